"""fluxion.random against jax.random: keys, the threefry2x32 primitive, bits, uniform, normal,
randint, bernoulli, categorical, choice and permutation, bit for bit; keys through jit, vmap,
scan and grad; errors for bad input."""
import warnings

import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
import fluxion.random as fr
from fluxion._src.random.threefry import threefry2x32_p

jax = pytest.importorskip("jax")
jr = jax.random
jnp = jax.numpy



def both(fn, seed=0, typed=False):
    """fn(random module, numpy module, key) for fluxion and for JAX, as NumPy arrays."""
    ours = fn(fr, fnp, fr.key(seed) if typed else fr.PRNGKey(seed))
    theirs = fn(jr, jnp, jr.key(seed) if typed else jr.PRNGKey(seed))
    if isinstance(ours, fr.PRNGKeyArray):
        ours, theirs = fr.key_data(ours), jr.key_data(theirs)
    return np.asarray(ours), np.asarray(theirs)


def assert_same(fn, seed=0, typed=False):
    ours, theirs = both(fn, seed, typed)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (ours, theirs)
    np.testing.assert_array_equal(ours, theirs)


# ---------------------------------------------------------------------------------------------
# The threefry2x32 primitive, against an independent NumPy implementation

def _rotl(v, d):
    return ((v << np.uint32(d)) | (v >> np.uint32(32 - d))).astype(np.uint32)


def threefry_reference(k1, k2, x1, x2):
    """Threefry-2x32, 20 rounds (Salmon et al. 2011), in NumPy uint32 arithmetic."""
    rotations = [(13, 15, 26, 6), (17, 29, 16, 24)]
    ks = [np.uint32(k1), np.uint32(k2), np.uint32(k1) ^ np.uint32(k2) ^ np.uint32(0x1BD11BDA)]
    x = [np.asarray(x1, np.uint32) + ks[0], np.asarray(x2, np.uint32) + ks[1]]
    with np.errstate(over="ignore"):
        for i in range(5):
            for r in rotations[i % 2]:
                x[0] = x[0] + x[1]
                x[1] = x[0] ^ _rotl(x[1], r)
            x[0] = x[0] + ks[(i + 1) % 3]
            x[1] = x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x


def test_threefry_known_answer():
    # The Random123 known-answer vector for threefry2x32_20 with key and counter all ones.
    ones = np.uint32(0xFFFFFFFF)
    out = threefry2x32_p.bind(*(fnp.asarray(np.array(ones)) for _ in range(4)))
    assert [int(o) for o in out] == [0x1CB996FC, 0xBB002BE7]


@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_threefry_matches_reference_eager_and_jit(shape):
    rng = np.random.default_rng(0)
    k1, k2 = rng.integers(0, 2**32, 2, dtype=np.uint32)
    x1, x2 = (rng.integers(0, 2**32, shape, dtype=np.uint32) for _ in range(2))
    want = threefry_reference(k1, k2, x1, x2)
    for fn in (threefry2x32_p.bind, fluxion.jit(threefry2x32_p.bind)):
        got = fn(np.uint32(k1), np.uint32(k2), x1, x2)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_unrolled_lowering_matches_reference():
    # The generic (non-CPU) rule: 20 unrolled rounds. Swapped in for the CPU briefly; its
    # integer results are exact, so executables cached meanwhile stay correct.
    from fluxion._src.compiler import lowering
    from fluxion._src.random import threefry
    rng = np.random.default_rng(1)
    x1, x2 = (rng.integers(0, 2**32, (3, 7), dtype=np.uint32) for _ in range(2))
    rolled = lowering.get_lowering(threefry2x32_p, "cpu")
    lowering.register_lowering(threefry2x32_p, threefry._threefry2x32_unrolled_lowering, "cpu")
    try:
        got = fluxion.jit(lambda a, b: threefry2x32_p.bind(np.uint32(3), np.uint32(4), a, b))(x1, x2)
    finally:
        lowering.register_lowering(threefry2x32_p, rolled, "cpu")
    want = threefry_reference(3, 4, x1, x2)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_threefry_vmap_broadcasts_keys_over_counters():
    keys = np.array([[1, 2], [3, 4], [5, 6]], np.uint32)
    counts = np.arange(4, dtype=np.uint32)
    out = fluxion.vmap(lambda k: threefry2x32_p.bind(k[0], k[1], counts, counts + 7))(keys)
    for i, (k1, k2) in enumerate(keys):
        want = threefry_reference(k1, k2, counts, counts + 7)
        np.testing.assert_array_equal(out[0][i], want[0])
        np.testing.assert_array_equal(out[1][i], want[1])


