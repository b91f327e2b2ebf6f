"""The differentiation API: jvp, vjp, grad, linearize, jacobians, nesting, errors, custom rules,
checkpointing. Values are checked against closed forms, finite differences and JAX."""
import functools

import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import lax
from fluxion.test_util import check_grads

jax = pytest.importorskip("jax")
jjnp = jax.numpy


def f_scalar(x):
    return jnp.sin(x) * x + jnp.exp(0.5 * x)


def df_scalar(x):
    return np.cos(x) * x + np.sin(x) + 0.5 * np.exp(0.5 * x)


def test_grad_matches_closed_form():
    for x in (0.3, -1.2, 2.0):
        np.testing.assert_allclose(fluxion.grad(f_scalar)(x), df_scalar(x), rtol=1e-5)


def test_jvp_and_vjp_agree_with_closed_form():
    x = np.float32(0.7)
    y, t = fluxion.jvp(f_scalar, (x,), (np.float32(2.0),))
    np.testing.assert_allclose(t, 2 * df_scalar(0.7), rtol=1e-5)
    y2, pullback = fluxion.vjp(f_scalar, x)
    np.testing.assert_allclose(y2, y)
    (ct,) = pullback(np.float32(3.0))
    np.testing.assert_allclose(ct, 3 * df_scalar(0.7), rtol=1e-5)


def test_higher_order_and_nesting():
    d3 = fluxion.grad(fluxion.grad(fluxion.grad(jnp.sin)))
    np.testing.assert_allclose(d3(1.0), -np.cos(1.0), rtol=1e-5)
    f = lambda x: jnp.sum(jnp.sin(x) ** 2)
    x = np.array([0.1, 0.5, -0.3], np.float32)
    v = np.array([1.0, -2.0, 0.5], np.float32)
    hvp = fluxion.jvp(fluxion.grad(f), (x,), (v,))[1]
    expected = jax.jvp(jax.grad(lambda x: jjnp.sum(jjnp.sin(x) ** 2)), (x,), (v,))[1]
    np.testing.assert_allclose(hvp, expected, rtol=1e-5)
    for g in (fluxion.grad(fluxion.jit(f)), fluxion.jit(fluxion.grad(f)),
              fluxion.jit(fluxion.grad(fluxion.jit(f)))):
        np.testing.assert_allclose(g(x), np.sin(2 * x), rtol=1e-5)


def test_has_aux_under_jit_returns_primal_values():
    # aux computed from differentiated inputs is a value, not a tracer of the finished trace
    def loss(x):
        return jnp.sin(x), {"twice": x * 2, "pos": jnp.where(x > 0, x, 0.0)}

    for wrap in (lambda f: f, fluxion.jit):
        g, aux = wrap(fluxion.grad(loss, has_aux=True))(-1.5)
        np.testing.assert_allclose(g, np.cos(-1.5), rtol=1e-6)
        assert float(aux["twice"]) == -3.0 and float(aux["pos"]) == 0.0
        y, t, aux = wrap(lambda x: fluxion.jvp(loss, (x,), (1.0,), has_aux=True))(0.5)
        np.testing.assert_allclose(t, np.cos(0.5), rtol=1e-6)
        assert float(aux["twice"]) == 1.0


def test_argnums_has_aux_and_pytrees():
    def loss(params, x, scale):
        y = jnp.tanh(params["w"] * x + params["b"])
        return scale * jnp.sum(y ** 2), {"y": y}

    params = {"w": np.float32(0.5), "b": np.array([0.1, -0.2], np.float32)}
    x = np.array([1.0, 2.0], np.float32)
    (value, aux), grads = fluxion.value_and_grad(loss, argnums=(0, 2), has_aux=True)(params, x, 2.0)
    jvalue_aux, jgrads = jax.value_and_grad(loss_j := (lambda p, x, s: (
        s * jjnp.sum(jjnp.tanh(p["w"] * x + p["b"]) ** 2), {"y": jjnp.tanh(p["w"] * x + p["b"])})),
        argnums=(0, 2), has_aux=True)(params, x, 2.0)
    np.testing.assert_allclose(value, jvalue_aux[0], rtol=1e-6)
    np.testing.assert_allclose(aux["y"], jvalue_aux[1]["y"], rtol=1e-6)
    np.testing.assert_allclose(grads[0]["w"], jgrads[0]["w"], rtol=1e-5)
    np.testing.assert_allclose(grads[0]["b"], jgrads[0]["b"], rtol=1e-5)
    np.testing.assert_allclose(grads[1], jgrads[1], rtol=1e-5)


