"""Eager jnp calls run as one cached executable per signature, with op-by-op semantics."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion._src.numpy import eager, linalg_ops, manipulation, reductions

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5)).astype(np.float32)
I = RNG.integers(-5, 5, (4, 5)).astype(np.int32)
B = X > 0

@pytest.fixture(autouse=True)
def _no_budget_flush(monkeypatch):
    """Counts of cached signatures below assume no process-wide flush in between."""
    monkeypatch.setattr(eager, "MAX_EAGER_EXECUTABLES", 10 ** 6)


CALLS = [
    ("sum", lambda m, x: m.sum(x)),
    ("sum_axis_keepdims", lambda m, x: m.sum(x, axis=1, keepdims=True)),
    ("sum_positional_axis", lambda m, x: m.sum(x, 0)),
    ("sum_initial_where", lambda m, x: m.sum(x, axis=0, initial=2, where=m.asarray(B))),
    ("prod_dtype", lambda m, x: m.prod(x, dtype=m.float32)),
    ("max", lambda m, x: m.max(x, axis=0)),
    ("mean", lambda m, x: m.mean(x)),
    ("var_ddof", lambda m, x: m.var(x, axis=1, ddof=1)),
    ("std", lambda m, x: m.std(x)),
    ("argmax", lambda m, x: m.argmax(x, axis=1)),
    ("argmin_flat", lambda m, x: m.argmin(x)),
    ("cumsum", lambda m, x: m.cumsum(x, axis=0)),
    ("any", lambda m, x: m.any(x > 0, axis=0)),
    ("count_nonzero", lambda m, x: m.count_nonzero(x)),
    ("average", lambda m, x: m.average(x, axis=0, weights=m.arange(4.0))),
    ("matmul", lambda m, x: m.matmul(x, x.T)),
    ("dot", lambda m, x: m.dot(x, m.ones(5, x.dtype))),
    ("tensordot", lambda m, x: m.tensordot(x, x, axes=([0], [0]))),
    ("outer", lambda m, x: m.outer(x[0], x[1])),
    ("trace", lambda m, x: m.trace(x)),
    ("method_sum", lambda m, x: x.sum(axis=0)),
    ("stack", lambda m, x: m.stack([x, x[::-1]], axis=1)),
    ("stack_of_array", lambda m, x: m.stack(x, axis=-1)),
    ("stack_scalars", lambda m, x: m.stack([x[0, 0], 2, 3.5])),
    ("vstack", lambda m, x: m.vstack([x[0], x])),
    ("hstack", lambda m, x: m.hstack([x, x])),
    ("dstack", lambda m, x: m.dstack([x[0], x[1]])),
    ("column_stack", lambda m, x: m.column_stack([x[0], x[1]])),
]


@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
@pytest.mark.parametrize("data", [X, I], ids=["f32", "i32"])
def test_eager_matches_jax_and_op_by_op(name, call, data):
    expected = call(jjnp, jjnp.asarray(data))
    got = call(jnp, jnp.asarray(data))
    with fluxion.disable_jit():
        op_by_op = call(jnp, jnp.asarray(data))
    for g, ref in [(got, expected), (op_by_op, expected)]:
        assert g.dtype == ref.dtype and g.shape == ref.shape
        assert g.weak_type == ref.weak_type
        np.testing.assert_allclose(np.asarray(g), np.asarray(ref), rtol=2e-6, atol=2e-6)


def test_python_scalars_of_a_kind_share_one_executable():
    x = jnp.asarray(X)
    reductions.sum.clear_cache()
    results = [float(jnp.sum(x, initial=k)) for k in range(5)]
    assert len(reductions.sum.eager_cache) == 1
    np.testing.assert_allclose(results, [X.sum() + k for k in range(5)], rtol=1e-5)


def test_static_arguments_and_types_select_executables():
    reductions.mean.clear_cache()
    jnp.mean(jnp.asarray(X))
    jnp.mean(jnp.asarray(X))
    jnp.mean(jnp.asarray(X), axis=0)
    jnp.mean(jnp.asarray(I))
    assert len(reductions.mean.eager_cache) == 3


def test_static_arguments_count_with_their_types():
    """`0`, `0.0` and `False` are equal dict keys: the cache must not let `axis=0.0` reuse the
    program of `axis=0` (JAX refuses a float axis)."""
    x = jnp.asarray(X)
    for call in (lambda ax: jnp.sum(x, ax), lambda ax: jnp.sum(x, axis=ax),
                 lambda ax: jnp.sum(x, axis=(ax,)), lambda ax: jnp.cumsum(x, axis=ax)):
        call(0), call(0)
        with pytest.raises(TypeError):
            call(0.0)
        with pytest.raises(TypeError):
            jjnp.sum(jjnp.asarray(X), 0.0)


def test_unhashable_static_argument_runs_op_by_op():
    got = jnp.sum(jnp.asarray(X), axis=[0, 1])
    np.testing.assert_allclose(got, X.sum(), rtol=1e-5)


def test_under_jit_the_jaxpr_stays_flat():
    text = str(fluxion.make_jaxpr(lambda x: jnp.mean(x @ x.T))(X))
    assert "pjit" not in text and "jit" not in text and "reduce_sum" in text


def test_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(eager, "MAX_EAGER_EXECUTABLES", 10 ** 6)  # the per-function bound alone
    linalg_ops.trace.clear_cache()
    for n in range(eager.MAX_SIGNATURES_PER_FUNCTION + 5):
        jnp.trace(jnp.ones((2, n + 1)))
    assert len(linalg_ops.trace.eager_cache) == eager.MAX_SIGNATURES_PER_FUNCTION


def test_errors_are_those_of_the_function():
    with pytest.raises(ValueError):
        jnp.sum(jnp.asarray(X), axis=5)
    with pytest.raises(TypeError):
        jnp.matmul(jnp.ones((2, 3)), jnp.ones((4, 2)))
    with pytest.raises(OverflowError):
        jnp.sum(jnp.asarray(I), initial=2**40)


def test_stack_of_a_list_of_arrays_is_one_executable():
    manipulation.stack.clear_cache()
    v = jnp.arange(3.0)
    for k in range(3):
        got = jnp.stack([v, v + k], axis=1)
        np.testing.assert_array_equal(got, np.stack([np.arange(3.0), np.arange(3.0) + k], 1))
    assert len(manipulation.stack.eager_cache) == 1
    with pytest.raises(ValueError, match="same shape"):
        jnp.stack([v, jnp.ones(4)])


def test_unary_front_explains_a_deleted_argument():
    """A cached one-argument function runs its program on the buffer directly; a failed
    run still gets the general path's explanation."""
    jnp.sin(jnp.ones((3, 7)))  # cached for this aval
    gone = jnp.ones((3, 7))
    gone.delete()
    with pytest.raises(RuntimeError, match=r"deleted with shape=f32\[3,7\]"):
        jnp.sin(gone)
    np.testing.assert_allclose(jnp.sin(jnp.ones((3, 7))), np.sin(np.ones((3, 7))), rtol=1e-6)