def test_threefry_rejects_other_dtypes_and_has_no_tangents():
    with pytest.raises(TypeError, match="uint32"):
        threefry2x32_p.bind(np.int32(1), np.uint32(2), np.uint32(3), np.uint32(4))
    primals = [np.uint32(1), np.uint32(2), np.arange(3, dtype=np.uint32),
               np.arange(3, dtype=np.uint32)]
    tangents = [np.zeros((), fluxion.dtypes.float0)] * 2 + [np.zeros(3, fluxion.dtypes.float0)] * 2
    _, t_out = fluxion.jvp(lambda *a: threefry2x32_p.bind(*a), primals, tangents)
    assert all(t.dtype == fluxion.dtypes.float0 for t in t_out)


def test_threefry_under_scan():
    def body(c, x):
        a, b = threefry2x32_p.bind(c, np.uint32(5), x, x)
        return a, b
    xs = np.arange(4, dtype=np.uint32)
    carry, ys = fluxion.lax.scan(body, np.uint32(9), xs)
    c = np.uint32(9)
    for x, y in zip(xs, np.asarray(ys)):
        a, b = threefry_reference(c, 5, x, x)
        assert b == y
        c = a
    assert carry == c


# ---------------------------------------------------------------------------------------------
# Keys

SEEDS = [0, 42, -1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40 + 5, -2**40, 2**63 - 1,
         np.int64(2**40 + 5), np.uint32(2**32 - 1), np.uint64(2**40 + 5), np.int8(-3), True,
         np.array(5)]


@pytest.mark.parametrize("seed", SEEDS, ids=repr)
def test_prng_key_seeds(seed):
    assert_same(lambda r, n, k: r.PRNGKey(seed))
    assert_same(lambda r, n, k: r.key_data(r.key(seed)))


@pytest.mark.parametrize("seed", [-1, 2**40 + 5, -2**40, 2**63 - 1, np.uint64(2**64 - 1)], ids=repr)
def test_prng_key_seeds_x64(seed, x64_both):
    assert_same(lambda r, n, k: r.PRNGKey(seed))


@pytest.mark.parametrize("seed", [1.0, np.float32(2), 2**64, np.array([1, 2]), "a"], ids=repr)
def test_bad_seeds_raise_like_jax(seed):
    with pytest.raises(Exception) as theirs:
        jr.PRNGKey(seed)
    with pytest.raises(theirs.type):
        fr.PRNGKey(seed)


@pytest.mark.parametrize("num,typed", [(2, False), (np.int32(3), True), ((2, 3), False),
                                       ((), True), (0, False), ([1, 2], False)], ids=repr)
def test_split(num, typed):
    assert_same(lambda r, n, k: r.split(k, num), seed=7, typed=typed)


@pytest.mark.parametrize("data", [0, 1, 2**32 - 1, 1.5, np.int32(-2), True, np.uint32(9)],
                         ids=repr)
def test_fold_in(data):
    assert_same(lambda r, n, k: r.fold_in(k, data), seed=3)
    assert_same(lambda r, n, k: r.fold_in(r.split(k, 4)[2], data), seed=3, typed=True)


def test_typed_key_array_behaviour():
    key = fr.key(3)
    assert key.shape == () and key.ndim == 0 and key.size == 1
    assert str(key.dtype) == "key<fry>" and key.dtype == fr.key_dtype()
    assert repr(key) == repr(jr.key(3))
    keys = fr.split(key, 4)
    jkeys = jr.split(jr.key(3), 4)
    assert keys.shape == (4,) and len(keys) == 4
    for sub, jsub in zip(keys, jkeys):
        np.testing.assert_array_equal(fr.key_data(sub), jr.key_data(jsub))
    for index in [1, -1, slice(1, None), slice(None, None, 2), np.array([3, 0]), (None, 2),
                  (Ellipsis,)]:
        np.testing.assert_array_equal(fr.key_data(keys[index]), jr.key_data(jkeys[index]))
    grid = fr.split(key, (2, 3))
    assert grid.reshape(3, 2).shape == (3, 2) and grid.T.shape == (3, 2)
    assert grid.ravel().shape == (6,) and grid[None].shape == (1, 2, 3)
    np.testing.assert_array_equal(keys == keys, np.ones(4, bool))
    np.testing.assert_array_equal(keys != keys[0], [False, True, True, True])
    assert fr.key_impl(key) == jr.key_impl(jr.key(3)) == fr.key_impl(fr.PRNGKey(0))
    wrapped = fr.wrap_key_data(fr.key_data(keys))
    assert bool(fnp.all(wrapped == keys))
    assert fr.clone(key).shape == ()
    with pytest.raises(TypeError, match="len"):
        len(key)
    with pytest.raises(TypeError, match="iteration over a 0-d key array"):
        iter(key)
    with pytest.raises(TypeError, match="boolean"):
        bool(key)
    with pytest.raises(TypeError, match="key_data"):
        np.asarray(key)
    with pytest.raises(TypeError):
        key + 1


