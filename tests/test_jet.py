"""fluxion.experimental.jet against JAX's jet (oracle) and nested jvp (independent truth)."""
import jax
import jax.experimental.jet as jjet
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import lax
from fluxion.ad_checkpoint import checkpoint_name
from fluxion._src import ad, core
from fluxion.experimental.jet import jet, jet_rules

ORDER = 4
rng = np.random.default_rng(0)
X = rng.uniform(0.2, 0.8, (3,)).astype(np.float32)
Y = rng.uniform(0.3, 0.9, (3,)).astype(np.float32)
SX = [rng.normal(size=(3,)).astype(np.float32) for _ in range(ORDER)]
SY = [rng.normal(size=(3,)).astype(np.float32) for _ in range(ORDER)]


def close(a, b, rtol=2e-4):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(1.0, float(np.max(np.abs(b))))
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale)


def check_series(out, want, rtol=2e-4):
    (p, s), (wp, ws) = out, want
    close(p, wp, rtol)
    assert len(s) == len(ws)
    for t, wt in zip(s, ws):
        close(t, wt, rtol)


# Each case: f(m, l) -> the function, written with numpy-like module m and lax-like module l,
# so the same code runs in fluxion and in JAX. Unary cases take x; binary take x, y.
UNARY = {
    "sin": lambda m, l: m.sin,
    "cos": lambda m, l: m.cos,
    "tanh": lambda m, l: m.tanh,
    "logistic": lambda m, l: l.logistic,
    "sinh_cosh": lambda m, l: lambda x: m.sinh(x) * m.cosh(x),
    "exp": lambda m, l: m.exp,
    "log": lambda m, l: m.log,
    "log1p": lambda m, l: m.log1p,
    "expm1": lambda m, l: m.expm1,
    "sqrt": lambda m, l: m.sqrt,
    "rsqrt": lambda m, l: l.rsqrt,
    "erf": lambda m, l: l.erf,
    "erf_inv": lambda m, l: l.erf_inv,
    "square": lambda m, l: m.square,
    "abs_sign": lambda m, l: lambda x: m.abs(x - 0.5) * m.sign(x - 0.4) + x,
    "integer_pow": lambda m, l: lambda x: x ** 3 + l.integer_pow(x, -2),
    "pow_const": lambda m, l: lambda x: x ** 2.5,
    "asinh_atanh": lambda m, l: lambda x: m.arcsinh(x) + m.arctanh(x),
    "acosh": lambda m, l: lambda x: m.arccosh(x + 1.5),
    "logsumexp": lambda m, l: lambda x: (jax.nn.logsumexp if m is jjnp else
                                         fluxion.nn.logsumexp)(x * 3.0),
    "reduce_max": lambda m, l: lambda x: m.max(x) + m.max(m.stack([x, x]), axis=0),
    "max_min_ties": lambda m, l: lambda x: m.maximum(x, 0.5) + m.minimum(x, x * 1.0),
    # JAX 0.10.2's jet fails on custom_jvp functions (UnexpectedTracerError): its side uses
    # the primal functions that fluxion's jet differentiates.
    "relu_softplus": lambda m, l: (
        lambda x: m.maximum(x - .5, 0.) + m.log1p(m.exp(x))) if m is jjnp else (
        lambda x: fluxion.nn.relu(x - .5) + fluxion.nn.softplus(x)),
    "structural": lambda m, l: lambda x: m.concatenate(
        [m.reshape(m.broadcast_to(x, (2, 3)).T, (6,))[1:4], m.expand_dims(x, 0)[0, ::-1]]
    ).sum() * m.squeeze(x[None, 1:2]),
    "select_convert": lambda m, l: lambda x: m.where(x > 0.5, m.sin(x), x * x).astype(
        m.float32),
    "cumsum_cumprod": lambda m, l: lambda x: m.cumsum(m.exp(x)) * m.cumprod(x),
    "dynamic_slice_gather": lambda m, l: lambda x: l.dynamic_slice(m.exp(x), (1,), (2,))
    * x[np.array([2, 0])],
    "dot_general": lambda m, l: lambda x: m.dot(m.outer(x, m.sin(x)), m.cos(x)),
    "scatter_add_update_slice": lambda m, l: lambda x: l.dynamic_update_slice(
        x.at[np.array([0, 0, 2])].add(m.sin(x)), x[:1] * x[2:], (1,)),
    "reduce_min_cummax_cumprod": lambda m, l: lambda x: m.min(m.sin(x)) + l.cummax(x * x)
    + l.cumprod(x, reverse=True),
    "conv_erfc_rev": lambda m, l: lambda x: m.convolve(x, m.exp(x), mode="same") + l.erfc(x)[::-1],
    "clamp": lambda m, l: lambda x: l.clamp(m.full(3, 0.3), m.sin(x), m.full(3, 0.6)),
}