def test_unary_front_honours_debug_nans_after_caching():
    x = jnp.full((2, 9), -1.0)
    assert np.isnan(np.asarray(jnp.log(x))).all()  # cached, no check
    with fluxion.debug_nans(True):
        with pytest.raises(FloatingPointError):
            jnp.log(x)
    assert np.isnan(np.asarray(jnp.log(x))).all()


_DIRECT_CALLS_CHECK = r"""
import numpy as np, pytest, fluxion, fluxion.numpy as jnp
from fluxion._src import dispatch
from fluxion._src.numpy import eager
assert not dispatch.placing

# One or two positional Arrays whose program is cached run it on their buffers (one lookup);
# the values, and a failed run's explanation, are the general path's.
a, b = jnp.arange(12.0).reshape(3, 4), jnp.arange(4.0)
for _ in range(2):
    np.testing.assert_allclose(jnp.dot(a, b), np.arange(12.0).reshape(3, 4) @ np.arange(4.0))
    np.testing.assert_allclose(a.sum(), 66.0)
assert any(k[0] is jnp.dot.__wrapped__ for k in eager._direct)
assert any(k[0] is jnp.sum.__wrapped__ for k in eager._direct)
gone = jnp.arange(12.0).reshape(3, 4)
gone.delete()
with pytest.raises(RuntimeError, match=r"deleted with shape=f32\[3,4\]"):
    jnp.dot(gone, b)
with pytest.raises(RuntimeError, match=r"deleted with shape=f32\[3,4\]"):
    gone.sum()
np.testing.assert_allclose(jnp.dot(a, b), [14.0, 38.0, 62.0])
np.testing.assert_allclose(jnp.sum(a, 0), [12.0, 15.0, 18.0, 21.0])  # not the one-arg entry

# A static second argument or static keywords run directly too, keyed with their types.
for _ in range(2):
    np.testing.assert_allclose(jnp.sum(a, 1), [6.0, 22.0, 38.0])
    np.testing.assert_allclose(a.max(axis=0), [8.0, 9.0, 10.0, 11.0])
    np.testing.assert_allclose(jnp.mean(a, axis=1, keepdims=True), [[1.5], [5.5], [9.5]])
assert (jnp.sum.__wrapped__, a.aval, fluxion.config.trace_key, 1, int, 1) in eager._direct
assert any(k[0] is jnp.max.__wrapped__ and "axis" in k for k in eager._direct)
assert any(k[0] is jnp.mean.__wrapped__ and ("axis", "keepdims") in k for k in eager._direct)
for bad in ([jnp.sum, (a, 1.0), {}], [jnp.max, (a,), {"axis": 0.0}]):
    with pytest.raises(TypeError, match="float"):
        bad[0](*bad[1], **bad[2])
# Three Arrays (`where(c, x, y)`), through the front of two positional parameters.
c = a > 5
for _ in range(2):
    np.testing.assert_allclose(jnp.where(c, a, -a), np.where(np.asarray(c), np.asarray(a), -np.asarray(a)))
assert any(k[1:] == (c.aval, a.aval, a.aval, fluxion.config.trace_key) for k in eager._direct)
gone2 = jnp.arange(12.0).reshape(3, 4)
gone2.delete()
with pytest.raises(RuntimeError, match=r"deleted with shape=f32\[3,4\]"):
    jnp.where(c, a, gone2)
with pytest.raises(RuntimeError, match=r"deleted with shape=f32\[3,4\]"):
    jnp.sum(gone2, 1)
with pytest.raises(RuntimeError, match=r"deleted with shape=f32\[3,4\]"):
    gone2.max(axis=0)

# debug_nans and disable_jit empty the direct cache, and nothing enters it meanwhile.
zero = jnp.zeros(5)
for _ in range(2):
    assert np.isnan(np.asarray(jnp.divide(zero, zero))).all()  # cached, no check
with fluxion.debug_nans(True):
    assert not eager._direct
    with pytest.raises(FloatingPointError):
        jnp.divide(zero, zero)
assert np.isnan(np.asarray(jnp.divide(zero, zero))).all()
with fluxion.disable_jit():
    assert not eager._direct
    jnp.divide(zero, zero), jnp.sin(zero)
    assert not eager._direct
jnp.divide(zero, zero)
assert eager._direct

# Placement turns on for good: the cache empties and direct calls stop.
fluxion.device_put(zero, fluxion.devices()[0])
assert dispatch.placing and not eager._direct
jnp.divide(zero, zero), jnp.sin(zero), a.sum()
assert not eager._direct
print("OK")
"""


