"""Regression tests for mismatches with JAX found by running whole JAX programs on fluxion
(the same source text with `import jax` and with `import fluxion as jax`)."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
import fluxion.scipy.stats

jax = pytest.importorskip("jax")
jjnp = jax.numpy
import jax.scipy.stats  # noqa: E402


def test_multinomial_logpmf_needs_integer_counts_and_takes_p_dtype():
    for lib, np_like in ((fluxion, jnp), (jax, jjnp)):
        with pytest.raises(ValueError, match="integer type"):
            lib.scipy.stats.multinomial.logpmf(np_like.array([1.0, 2.0]), 3, np_like.array([0.4, 0.6]))
    p16 = np.array([0.4, 0.6], np.float16)
    ours = fluxion.scipy.stats.multinomial.pmf(jnp.array([1, 2]), 3, p16)
    theirs = jax.scipy.stats.multinomial.pmf(jjnp.array([1, 2]), 3, p16)
    assert ours.dtype == theirs.dtype == np.float16
    np.testing.assert_allclose(np.float32(ours), np.float32(theirs), rtol=1e-3)


def _weak(x, lib):
    return x.weak_type if lib is fluxion else jax.typeof(x).weak_type


def test_linearize_of_weak_primal_gives_weak_tangents():
    # a weak scalar residual staged as a jaxpr literal stayed weak only as a NumPy scalar
    for lib, np_like in ((fluxion, jnp), (jax, jjnp)):
        _, f_jvp = lib.linearize(np_like.sin, 1.0)
        t = f_jvp(2.0)
        assert _weak(t, lib) and t.dtype == np.float32
        np.testing.assert_allclose(t, 2 * np.cos(1.0), rtol=1e-6)
    closed = fluxion.make_jaxpr(lambda x: x * jnp.asarray(2.0))(1.0)
    out = fluxion.core.eval_jaxpr(closed.jaxpr, closed.consts, 1.0)[0]
    assert out.weak_type


def test_vmap_broadcasts_an_unbatched_float0_output():
    f = lambda x: (x, np.zeros((2,), fluxion.dtypes.float0))
    ours = fluxion.vmap(f)(jnp.ones(3))[1]
    theirs = jax.vmap(f)(jjnp.ones(3))[1]
    assert ours.dtype == theirs.dtype == fluxion.dtypes.float0 and ours.shape == theirs.shape == (3, 2)


def test_jacobians_cast_blocks_and_check_dtypes_as_jax():
    for lib, np_like in ((fluxion, jnp), (jax, jjnp)):
        ident = lib.jacfwd(lambda x: x)(3.0)  # each block takes its example's weak type
        assert ident.dtype == np.float32 and _weak(ident, lib)
        ints = lib.jacrev(lambda x: x * 2.0, allow_int=True)(np_like.arange(2))
        assert ints.dtype == np.int32 and not np.asarray(ints).any()
        real = lib.jacfwd(lambda x: np_like.real(x * (1 + 2j)))(np_like.arange(2.0))
        assert real.dtype == np.float32
        np.testing.assert_allclose(real, np.eye(2))
        bad = [(lambda: lib.jacrev(lambda x: x * 1j)(np_like.ones(2)), "jacrev requires real-valued outputs"),
               (lambda: lib.jacrev(lambda x: (x * 2).astype(int))(np_like.ones(2)), "integer outputs"),
               (lambda: lib.jacrev(lambda x: x)(np_like.arange(2)), "jacrev requires real- or complex"),
               (lambda: lib.jacfwd(lambda x: x)(np_like.ones(2, np_like.complex64)), "jacfwd requires real-valued inputs"),
               (lambda: lib.jacfwd(lambda x: x)(np_like.arange(2)), "jacfwd requires real-valued inputs"),
               (lambda: lib.jacfwd(np_like.abs, holomorphic=True)(np_like.ones(2, np_like.complex64)),
                "jacfwd with holomorphic=True requires outputs"),
               (lambda: lib.grad(lambda x: (x * 2).astype(int))(1.0), "integer outputs")]
        for call, message in bad:
            with pytest.raises(TypeError, match=message):
                call()


def test_jit_rejects_argnames_the_function_cannot_take_by_keyword():
    def f(a, /, b, *c, d):
        return a

    for lib in (fluxion, jax):
        for kw, message in [(dict(static_argnames="y"), "does not take these args"),
                            (dict(static_argnames=("b", "a")), "positional-only"),
                            (dict(donate_argnames="c"), "positional-only"),
                            (dict(donate_argnames="z"), "invalid argnames {'z'} in donate_argnames")]:
            with pytest.raises(ValueError, match=message):
                lib.jit(f, **kw)
        lib.jit(lambda x, **kw: x, static_argnames="anything")  # **kwargs takes any name
        assert lib.jit(f, static_argnames=("b", "d"))(1.0, 2, d=3) == 1.0


def test_multi_output_lax_functions_return_lists_as_jax():
    x = np.array([[3.0, 1.0, 2.0], [0.5, 4.0, 1.0], [2.0, 1.0, 5.0]], np.float32)
    for lib in (fluxion, jax):
        outs = [lib.lax.top_k(x[0], 2), lib.lax.approx_max_k(x[0], 2), lib.lax.approx_min_k(x[0], 2),
                lib.lax.linalg.lu(x), lib.lax.linalg.tridiagonal(x + x.T)]
        assert [type(o) for o in outs] == [list] * 5
        assert type(lib.lax.linalg.qr(x)) is tuple