def test_key_data_validation_like_jax():
    for bad in [np.zeros(3, np.uint32), np.zeros(2, np.int32), np.zeros((), np.uint32), 1, "a"]:
        with pytest.raises(TypeError):
            jr.wrap_key_data(bad)
        with pytest.raises(TypeError):
            fr.wrap_key_data(bad)
    with pytest.raises(ValueError, match="unrecognized PRNG implementation"):
        fr.key(0, impl="foo")
    with pytest.raises(NotImplementedError, match="threefry2x32"):
        fr.key(0, impl="rbg")


# ---------------------------------------------------------------------------------------------
# bits, uniform, normal

# Shapes () and odd sizes exercise the counter layout; each case compiles once per library.
@pytest.mark.parametrize("shape,dtype", [((), "float32"), ((5,), "float16"),
                                         ((2, 1, 3), "bfloat16")], ids=str)
def test_uniform_and_normal(shape, dtype):
    assert_same(lambda r, n, k: r.uniform(k, shape, dtype), seed=11)
    assert_same(lambda r, n, k: r.normal(k, shape, dtype), seed=12, typed=True)


@pytest.mark.parametrize("shape,dtype", [((), None), ((2, 5), "uint16")], ids=str)
def test_bits(shape, dtype):
    assert_same(lambda r, n, k: r.bits(k, shape, dtype), seed=5)


def test_float64_and_uint64_under_x64(x64_both):
    assert_same(lambda r, n, k: r.normal(k, (2, 3), n.float64))
    assert_same(lambda r, n, k: r.bits(k, (5,)))
    assert_same(lambda r, n, k: r.randint(k, (9,), -2**40, 2**50))


def test_uniform_bounds_and_complex_normal():
    assert_same(lambda r, n, k: r.uniform(k, (2, 3), minval=n.array([-1.0, 0.0, 5.0]),
                                          maxval=n.array([[1.0], [10.0]])))
    assert_same(lambda r, n, k: r.normal(k, (5,), n.complex64))



# ---------------------------------------------------------------------------------------------
# Transformations

def test_eager_and_jit_agree():
    key = fr.PRNGKey(1)

    def draws(k):
        k1, k2, k3 = fr.split(k, 3)
        return fr.normal(k1, (4,)), fr.randint(k2, (3,), 0, 9), fr.uniform(k3, (), "bfloat16")
    for eager, jitted in zip(draws(key), fluxion.jit(draws)(key)):
        np.testing.assert_array_equal(eager, jitted)


def test_vmap_over_keys_matches_loop():
    keys = fr.split(fr.key(2), 5)
    batched = fluxion.vmap(lambda k: fr.normal(k, (3,)))(keys)
    for i, k in enumerate(keys):
        np.testing.assert_array_equal(batched[i], fr.normal(k, (3,)))
    ours = fluxion.vmap(lambda k: fr.split(k, 3))(keys)
    theirs = jax.vmap(lambda k: jr.split(k, 3))(jr.split(jr.key(2), 5))
    np.testing.assert_array_equal(fr.key_data(ours), jr.key_data(theirs))


def test_vmap_fold_in_and_axes():
    ours = fluxion.vmap(fr.fold_in, in_axes=(None, 0))(fr.key(0), fnp.arange(5))
    theirs = jax.vmap(jr.fold_in, in_axes=(None, 0))(jr.key(0), jnp.arange(5))
    np.testing.assert_array_equal(fr.key_data(ours), jr.key_data(theirs))
    grid = fr.split(fr.key(1), (3, 4))
    ours = fluxion.vmap(fluxion.vmap(fr.uniform), in_axes=1)(grid)
    theirs = jax.vmap(jax.vmap(jr.uniform), in_axes=1)(jr.split(jr.key(1), (3, 4)))
    np.testing.assert_array_equal(ours, theirs)
    keys = fluxion.vmap(lambda k: fr.split(k), out_axes=1)(fr.split(fr.key(0), 3))
    assert keys.shape == (2, 3)


def test_typed_keys_through_jit_and_scan():
    step = fluxion.jit(lambda k: fr.split(k))
    out = step(fr.key(4))
    assert isinstance(out, fr.PRNGKeyArray) and out.shape == (2,)
    np.testing.assert_array_equal(fr.key_data(out), jr.key_data(jr.split(jr.key(4))))

    def body(key, _):
        key, sub = fr.split(key)
        return key, fr.normal(sub, (2,))

    def jbody(key, _):
        key, sub = jr.split(key)
        return key, jr.normal(sub, (2,))
    key, ys = fluxion.jit(lambda k: fluxion.lax.scan(body, k, None, length=5))(fr.key(0))
    jkey, jys = jax.lax.scan(jbody, jr.key(0), None, length=5)
    np.testing.assert_array_equal(ys, jys)
    np.testing.assert_array_equal(fr.key_data(key), jr.key_data(jkey))
    shapes = fluxion.eval_shape(lambda k: fr.split(k, 3), fr.key(0))
    assert shapes.shape == (3,)


