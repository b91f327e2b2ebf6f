"""The jax.numpy names this group adds exist in fluxion.numpy, with JAX's kinds of object."""
import inspect

import jax.numpy as jnp
import pytest

import fluxion.numpy as fnp

NAMES = """
acos acosh asin asinh atan atanh atan2
r_ c_ s_ index_exp mgrid ogrid ix_ indices tril_indices triu_indices tril_indices_from
triu_indices_from diag_indices diag_indices_from mask_indices ravel_multi_index unravel_index
fill_diagonal
block insert delete resize rollaxis unstack trim_zeros apply_along_axis apply_over_axes put
put_along_axis place packbits unpackbits vander diagflat array_equiv geomspace
gcd lcm ldexp frexp modf nextafter spacing i0 fabs bitwise_count
vecdot matvec vecmat cumulative_sum cumulative_prod
ufunc frompyfunc
load save savez frombuffer fromfile fromstring fromfunction fromiter from_dlpack array_repr
array_str printoptions get_printoptions set_printoptions iterable isscalar iscomplex
iscomplexobj isreal isrealobj
float8_e3m4 float8_e4m3 float8_e4m3b11fnuz float8_e4m3fn float8_e4m3fnuz float8_e5m2
float8_e5m2fnuz float8_e8m0fnu float4_e2m1fn float6_e2m3fn float6_e3m2fn int1 int2 int4 uint1
uint2 uint4 bool object_ flexible character ComplexWarning
""".split()


@pytest.mark.parametrize("name", NAMES)
def test_name_exists(name):
    assert hasattr(jnp, name), f"jax.numpy has no {name}"
    ours, theirs = getattr(fnp, name), getattr(jnp, name)
    assert callable(ours) == callable(theirs) or name in ("r_", "c_"), name
    if inspect.isfunction(theirs) and inspect.isfunction(ours):
        # Same parameter names (what a keyword call relies on).
        jax_params = [p for p in inspect.signature(theirs).parameters if p not in ("out",)]
        our_params = [p for p in inspect.signature(ours).parameters if p not in ("out",)]
        if jax_params != ["args", "kwargs"]:  # JAX's pass-through wrappers of NumPy's
            assert our_params == jax_params, (name, our_params, jax_params)


def test_every_jax_ufunc_is_a_ufunc_here():
    names = [n for n in dir(jnp) if isinstance(getattr(jnp, n), jnp.ufunc)]
    assert names and all(isinstance(getattr(fnp, n), fnp.ufunc) for n in names)