def test_direct_calls_in_a_fresh_process():
    """The direct-execution cache (fluxion/_src/numpy/eager.py `_direct`), checked where
    placement has not turned on (in this process an earlier test may have turned it on)."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", _DIRECT_CALLS_CHECK], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr


def test_direct_paths_keep_values_and_explanations():
    """In this process (placement possibly on): the same calls, values and errors."""
    a, b = jnp.arange(12.0).reshape(3, 4), jnp.arange(4.0)
    for _ in range(2):
        np.testing.assert_allclose(jnp.dot(a, b), [14.0, 38.0, 62.0])
        np.testing.assert_allclose(a.sum(), 66.0)
    gone = jnp.arange(12.0).reshape(3, 4)
    gone.delete()
    with pytest.raises(RuntimeError, match=r"deleted with shape=f32\[3,4\]"):
        jnp.dot(gone, b)
    zero = jnp.zeros(5)
    jnp.divide(zero, zero)
    with fluxion.debug_nans(True):
        with pytest.raises(FloatingPointError):
            jnp.divide(zero, zero)


def test_eager_executables_have_a_process_wide_budget(monkeypatch):
    # Every XLA:CPU executable holds memory mappings of JIT code and a process may have 65,530:
    # past the budget every eager cache is emptied, so executables no other cache holds go.
    monkeypatch.setattr(eager, "MAX_EAGER_EXECUTABLES", 3)
    monkeypatch.setattr(eager, "_compiled_since_flush", 0)
    for cache in eager.signature_caches:
        cache.clear()
    for n in range(1, 8):
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_allclose(np.asarray(jnp.cumsum(x)), np.cumsum(x))
        np.testing.assert_allclose(np.asarray(jnp.var(x)), np.var(x), rtol=1e-6)
        held = sum(len(c) for c in eager.signature_caches)
        assert held <= 3
    assert eager._compiled_since_flush <= 3