def test_grad_through_noise():
    w = np.full((3, 2), 0.3, np.float32)

    def loss(random, np_like, key):
        def f(w):
            x = random.normal(key, (4, 3))
            drop = random.bernoulli(random.fold_in(key, 1), 0.7, (4, 2))
            return np_like.sum(np_like.where(drop, np_like.tanh(x @ w), 0.0) ** 2)
        return f
    ours = fluxion.jit(fluxion.grad(loss(fr, fnp, fr.key(0))))(w)
    theirs = jax.grad(loss(jr, jnp, jr.key(0)))(w)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    _, key_ct = fluxion.grad(lambda w, k: fnp.sum(fr.normal(k, (3,)) * w), argnums=(0, 1),
                             allow_int=True)(1.0, fr.PRNGKey(0))
    assert key_ct.dtype == fluxion.dtypes.float0


# ---------------------------------------------------------------------------------------------
# Errors

BAD_CALLS = [
    lambda r, n, k: r.normal(1, (2,)),
    lambda r, n, k: r.normal(np.zeros(3, np.uint32), (2,)),
    lambda r, n, k: r.normal(np.zeros(2, np.int32), (2,)),
    lambda r, n, k: r.normal(np.zeros((2, 2), np.uint32), (2,)),
    lambda r, n, k: r.normal(None, (2,)),
    lambda r, n, k: r.normal(k, (2.0,)),
    lambda r, n, k: r.normal(k, None),
    lambda r, n, k: r.normal(k, (3,), "int32"),
    lambda r, n, k: r.uniform(k, (3,), minval=n.zeros(4)),
    lambda r, n, k: r.uniform(k, (3,), "int32"),
    lambda r, n, k: r.bits(k, (3,), "int32"),
    lambda r, n, k: r.split(k, 2.0),
    lambda r, n, k: r.split(r.split(k), 2),
    lambda r, n, k: r.fold_in(k, -1),
    lambda r, n, k: r.fold_in(k, n.arange(2)),
    lambda r, n, k: r.gumbel(k, (2,), mode="bad"),
]


@pytest.mark.parametrize("call", BAD_CALLS)
def test_bad_input_raises_jax_error_class(call):
    with pytest.raises(Exception) as theirs:
        call(jr, jnp, jr.PRNGKey(0))
    with pytest.raises(theirs.type):
        call(fr, fnp, fr.PRNGKey(0))


def test_explicit_float64_warns_without_x64():
    with pytest.warns(UserWarning, match="Explicitly requested dtype float64"):
        out = fr.uniform(fr.PRNGKey(0), (2,), "float64")
    assert out.dtype == np.float32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fr.uniform(fr.PRNGKey(0), (2,), float)


@pytest.mark.cpu_only(reason="the CPU lowering of threefry")
def test_threefry_loop_runs_on_flat_arrays_on_cpu():
    # XLA:CPU compiles the cipher's loop body several times faster in one dimension than in
    # four; the bits are the same (their counters are the row-major indices either way).
    key = fluxion.random.PRNGKey(3)
    text = fluxion.jit(lambda k: fluxion.random.uniform(k, (3, 3, 4, 6))).lower(key).as_text()
    loop = text[text.index("stablehlo.while"):]
    assert "tensor<216xui32>" in loop[:2000] and "tensor<3x3x4x6xui32>" not in loop[:2000]
    ours = fluxion.random.uniform(key, (3, 3, 4, 6))
    theirs = jax.random.uniform(jax.random.PRNGKey(3), (3, 3, 4, 6))
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def _key_types_and_traced_reprs(lib):
    seen = []
    key, keys = lib.random.key(0), lib.random.split(lib.random.key(0), (3, 4))
    lib.jit(lambda k: seen.append(repr(k)) or k)(key)
    lib.jit(lambda k: seen.append(repr(k)) or k)(keys)
    lib.vmap(lambda k: seen.append(repr(k)) or k)(keys[0])
    lib.jit(lambda k: seen.append(repr(lib.typeof(k))) or k)(keys)
    types = [lib.typeof(key), lib.typeof(keys)]
    return seen, [repr(t) for t in types], [(t.shape, str(t.dtype)) for t in types]


def test_typeof_and_traced_repr_of_key_arrays_match_jax():
    import jax
    assert _key_types_and_traced_reprs(fluxion) == _key_types_and_traced_reprs(jax)
