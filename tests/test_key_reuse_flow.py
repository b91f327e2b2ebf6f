"""`debug_key_reuse` across trace boundaries: programs run under JAX (the oracle) and
fluxion with the flag set must raise the same class with the same first line, or both not
raise. Each program takes the module (`jax` or `fluxion`) and a fresh key."""
import jax
import pytest

import fluxion


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test compares what each library raises
        return type(e).__name__, str(e).splitlines()[0] if str(e) else ""
    return None


def _custom_jvp(m, consume=True):
    @m.custom_jvp
    def f(x, k):
        return x * m.random.normal(k) if consume else x * 2.0
    f.defjvp(lambda p, t: (f(*p), t[0]))
    return f


def _custom_vjp(m):
    @m.custom_vjp
    def f(x, k):
        return x * m.random.normal(k)
    f.defvjp(lambda x, k: (f(x, k), None), lambda res, g: (g, None))
    return f


def _train(m, key, split):
    update = m.jit(lambda p, s: p + m.random.normal(s, p.shape))
    params = m.numpy.ones(3)
    for _ in range(3):
        if split:
            key, sub = m.random.split(key)
        params = update(params, sub if split else key)


def _dropout(m, x, key):
    return m.numpy.where(m.random.bernoulli(key, 0.5, x.shape), x, 0.0)


def _split_carry(m):
    def body(c, _):
        a, b = m.random.split(c)
        return a, m.random.normal(b)
    return body