def test_linearize_matches_jvp():
    x = np.array([0.2, 0.4], np.float32)
    f = lambda x: jnp.sin(x) * jnp.cos(x)
    y, f_jvp = fluxion.linearize(f, x)
    for t in (np.ones(2, np.float32), np.array([2.0, -1.0], np.float32)):
        np.testing.assert_allclose(f_jvp(t), fluxion.jvp(f, (x,), (t,))[1], rtol=1e-6)


def test_jacobians_and_hessian_match_jax():
    f = lambda x: jnp.sin(x) * jnp.sum(x ** 2)
    jf = lambda x: jjnp.sin(x) * jjnp.sum(x ** 2)
    x = np.array([0.1, 0.7, -0.4], np.float32)
    np.testing.assert_allclose(fluxion.jacfwd(f)(x), jax.jacfwd(jf)(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fluxion.jacrev(f)(x), jax.jacrev(jf)(x), rtol=1e-5, atol=1e-6)
    g = lambda x: jnp.sum(jnp.sin(x) * x)
    jg = lambda x: jjnp.sum(jjnp.sin(x) * x)
    np.testing.assert_allclose(fluxion.hessian(g)(x), jax.hessian(jg)(x), rtol=1e-5, atol=1e-6)


def test_integer_inputs_get_float0_tangents():
    f = lambda x, n: x * n
    out, t = fluxion.jvp(f, (2.0, 3), (1.0, np.zeros((), fluxion.dtypes.float0)))
    assert float(t) == 3.0
    g = fluxion.grad(f, argnums=(0, 1), allow_int=True)(2.0, 3)
    assert g[1].dtype == fluxion.dtypes.float0


@pytest.mark.parametrize("fun, args, match", [
    (lambda x: x * 2, (np.ones(3, np.float32),), "scalar-output"),
    (lambda n: n * 2.0, (3,), "real- or complex-valued inputs"),
    (lambda x: (x > 0).astype(jnp.int32), (1.0,), "real-valued outputs"),
])
def test_grad_errors_match_jax(fun, args, match):
    with pytest.raises(TypeError, match=match):
        fluxion.grad(fun)(*args)
    with pytest.raises(TypeError):
        jax.grad(fun)(*args)


_JACOBIAN_DTYPE_CASES = {
    "jacfwd of an integer output": lambda m: m.jacfwd(lambda x: (x.sum() * 2).astype(int))(
        np.ones(2, np.float32)),
    "jacfwd of a complex input": lambda m: m.jacfwd(lambda x: x * 2)(np.ones(2, np.complex64)),
    "jacfwd holomorphic, real output": lambda m: m.jacfwd(lambda x: x.real, holomorphic=True)(
        np.ones(2, np.complex64)),
    "jacfwd of an integer input": lambda m: m.jacfwd(lambda x: x * 2)(1),
    "jacrev of a complex output": lambda m: m.jacrev(lambda x: x * 1j)(1.0),
    "jacrev of an integer output": lambda m: m.jacrev(lambda x: x.astype(int))(1.0),
    "jacrev holomorphic, real input": lambda m: m.jacrev(lambda x: x, holomorphic=True)(
        np.ones(2, np.float32)),
    "jacrev allow_int": lambda m: m.jacrev(lambda x: x * 2.0, allow_int=True)(np.ones(2, np.int32)),
    "hessian of an integer output": lambda m: m.hessian(lambda x: (x ** 2).sum().astype(int))(
        np.ones(2, np.float32)),
    "grad of a complex output": lambda m: m.grad(lambda x: x * 1j)(1.0),
}


@pytest.mark.parametrize("case", list(_JACOBIAN_DTYPE_CASES))
def test_jacobian_dtype_rules_match_jax(case):
    """Which inputs/outputs each of jacfwd/jacrev/grad accepts, their messages, and the zero
    Jacobians of integer outputs (jacfwd) and integer inputs (jacrev with allow_int)."""
    def run(module):
        try:
            return module.jit(lambda: _JACOBIAN_DTYPE_CASES[case](module))()
        except TypeError as e:
            return str(e)
    expected, got = run(jax), run(fluxion)
    if isinstance(expected, str):
        assert got == expected
    else:
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def test_grad_of_non_array_output_is_type_error():
    with pytest.raises(TypeError):
        fluxion.grad(lambda x: "not an array")(1.0)


def test_holomorphic_grad():
    f = lambda z: z * z + jnp.sin(z)
    z = np.complex64(1.0 + 0.5j)
    np.testing.assert_allclose(fluxion.grad(f, holomorphic=True)(z),
                               jax.grad(lambda z: z * z + jjnp.sin(z), holomorphic=True)(z), rtol=1e-5)


def test_grad_jaxpr_has_no_dead_equations():
    def f(x):
        unused = jnp.exp(x) * 3.0  # noqa: F841
        return jnp.sum(jnp.sin(x))
    jaxpr = fluxion.make_jaxpr(fluxion.grad(f))(np.ones(3, np.float32)).jaxpr
    names = [e.primitive.name for e in jaxpr.eqns]
    assert "exp" not in names and "sin" not in names  # the primal output is not needed
    live = {id(v) for v in jaxpr.outvars}
    for eqn in reversed(jaxpr.eqns):
        assert any(id(v) in live for v in eqn.outvars), f"dead equation {eqn}"
        live.update(id(v) for v in eqn.invars)


# ---------------------------------------------------------------------------------------------
# custom_jvp / custom_vjp

@fluxion.custom_jvp
def log1pexp(x):
    return jnp.log(1.0 + jnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1.0 - 1.0 / (1.0 + jnp.exp(x)))


def test_custom_jvp_stabilizes_gradient():
    assert np.isfinite(float(fluxion.grad(log1pexp)(100.0)))
    np.testing.assert_allclose(fluxion.grad(log1pexp)(100.0), 1.0)
    np.testing.assert_allclose(fluxion.jit(fluxion.grad(log1pexp))(2.0), 1 / (1 + np.exp(-2.0)), rtol=1e-6)
    np.testing.assert_allclose(fluxion.grad(fluxion.jit(log1pexp))(2.0), 1 / (1 + np.exp(-2.0)), rtol=1e-6)
    np.testing.assert_allclose(fluxion.vmap(fluxion.grad(log1pexp))(np.array([0.0, 2.0], np.float32)),
                               1 / (1 + np.exp(-np.array([0.0, 2.0]))), rtol=1e-6)
    second = fluxion.grad(fluxion.grad(log1pexp))(0.5)
    s = 1 / (1 + np.exp(-0.5))
    np.testing.assert_allclose(second, s * (1 - s), rtol=1e-5)


@fluxion.custom_jvp
def _triple(x):
    return x * 3.0


# The rule applies the function itself to the tangent (a linear custom function): the call on
# the tangent must transpose.
_triple.defjvp(lambda primals, tangents: (_triple(primals[0]), _triple(tangents[0])))


@pytest.mark.parametrize("transform", [
    lambda f: fluxion.grad(f),
    lambda f: fluxion.jit(fluxion.grad(f)),
    lambda f: fluxion.grad(fluxion.checkpoint(f)),
    lambda f: fluxion.grad(fluxion.checkpoint(f, policy=fluxion.checkpoint_policies.nothing_saveable)),
    lambda f: fluxion.grad(lambda x: lax.scan(lambda c, _: (f(c), None), x, None, length=2)[0]),
    lambda f: fluxion.grad(fluxion.grad(f)),
], ids=["grad", "jit", "checkpoint", "nothing_saveable", "scan", "second"])
def test_custom_jvp_whose_rule_calls_the_function_on_tangents(transform):
    def f(x):
        return jnp.sin(_triple(x))

    def expected(f):  # the same function written without the custom rule
        return transform(f)(0.7)
    np.testing.assert_allclose(transform(f)(0.7), expected(lambda x: jnp.sin(x * 3.0)), rtol=1e-6)


def test_linear_transpose_of_a_custom_jvp_function():
    (ct,) = fluxion.linear_transpose(_triple, 1.0)(2.0)
    assert float(ct) == 6.0


def test_custom_jvp_nondiff_argnums_and_defjvps():
    @functools.partial(fluxion.custom_jvp, nondiff_argnums=(0,))
    def apply(n, x):
        return x ** n

    @apply.defjvp
    def _apply_jvp(n, primals, tangents):
        (x,), (t,) = primals, tangents
        return apply(n, x), n * x ** (n - 1) * t

    np.testing.assert_allclose(fluxion.grad(apply, argnums=1)(3, 2.0), 12.0)

    @fluxion.custom_jvp
    def f(x, y):
        return jnp.sin(x) * y
    f.defjvps(lambda g, ans, x, y: jnp.cos(x) * g * y, lambda g, ans, x, y: jnp.sin(x) * g)
    np.testing.assert_allclose(fluxion.grad(f, argnums=(0, 1))(0.5, 2.0),
                               (np.cos(0.5) * 2.0, np.sin(0.5)), rtol=1e-6)


def test_custom_vjp():
    @fluxion.custom_vjp
    def clip_gradient(x):
        return x

    def fwd(x):
        return x, None

    def bwd(_, g):
        return (jnp.clip(g, -1.0, 1.0),)

    clip_gradient.defvjp(fwd, bwd)
    f = lambda x: jnp.sum(clip_gradient(x) * 10.0)
    x = np.ones(3, np.float32)
    np.testing.assert_allclose(fluxion.grad(f)(x), np.ones(3))
    np.testing.assert_allclose(fluxion.jit(fluxion.grad(f))(x), np.ones(3))
    per_example = fluxion.vmap(fluxion.grad(lambda x: clip_gradient(x) * 0.5))(x)
    np.testing.assert_allclose(per_example, 0.5 * np.ones(3))
    with pytest.raises(TypeError, match="forward-mode"):
        fluxion.jvp(clip_gradient, (1.0,), (1.0,))


def test_custom_vjp_bad_bwd_structure():
    @fluxion.custom_vjp
    def f(x, y):
        return x * y
    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g,))
    with pytest.raises(TypeError, match="bwd"):
        fluxion.grad(f)(1.0, 2.0)


