"""Compare fluxion.numpy with jax.numpy (the oracle): values, dtypes, weak types, errors."""
import jax
import jax.numpy as jnp
import numpy as np

import fluxion
import fluxion.numpy as fnp


def _leaves(out):
    return jax.tree_util.tree_leaves(out) if isinstance(out, (tuple, list)) else [out]


def _weak(x):
    return bool(getattr(getattr(x, "aval", None), "weak_type", False))


def _array_leaves_only(out):
    from fluxion._src.array import Array
    return all(isinstance(leaf, Array) for leaf in jax.tree_util.tree_leaves(out))


def _with_traced(fn, args, kwargs):
    """fn as a function of args' NumPy arrays and scalars alone (shapes, Python scalars and
    kwargs stay static), and those traced arguments."""
    traced = [i for i, a in enumerate(args) if isinstance(a, (np.ndarray, np.generic))]

    def call(*traced_args):
        full = list(args)
        for i, a in zip(traced, traced_args):
            full[i] = a
        return fn(*full, **kwargs)
    return call, [args[i] for i in traced]


def jax_result(fn, args, kwargs, eager=False):
    """fn(*args, **kwargs) in JAX, compiled once under jax.jit with the NumPy arguments traced
    (eager JAX compiles each primitive separately, which made the oracle half the suite's
    time). Eager where jit cannot trace fn (concrete values needed: its error is the
    specification then), with no array arguments, or when asked (`eager`: the result holds
    Python values, which jit would turn into arrays)."""
    call, traced = _with_traced(fn, args, kwargs)
    if traced and not eager:
        try:
            return jax.jit(call)(*traced)
        except Exception:  # noqa: BLE001 - retried eagerly, where JAX decides
            pass
    return fn(*args, **kwargs)


def assert_matches(expected, actual, rtol=1e-6, atol=0.0, check_weak=True):
    exp, act = _leaves(expected), _leaves(actual)
    assert len(exp) == len(act), (expected, actual)
    for e, a in zip(exp, act):
        assert np.asarray(a).dtype == np.asarray(e).dtype, (e, a)
        assert np.shape(a) == np.shape(e), (e, a)
        if check_weak:
            assert _weak(a) == _weak(e), ("weak type", e, a)
        e_np, a_np = np.asarray(e), np.asarray(a)
        if e_np.dtype.kind in "fc" or e_np.dtype.name in ("bfloat16",):
            np.testing.assert_allclose(a_np.astype(np.complex128 if e_np.dtype.kind == "c"
                                                   else np.float64),
                                       e_np.astype(np.complex128 if e_np.dtype.kind == "c"
                                                   else np.float64),
                                       rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(a_np, e_np)


def check(name, *args, rtol=1e-6, atol=0.0, jit=True, check_weak=True, **kwargs):
    """fnp.name(*args, **kwargs) equals jnp.name(...) in value, dtype and weak type; jit too."""
    actual = getattr(fnp, name)(*args, **kwargs)
    expected = jax_result(getattr(jnp, name), args, kwargs,
                          eager=not _array_leaves_only(actual))
    assert_matches(expected, actual, rtol, atol, check_weak)
    if jit:
        call, traced = _with_traced(getattr(fnp, name), args, kwargs)
        jitted = fluxion.jit(call)(*traced)
        assert_matches(expected, jitted, rtol, atol, check_weak)
    return actual


def check_both_modes(name, *args, **kw):
    for x64 in (False, True):
        with jax.enable_x64(x64), fluxion.enable_x64(x64):
            check(name, *args, **kw)


def error_class(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        return type(e)
    return None


def check_error(name, *args, **kwargs):
    """fnp.name raises the same exception class as jnp.name."""
    expected = error_class(getattr(jnp, name), *args, **kwargs)
    assert expected is not None, f"jax.numpy.{name} does not raise"
    actual = error_class(getattr(fnp, name), *args, **kwargs)
    assert actual is not None and issubclass(actual, expected), (name, expected, actual)


def check_fn(fn, *args, rtol=1e-6, atol=0.0, jit=True, check_weak=True):
    """fn(fnp, *args) equals fn(jnp, *args) (value, dtype, weak type), eagerly and under jit."""
    actual = fn(fnp, *args)
    expected = jax_result(lambda *a: fn(jnp, *a), args, {},
                          eager=not _array_leaves_only(actual))
    assert_matches(expected, actual, rtol, atol, check_weak)
    if jit:
        assert_matches(expected, fluxion.jit(lambda *a: fn(fnp, *a))(*args), rtol, atol,
                       check_weak)
    return actual


def check_fn_error(fn, *args):
    expected = error_class(fn, jnp, *args)
    assert expected is not None, "jax.numpy does not raise"
    actual = error_class(fn, fnp, *args)
    assert actual is not None and issubclass(actual, expected), (expected, actual)
