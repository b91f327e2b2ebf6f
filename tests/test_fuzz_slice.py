"""A seeded slice of the differential fuzzer (`make fuzz` runs 10,000 programs).
FLUXION_FUZZ_SLICE_EXAMPLES sets its size (tests/test_xla_default_flags.py reruns a smaller one)."""
import os

from hypothesis import given, settings, strategies as st

from fuzz.ops import OPS
from fuzz.programs import check, make_program


def test_the_fuzzer_covers_over_100_functions():
    assert len({op.name for op in OPS}) >= 100


@settings(max_examples=int(os.environ.get("FLUXION_FUZZ_SLICE_EXAMPLES", "25")), derandomize=True, deadline=None)
@given(seed=st.integers(0, 10**9))
def test_random_programs_agree_with_jax(seed):
    program = make_program(seed)
    mismatches, _ = check(program)
    assert not mismatches, program.describe() + "\n" + "\n".join(mismatches)