# ---------------------------------------------------------------------------------------------
# checkpoint

def test_checkpoint_recomputes_in_backward_pass():
    def f(x):
        return jnp.sum(jnp.sin(jnp.sin(x)))
    x = np.ones(3, np.float32)
    plain = fluxion.make_jaxpr(fluxion.value_and_grad(f))(x)
    remat = fluxion.make_jaxpr(fluxion.value_and_grad(fluxion.checkpoint(f)))(x)

    from fluxion._src.core import subjaxprs

    def deep_count(jaxpr, name):
        return sum((e.primitive.name == name) + sum(deep_count(s, name) for s in subjaxprs(e.params))
                   for e in jaxpr.eqns)
    assert deep_count(plain.jaxpr, "sin") == 2
    assert deep_count(remat.jaxpr, "sin") > 2  # the inner sin is computed again for the backward pass
    np.testing.assert_allclose(fluxion.grad(fluxion.checkpoint(f))(x), fluxion.grad(f)(x), rtol=1e-6)


def test_checkpoint_policies():
    from fluxion.ad_checkpoint import checkpoint_name
    policies = fluxion.checkpoint_policies

    def f(w, x):
        h = checkpoint_name(jnp.tanh(w @ x), "h")
        return jnp.sum(jnp.sin(h))
    w = np.eye(3, dtype=np.float32) * 0.5
    x = np.ones(3, np.float32)
    expected = fluxion.grad(f)(w, x)
    for policy in (policies.everything_saveable, policies.nothing_saveable, policies.dots_saveable,
                   policies.dots_with_no_batch_dims_saveable, policies.save_only_these_names("h")):
        g = fluxion.grad(fluxion.checkpoint(f, policy=policy))(w, x)
        np.testing.assert_allclose(g, expected, rtol=1e-6)
        np.testing.assert_allclose(fluxion.jit(fluxion.grad(fluxion.checkpoint(f, policy=policy)))(w, x),
                                   expected, rtol=1e-6)