BINARY = {
    "mul": lambda m, l: lambda x, y: x * y,
    "div": lambda m, l: lambda x, y: x / y,
    "pow": lambda m, l: lambda x, y: x ** y,
    "atan2": lambda m, l: m.arctan2,
    "sub_add": lambda m, l: lambda x, y: (x - y) * (x + y),
    "max": lambda m, l: m.maximum,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_jax(name):
    f, jf = UNARY[name](jnp, lax), UNARY[name](jjnp, jax.lax)
    check_series(jet(f, (X,), (SX,)), jjet.jet(jf, (X,), (SX,)))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_jax(name):
    f, jf = BINARY[name](jnp, lax), BINARY[name](jjnp, jax.lax)
    check_series(jet(f, (X, Y), (SX, SY)), jjet.jet(jf, (X, Y), (SX, SY)))


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_orders_match_jax(order):
    def f(m):
        return lambda x, y: m.sum(m.exp(m.sin(x) * y) / (1 + x * x)) + m.log(y)
    check_series(jet(f(jnp), (X, Y), (SX[:order], SY[:order])),
                 jjet.jet(f(jjnp), (X, Y), (SX[:order], SY[:order])))


def _nested_jvp(f, x, v, order):
    """[d^k/dt^k f(x + t v) at t=0 for k = 1..order], by nested fluxion.jvp."""
    derivs, g = [], f
    for _ in range(order):
        g = (lambda g: lambda x: fluxion.jvp(g, (x,), (v,))[1])(g)
        derivs.append(g(x))
    return derivs


@pytest.mark.parametrize("fname", ["tan", "arctan", "arcsin", "arccos", "sin_exp", "exp2",
                                   "rem", "clamp", "lgamma", "digamma", "polygamma", "cbrt",
                                   "barrier_name_device_put", "prod", "prod_with_zero", "sort"])
def test_matches_nested_jvp(fname):
    # tan, atan, asin, acos, exp2, cbrt, the gamma family, reduce_prod and sort have no rule in
    # JAX's jet, and its rem and clamp (scalar bounds) are wrong or fail: nested jvp is the truth.
    f = {"sin_exp": lambda x: jnp.sin(jnp.exp(x)) * x,
         "rem": lambda x: lax.rem(x * 3.0 - 2.0, 0.7),
         "clamp": lambda x: lax.clamp(0.3, jnp.sin(x), 0.6),
         "lgamma": lax.lgamma, "digamma": lax.digamma,
         "polygamma": lambda x: lax.polygamma(jnp.full_like(x, 2.0), x + 1.0),
         "cbrt": lambda x: lax.cbrt(x - 0.55),  # negative operands too
         # Products of 5 and of 3 (odd: padded by ones); one factor zero (log would fail).
         "prod": lambda x: jnp.prod(jnp.stack([x, x - 0.5, x * x, jnp.sin(x), x + 1]), axis=0)
         + jnp.prod(x),
         "prod_with_zero": lambda x: jnp.prod(x - X[1]) * x  # (and scatter)
         + jnp.asarray(x).at[1].set(x[0] * x[2]) ** 2,
         "sort": lambda x: jnp.sort(jnp.sin(x * 7.0)) * jnp.argsort(x).astype(x.dtype),
         "barrier_name_device_put": lambda x: jnp.sin(fluxion.device_put(
             checkpoint_name(lax.optimization_barrier(x * x), "a")))
         }.get(fname) or getattr(jnp, fname)
    v = SX[0]
    primal, series = jet(f, (X,), ([v] + [jnp.zeros_like(v)] * (ORDER - 1),))
    close(primal, f(X))
    for got, want in zip(series, _nested_jvp(f, X, v, ORDER)):
        close(got, want, rtol=1e-3)


def test_under_jit_and_of_jit():
    def f(m):
        return lambda x: m.tanh(m.sin(x) * x)
    want = jjet.jet(f(jjnp), (X,), (SX,))
    whole = fluxion.jit(lambda x, s: jet(f(jnp), (x,), (s,)))(X, SX)
    check_series(whole, want)
    inner = jet(fluxion.jit(f(jnp)), (X,), (SX,))
    check_series(inner, want)
    # The jit call stays one call: its jaxpr holds a jit equation of the jet of the body.
    jaxpr = fluxion.make_jaxpr(lambda x, s: jet(fluxion.jit(f(jnp)), (x,), (s,)))(X, SX)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns if e.primitive.name == "jit"] == ["jit"]