_CASES = {
    # ---- cond / switch: a key is consumed if any branch consumes it
    "cond closure, then reuse": lambda m, k: (
        m.lax.cond(True, lambda: m.random.normal(k), lambda: 0.0), m.random.normal(k)),
    "cond false branch operand, then reuse": lambda m, k: (
        m.lax.cond(True, lambda q: 0.0, m.random.normal, k), m.random.uniform(k)),
    "switch operand, then reuse": lambda m, k: (
        m.lax.switch(1, [lambda q: 0.0, lambda q: 1.0, m.random.normal], k),
        m.random.uniform(k)),
    "cond in jit, then reuse": lambda m, k: m.jit(lambda p, kk: (
        m.lax.cond(p, m.random.normal, lambda q: 0.0, kk), m.random.uniform(kk)))(True, k),
    "consumed, then cond closure": lambda m, k: (
        m.random.normal(k), m.lax.cond(True, lambda: m.random.normal(k), lambda: 0.0)),
    "consumed, then cond operand in jit": lambda m, k: m.jit(lambda kk: (
        m.random.normal(kk), m.lax.cond(True, m.random.normal, lambda q: 0.0, kk)))(k),
    "cond branches each once (no error)": lambda m, k: (
        m.lax.cond(True, lambda: m.random.normal(k), lambda: m.random.uniform(k))),
    "cond operand unused, then use (no error)": lambda m, k: (
        m.lax.cond(True, lambda q: 1.0, lambda q: 0.0, k), m.random.uniform(k)),
    "cond returns split keys (no error)": lambda m, k: (lambda ks: (
        m.random.normal(ks[0]), m.random.normal(ks[1])))(
        m.lax.cond(True, m.random.split, m.random.split, k)),
    "cond on elements, then another (no error)": lambda m, k: (lambda ks: (
        m.lax.cond(True, lambda q: m.random.normal(q[0]), lambda q: m.random.normal(q[1]), ks),
        m.random.normal(ks[2])))(m.random.split(k, 3)),
    "cond on elements, then one of them": lambda m, k: (lambda ks: (
        m.lax.cond(True, lambda q: m.random.normal(q[0]), lambda q: m.random.normal(q[1]), ks),
        m.random.normal(ks[1])))(m.random.split(k, 3)),
    # ---- loops: the body runs repeatedly
    "scan body consumes a closed-over key": lambda m, k: m.lax.scan(
        lambda c, _: (c, m.random.normal(k)), 0.0, None, length=3),
    "fori_loop body consumes a closed-over key": lambda m, k: m.lax.fori_loop(
        0, 3, lambda i, x: x + m.random.normal(k), 0.0),
    "while_loop body consumes a closed-over key": lambda m, k: m.lax.while_loop(
        lambda x: x < 3.0, lambda x: x + m.random.uniform(k), 0.0),
    "scan carry consumed and returned": lambda m, k: m.lax.scan(
        lambda c, _: (c, m.random.normal(c)), k, None, length=3),
    "scan carry consumed twice in jit": lambda m, k: m.jit(lambda kk: m.lax.scan(
        lambda c, _: (m.random.split(c)[0], m.random.normal(c)), kk, None, length=3))(k),
    "while cond and body consume the carry": lambda m, k: m.lax.while_loop(
        lambda c: m.random.uniform(c[0]) < 0.5, lambda c: (m.random.split(c[0])[0], c[1]),
        (k, 0.0)),
    "fori_loop indexes a closed-over key array": lambda m, k: (lambda ks: m.lax.fori_loop(
        0, 3, lambda i, x: x + m.random.normal(ks[i]), 0.0))(m.random.split(k, 3)),
    "scan carry split, then the initial key": lambda m, k: (
        m.lax.scan(_split_carry(m), k, None, length=3), m.random.normal(k)),
    "scan over keys, then an element": lambda m, k: (lambda ks: (
        m.lax.scan(lambda c, kk: (c, m.random.normal(kk)), 0.0, ks),
        m.random.normal(ks[0])))(m.random.split(k, 3)),
    "element, then scan over the keys": lambda m, k: (lambda ks: (
        m.random.normal(ks[0]), m.lax.scan(lambda c, q: (c, m.random.normal(q)), 0.0, ks)))(
        m.random.split(k, 2)),
    "scan carry split (no error)": lambda m, k: m.lax.scan(_split_carry(m), k, None, length=3),
    "fori_loop folds in a closed-over key (no error)": lambda m, k: m.lax.fori_loop(
        0, 3, lambda i, x: x + m.random.normal(m.random.fold_in(k, i)), 0.0),
    "while carry split (no error)": lambda m, k: m.lax.while_loop(
        lambda c: c[1] < 3.0,
        lambda c: (lambda a, b: (a, c[1] + m.random.uniform(b)))(*m.random.split(c[0])),
        (k, 0.0)),
    "scan with a cond in the body (no error)": lambda m, k: m.lax.scan(
        lambda c, _: (lambda a, b: (a, m.lax.cond(True, lambda: m.random.normal(b),
                                                  lambda: m.random.uniform(b))))(
            *m.random.split(c)), k, None, length=3),
    # ---- autodiff, vmap, custom rules, checkpoint, nested jit
    "vmap over keys, then again": lambda m, k: (lambda ks: (
        m.vmap(m.random.normal)(ks), m.vmap(m.random.normal)(ks)))(m.random.split(k, 3)),
    "vmap over keys, then an element": lambda m, k: (lambda ks: (
        m.vmap(m.random.normal)(ks), m.random.normal(ks[0])))(m.random.split(k, 3)),
    "vmap body reuse, eagerly": lambda m, k: m.vmap(
        lambda q: m.random.normal(q) + m.random.normal(q))(m.random.split(k, 2)),
    "vmap not consuming, then use (no error)": lambda m, k: (lambda ks: (
        m.vmap(lambda q: 1.0)(ks), m.vmap(m.random.normal)(ks)))(m.random.split(k, 2)),
    "grad with a key argument, then reuse": lambda m, k: (
        m.grad(lambda x, kk: x * m.random.normal(kk))(1.0, k), m.random.normal(k)),
    "custom_jvp key argument, then reuse": lambda m, k: (
        _custom_jvp(m)(1.0, k), m.random.normal(k)),
    "grad of custom_jvp, then reuse": lambda m, k: (
        m.grad(_custom_jvp(m))(1.0, k), m.random.normal(k)),
    "custom_jvp in jit takes its keys": lambda m, k: m.jit(lambda kk: (
        _custom_jvp(m, consume=False)(1.0, kk), m.random.normal(kk)))(k),
    "consumed, then custom_jvp in jit": lambda m, k: m.jit(lambda kk: (
        m.random.normal(kk), _custom_jvp(m)(1.0, kk)))(k),
    "custom_vjp key argument, then reuse": lambda m, k: (
        _custom_vjp(m)(1.0, k), m.random.normal(k)),
    "grad of custom_vjp, then reuse": lambda m, k: (
        m.grad(_custom_vjp(m))(1.0, k), m.random.normal(k)),
    "checkpoint key argument, then reuse": lambda m, k: (
        m.checkpoint(lambda x, kk: x * m.random.normal(kk))(1.0, k), m.random.normal(k)),
    "consumed, then checkpoint": lambda m, k: (
        m.random.normal(k), m.checkpoint(m.random.normal)(k)),
    "consumed, then checkpoint in jit": lambda m, k: m.jit(lambda kk: (
        m.random.normal(kk), m.checkpoint(m.random.normal)(kk)))(k),
    "checkpoint not consuming, then use (no error)": lambda m, k: (
        m.checkpoint(lambda q: 1.0)(k), m.random.normal(k)),
    "nested jit closure, then reuse": lambda m, k: m.jit(lambda kk: (
        m.jit(lambda: m.random.normal(kk))(), m.random.normal(kk)))(k),
    # ---- elements of key arrays
    "element twice": lambda m, k: (lambda ks: (
        m.random.normal(ks[0]), m.random.normal(ks[0])))(m.random.split(k, 3)),
    "indexed twice, unused": lambda m, k: (lambda ks: (ks[1], ks[1]))(m.random.split(k, 3)),
    "element, then the whole array": lambda m, k: (lambda ks: (
        m.random.normal(ks[0]), m.vmap(m.random.normal)(ks)))(m.random.split(k, 3)),
    "slice, then an element in it": lambda m, k: (lambda ks: (
        m.vmap(m.random.normal)(ks[1:3]), m.random.normal(ks[2])))(m.random.split(k, 4)),
    "negative index aliases": lambda m, k: (lambda ks: (
        m.random.normal(ks[0]), m.random.normal(ks[-3])))(m.random.split(k, 3)),
    "element twice in jit": lambda m, k: m.jit(lambda ks: (
        m.random.normal(ks[0]), m.random.normal(ks[0])))(m.random.split(k, 3)),
    "traced indices in jit": lambda m, k: m.jit(lambda ks, i, j: (
        m.random.normal(ks[i]), m.random.normal(ks[j])))(m.random.split(k, 3), 1, 2),
    "jit consumes an element, then it eagerly": lambda m, k: (lambda ks: (
        m.jit(lambda q: m.random.normal(q[0]))(ks), m.random.normal(ks[0])))(
        m.random.split(k, 3)),
    "transpose consumes": lambda m, k: (lambda ks: (
        m.vmap(m.random.normal)(ks.T), m.random.normal(ks[0])))(m.random.split(k, 3)),
    "split checks the shape before consumption (ValueError)": lambda m, k: (lambda ks: (
        m.random.normal(ks[0]), m.random.split(ks)))(m.random.split(k, 3)),
    "elements each once (no error)": lambda m, k: (lambda ks: [
        m.random.normal(ks[i]) for i in range(3)])(m.random.split(k, 3)),
    "unpacking, then an element (no error)": lambda m, k: (lambda ks: (
        [m.random.normal(a) for a in ks], m.random.normal(ks[0])))(m.random.split(k, 3)),
    "other elements in jit (no error)": lambda m, k: (lambda ks: (
        m.jit(lambda q: m.random.normal(q[0]))(ks), m.random.normal(ks[1])))(
        m.random.split(k, 3)),
    "reshape, then elements (no error)": lambda m, k: (lambda ks: (
        m.random.normal(ks.reshape(2, 2)[0, 0]), m.random.normal(ks[0])))(
        m.random.split(k, 4)),
    # ---- keys passed through unchanged are the same key in a jaxpr (JAX's Forward)
    "jitted closure called twice": lambda m, k: (lambda f: (f(1.0), f(2.0)))(
        m.jit(lambda x: x + m.random.normal(k))),
    "cond returns its operand, in jit": lambda m, k: m.jit(lambda p, kk: (lambda k2: (
        m.random.normal(k2), m.random.normal(kk)))(
        m.lax.cond(p, lambda q: q, lambda q: q, kk)))(True, k),
    "nested jit returns its argument": lambda m, k: m.jit(lambda kk: (lambda k2: (
        m.random.normal(k2), m.random.normal(kk)))(m.jit(lambda q: q)(kk)))(k),
    "jit passes a consumed key through": lambda m, k: (
        m.random.normal(k), m.random.normal(m.jit(lambda q: q)(k))),
    "copy in jit": lambda m, k: m.jit(lambda q: (
        m.random.normal(q.copy()), m.random.normal(q)))(k),
    "tree_map identity in jit": lambda m, k: m.jit(lambda q: (
        m.random.normal(m.tree_util.tree_map(lambda x: x, q)), m.random.normal(q)))(k),
    "clone in jit (no error)": lambda m, k: m.jit(lambda q: (
        m.random.normal(m.random.clone(q)), m.random.normal(q)))(k),
    "wrap_key_data of key_data in jit (no error)": lambda m, k: m.jit(lambda q: (
        m.random.normal(m.random.wrap_key_data(m.random.key_data(q))),
        m.random.normal(q)))(k),
    "make_jaxpr and eval_shape consume nothing (no error)": lambda m, k: (
        m.make_jaxpr(lambda: m.random.normal(k))(), m.eval_shape(m.random.normal, k),
        m.random.normal(k)),
    # ---- everyday patterns
    "training loop splitting the key (no error)": lambda m, k: _train(m, k, split=True),
    "training loop reusing the key": lambda m, k: _train(m, k, split=False),
    "dropout layers with one key, in jit": lambda m, k: m.jit(lambda x: _dropout(
        m, _dropout(m, x, k), k))(m.numpy.ones(4)),
    "dropout layers with split keys, in jit (no error)": lambda m, k: (lambda k1, k2: m.jit(
        lambda x: _dropout(m, _dropout(m, x, k1), k2))(m.numpy.ones(4)))(*m.random.split(k)),
    "scan with the key in a tuple carry (no error)": lambda m, k: m.lax.scan(
        lambda c, x: (lambda a, b: ((a, c[1] + x * m.random.normal(b)), None))(
            *m.random.split(c[0])), (k, 0.0), m.numpy.arange(3.0)),
    "vmap with an unmapped key, then reuse": lambda m, k: (
        m.vmap(lambda x, q: x * m.random.normal(q), in_axes=(0, None))(m.numpy.ones(2), k),
        m.random.normal(k)),
    "list of split keys, then reuse": lambda m, k: (lambda ks: (
        [m.random.normal(q) for q in ks], m.random.normal(ks[0])))(list(m.random.split(k, 3))),
    # ---- reads that do not consume
    "fold_in, key_data, clone, passthrough (no error)": lambda m, k: (
        m.random.fold_in(k, 1), m.random.key_data(k), m.random.normal(m.random.clone(k)),
        m.random.normal(m.jit(lambda q: q)(k))),
}