def test_check_grads_on_composite():
    f = lambda x, y: jnp.sum(jnp.tanh(x * y) + jnp.exp(-x ** 2))
    with fluxion.enable_x64():
        x = np.array([0.3, -0.7], np.float64)
        y = np.array([1.1, 0.4], np.float64)
        check_grads(f, (x, y), order=2, modes=("fwd", "rev"))


def test_check_grads_catches_a_wrong_rule():
    @fluxion.custom_jvp
    def wrong(x):
        return jnp.sin(x)
    wrong.defjvp(lambda p, t: (wrong(p[0]), t[0] * 2.0))
    with pytest.raises(AssertionError):
        check_grads(wrong, (np.float32(0.3),), order=1, modes=("fwd",))


def test_check_grads_takes_tolerance_dicts_as_jax():
    # JAX's check_grads takes {dtype: tol} dicts; the leaf's dtype picks the tolerance.
    f = lambda x: jnp.sum(jnp.sin(x) * x)
    x = np.array([0.3, -0.7], np.float32)
    tols = {np.float32: 2e-2, np.float64: 1e-5}
    check_grads(f, (x,), order=2, atol=tols, rtol=tols)
    import jax.test_util
    jax.test_util.check_grads(lambda x: jax.numpy.sum(jax.numpy.sin(x) * x), (x,), order=2,
                              atol=tols, rtol=tols)
    wrong = fluxion.custom_jvp(lambda x: jnp.sin(x))
    wrong.defjvp(lambda p, t: (wrong(p[0]), t[0] * 2.0))
    with pytest.raises(AssertionError):  # a dict without the leaf's dtype: the default applies
        check_grads(wrong, (np.float32(0.3),), order=1, modes=("fwd",),
                    atol={np.float64: 10.0}, rtol={np.float64: 10.0})


