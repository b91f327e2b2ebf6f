import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import fluxion  # noqa: E402


@pytest.fixture
def x64():
    """Run a test with 64-bit types enabled."""
    with fluxion.enable_x64(True):
        yield


@pytest.fixture
def rng():
    return np.random.default_rng(0)
