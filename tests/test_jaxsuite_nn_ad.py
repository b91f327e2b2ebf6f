"""nn, autodiff, ndimage and XLA:CPU behaviours found by running JAX 0.10.2's own tests against
fluxion, each checked here against JAX or NumPy directly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
import fluxion.scipy.ndimage
from fluxion.test_util import check_grads


@pytest.mark.parametrize("x,kw", [(np.array([1, 2, 0]), {}),
                                  (np.array([[1, 3], [0, -1]]), {"axis": 0}),
                                  (np.array([1, 2]), {"axis": -2}),
                                  (np.array([1, 2], np.uint8), {"dtype": np.int8}), (3, {})])
def test_one_hot_matches_jax(x, kw):
    ours, theirs = fluxion.nn.one_hot(x, 3, **kw), jax.nn.one_hot(x, 3, **kw)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_one_hot_warnings_errors_and_axis_names():
    with pytest.warns(DeprecationWarning, match="one_hot input should be integer-typed"):
        fluxion.nn.one_hot(fnp.array([1.0]), 3)
    with pytest.raises(fluxion.errors.ConcretizationTypeError,
                       match="jax.nn.one_hot argument `num_classes`"):
        fluxion.jit(fluxion.nn.one_hot)(3, 5)
    with pytest.raises(ValueError, match="out of bounds"):
        fluxion.nn.one_hot(np.array([1]), 3, axis=3)
    x = np.array([0, 2, 1])
    ours = fluxion.vmap(lambda v: fluxion.nn.one_hot(v, 3, axis="i"), axis_name="i")(x)
    theirs = jax.vmap(lambda v: jax.nn.one_hot(v, 3, axis="i"), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    with pytest.raises(ValueError, match="Expected num_classes to match"):
        fluxion.vmap(lambda v: fluxion.nn.one_hot(v, 4, axis="i"), axis_name="i")(x)


SPECIAL = [np.nan, np.inf, -np.inf, 1.0, 80.0, -80.0]


@pytest.mark.parametrize("x", SPECIAL)
@pytest.mark.parametrize("y", [0.0, np.nan, np.inf, -np.inf])
def test_logaddexp_tangent_at_special_values(x, y):
    # NaN gave a finite tangent (softplus'(nan) was 1), -inf a tangent weight of 1, not 0.
    args, tangents = (np.float32(x), np.float32(y)), (np.float32(1.5), np.float32(2.5))
    ours = fluxion.jvp(fnp.logaddexp, args, tangents)
    theirs = jax.jvp(jnp.logaddexp, args, tangents)
    np.testing.assert_array_equal(np.asarray(ours[1]), np.asarray(theirs[1]))
    t = fluxion.jvp(lambda v: fnp.logaddexp(v, 0.0), (1.0,), (1.0,))[1]
    assert t.weak_type


def test_softplus_gradient_checks_as_in_jax():
    check_grads(fluxion.nn.softplus, (float("nan"),), order=1)
    check_grads(fluxion.nn.elu, (1e4,), order=4, eps=1.0, modes=["fwd"])
    check_grads(fluxion.nn.elu, (1e4,), order=4, eps=1.0, modes=["rev"])
    check_grads(fluxion.nn.relu, (1.0,), order=3, rtol=1e-2, atol=1e-2)


def test_check_grads_catches_a_wrong_rule():
    bad = fluxion.custom_jvp(lambda x: x * x)
    bad.defjvp(lambda p, t: (p[0] * p[0], 3 * p[0] * t[0]))
    with pytest.raises(AssertionError):
        check_grads(bad, (np.float32(1.5),), order=1, modes=["fwd"])


def _sigmoid_rule(g, ans, x):
    return g * ans * (1 - ans)


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp", "grad_inside"])
def test_custom_rules_in_loops_leak_no_tracers(kind):
    # The staged equation kept the rule, and the rule's closure the call's arguments (tracers
    # of the loop body): checking_leaks reported them; memory held them.
    sigmoid = fluxion.custom_jvp(lambda x: 1 / (1 + fnp.exp(-x)))
    sigmoid.defjvps(_sigmoid_rule)
    sine = fluxion.custom_vjp(fnp.sin)
    sine.defvjp(lambda x: (fnp.sin(x), x), lambda r, g: (g * fnp.cos(r),))
    body = {"custom_jvp": sigmoid, "custom_vjp": sine,
            "grad_inside": fluxion.grad(lambda y: sine(y) * sigmoid(y))}[kind]

    @fluxion.jit
    def run(x):
        return fluxion.lax.scan(lambda h, _: (body(h + x), None), x, None, length=2)[0]

    with fluxion.checking_leaks():
        run(np.float32(0.5))
        fluxion.grad(run)(np.float32(0.5))


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_half_precision_dot_with_wider_result_then_transpose(dtype):
    # XLA:CPU folds the transpose into the dot and then cannot run a bf16 x bf16 -> f32 dot
    # ("Unsupported element type for DotThunk::Execute"); JAX fails the same way here.
    x = np.random.RandomState(0).randn(16, 128, 4, 32).astype(jnp.dtype(dtype))
    f = lambda x: fnp.swapaxes(fnp.einsum("BTNH,BSNH->BNTS", x, x,
                                          preferred_element_type=np.float32), -1, -2)
    out = np.asarray(fluxion.jit(f)(x))
    wide = x.astype(np.float32)
    np.testing.assert_allclose(out, np.einsum("BTNH,BSNH->BNST", wide, wide), rtol=1e-5,
                               atol=1e-4)


def test_map_coordinates_errors_name_the_limits_as_jax():
    x, c = np.arange(5.0), [np.linspace(0, 5, num=3)]
    with pytest.raises(NotImplementedError, match="requires order<=1"):
        fluxion.scipy.ndimage.map_coordinates(x, c, order=2)
    with pytest.raises(NotImplementedError, match="does not yet support mode"):
        fluxion.scipy.ndimage.map_coordinates(x, c, order=1, mode="grid-wrap")


def test_check_jvp_and_check_vjp_take_jax_signatures():
    import functools
    from fluxion.test_util import check_jvp, check_vjp
    x = np.linspace(-1, 1, 5).astype(np.float32)
    check_jvp(fnp.tanh, functools.partial(fluxion.jvp, fnp.tanh), (x,))
    check_vjp(fnp.tanh, functools.partial(fluxion.vjp, fnp.tanh), (x,))
    check_grads(fnp.tanh, (x,), order=2, modes=["fwd", "rev", "lin"])


@pytest.mark.parametrize("make", [lambda d: fnp.zeros((2,), d), lambda d: fnp.ones((), d),
                                  lambda d: fnp.full((2,), 0, d), lambda d: fnp.empty((3,), d),
                                  lambda d: fnp.zeros_like(np.zeros(2), dtype=d),
                                  lambda d: fnp.array(np.zeros(2, d))])
def test_float0_arrays_stay_on_the_host(make):
    # XLA has no float0: these raised "Unknown NumPy dtype" from the runtime.
    out = make(fluxion.dtypes.float0)
    assert out.dtype == fluxion.dtypes.float0 and isinstance(out, np.ndarray)


def test_float0_tangent_through_a_custom_jvp():
    @fluxion.custom_jvp
    def f(x, y):
        return x, y

    f.defjvp(lambda p, t: (p, (2.0, fluxion.custom_derivatives.zero_from_primal(p[1]))))
    _, tangents = fluxion.jvp(f, (2.0, 3), (np.ones(()), fnp.zeros((), fluxion.dtypes.float0)))
    assert float(tangents[0]) == 2.0 and tangents[1].dtype == fluxion.dtypes.float0


def test_custom_vjp_nondiff_argnames():
    import functools

    @functools.partial(fluxion.custom_vjp, nondiff_argnums=(0,), nondiff_argnames=("g",))
    def app(f, g, x):
        return f(g(x))

    app.defvjp(lambda f, g, x: (app(f, g, x), None), lambda f, g, _, ct: (7 * ct,))
    assert float(fluxion.grad(lambda x: app(lambda y: y, lambda y: 2 * y, x))(1.0)) == 7.0


def test_custom_derivative_argument_and_rule_errors_as_jax():
    @fluxion.custom_jvp
    def f(x):
        return x ** 2

    f.defjvp(lambda primals, tangents: tangents[0])
    with pytest.raises(TypeError, match=r"must produce a pair \(list or tuple of length two\)"):
        fluxion.jvp(f, (2.0,), (1.0,))

    for decorator in (fluxion.custom_jvp, fluxion.custom_vjp):
        g = decorator(lambda x, y, *, z=None: fnp.sin(x) * y)
        if decorator is fluxion.custom_jvp:
            g.defjvp(lambda p, t: (g(*p), t[0]))
        else:
            g.defvjp(lambda x, y: (g(x, y), None), lambda r, ct: (ct, ct))
        with pytest.raises(TypeError, match="could not be resolved to positional-only arguments"
                                            "(.|\n)*missing a required argument: 'y'"):
            g(0.5)
        with pytest.raises(TypeError, match="keyword arguments could not be resolved to "
                                            "positions: z"):
            g(0.5, 0.1, z=1.0)

    @fluxion.custom_jvp
    def h(x, y=2.0):
        return x * y

    h.defjvps(lambda t, ans, x, y: t * y, lambda t, ans, x, y: t * x)
    assert float(h(1.5)) == float(h(x=1.5)) == 3.0
    assert float(fluxion.grad(h)(1.5)) == 2.0


def test_jvp_of_a_jitted_custom_vjp_function_is_a_type_error():
    sine = fluxion.custom_vjp(fnp.sin)
    sine.defvjp(lambda x: (fnp.sin(x), fnp.cos(x)), lambda c, g: (c * g,))
    with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\)"):
        fluxion.jvp(fluxion.jit(sine), (3.0,), (1.0,))
    assert float(fluxion.jit(fluxion.grad(sine))(0.0)) == 1.0  # (the linear part transposes)


def test_symbolic_zero_tangents_survive_vmap():
    # Under vmap the batched rule instantiated every tangent: the rule saw arrays of zeros.
    seen = []

    @fluxion.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        seen.append(type(tangents[1]) is fluxion.custom_derivatives.SymbolicZero)
        return f(*primals), tangents[0] * primals[1]

    f.defjvp(f_jvp, symbolic_zeros=True)
    x = fnp.arange(3.0)
    g = fluxion.grad(lambda x, y: fluxion.vmap(f)(x, y).sum())(x, fnp.ones(3))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 1.0, 1.0])
    out = fluxion.jvp(fluxion.vmap(f), (x, fnp.ones(3)), (fnp.ones(3), fnp.zeros(3)))
    np.testing.assert_array_equal(np.asarray(out[1]), [1.0, 1.0, 1.0])
    assert seen[0] is True and seen[-1] is False  # (an explicit zeros array is not symbolic)


def test_checkify_errors_are_jaxlibs_runtime_error_and_preds_scalar():
    from fluxion.experimental import checkify

    @fluxion.vmap
    def f(x):
        checkify.check(fnp.sum(x) == 1.0, "x must sum to one.")
        return x

    with pytest.raises(fluxion.errors.JaxRuntimeError, match="x must sum to one"):
        f(fnp.array([[0.5, 0.5], [1.0, 1.0]]))
    assert checkify.JaxRuntimeError is fluxion.errors.JaxRuntimeError
    for check in (checkify.check, checkify.debug_check):
        with pytest.raises(TypeError, match="takes a scalar pred"):
            checkify.checkify(lambda x: check(x != x, "msg"))(fnp.ones(3))