@pytest.mark.parametrize("modes", [("fwd",), ("rev",)])
def test_check_grads_of_python_float_args_uses_float32_steps(modes):
    # A Python float argument is float32 without x64, so its finite-difference step and
    # tolerance are float32's, as in JAX's check_grads (float64's step drowned in rounding).
    f = lambda x: lax.cond(x < 3, lambda x: (x, x), lambda x: (2 * x, 4 * x), x)
    check_grads(f, (3.14,), order=2, modes=modes)
    check_grads(fluxion.jit(f), (3.14,), order=2, modes=modes)
    import jax.test_util
    f_jax = lambda x: jax.lax.cond(x < 3, lambda x: (x, x), lambda x: (2 * x, 4 * x), x)
    jax.test_util.check_grads(f_jax, (3.14,), order=2, modes=modes)


def test_custom_vjp_nondiff_argnums():
    @functools.partial(fluxion.custom_vjp, nondiff_argnums=(0,))
    def scale(k, x):
        return k * x

    def fwd(k, x):
        return scale(k, x), None

    def bwd(k, _, g):
        return (k * g * 10.0,)

    scale.defvjp(fwd, bwd)
    np.testing.assert_allclose(fluxion.grad(scale, argnums=1)(3.0, 2.0), 30.0)
    np.testing.assert_allclose(fluxion.jit(fluxion.grad(lambda x: scale(3.0, x)))(2.0), 30.0)


