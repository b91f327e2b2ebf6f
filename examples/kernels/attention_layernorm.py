"""Flash-attention forward (blocked online softmax) and layer norm forward + backward kernels."""
import fluxion as jax
import fluxion.numpy as jnp
from fluxion.experimental import pallas as pl


def flash_attention(q, k, v, bq=16, bk=16):
    """softmax(q k^T / sqrt(d)) v, one query block per grid step, key blocks in a `pl.loop`."""
    lq, d = q.shape
    lk = k.shape[0]
    assert lk % bk == 0, "key length must be a multiple of bk"
    scale = 1.0 / d ** 0.5

    def kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref):
        m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, jnp.float32)
        l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)
        qb = q_ref[...] * scale

        @pl.loop(0, lk // bk)
        def _(j):
            kb = k_ref[pl.ds(j * bk, bk), :]
            vb = v_ref[pl.ds(j * bk, bk), :]
            s = qb @ kb.T
            m_new = jnp.maximum(m_ref[...], s.max(axis=1))
            p = jnp.exp(s - m_new[:, None])
            corr = jnp.exp(m_ref[...] - m_new)
            l_ref[...] = l_ref[...] * corr + p.sum(axis=1)
            acc_ref[...] = acc_ref[...] * corr[:, None] + p @ vb
            m_ref[...] = m_new
        o_ref[...] = (acc_ref[...] / l_ref[...][:, None]).astype(o_ref.dtype)

    return pl.pallas_call(
        kernel, jax.ShapeDtypeStruct(q.shape, q.dtype), grid=(pl.cdiv(lq, bq),),
        in_specs=[pl.BlockSpec((bq, d), lambda i: (i, 0)), pl.BlockSpec((lk, d), lambda i: (0, 0)),
                  pl.BlockSpec((lk, d), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((bq, d), lambda i: (i, 0)),
        scratch_shapes=[pl.ANY((bq,), jnp.float32), pl.ANY((bq,), jnp.float32),
                        pl.ANY((bq, d), jnp.float32)])(q, k, v)


def _ln_fwd_call(x, br, eps):
    r, c = x.shape

    def kernel(x_ref, y_ref, mu_ref, rs_ref):
        v = x_ref[...]
        mu = v.mean(axis=1)
        rs = 1.0 / jnp.sqrt(((v - mu[:, None]) ** 2).mean(axis=1) + eps)
        y_ref[...] = (v - mu[:, None]) * rs[:, None]
        mu_ref[...] = mu
        rs_ref[...] = rs
    row = pl.BlockSpec((br, c), lambda i: (i, 0))
    vec = pl.BlockSpec((br,), lambda i: (i,))
    return pl.pallas_call(
        kernel, (jax.ShapeDtypeStruct((r, c), x.dtype), jax.ShapeDtypeStruct((r,), x.dtype),
                 jax.ShapeDtypeStruct((r,), x.dtype)),
        grid=(pl.cdiv(r, br),), in_specs=[row], out_specs=(row, vec, vec))(x)


def _ln_bwd_call(x, mu, rs, g, br):
    r, c = x.shape

    def kernel(x_ref, mu_ref, rs_ref, g_ref, dx_ref):
        xh = (x_ref[...] - mu_ref[...][:, None]) * rs_ref[...][:, None]
        gv = g_ref[...]
        dx_ref[...] = rs_ref[...][:, None] * (
            gv - gv.mean(axis=1, keepdims=True) - xh * (gv * xh).mean(axis=1, keepdims=True))
    row = pl.BlockSpec((br, c), lambda i: (i, 0))
    vec = pl.BlockSpec((br,), lambda i: (i,))
    return pl.pallas_call(kernel, jax.ShapeDtypeStruct((r, c), x.dtype), grid=(pl.cdiv(r, br),),
                          in_specs=[row, vec, vec, row], out_specs=row)(x, mu, rs, g)


def layer_norm(x, br=8, eps=1e-5):
    """Row layer norm (no affine) with a Pallas forward and a Pallas backward via custom_vjp."""
    @jax.custom_vjp
    def ln(x):
        return _ln_fwd_call(x, br, eps)[0]

    def fwd(x):
        y, mu, rs = _ln_fwd_call(x, br, eps)
        return y, (x, mu, rs)

    def bwd(res, g):
        x, mu, rs = res
        return (_ln_bwd_call(x, mu, rs, g, br),)
    ln.defvjp(fwd, bwd)
    return ln(x)
