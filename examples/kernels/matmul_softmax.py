"""Tiled matmul with a scratch accumulator and a fused row softmax, as Pallas kernels."""
import fluxion as jax
import fluxion.numpy as jnp
from fluxion.experimental import pallas as pl


def matmul(x, y, bm=128, bn=128, bk=128):
    m, k = x.shape
    _, n = y.shape
    nk = pl.cdiv(k, bk)

    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros(acc_ref.shape, acc_ref.dtype)
        xb, yb = x_ref[...], y_ref[...]
        if k % bk:  # the last k block runs past the arrays: its padding is garbage (NaN)
            kk = pl.program_id(2) * bk + jnp.arange(bk)
            xb = jnp.where((kk < k)[None, :], xb, 0)
            yb = jnp.where((kk < k)[:, None], yb, 0)
        acc_ref[...] += jnp.dot(xb, yb)

        @pl.when(pl.program_id(2) == nk - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    return pl.pallas_call(
        kernel, jax.ShapeDtypeStruct((m, n), x.dtype),
        grid_spec=pl.GridSpec(
            grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), nk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, l: (i, l)),
                      pl.BlockSpec((bk, bn), lambda i, j, l: (l, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, l: (i, j)),
            scratch_shapes=[pl.ANY((bm, bn), jnp.float32)]),
        interpret=True)(x, y)


def softmax(x, br=8):
    r, c = x.shape

    def kernel(x_ref, o_ref):
        v = x_ref[...].astype(jnp.float32)
        e = jnp.exp(v - v.max(axis=1, keepdims=True))
        o_ref[...] = (e / e.sum(axis=1, keepdims=True)).astype(o_ref.dtype)

    return pl.pallas_call(
        kernel, jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(pl.cdiv(r, br),),
        in_specs=[pl.BlockSpec((br, c), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((br, c), lambda i: (i, 0)))(x)