def test_stop_gradient():
    f = lambda x: x * lax.stop_gradient(x)
    np.testing.assert_allclose(fluxion.grad(f)(3.0), 3.0)
    jaxpr = fluxion.make_jaxpr(f)(3.0)
    assert "stop_gradient" in str(jaxpr)
    np.testing.assert_allclose(fluxion.vmap(fluxion.grad(f))(np.arange(3.0, dtype=np.float32)), np.arange(3.0))


@pytest.mark.parametrize("name", ["real", "imag", "abs", "conj", "exp"])
def test_check_grads_of_non_holomorphic_complex_functions(name):
    # JAX's check_grads passes for these; a VJP is the real-linear adjoint, so only the real
    # parts of the dot-product test agree for real, imag, abs and conj.
    import jax.test_util
    x = np.array([6.4 + 3.8j, -3.4 + 3.6j, 1.05 + 1.1j], np.complex64)
    jax.test_util.check_grads(getattr(jax.lax, name), (x,), 2, ["fwd", "rev"], 0.15, 0.15)
    check_grads(getattr(lax, name), (x,), 2, ["fwd", "rev"], 0.15, 0.15)
    check_grads(fluxion.jit(getattr(lax, name)), (x,), 1, ["rev"], 0.15, 0.15)


def test_check_grads_catches_a_conjugated_complex_vjp():
    @fluxion.custom_vjp
    def bad(z):
        return z * (2 + 1j)
    bad.defvjp(lambda z: (bad(z), None), lambda _, g: (g * (2 - 1j),))
    with pytest.raises(AssertionError):
        check_grads(bad, (np.array([1 + 2j, 3 - 1j], np.complex64),), 1, ["rev"])


def test_check_grads_of_infinite_outputs():
    # Windows made of -inf padding alone give -inf at x + eps*v and x - eps*v: their finite
    # difference is 0 (JAX's safe subtraction), not inf - inf = NaN.
    x = np.array([0.3, -1.2, 2.5, 0.7], np.float32)
    pad = [(3, 0)]
    f = lambda x: lax.reduce_window(x, -np.inf, lax.max, (2,), (1,), pad)
    assert np.isneginf(np.asarray(f(x))[:2]).all()
    check_grads(f, (x,), 1)
    import jax.test_util
    jax.test_util.check_grads(
        lambda x: jax.lax.reduce_window(x, -np.inf, jax.lax.max, (2,), (1,), pad), (x,), 1)


def test_check_grads_float32_step_is_jax_eps():
    # float32 arguments take JAX's default step 1e-4: with 1e-3 the finite difference of a
    # steep function (1/x near 0, asin near 1) is off by more than the tolerance.
    import jax.test_util
    x = np.array([0.005, -0.004], np.float32)
    jax.test_util.check_grads(lambda x: 1 / x, (x,), 1)
    check_grads(lambda x: 1 / x, (x,), 1)


def test_stop_gradient_peels_integer_jvp_tracers_like_jax():
    # JAX issue 33689: a custom_gradient's integer output is a JVP tracer; stop_gradient must
    # give it back as a plain value, like the float output beside it.
    kinds = []

    @fluxion.custom_gradient
    def f(x):
        return (x, jnp.round(x).astype(jnp.int32)), lambda g: jnp.ones_like(x)

    def loss(x):
        y, i = f(x)
        kinds.extend(type(v) for v in lax.stop_gradient((y, i)))
        return jnp.sum(f(y)[0])
    np.testing.assert_allclose(fluxion.grad(loss)(jnp.ones(3)), np.ones(3))
    assert kinds[0] is kinds[1] and not issubclass(kinds[0], fluxion.core.Tracer)


