"""Objects with `__jax_array__`: jnp functions convert them (JAX 0.10.2 converts them in the
functions that call `asarray` first); abstractification (jit, grad, lax) refuses them with
JAX's ValueError."""
import jax
import jax.numpy as jax_jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp


class Wrapped:
    def __init__(self, lib, value):
        self.value = lib.numpy.asarray(value)

    def __jax_array__(self):
        return self.value


V = np.arange(1.0, 4.0, dtype=np.float32)
CALLS = {  # the calls JAX 0.10.2 accepts
    "asarray": lambda m, a: m.asarray(a),
    "array": lambda m, a: m.array(a),
    "stack": lambda m, a: m.stack([a, a]),
    "concatenate": lambda m, a: m.concatenate([a, a]),
    "column_stack": lambda m, a: m.column_stack([a, a]),
    "dstack": lambda m, a: m.dstack([a, a]),
    "broadcast_arrays": lambda m, a: m.broadcast_arrays(a, a)[0],
    "meshgrid": lambda m, a: m.meshgrid(a, a)[1],
    "einsum": lambda m, a: m.einsum("i,i", a, a),
    "select": lambda m, a: m.select([m.asarray(V) > 1], [a]),
    "piecewise": lambda m, a: m.piecewise(a, [m.asarray(V) > 1], [1.0, 0.0]),
    "choose": lambda m, a: m.choose(m.array([0, 0, 0]), [a]),
    "pad": lambda m, a: m.pad(a, 1),
    "copy": lambda m, a: m.copy(a),
    "astype": lambda m, a: m.astype(a, m.int32),
    "operator": lambda m, a: m.asarray(V) + a,
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_jnp_functions_convert_like_jax(name):
    ours = CALLS[name](jnp, Wrapped(fluxion, V))
    theirs = CALLS[name](jax_jnp, Wrapped(jax, V))
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))


def test_abstractification_refuses_them_as_jax():
    for fn in (lambda a: fluxion.jit(lambda x: x * 2)(a), lambda a: fluxion.lax.add(a, a),
               lambda a: fluxion.grad(lambda x: x.sum())(a)):
        with pytest.raises(ValueError, match="__jax_array__"):
            fn(Wrapped(fluxion, V))
    with pytest.raises(ValueError, match="__jax_array__"):
        jax.jit(lambda x: x * 2)(Wrapped(jax, V))
