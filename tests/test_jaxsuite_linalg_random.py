"""Behaviours found by running JAX 0.10.2's linalg, random and solver test files against
fluxion: each checked here against JAX directly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp


@pytest.mark.parametrize("axis", [range(2), np.array([0, 1]), np.int64(1), [0, 1]])
@pytest.mark.parametrize("name", ["expand_dims", "squeeze"])
def test_axis_given_as_any_integer_iterable(name, axis):
    x = np.ones((1, 1, 3), np.float32)
    want = getattr(jnp, name)(x, axis)
    ours = getattr(fnp, name)
    assert ours(x, axis).shape == want.shape
    assert fluxion.jit(lambda v: ours(v, axis))(x).shape == want.shape


def test_moveaxis_source_as_range():
    x = np.zeros((1, 2, 3), np.float32)
    want = jnp.moveaxis(x, range(2), (1, 2))
    assert fnp.moveaxis(x, range(2), (1, 2)).shape == want.shape


@pytest.mark.parametrize("fmt", ["bcoo", "bcsr"])
def test_sparse_from_scipy_sparse(fmt):
    import importlib
    import jax.experimental.sparse as jsparse
    import scipy.sparse as sps
    mat = sps.random(5, 4, density=0.4, random_state=0, dtype=np.float32)
    cls_name = fmt.upper()
    ours_cls = getattr(importlib.import_module(f"fluxion.experimental.sparse.{fmt}"), cls_name)
    ours = ours_cls.from_scipy_sparse(mat)
    theirs = getattr(jsparse, cls_name).from_scipy_sparse(mat)
    assert (ours.shape, ours.nse, ours.dtype) == (theirs.shape, theirs.nse, theirs.dtype)
    assert ours.indices.dtype == theirs.indices.dtype
    np.testing.assert_array_equal(ours.todense(), theirs.todense())
    np.testing.assert_array_equal(fluxion.jit(lambda m: m.todense())(ours), mat.toarray())
    with pytest.raises(NotImplementedError):
        ours_cls.from_scipy_sparse(mat, n_batch=1)


def _hermitian_with_spectrum(n, spectrum, dtype, seed=0):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    return ((q * spectrum) @ q.T).astype(dtype)


@pytest.mark.parametrize("spectrum", [np.linspace(1, 1000, 100),
                                      np.r_[np.full(5, 10.0), np.linspace(1, 2, 95)]],
                         ids=["linear", "cluster"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lobpcg_standard_top_eigenpairs(dtype, spectrum, x64):
    # jax.experimental.sparse.linalg.lobpcg_standard was missing.
    from fluxion.experimental.sparse import linalg as sparse_linalg
    n, k = 100, 5
    a = _hermitian_with_spectrum(n, spectrum, dtype)
    x = np.random.default_rng(1).standard_normal((n, k)).astype(dtype)
    want = np.sort(spectrum)[::-1][:k]
    eps = np.finfo(dtype).eps
    m = 60 if dtype == np.float32 else 200  # f64's default tolerance (its eps) takes longer
    runs = {"eager": sparse_linalg.lobpcg_standard(a, x, m),
            "jit": fluxion.jit(lambda a, x: sparse_linalg.lobpcg_standard(a, x, m))(a, x),
            "callable": sparse_linalg.lobpcg_standard(
                fluxion.vmap(lambda v: fnp.asarray(a) @ v, in_axes=1, out_axes=1), x, m)}
    for name, (theta, u, iters) in runs.items():
        assert theta.dtype == u.dtype == dtype, name
        assert theta.shape == (k,) and u.shape == (n, k), name
        assert int(iters) < m, name
        np.testing.assert_allclose(theta, want, rtol=10 * np.sqrt(eps), err_msg=name)
        u = np.asarray(u, np.float64)
        np.testing.assert_allclose(u.T @ u, np.eye(k), atol=100 * np.sqrt(eps), err_msg=name)
        resid = a.astype(np.float64) @ u - u * np.asarray(theta, np.float64)
        assert np.linalg.norm(resid, axis=0).max() < 1e3 * np.sqrt(eps) * want[0], name


def test_lobpcg_standard_runs_m_steps_with_zero_tol():
    from fluxion.experimental.sparse import linalg as sparse_linalg
    a = _hermitian_with_spectrum(60, np.linspace(1, 50, 60), np.float32)
    x = np.random.default_rng(2).standard_normal((60, 3)).astype(np.float32)
    theta, _, iters = sparse_linalg.lobpcg_standard(a, x, 25, tol=0.0)
    assert int(iters) == 25
    np.testing.assert_allclose(theta, [50, 50 - 49 / 59, 50 - 98 / 59], rtol=1e-4)


def test_lobpcg_standard_argument_errors():
    import jax.experimental.sparse.linalg as jax_sparse_linalg
    from fluxion.experimental.sparse import linalg as sparse_linalg
    a = np.eye(100, dtype=np.float32)
    x = np.ones((100, 10), np.float32)
    cases = [((a, x[:, :0]), "search dim > 0"),
             ((lambda v: (fnp.asarray(a) @ v).astype(fnp.float16), x), "A, X must have same dtypes"),
             ((a[:60], x), r"A must be \(100, 100\)"),
             ((a[:50, :50], x[:50]), r"search dim \* 5 < matrix dim")]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            sparse_linalg.lobpcg_standard(*args)
    jax_case = (lambda v: (jnp.asarray(a) @ v).astype(jnp.float16), x)
    with pytest.raises(ValueError, match="A, X must have same dtypes"):
        jax_sparse_linalg.lobpcg_standard(*jax_case)


def test_key_arrays_have_the_array_buffer_methods():
    # Key arrays lacked JAX's Array buffer and shard methods (delete, copy_to_host_async, ...).
    import jax.random
    import fluxion.random
    theirs = jax.random.split(jax.random.key(0), 10)
    ours = fluxion.random.split(fluxion.random.key(0), 10)
    assert ours.is_fully_addressable and ours.is_fully_replicated
    assert ours.on_device_size_in_bytes() == theirs.on_device_size_in_bytes()
    assert ours.unsafe_buffer_pointer() == ours._base_array.unsafe_buffer_pointer()
    assert ours.copy_to_host_async() is None and theirs.copy_to_host_async() is None
    for shards in (ours.addressable_shards, ours.global_shards):
        assert len(shards) == len(theirs.addressable_shards) == 1
        assert isinstance(shards[0].data, fluxion.random.PRNGKeyArray)
        assert shards[0].data.shape == theirs.addressable_shards[0].data.shape == (10,)
        assert shards[0].index == theirs.addressable_shards[0].index
    block = ours.addressable_data(0)
    assert isinstance(block, fluxion.random.PRNGKeyArray) and bool((block == ours).all())
    assert not ours.is_deleted()
    ours.delete()
    theirs.delete()
    assert ours.is_deleted() and theirs.is_deleted()


@pytest.mark.parametrize("offset", [0, 3, -1, None])
def test_random_seed_offset_flag(offset):
    # The jax_random_seed_offset flag did not exist.
    import jax.random
    import fluxion.random
    jit_key = fluxion.jit(lambda s: fluxion.random.key_data(fluxion.random.key(s)))
    jit_key(np.int32(17))  # cached before the flag changes: the cache must see the offset
    old = jax.config.jax_random_seed_offset, fluxion.config.jax_random_seed_offset
    jax.config.update("jax_random_seed_offset", offset)
    fluxion.config.update("jax_random_seed_offset", offset)
    try:
        for seed in (17, np.int32(-1), np.uint32(5)):
            want = jax.random.key_data(jax.random.key(seed))
            np.testing.assert_array_equal(fluxion.random.key_data(fluxion.random.key(seed)), want)
            np.testing.assert_array_equal(fluxion.random.PRNGKey(seed), jax.random.PRNGKey(seed))
        np.testing.assert_array_equal(jit_key(np.int32(17)),
                                      jax.random.key_data(jax.random.key(np.int32(17))))
    finally:
        jax.config.update("jax_random_seed_offset", old[0])
        fluxion.config.update("jax_random_seed_offset", old[1])


def test_random_seed_offset_takes_only_ints():
    for bad in (2.0, "3"):
        with pytest.raises(ValueError, match="must be None or of type int"):
            fluxion.config.update("jax_random_seed_offset", bad)
