"""The IR: printing, checking, evaluation, DCE, constants."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src import core
from fluxion._src.core import ClosedJaxpr, Jaxpr, JaxprEqn, JaxprTypeError, ShapedArray, Var
from fluxion._src.lax import elementwise as ew


def test_shaped_array_basics():
    a = ShapedArray((2, 3), np.float32)
    assert a.ndim == 2 and a.size == 6 and a.str_short() == "f32[2,3]"
    assert a == ShapedArray((2, 3), np.dtype("float32")) and hash(a) == hash(ShapedArray((2, 3), np.float32))
    assert a != a.update(weak_type=True)
    assert repr(a.update(weak_type=True)) == "ShapedArray(float32[2,3], weak_type=True)"


def test_jaxpr_prints_like_jax():
    jaxpr = fluxion.make_jaxpr(lambda x, y: lax.sin(x) * y + 2.0)(np.ones(3, np.float32), np.ones(3, np.float32))
    assert str(jaxpr) == (
        "{ lambda ; a:f32[3] b:f32[3]. let\n"
        "    c:f32[3] = sin a\n"
        "    d:f32[3] = mul c b\n"
        "    e:f32[3] = add d 2.0:f32[]\n"
        "  in (e,) }")


def test_single_equation_prints_on_one_line():
    jaxpr = fluxion.make_jaxpr(lambda x: lax.mul(x, 2.0))(np.ones(3, np.float32))
    assert str(jaxpr) == "{ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (b,) }"


def test_closed_over_array_becomes_constvar():
    c = fluxion.device_put(np.arange(3, dtype=np.float32))
    jaxpr = fluxion.make_jaxpr(lambda x: lax.add(x, c))(np.ones(3, np.float32))
    assert len(jaxpr.consts) == 1 and str(jaxpr).startswith("{ lambda a:f32[3]; b:f32[3]. let")


def test_dead_code_is_removed():
    def f(x):
        lax.exp(x)  # unused
        return lax.sin(x)
    jaxpr = fluxion.make_jaxpr(f)(1.0)
    assert [e.primitive.name for e in jaxpr.eqns] == ["sin"]


def test_eval_jaxpr_matches_direct_call():
    f = lambda x, y: lax.add(lax.mul(x, y), lax.exp(x))
    x, y = np.float32(0.5), np.float32(3.0)
    closed = fluxion.make_jaxpr(f)(x, y)
    out, = core.eval_jaxpr(closed.jaxpr, closed.consts, x, y)
    np.testing.assert_allclose(np.asarray(out), 0.5 * 3.0 + np.exp(0.5), rtol=1e-6)


def test_check_jaxpr_accepts_traced_and_rejects_bad_types():
    closed = fluxion.make_jaxpr(lambda x: lax.sin(lax.exp(x)))(np.ones(2, np.float32))
    core.check_jaxpr(closed.jaxpr)
    a, b = Var(ShapedArray((2,), np.float32)), Var(ShapedArray((3,), np.float32))
    bad = Jaxpr([], [a], [b], [JaxprEqn([a], [b], ew.sin_p, {})])
    with pytest.raises(JaxprTypeError):
        core.check_jaxpr(bad)
    undefined = Var(ShapedArray((2,), np.float32))
    out = Var(ShapedArray((2,), np.float32))
    with pytest.raises(JaxprTypeError, match="before definition"):
        core.check_jaxpr(Jaxpr([], [a], [out], [JaxprEqn([undefined], [out], ew.sin_p, {})]))


def test_nested_jit_shows_call_equation():
    inner = fluxion.jit(lambda y: lax.mul(y, 2.0))
    text = str(fluxion.make_jaxpr(lambda x: inner(x))(np.ones(3, np.float32)))
    assert "= jit[" in text and "name=<lambda>" in text and "mul a 2.0:f32[]" in text


def test_jit_and_eager_agree_through_nesting():
    inner = fluxion.jit(lambda y: lax.exp(y))
    outer = fluxion.jit(lambda x: lax.add(inner(x), lax.sin(x)))
    x = np.linspace(-1, 1, 5).astype(np.float32)
    np.testing.assert_allclose(np.asarray(outer(x)), np.exp(x) + np.sin(x), rtol=1e-6)


def _closed_jaxpr_views(lib, numpy):
    """The parts of a ClosedJaxpr that a custom interpreter reads, and a Var's printed form."""
    import re
    c = numpy.arange(3.0)
    closed = lib.make_jaxpr(lambda x: numpy.exp(x) + c)(numpy.ones(3))
    var_repr = re.sub(r"id=\d+", "id=#", repr(closed.invars[0]))
    swapped = closed.replace(consts=[c * 2]).map_jaxpr(lambda j: j.replace(eqns=j.eqns))
    return (len(closed.literals), closed.literals[0].tolist(), len(closed.constvars),
            len(closed.invars), len(closed.outvars), var_repr, len(swapped.consts),
            swapped.consts[0].tolist(), [e.primitive.name for e in swapped.eqns])


def test_closed_jaxpr_has_jaxs_attributes_and_var_repr():
    import jax
    assert _closed_jaxpr_views(fluxion, jnp) == _closed_jaxpr_views(jax, jax.numpy)
