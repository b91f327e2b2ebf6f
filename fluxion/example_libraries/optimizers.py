"""Optimizers as (init_fun, update_fun, get_params) triples, with
jax.example_libraries.optimizers' API.

`init_fun(params)` makes an `OptimizerState` (a pytree), `update_fun(step, grads, state)`
takes one step, `get_params(state)` reads the parameters back. Each optimizer is written for
one array; the `optimizer` decorator extends it to pytrees of arrays.
"""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any, Callable, NamedTuple

import fluxion.numpy as jnp
from fluxion import tree as _tree
from fluxion.tree_util import register_pytree_node

Array = Any
Params = Any
State = Any
Updates = Params
Step = int
Schedule = Callable[[Step], float]

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
register_pytree_node(OptimizerState,
                     lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
                     lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))

InitFn = Callable[[Params], OptimizerState]
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]


class Optimizer(NamedTuple):
    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def _unzip2(pairs):
    pairs = list(pairs)
    return [a for a, _ in pairs], [b for _, b in pairs]


def optimizer(opt_maker):
    """Decorator: an optimizer maker for single arrays becomes one for pytrees of arrays."""
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            x0_flat, tree = _tree.flatten(x0_tree)
            states_flat, subtrees = _unzip2(_tree.flatten(init(x0)) for x0 in x0_flat)
            return OptimizerState(states_flat, tree, subtrees)

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            states_flat, tree, subtrees = opt_state
            grad_flat, grad_tree_def = _tree.flatten(grad_tree)
            if grad_tree_def != tree:
                raise TypeError("optimizer update function was passed a gradient tree that did "
                                "not match the parameter tree structure with which it was "
                                f"initialized: parameter tree {tree} and grad tree "
                                f"{grad_tree_def}.")
            states = [_tree.unflatten(s, f) for s, f in zip(subtrees, states_flat)]
            new_states = [update(i, g, s) for g, s in zip(grad_flat, states)]
            new_flat, new_subtrees = _unzip2(_tree.flatten(s) for s in new_states)
            for old, new in zip(subtrees, new_subtrees):
                if old != new:
                    raise TypeError("optimizer update function produced an output structure "
                                    f"that did not match its input structure: input {old} and "
                                    f"output {new}.")
            return OptimizerState(new_flat, tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            states_flat, tree, subtrees = opt_state
            return _tree.unflatten(tree, [get_params(_tree.unflatten(s, f))
                                          for s, f in zip(subtrees, states_flat)])

        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


def _first(state):
    return state[0]


@optimizer
def sgd(step_size):
    """Stochastic gradient descent: x - step_size(i) * g."""
    step_size = make_schedule(step_size)
    return (lambda x0: x0), (lambda i, g, x: x - step_size(i) * g), (lambda x: x)


def _velocity_method(step_size, mass, lookahead):
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        direction = mass * velocity + g if lookahead else velocity
        return x - step_size(i) * direction, velocity
    return init, update, _first


@optimizer
def momentum(step_size, mass: float):
    """Gradient descent with momentum `mass`."""
    return _velocity_method(step_size, mass, lookahead=False)


@optimizer
def nesterov(step_size, mass: float):
    """Nesterov's accelerated gradient with momentum `mass`."""
    return _velocity_method(step_size, mass, lookahead=True)


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad (with momentum on the scaled gradient)."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq += jnp.square(g)
        inv_sqrt = jnp.where(g_sq > 0, 1.0 / jnp.sqrt(g_sq), 0.0)
        m = (1.0 - momentum) * (g * inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return init, update, _first


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp: steps scaled by a running root mean square of the gradients."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1.0 - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq + eps), avg_sq
    return init, update, _first


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp with momentum."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq, mom = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq + eps)
        return x - mom, avg_sq, mom
    return init, update, _first


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma and Ba): bias-corrected first and second moment estimates."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        v_hat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        return x - step_size(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v
    return init, update, _first


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax: Adam with the infinity norm."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        x = x - (step_size(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))) * m / (u + eps)
        return x, m, u
    return init, update, _first


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3 (memory-efficient adaptive optimization): one accumulator per axis."""
    step_size = make_schedule(step_size)

    def along(ndim, v, axis):
        index = [None] * ndim
        index[axis:axis + 1] = [slice(None)]  # a rank-0 gradient still gets the one axis
        return v[tuple(index)]

    def init(x0):
        shape = x0.shape
        x0 = jnp.atleast_1d(x0)
        return x0, jnp.zeros_like(x0), [jnp.zeros(n, dtype=x0.dtype) for n in x0.shape], shape

    def update(i, g, state):
        x, m, vs, shape = state
        vs = [along(g.ndim, v, axis) for axis, v in enumerate(vs)]
        accum = functools.reduce(jnp.minimum, vs) + jnp.square(g)
        inv_sqrt = jnp.where(accum > 0, 1.0 / jnp.sqrt(accum), 0)
        m = (1.0 - momentum) * (g * inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        vs = [accum.max(tuple(a for a in range(x.ndim) if a != j)) for j in range(x.ndim)]
        return x, m, vs, shape

    def get_params(state):
        x, _, _, shape = state
        return x.reshape(shape)
    return init, update, get_params


# ---------------------------------------------------------------------------------------------
# Step-size schedules

def constant(step_size) -> Schedule:
    """The same step size at every step."""
    return lambda i: step_size


def exponential_decay(step_size, decay_steps, decay_rate) -> Schedule:
    """step_size * decay_rate ** (i / decay_steps)."""
    return lambda i: step_size * decay_rate ** (i / decay_steps)


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False) -> Schedule:
    """step_size / (1 + decay_rate * i / decay_steps), floored when `staircase`."""
    if staircase:
        return lambda i: step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    return lambda i: step_size / (1 + decay_rate * i / decay_steps)


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0) -> Schedule:
    """From step_size to final_step_size over decay_steps, as (1 - i/decay_steps)**power."""
    def schedule(step_num):
        step_num = jnp.minimum(step_num, decay_steps)
        return (1 - step_num / decay_steps) ** power * (step_size - final_step_size) \
            + final_step_size
    return schedule


def piecewise_constant(boundaries, values) -> Schedule:
    """values[k] between boundaries[k-1] and boundaries[k]."""
    boundaries, values = jnp.array(boundaries), jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if not boundaries.shape[0] == values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")
    return lambda i: values[jnp.sum(i > boundaries)]


def make_schedule(scalar_or_schedule) -> Schedule:
    """A schedule as is, or a constant schedule for a scalar."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(type(scalar_or_schedule))


# ---------------------------------------------------------------------------------------------
# Utilities

def l2_norm(tree):
    """The L2 norm of all the leaves of `tree` together."""
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in _tree.leaves(tree)))


def clip_grads(grad_tree, max_norm):
    """Gradients rescaled so that their joint L2 norm is at most `max_norm`."""
    norm = l2_norm(grad_tree)
    return _tree.map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """Marks where a parameter's optimizer state sits in an unpacked state tree."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):
        yield self.subtree


def unpack_optimizer_state(opt_state):
    """The state as a pytree of JoinPoints (e.g. for saving with pickle-free formats)."""
    states_flat, tree_def, subtree_defs = opt_state
    return _tree.unflatten(tree_def, [JoinPoint(_tree.unflatten(s, f))
                                      for s, f in zip(subtree_defs, states_flat)])


def pack_optimizer_state(marked_pytree):
    """The inverse of `unpack_optimizer_state`."""
    sentinels, tree_def = _tree.flatten(marked_pytree)
    if not all(isinstance(s, JoinPoint) for s in sentinels):
        raise TypeError("pack_optimizer_state expects a pytree of JoinPoints")
    states_flat, subtree_defs = _unzip2(_tree.flatten(s.subtree) for s in sentinels)
    return OptimizerState(states_flat, tree_def, subtree_defs)