def test_check_grads_float64_step_is_jax_eps():
    # float64 arguments of a function computing in float32 (lax.mul's out_dtype): JAX's step,
    # 1e-4, resolves the float32 result; a 1e-6 step drowned in its rounding.
    import jax.test_util
    with fluxion.enable_x64(), jax.enable_x64():
        x = np.array([3.3, -4.7, 5.2], np.float64)  # products of ~20: float32 ulps ~2e-6
        y = np.array([4.1, 2.4, -3.9], np.float64)
        tol = {np.float32: 0.15, np.float64: 0.15}
        jax.test_util.check_grads(lambda a, b: jax.lax.mul(a, b, out_dtype=np.float32), (x, y),
                                  2, ["fwd", "rev"], tol, tol)
        check_grads(lambda a, b: lax.mul(a, b, out_dtype=np.float32), (x, y), 2,
                    ["fwd", "rev"], tol, tol)


def _complex_gradient_types(lib, numpy):
    """(dtype, weak type) of gradients and VJPs of a Python complex through real/imag/abs."""
    funs = [lambda z: numpy.real(z) ** 2 + numpy.imag(z) ** 2, lambda z: numpy.abs(z),
            lambda z: numpy.real(numpy.conj(z)) * 2.0]
    types = []
    for f in funs:
        for g in (lib.grad(f), lib.jit(lib.grad(f)), lambda z: lib.vjp(f, z)[1](1.0)[0]):
            out = g(3.0 + 4j)
            types.append((out.dtype, out.weak_type))
    return types


def test_gradient_of_weak_complex_input_is_strong_as_in_jax():
    # The zero real or imaginary part of real/imag's transpose is strongly typed in JAX, so
    # the gradient is strong although the Python complex input is weak.
    assert _complex_gradient_types(fluxion, jnp) == _complex_gradient_types(jax, jjnp)


def test_vjp_cotangent_weak_type_follows_the_rules_not_the_primal():
    f = lambda x: jnp.concatenate([x[None], x[None]]).sum()
    jf = lambda x: jjnp.concatenate([x[None], x[None]]).sum()
    ours = fluxion.vjp(f, jnp.float32(3.0))[1](1.0)[0]
    theirs = jax.vjp(jf, jjnp.float32(3.0))[1](1.0)[0]
    assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.weak_type) == (np.float32, True)


def _custom_vjp_residuals_seen_by_bwd(lib, numpy):
    """What a custom_vjp's bwd receives for scalar array residuals, and what vjp returns."""
    seen = []

    @lib.custom_vjp
    def f(x):
        return numpy.sin(x)

    def f_bwd(res, g):
        seen.append([(type(r).__name__, r.dtype, r.weak_type, float(r)) for r in res])
        return (res[0] * g,)

    f.defvjp(lambda x: (f(x), (numpy.cos(x), numpy.float32(1.0))), f_bwd)
    (out,) = lib.vjp(f, 3.0)[1](1.0)
    grad = lib.grad(f)(np.float32(3.0))
    return seen, (out.dtype, out.weak_type, float(out)), (grad.dtype, float(grad))


def test_custom_vjp_bwd_gets_scalar_residuals_as_arrays():
    # Scalar residuals were staged as literals and reached bwd as Python / NumPy scalars, so
    # vjp returned a Python float and `res.shape` failed in bwd.
    ours = _custom_vjp_residuals_seen_by_bwd(fluxion, jnp)
    theirs = _custom_vjp_residuals_seen_by_bwd(jax, jjnp)
    assert ours[0] == theirs[0] and ours[0][0][0][0] == "ArrayImpl"
    assert ours[1:] == theirs[1:]


def _what_jvp_passes_for_an_unperturbed_input(lib, numpy):
    seen = []

    def f(x, n):
        seen.append(repr(n))
        return x * n

    float0_zero = np.zeros((), lib.dtypes.float0)
    lib.jvp(f, (np.float32(2.0), numpy.int32(3)), (np.float32(1.0), float0_zero))
    return seen


def test_jvp_passes_an_input_with_a_float0_tangent_as_its_value():
    # It was wrapped as JVPTracer(primal=3, tangent=Zero(float0[])); JAX passes the value.
    ours = _what_jvp_passes_for_an_unperturbed_input(fluxion, jnp)
    assert ours == _what_jvp_passes_for_an_unperturbed_input(jax, jjnp) == [
        "Array(3, dtype=int32)"]
