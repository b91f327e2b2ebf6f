"""pytest setup for JAX's rewritten test files: JAX's test helpers (the oracle) compile and
differentiate with fluxion, and hand fluxion values to JAX only as NumPy arrays."""
import jax  # noqa: F401  (JAX's internals: the tests' test_util, dtypes, config)
import numpy as np
from jax._src import test_util as jtu
from jax._src.internal_test_util import lax_test_util

import fluxion
import fluxion.test_util


class _FluxionApi:
    """Stands for `jax._src.api` inside JAX's test_util: `_CompileAndCheck` jits with fluxion."""

    def __getattr__(self, name):
        return getattr(fluxion, name)


jtu.api = _FluxionApi()
jtu.check_grads = fluxion.test_util.check_grads

_promote_like_jnp = jtu.promote_like_jnp


def _promote_like_jnp_on_numpy(fun, inexact=False):
    # JAX's version calls jax.numpy.asarray, which rejects fluxion Arrays.
    wrapped = _promote_like_jnp(fun, inexact)

    def call(*args, **kwargs):
        args = [np.asarray(a) if isinstance(a, fluxion.Array) else a for a in args]
        return wrapped(*args, **kwargs)
    return call


jtu.promote_like_jnp = _promote_like_jnp_on_numpy


def _fluxion_slicer(x, bdim):
    # lax_test_util slices vmap test inputs with JAX's lax: fluxion's keeps them fluxion's.
    if bdim is None:
        return lambda _: x
    return lambda i: fluxion.lax.index_in_dim(x, i, bdim, keepdims=False)


lax_test_util.slicer = _fluxion_slicer