def test_jit_with_inputs_without_series():
    # Only x carries a series; the closed-over y does not; output 2 has no series at all.
    def f(m):
        return lambda x, y: (m.sin(x) * y, y * 2.0)
    g = lambda x: fluxion.jit(f(jnp))(x, Y)
    gj = lambda x: jax.jit(f(jjnp))(x, Y)
    (p1, p2), (s1, s2) = jet(g, (X,), (SX,))
    (w1, w2), (ws1, ws2) = jjet.jet(gj, (X,), (SX,))
    check_series((p1, s1), (w1, ws1))
    check_series((p2, s2), (w2, ws2))


def test_vmap_of_jet_and_jet_of_vmap():
    def f(m):
        return lambda x: m.exp(m.sin(x)) * x
    xs = np.stack([X, Y])
    ss = [np.stack([a, b]) for a, b in zip(SX, SY)]
    p, s = fluxion.vmap(lambda x, *s: jet(f(jnp), (x,), (list(s),)))(xs, *ss)
    for i in range(2):  # a Python loop is the truth
        pi, si = jet(f(jnp), (xs[i],), ([t[i] for t in ss],))
        close(p[i], pi)
        for a, b in zip(s, si):
            close(a[i], b)
    check_series(jet(fluxion.vmap(f(jnp)), (xs,), (ss,)), jjet.jet(jax.vmap(f(jjnp)), (xs,), (ss,)))


def test_custom_jvp_differentiates_primal_function():
    # As JAX means to: jet ignores the (here deliberately wrong) custom rule. (JAX 0.10.2's jet
    # raises UnexpectedTracerError here, so its oracle is the jet of the primal function.)
    @fluxion.custom_jvp
    def f(x):
        return jnp.sin(x) * x

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(primals[0]), tangents[0] * 100.0
    check_series(jet(f, (X,), (SX,)), jjet.jet(lambda x: jjnp.sin(x) * x, (X,), (SX,)))


def test_not_scaled_and_outputs_without_series():
    def f(m):
        return lambda x: {"a": m.exp(x), "b": 2.0, "c": m.ones(2)}
    out, series = jet(f(jnp), (X,), (SX,), factorial_scaled=False)
    want, wseries = jjet.jet(f(jjnp), (X,), (SX,), factorial_scaled=False)
    for k in "abc":
        check_series((out[k], series[k]), (want[k], wseries[k]))
    assert out["b"] == 2.0


def test_linear_fallback_for_a_new_primitive():
    # A primitive marked linear with ad.deflinear needs no jet rule.
    double_p = core.Primitive("double_for_jet_test")
    double_p.def_impl(lambda x: x * 2)
    double_p.def_abstract_eval(lambda a: a)
    ad.deflinear(double_p, lambda ct, x: [ct * 2])
    assert double_p not in jet_rules
    p, s = jet(lambda x: jnp.sin(double_p.bind(x)), (X,), (SX,))
    check_series((p, s), jjet.jet(lambda x: jjnp.sin(2 * x), (X,), (SX,)))


def test_errors():
    with pytest.raises(ValueError, match="inconsistent lengths"):
        jet(jnp.sin, (X, X), ([SX[0]], [SX[0], SX[1]]))
    with pytest.raises(ValueError, match="primal value at position 0 is not an array"):
        jet(lambda x: x, ((X,),), ([SX[0]],))
    with pytest.raises(ValueError, match="term 0 for argument 0 is not an array"):
        jet(lambda x: x, (X,), ([(SX[0],)],))
    with pytest.raises(NotImplementedError, match="Jet rule for 'bessel_i0e' not implemented"):
        jet(lax.bessel_i0e, (X,), (SX,))
    with pytest.raises(KeyError):  # what JAX raises
        jet(lax.bessel_i0e, (X,), (SX,))


def test_composes_with_grad_and_itself():
    def f(m):
        return lambda x: m.sum(m.sin(x) ** 2)
    s = SX[:2]
    check_series(jet(fluxion.grad(f(jnp)), (X,), (s,)), jjet.jet(jax.grad(f(jjnp)), (X,), (s,)))
    close(fluxion.grad(lambda x: jet(f(jnp), (x,), (s,))[1][1])(X),
          jax.grad(lambda x: jjet.jet(f(jjnp), (x,), (s,))[1][1])(X))

    def nested(m, jet_fn):  # an inner jet under an outer one: no confusion of the two
        return lambda y: jet_fn(lambda x: m.sin(x * y), (X,), (s,))[1][1].sum()
    check_series(jet(nested(jnp, jet), (2.0,), ((1.0, 0.0),)),
                 jjet.jet(nested(jjnp, jjet.jet), (2.0,), ((1.0, 0.0),)))