@pytest.mark.parametrize("name", list(_CASES))
def test_key_reuse_flow_matches_jax(name):
    program = _CASES[name]
    results = []
    for mod in (fluxion, jax):
        with mod.debug_key_reuse(True):
            results.append(_raised(lambda: program(mod, mod.random.key(0))))
    assert results[0] == results[1]
    if name.endswith("(no error)"):
        assert results[0] is None
    else:
        assert results[0][0] == ("ValueError" if name.endswith("(ValueError)") else "KeyReuseError")


@pytest.mark.parametrize("name", [n for n in _CASES if not n.endswith("(no error)")])
def test_without_the_flag_nothing_is_checked(name):
    """With the flag off (the default) the same programs run unchecked."""
    err = _raised(lambda: _CASES[name](fluxion, fluxion.random.key(0)))
    assert err is None or err[0] != "KeyReuseError"


def test_flag_off_keys_carry_no_scope():
    k = fluxion.random.key(0)
    fluxion.lax.cond(True, lambda: fluxion.random.normal(k), lambda: 0.0)
    ks = fluxion.random.split(k, 2)
    ks[0]
    assert k._consumed is False and ks._consumed is False and ks[0]._origin is None


_SAMPLERS = [
    lambda r, k: r.uniform(k), lambda r, k: r.normal(k, (2,)), lambda r, k: r.bernoulli(k),
    lambda r, k: r.randint(k, (), 0, 3), lambda r, k: r.choice(k, 4),
    lambda r, k: r.permutation(k, 4), lambda r, k: r.gamma(k, 2.0),
    lambda r, k: r.beta(k, 2.0, 3.0), lambda r, k: r.poisson(k, 2.0),
    lambda r, k: r.t(k, 3.0), lambda r, k: r.binomial(k, 5, 0.5),
    lambda r, k: r.truncated_normal(k, -1.0, 1.0), lambda r, k: r.orthogonal(k, 2),
]


@pytest.mark.parametrize("i", range(len(_SAMPLERS)))
def test_samplers_in_transformations_raise_nothing(i):
    """Samplers fed fresh keys inside jit, vmap, scan, fori_loop, cond and checkpoint: no
    false KeyReuseError (their internal loops and splits are not reuse)."""
    f, m = _SAMPLERS[i], fluxion
    r = m.random
    with m.debug_key_reuse(True):
        k = r.key(i)
        k1, k2, k3, k4, k5 = r.split(k, 5)
        m.jit(m.vmap(lambda q: f(r, q)))(r.split(k1, 3))
        m.lax.scan(lambda c, q: (c, f(r, q)), 0.0, r.split(k2, 3))
        m.lax.fori_loop(0, 2, lambda j, c: (f(r, r.fold_in(k3, j)), c)[1], 0.0)
        m.lax.cond(True, lambda q: f(r, q), lambda q: f(r, q), k4)
        m.checkpoint(lambda q: f(r, q))(k5)
        with pytest.raises(m.errors.KeyReuseError):
            f(r, k5)
