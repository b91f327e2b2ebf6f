"""fluxion.test_util.check_grads accepts JAX's tolerance forms and picks its defaults for the
dtypes it computes in."""
import numpy as np
import pytest

import fluxion.numpy as fnp
from fluxion.test_util import check_grads


def test_tolerances_may_be_dicts_keyed_by_dtype():
    # JAX's check_grads takes {dtype: tolerance}; fluxion's failed formatting the dict.
    x = np.linspace(0.5, 1.5, 5).astype(np.float32)
    tol = {np.float32: 3e-2, np.float64: 1e-5}
    check_grads(fnp.sin, (x,), 2, atol=tol, rtol=tol)
    with pytest.raises(AssertionError):  # the dict is used, not ignored
        check_grads(lambda v: fnp.sin(v) + (v - v.astype(np.float16)), (x,), 1,
                    modes=["fwd"], atol={np.float32: 1e-9}, rtol={np.float32: 1e-9}, eps=1e-3)


def test_float64_arguments_without_x64_use_float32_defaults():
    # The float64 defaults (eps 1e-6, tolerance 1e-5) were used for values computed in float32.
    x = np.random.default_rng(0).uniform(0.5, 2.0, 10)  # float64
    check_grads(lambda v: fnp.ldexp(v, 3), (x,), 1)
    check_grads(fnp.exp, (x,), 2)
