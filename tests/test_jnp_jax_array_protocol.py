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


UFUNC_CALLS = {  # JAX 0.10.2 raises ValueError here; fluxion converts (docs/differences.md)
    "multiply": (lambda m, a: m.multiply(a, 2), lambda v: v * 2),
    "multiply_right": (lambda m, a: m.multiply(2, a), lambda v: 2 * v),
    "add": (lambda m, a: m.add(a, a), lambda v: v + v),
    "sin": (lambda m, a: m.sin(a), np.sin),
    "maximum": (lambda m, a: m.maximum(a, 2.0), lambda v: np.maximum(v, 2.0)),
    "true_divide": (lambda m, a: m.true_divide(a, 2), lambda v: v / 2),
    "equal": (lambda m, a: m.equal(a, 2.0), lambda v: v == 2.0),
}


@pytest.mark.parametrize("name", sorted(UFUNC_CALLS))
def test_ufuncs_convert_them_as_the_other_jnp_functions(name):
    # They raised TypeError ("Cannot determine dtype") while promoting dtypes.
    call, expected = UFUNC_CALLS[name]
    out = call(jnp, Wrapped(fluxion, V))
    assert isinstance(out, fluxion.Array)
    np.testing.assert_allclose(np.asarray(out), expected(V), rtol=1e-6)
    assert out.dtype == call(jnp, V).dtype
    with pytest.raises(ValueError, match="__jax_array__"):
        call(jax_jnp, Wrapped(jax, V))
