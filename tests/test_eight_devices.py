"""Every test file that needs 8 CPU devices (tests/_eight_devices.py lists them), in one fresh
pytest process with 8 CPU devices for fluxion and JAX. Named to be collected early, so that
pytest-xdist starts this long test first rather than leaving it for the end of the run."""
import pytest

from _eight_devices import EIGHT_DEVICE_FILES, assert_files_pass_on_8_devices


@pytest.mark.timeout(1500)
def test_eight_device_files_pass():
    assert_files_pass_on_8_devices(EIGHT_DEVICE_FILES, timeout=1400)
