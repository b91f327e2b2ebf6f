"""custom_jvp/custom_vjp functions that close over traced values, against JAX: values batched
by an enclosing vmap are batched inside the function too; a value being differentiated that
the function closes over is an UnexpectedTracerError (JAX's), never a silently zero derivative."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp


def _closing_jvp(m, np_, y):
    @m.custom_jvp
    def f(x):
        return np_.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        return np_.sin(x) * y, 10.0 * np_.cos(x) * y * dx  # 10x: the rule, not autodiff, ran
    return f


def _closing_vjp(m, np_, y):
    @m.custom_vjp
    def f(x):
        return np_.sin(x) * y
    f.defvjp(lambda x: (np_.sin(x) * y, x), lambda x, g: (10.0 * np_.cos(x) * y * g,))
    return f


PROGRAMS = {
    "vmap": lambda m, mk, ys, xs: m.vmap(lambda y, x: mk(y)(x))(ys, xs),
    "vmap_grad": lambda m, mk, ys, xs: m.vmap(lambda y, x: m.grad(mk(y))(x))(ys, xs),
    "vmap_grad_unbatched_x": lambda m, mk, ys, xs: m.vmap(lambda y: m.grad(mk(y))(0.5))(ys),
    "jit_vmap_grad": lambda m, mk, ys, xs: m.jit(m.vmap(lambda y, x: m.grad(mk(y))(x)))(ys, xs),
    "vmap_jit": lambda m, mk, ys, xs: m.vmap(lambda y, x: m.jit(mk(y))(x))(ys, xs),
    "vmap_vmap": lambda m, mk, ys, xs: m.vmap(lambda y: m.vmap(lambda x: mk(y)(x))(xs))(ys),
    "vmap_jvp": lambda m, mk, ys, xs: m.vmap(lambda y, x: m.jvp(mk(y), (x,), (1.0,)))(ys, xs),
    "jit_closure_grad_x": lambda m, mk, ys, xs: m.jit(lambda y: m.grad(mk(y))(0.5))(2.0),
}


@pytest.mark.parametrize("rule", ["jvp", "vjp"])
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_closures_over_batched_values_match_jax(rule, program):
    make = {"jvp": _closing_jvp, "vjp": _closing_vjp}[rule]
    ys, xs = np.arange(1.0, 4.0, dtype=np.float32), np.array([0.5, 1.0, 1.5], np.float32)
    if (rule, program) == ("vjp", "vmap_jvp"):  # no forward mode through a custom_vjp
        for m, np_ in ((fluxion, jnp), (jax, jjnp)):
            with pytest.raises(TypeError, match="forward-mode"):
                PROGRAMS[program](m, lambda y: make(m, np_, y), ys, xs)
        return
    got = PROGRAMS[program](fluxion, lambda y: make(fluxion, jnp, y), ys, xs)
    want = PROGRAMS[program](jax, lambda y: make(jax, jjnp, y), ys, xs)
    for g, w in zip(fluxion.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
        assert g.dtype == w.dtype and g.shape == w.shape


@pytest.mark.parametrize("library", ["jax", "fluxion"])
@pytest.mark.parametrize("rule", ["jvp", "vjp"])
@pytest.mark.parametrize("how", ["grad", "jvp", "jit_grad"])
def test_closing_over_a_differentiated_value_raises(library, rule, how):
    m, np_ = (jax, jjnp) if library == "jax" else (fluxion, jnp)
    make = {"jvp": _closing_jvp, "vjp": _closing_vjp}[rule]
    outer = lambda y: make(m, np_, y)(2.0)
    run = {"grad": lambda: m.grad(outer)(3.0), "jvp": lambda: m.jvp(outer, (3.0,), (1.0,)),
           "jit_grad": lambda: m.jit(m.grad(outer))(3.0)}[how]
    with pytest.raises(m.errors.UnexpectedTracerError):
        run()