CONTROL_FLOW = {
    "cond": lambda x: lax.cond(x[0] > 0, lambda y: jnp.sin(y) * x, lambda y: y + 1., x * 2.),
    "scan": lambda x: lax.scan(lambda c, a: (c * jnp.sin(a) + x[0], jnp.exp(c) * a), 1.0, x)[1],
    "fori_scan": lambda x: lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * c + i, x),
    "while": lambda x: lax.while_loop(lambda c: c[1] < 3,
                                      lambda c: (jnp.sin(c[0]) * x, c[1] + 1), (x, 0))[0],
}


@pytest.mark.parametrize("name", sorted(CONTROL_FLOW))
def test_control_flow_matches_nested_jvp(name):
    # JAX 0.10.2's jet has no rule for cond, scan or while: nested jvp is the truth.
    f = CONTROL_FLOW[name]
    v = SX[0]
    zero = np.zeros_like(v)
    primal, series = fluxion.jit(lambda x: jet(f, (x,), ([v, zero, zero],)))(X)
    close(primal, f(X))
    for got, want in zip(series, _nested_jvp(f, X, v, 3)):
        close(got, want, rtol=1e-3)


def test_x64_keeps_float32(x64):
    # Constants inside the rules are weakly typed: float32 series stay float32.
    fs = [jnp.exp2, lax.erf_inv, jnp.arcsin, lax.lgamma, CONTROL_FLOW["scan"],
          UNARY["logsumexp"](jnp, lax), BINARY["pow"](jnp, lax)]
    for f in fs:
        args = (X, Y)[:f.__code__.co_argcount if hasattr(f, "__code__") else 1]
        p, s = jet(f, args, (SX[:2], SY[:2])[:len(args)])
        assert p.dtype == np.float32 and all(t.dtype == np.float32 for t in s), f


@pytest.mark.parametrize("name", ["cond", "while"])
def test_vmap_of_jet_of_control_flow(name):
    # A batched predicate: cond becomes a select, while runs until every lane is done.
    f = CONTROL_FLOW[name]
    xs, ss = np.stack([X, -X]), [np.stack([a, b]) for a, b in zip(SX[:2], SY[:2])]
    p, s = fluxion.vmap(lambda x, a, b: jet(f, (x,), ([a, b],)))(xs, *ss)
    for i in range(2):  # a Python loop is the truth
        pi, si = jet(f, (xs[i],), ([t[i] for t in ss],))
        close(p[i], pi)
        for a, b in zip(s, si):
            close(a[i], b)


def test_public_names_of_jax_jet():
    import fluxion.experimental.jet as ours
    helpers = {"Any", "Callable", "ad_util", "api_util", "core", "dispatch", "jnp", "lax",
               "lax_internal", "lu", "np", "partial", "pe", "pjit", "register_pytree_node",
               "safe_zip", "sharding_impls", "tree_flatten", "tree_structure", "tree_unflatten",
               "treedef_is_leaf", "unzip2", "weakref_lru_cache"}  # imports inside JAX's module
    # JAX's linear_util transformations and call-primitive hooks: fluxion's trace is built
    # differently (jet_flat; rules for call primitives take the trace).
    internals = {"jet_fun", "jet_subtrace", "traceable", "call_param_updaters"}
    theirs = {n for n in dir(jjet) if not n.startswith("_")}
    mine = {n for n in dir(ours) if not n.startswith("_")}
    assert sorted(theirs - mine - helpers - internals) == []
    assert not (internals | helpers) & mine


def _grad_inside(lib, np_mod):
    def g(eps):  # grad's transpose sums the two cotangents of x with add_any
        return lib.grad(lambda x, e: x * e + e + x)(np_mod.array(1.), eps)
    return g


def _grad_of_jacfwd_inside(lib, np_mod):
    def h(eps):
        x = np_mod.array([1., 1.])
        return lib.grad(lib.jacfwd(lambda t: ((x + t * eps * x) ** 5).sum()))(0.)
    return h


@pytest.mark.parametrize("make,primal,series", [(_grad_inside, 1., [1.]),
                                                 (_grad_of_jacfwd_inside, 0., [1., 2., 3.])])
@pytest.mark.parametrize("jitted", [False, True])
def test_jet_through_grad_add_any(make, primal, series, jitted):
    fun = make(fluxion, jnp)
    fun = fluxion.jit(fun) if jitted else fun
    out, terms = jet(fun, (primal,), (series,))
    want, want_terms = jjet.jet(make(jax, jjnp), (primal,), (series,))
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(terms), np.asarray(want_terms), rtol=1e-4)
