"""`custom_jvp` and `custom_vjp`: functions with user-defined derivative rules.

Each is a call primitive whose rules differ by trace: evaluated directly when concrete, staged
as an equation holding the function's jaxpr (and the Python rule) when traced, and
differentiated with the user's rule under JVP. A custom_vjp's JVP runs `fwd` and emits a
linear `custom_lin` equation whose transpose runs `bwd`; evaluating `custom_lin` (pure forward
mode) is an error, as in JAX.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Callable, Sequence

from fluxion._src import ad, basearray, batching, core, dtypes, key_flow, staging
from fluxion._src.config import config
from fluxion._src.api import fun_name
from fluxion._src.call_transforms import closure_convert, jvp_jaxpr, transpose_jaxpr
from fluxion._src.compiler import lowering
from fluxion._src.core import ClosedJaxpr
from fluxion._src.tree_util import keystr, tree_flatten, tree_map, tree_structure, tree_unflatten


def _split_nondiff(args, nondiff_argnums):
    nondiff = tuple(args[i] for i in nondiff_argnums)
    diff = tuple(a for i, a in enumerate(args) if i not in nondiff_argnums)
    return nondiff, diff


def _merge_nondiff(nondiff, diff, nondiff_argnums):
    args, nd, d = [], iter(nondiff), iter(diff)
    for i in range(len(nondiff) + len(diff)):
        args.append(next(nd) if i in nondiff_argnums else next(d))
    return args


def _resolve_argnums(fun, nondiff_argnums, nondiff_argnames=()):
    nums = set(nondiff_argnums)
    if nondiff_argnames:
        names = list(inspect.signature(fun).parameters)
        nums.update(names.index(n) for n in nondiff_argnames)
    return tuple(sorted(nums))


class _PositionalArgs:
    """Turns a call's arguments into positions (defaults filled in), as JAX resolves them
    before calling a custom-derivative function; what cannot be bound raises TypeError naming
    `kind`. The signature is read once: a call with exactly the positional parameters is taken
    as it is."""

    def __init__(self, kind: str, fun):
        self.kind, self.fun = kind, fun
        try:
            self.signature = inspect.signature(fun)
        except (TypeError, ValueError):  # (a builtin without a signature)
            self.signature, self.exact = None, None
            return
        params = self.signature.parameters.values()
        simple = all(p.kind is not p.KEYWORD_ONLY or p.default is not p.empty for p in params)
        self.exact = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                         for p in params) if simple else None

    def __call__(self, args, kwargs) -> tuple:
        if self.signature is None or (not kwargs and len(args) == self.exact):
            return args
        prefix = (f"The input arguments to the {self.kind}-decorated function "
                  f"{fun_name(self.fun)} could not be resolved to positional-only arguments. "
                  "Binding failed with the error:\n")
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(prefix + str(e)) from None
        bound.apply_defaults()
        passed = [k for k in bound.kwargs if k in kwargs]
        if passed:
            raise TypeError(prefix + "The following keyword arguments could not be resolved "
                            f"to positions: {', '.join(passed)}")
        return bound.args


def _stage(flat_fun, avals, origin) -> tuple[ClosedJaxpr, list]:
    closed = staging.trace_to_jaxpr(flat_fun, list(avals), origin=origin)
    return closure_convert(closed)


def _key_reuse_staged(name: str, args) -> None:
    """`debug_key_reuse`: a staged custom_jvp/custom_vjp call consumes every key passed to
    it (JAX has no key rule for these equations); run eagerly or differentiated, the
    function's own consumption passes through (`key_flow.transparent`)."""
    if config.debug_key_reuse and key_flow.staged():
        key_flow.consume_all(name, tuple(args))


def _forward_attr(self, name):
    """Attributes the object lacks come from the function it wraps (a custom_vmap function's
    `def_vmap`, say), as JAX's custom_api_util.forward_attr."""
    fun = self.__dict__.get("fun")
    if fun is None:
        raise AttributeError(name)
    return getattr(fun, name)


def _check_aliased_refs(fun, args, nondiff_argnums) -> None:
    """JAX's ValueError for one Ref passed as two differentiable arguments of a custom_vjp
    function."""
    from fluxion._src.state import aliasing
    from fluxion._src.state.types import is_ref
    leaves, tree = tree_flatten(tuple(args))
    names = aliasing.operand_names(fun, tree, len(leaves))
    argnums = [i for i, a in enumerate(args) for _ in tree_flatten(a)[0]]
    seen: dict[int, int] = {}
    for k, (argnum, x) in enumerate(zip(argnums, leaves)):
        if argnum in nondiff_argnums or not is_ref(x):
            continue
        key = id(aliasing.referent(x))
        if key in seen:
            raise ValueError(
                "only one reference to a mutable array may be passed as an argument to a "
                f"function, but custom_vjp function {fun} got the same mutable array "
                f"reference of type {x.aval.str_short()} at {names[seen[key]]} and "
                f"{names[k]}.")
        seen[key] = k


def _check_returned_refs(fun, kind: str, out, args, n_outputs: int) -> None:
    """JAX's ValueError for a custom_vjp primal or fwd function returning a Ref: never as a
    primal output (the first `n_outputs` leaves), and as a residual only if it was an
    argument."""
    from fluxion._src.state.types import is_ref
    from fluxion._src.tree_util import tree_flatten_with_path
    arg_ids = {id(x.value if isinstance(x, CustomVJPPrimal) else x) for x in args}
    for i, (path, leaf) in enumerate(tree_flatten_with_path(out)[0]):
        if not is_ref(leaf):
            continue
        loc = f" at output tree path {keystr(path)}" if path else ""
        if i < n_outputs:
            raise ValueError(f"custom_vjp {kind} function {fun} returned a mutable array "
                             f"reference of type {leaf.aval.str_short()}{loc}, but mutable "
                             "array references cannot be returned there.")
        if id(leaf) not in arg_ids:
            raise ValueError(f"custom_vjp {kind} function {fun} returned a mutable array "
                             f"reference of type {leaf.aval.str_short()}{loc} that was not "
                             "an argument.")


# =============================================================================================
# custom_jvp

custom_jvp_call_p = core.Primitive("custom_jvp_call")
custom_jvp_call_p.multiple_results = True


class custom_jvp:
    """A function with a custom JVP rule.

    >>> @custom_jvp
    ... def f(x): return jnp.log1p(jnp.exp(x))
    >>> @f.defjvp
    ... def f_jvp(primals, tangents):
    ...     x, = primals; t, = tangents
    ...     return f(x), t * jax.nn.sigmoid(x)
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _resolve_argnums(fun, nondiff_argnums, nondiff_argnames)
        self._positional_args = _PositionalArgs("custom_jvp", fun)
        self.jvp = None
        self.symbolic_zeros = False

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    __getattr__ = _forward_attr

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Set the rule: jvp(primals, tangents) -> (primal_out, tangent_out)."""
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def defjvps(self, *jvps: Callable | None) -> None:
        """Set the rule as one function per argument: jvps[i](g, ans, *args) is the tangent
        contribution of argument i given its tangent g (None: no dependence)."""
        def jvp(primals, tangents):
            ans = self(*primals)
            total = None
            for fn, t in zip(jvps, tangents):
                if fn is None:
                    continue
                term = fn(t, ans, *primals)
                total = term if total is None else tree_map(lambda a, b: a + b, total, term)
            if total is None:
                total = tree_map(lambda a: a * 0, ans)
            return ans, total
        self.defjvp(jvp)

    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {fun_name(self.fun)} "
                                 "using defjvp.")
        args = self._positional_args(args, kwargs)
        nondiff, diff = _split_nondiff(args, self.nondiff_argnums)
        leaves, in_tree = tree_flatten(diff)
        out_tree_box = []
        fun, passes_keys = self.fun, config.debug_key_reuse and not key_flow.staged()
        if passes_keys:  # run once, at the caller's level (staged, `_key_reuse_staged` below)
            fun = key_flow.transparent(fun, (tuple(args), {}))
        # The rule is kept in the staged equation: it must not hold the arguments (tracers)
        # but where the key-reuse checker needs them.
        key_args = diff if passes_keys else None

        def flat_fun(*xs):
            out = fun(*_merge_nondiff(nondiff, tree_unflatten(in_tree, xs), self.nondiff_argnums))
            out_leaves, out_tree = tree_flatten(out)
            out_tree_box.append(out_tree)
            return out_leaves

        def flat_jvp(primals, tangents):
            p = tree_unflatten(in_tree, primals)
            t = tree_unflatten(in_tree, tangents)
            if key_args is not None:
                key_flow.pass_in(key_args, p)
            pair = self.jvp(*nondiff, tuple(p), tuple(t))
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise TypeError(f"Custom JVP rule {fun_name(self.jvp)} for function "
                                f"{fun_name(self.fun)} must produce a pair (list or tuple of "
                                "length two) representing primal and tangent outputs, but got "
                                f"{pair}.")
            out_p, out_t = pair
            if key_args is not None:
                key_flow.pass_back(key_args, p)
            p_leaves, p_tree = tree_flatten(out_p)
            t_leaves, t_tree = tree_flatten(out_t)
            out_tree_box.append(p_tree)
            if p_tree != t_tree:
                raise TypeError(f"Custom JVP rule of {fun_name(self.fun)} must produce primal and "
                                f"tangent outputs with equal container structures, got {p_tree} "
                                f"and {t_tree}.")
            for po, to in zip(p_leaves, t_leaves):
                pa, ta = core.get_aval(po), core.get_aval(to)
                if ad.tangent_aval(pa).shape != ta.shape:  # JAX's class and message
                    from fluxion._src.ad_api import _long
                    raise TypeError(
                        f"Custom JVP rule of {fun_name(self.fun)} must produce primal and tangent "
                        "outputs with corresponding shapes and dtypes. Expected "
                        f"{_long(ad.tangent_aval(pa))} (tangent type of {_long(pa)}) but got "
                        f"{_long(ta)}.")
            return p_leaves, t_leaves

        flat_jvp.__qualname__ = fun_name(self.jvp)
        outs = bind_custom_jvp(flat_fun, flat_jvp, leaves, self.symbolic_zeros, fun_name(self.fun))
        _key_reuse_staged("custom_jvp_call", args)
        return tree_unflatten(out_tree_box[-1], outs)


def bind_custom_jvp(flat_fun, flat_jvp, args, symbolic_zeros, name):
    """Apply a custom-JVP function at the current trace."""
    trace = core.current_trace()
    if isinstance(trace, core.EvalTrace):
        return flat_fun(*args)
    if isinstance(trace, ad.JVPTrace):
        return _custom_jvp_at_jvp_trace(trace, flat_fun, flat_jvp, args, symbolic_zeros, name)
    if isinstance(trace, batching.BatchTrace):
        return _custom_jvp_at_batch_trace(trace, flat_fun, flat_jvp, args, symbolic_zeros, name)
    if isinstance(trace, ad.PartialEvalTrace) and not any(trace.is_unknown(a) for a in args):
        with core.set_current_trace(trace.parent):
            return bind_custom_jvp(flat_fun, flat_jvp, args, symbolic_zeros, name)
    # Staging: record the function as a jaxpr; the rule stays a Python callable.
    avals = [core.get_aval(a) for a in args]
    with core.set_current_trace(core.eval_trace):
        jaxpr, consts = _stage(flat_fun, avals, f"custom_jvp of {name}")
    return custom_jvp_call_p.bind(*consts, *args, call_jaxpr=jaxpr, jvp_fn=_JvpFn(flat_jvp, len(consts)),
                                  num_consts=len(consts), symbolic_zeros=symbolic_zeros)


class _JvpFn:
    """The user's JVP rule as an equation parameter (hashable by identity)."""

    def __init__(self, fn, num_consts):
        self.fn = fn
        self.num_consts = num_consts

    def __call__(self, primals, tangents):
        return self.fn(primals, tangents)

    def __repr__(self):
        return getattr(self.fn, "__name__", "jvp")

    __name__ = property(lambda self: getattr(self.fn, "__qualname__", "jvp"))


def _custom_jvp_at_jvp_trace(trace, flat_fun, flat_jvp, args, symbolic_zeros, name):
    primals, tangents = zip(*(trace.primal_tangent(a) for a in args)) if args else ((), ())
    with core.set_current_trace(trace.parent):
        if all(type(t) is ad.Zero for t in tangents):
            return bind_custom_jvp(flat_fun, flat_jvp, list(primals), symbolic_zeros, name)
        tangents_in = [t if symbolic_zeros and type(t) is ad.Zero else ad.instantiate(t)
                       for t in tangents]
        out_p, out_t = flat_jvp(list(primals), tangents_in)
    return [trace.wrap(p, t) for p, t in zip(out_p, out_t)]


def _all_batched(trace, args):
    vals = []
    for a in args:
        v, d = trace.unpack(a)
        vals.append(batching.bdim_at_front(v, d, trace.axis_size))
    return vals


def _batched_fn(trace, fn):
    """`fn` (flat lists) vmapped over axis 0 of every input and output, under trace's axis."""
    def batched(*xs):
        outs, dims = batching.batch_flat(fn, xs, [0] * len(xs), trace.axis_name, trace.axis_size,
                                         trace.spmd_axis_name, tag=trace.tag)
        return [batching.matchaxis(o, d, 0, trace.axis_size) for o, d in zip(outs, dims)]
    return batched


def _custom_jvp_at_batch_trace(trace, flat_fun, flat_jvp, args, symbolic_zeros, name):
    vals = _all_batched(trace, args)
    n = len(vals)
    fun_b = _batched_fn(trace, flat_fun)

    def jvp_b(primals, tangents):
        # With symbolic_zeros, zero tangents reach the rule as zeros of one example's shape
        # (SymbolicZero), not as batched arrays of zeros; only the others are batched.
        zero = [symbolic_zeros and type(t) is ad.Zero for t in tangents]
        example_avals = [t.aval.update(shape=t.aval.shape[1:]) if z else None
                         for t, z in zip(tangents, zero)]
        live = [ad.instantiate(t) for t, z in zip(tangents, zero) if not z]

        def jvp_lists(*xs):
            given = iter(xs[n:])
            ts = [ad.Zero(a) if z else next(given) for z, a in zip(zero, example_avals)]
            p, t = flat_jvp(list(xs[:n]), ts)
            return list(p) + [ad.instantiate(x) for x in t]

        outs = _batched_fn(trace, jvp_lists)(*primals, *live)
        half = len(outs) // 2
        return outs[:half], outs[half:]

    with core.set_current_trace(trace.parent):
        outs = bind_custom_jvp(fun_b, jvp_b, vals, symbolic_zeros, name)
    return [trace.wrap(o, 0) for o in outs]


# Rules for the staged equation (reached by eval_jaxpr of a jaxpr holding custom_jvp_call).

def _custom_jvp_call_impl(*args, call_jaxpr, jvp_fn, num_consts, symbolic_zeros):
    return core.eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)


def _custom_jvp_call_abstract_eval(*avals, call_jaxpr, **_):
    return call_jaxpr.out_avals


def _custom_jvp_call_jvp(primals, tangents, *, call_jaxpr, jvp_fn, num_consts, symbolic_zeros):
    consts, args = primals[:num_consts], primals[num_consts:]
    const_tangents = tangents[:num_consts]
    if any(type(t) is not ad.Zero for t in const_tangents):
        raise NotImplementedError("differentiating a custom_jvp function with respect to "
                                  "values it closes over is not supported; pass them as arguments")
    arg_tangents = [t if symbolic_zeros and type(t) is ad.Zero else ad.instantiate(t)
                    for t in tangents[num_consts:]]
    return jvp_fn(list(args), arg_tangents)


def _custom_jvp_call_lowering(ctx, *args, call_jaxpr, **_):
    return ctx.lower_jaxpr(call_jaxpr, args)


def _custom_jvp_call_partial_eval(trace, primitive, args, params):
    # An unknown input means the call is on the linear (tangent) side of a linearization, which
    # differentiates no further: the rule is dropped and the body traced in line, so it
    # transposes as ordinary primitives (as in JAX; a JVP rule that applies the function
    # itself to the tangents relies on it).
    with core.set_current_trace(trace):
        return core.eval_jaxpr(params["call_jaxpr"].jaxpr, params["call_jaxpr"].consts, *args)


def _custom_jvp_call_transpose(cts, *args, call_jaxpr, **_):
    # Reached where a call on the linear side was staged whole (a checkpointed region, a
    # jaxpr handed to linear_transpose): its body is linear in those inputs.
    linear = tuple(ad.is_undefined_primal(a) for a in args)
    ct_avals = tuple(ad.tangent_aval(a) for a in call_jaxpr.out_avals)
    transposed = transpose_jaxpr(call_jaxpr, linear, ct_avals)
    nonlinear = [a for a, is_linear in zip(args, linear) if not is_linear]
    outs = iter(core.eval_jaxpr(transposed.jaxpr, transposed.consts, *nonlinear,
                                *[ad.instantiate(c) for c in cts]))
    return [next(outs) if is_linear else None for is_linear in linear]


custom_jvp_call_p.def_impl(_custom_jvp_call_impl)
custom_jvp_call_p.def_abstract_eval(_custom_jvp_call_abstract_eval)
ad.primitive_jvps[custom_jvp_call_p] = _custom_jvp_call_jvp
ad.partial_eval_rules[custom_jvp_call_p] = _custom_jvp_call_partial_eval
ad.primitive_transposes[custom_jvp_call_p] = _custom_jvp_call_transpose
lowering.register_lowering(custom_jvp_call_p, _custom_jvp_call_lowering)


def _rebind_under(trace, vals, dims, call_jaxpr, num_consts, bind):
    """Batch a staged custom-derivative call by applying it anew under the batch trace."""
    args = [trace.wrap(v, d) for v, d in zip(vals, dims)]
    consts, xs = args[:num_consts], args[num_consts:]

    def flat_fun(*a):
        return core.eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *consts, *a)

    with core.set_current_trace(trace):
        outs = bind(flat_fun, xs)
    unpacked = [trace.unpack(o) for o in outs]
    return [v for v, _ in unpacked], [d for _, d in unpacked]


def _custom_jvp_call_batch(trace, vals, dims, *, call_jaxpr, jvp_fn, num_consts, symbolic_zeros):
    return _rebind_under(trace, vals, dims, call_jaxpr, num_consts, lambda fun, xs: bind_custom_jvp(
        fun, jvp_fn, xs, symbolic_zeros, "custom_jvp"))


batching.trace_rules[custom_jvp_call_p] = _custom_jvp_call_batch


# =============================================================================================
# custom_vjp

custom_vjp_call_p = core.Primitive("custom_vjp_call")
custom_vjp_call_p.multiple_results = True
custom_lin_p = core.Primitive("custom_lin")
custom_lin_p.multiple_results = True


class custom_vjp:
    """A function with a custom VJP rule, given as `fwd` and `bwd` functions.

    ``fwd(*args) -> (out, residuals)``; ``bwd(residuals, cotangent_out) -> tuple of cotangents``
    (one per argument; with nondiff_argnums, bwd receives those arguments first).
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _resolve_argnums(fun, nondiff_argnums, nondiff_argnames)
        self._positional_args = _PositionalArgs("custom_vjp", fun)
        self.fwd = None
        self.bwd = None
        self.symbolic_zeros = False

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    __getattr__ = _forward_attr

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:
        self.fwd, self.bwd = fwd, bwd
        self.symbolic_zeros = symbolic_zeros

    def __call__(self, *args, **kwargs):
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {fun_name(self.fun)} "
                                 "using defvjp.")
        args = self._positional_args(args, kwargs)
        nondiff, diff = _split_nondiff(args, self.nondiff_argnums)
        leaves, in_tree = tree_flatten(diff)
        # The backward rule outlives this call (a staged equation keeps it): it checks the
        # cotangents against the arguments' abstract values, not the arguments (tracers).
        diff_avals = tree_map(core.get_aval, diff)
        name = fun_name(self.fun)
        out_tree_box = []
        fun, fwd = self.fun, self.fwd
        if config.debug_key_reuse and not key_flow.staged():
            fun, fwd = (key_flow.transparent(g, (tuple(args), {})) for g in (fun, fwd))

        if staging.refs_among(leaves):
            _check_aliased_refs(self.fun, args, self.nondiff_argnums)

        def flat_fun(*xs):
            out = fun(*_merge_nondiff(nondiff, tree_unflatten(in_tree, xs), self.nondiff_argnums))
            out_leaves, out_tree = tree_flatten(out)
            if staging.refs_among(out_leaves):
                _check_returned_refs(self.fun, "primal", out, (), 0)
            out_tree_box.append(out_tree)
            return out_leaves

        def flat_fwd(*xs, perturbed=None):
            if self.symbolic_zeros:  # each argument leaf as (value, whether it has a tangent)
                flags = [True] * len(xs) if perturbed is None else perturbed
                xs = [CustomVJPPrimal(x, bool(p)) for x, p in zip(xs, flags)]
            res = fwd(*_merge_nondiff(nondiff, tree_unflatten(in_tree, xs), self.nondiff_argnums))
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise TypeError(f"Custom VJP fwd rule {fun_name(self.fwd)} for function {name} "
                                "must produce a pair (list or tuple of length two) representing "
                                f"primal outputs and residuals (values stored from the forward "
                                f"pass for use on the backward pass), got {type(res).__name__}.")
            out, residuals = res
            out_leaves, out_tree = tree_flatten(out)
            res_leaves, res_tree = tree_flatten(residuals)
            if staging.refs_among(out_leaves + res_leaves):
                _check_returned_refs(self.fwd, "fwd", res, xs, len(out_leaves))
            out_tree_box.append(out_tree)
            return out_leaves, res_leaves, res_tree

        def flat_bwd(res_tree, res_leaves, ct_leaves):
            residuals = tree_unflatten(res_tree, res_leaves)
            if not self.symbolic_zeros:  # else zero cotangents reach bwd as SymbolicZero
                ct_leaves = [ad.instantiate(c) for c in ct_leaves]
            ct = tree_unflatten(out_tree_box[-1], ct_leaves)
            cts = self.bwd(*nondiff, residuals, ct)
            if not isinstance(cts, (tuple, list)) or len(cts) != len(diff_avals):
                raise TypeError(
                    f"Custom VJP bwd rule must produce an output with the same container (pytree) "
                    f"structure as the args tuple of the primal function, and in particular must "
                    f"produce a tuple of length equal to the number of arguments to the primal "
                    f"function, but got bwd output of type {type(cts).__name__} for primal input "
                    f"structure {in_tree}.")
            out = []
            for arg, ct in zip(diff_avals, cts):
                arg_leaves, arg_tree = tree_flatten(arg)
                if ct is None:
                    out.extend(ad.Zero(ad.tangent_aval(a)) for a in arg_leaves)
                    continue
                # As JAX: the cotangent is a prefix of the argument, a None standing for zeros
                # of the whole subtree there (none at all where the argument has a None).
                pairs = []
                try:
                    tree_map(lambda c, sub: pairs.append((c, sub)), ct, arg,
                             is_leaf=lambda x: x is None)
                except (ValueError, TypeError):
                    pairs = None
                if pairs is None or any(c is not None and _not_a_leaf(sub) for c, sub in pairs):
                    ct_tree = tree_structure(ct, is_leaf=lambda x: x is None)
                    raise TypeError(f"Custom VJP bwd rule produced a cotangent with structure "
                                    f"{ct_tree} for an argument with structure {arg_tree}.")
                for c, sub in pairs:
                    if c is None:
                        out.extend(ad.Zero(ad.tangent_aval(a)) for a in tree_flatten(sub)[0])
                        continue
                    aval = sub
                    ca = core.get_aval(c)
                    if ca.shape != aval.shape:
                        raise ValueError(f"Custom VJP bwd rule must produce an output with "
                                         f"shapes/dtypes matching the primal inputs: got a "
                                         f"cotangent of shape {ca.shape} for an input of shape "
                                         f"{aval.shape}.")
                    out.append(c)
            return out

        outs = bind_custom_vjp(flat_fun, flat_fwd, flat_bwd, leaves, name)
        _key_reuse_staged("custom_vjp_call", args)
        return tree_unflatten(out_tree_box[-1], outs)


def _not_a_leaf(x) -> bool:
    leaves = tree_flatten(x)[0]
    return len(leaves) != 1 or leaves[0] is not x


def bind_custom_vjp(flat_fun, flat_fwd, flat_bwd, args, name):
    trace = core.current_trace()
    if isinstance(trace, core.EvalTrace):
        return flat_fun(*args)
    if isinstance(trace, ad.JVPTrace):
        return _custom_vjp_at_jvp_trace(trace, flat_fun, flat_fwd, flat_bwd, args, name)
    if isinstance(trace, batching.BatchTrace):
        return _custom_vjp_at_batch_trace(trace, flat_fun, flat_fwd, flat_bwd, args, name)
    if isinstance(trace, ad.PartialEvalTrace) and not any(trace.is_unknown(a) for a in args):
        with core.set_current_trace(trace.parent):
            return bind_custom_vjp(flat_fun, flat_fwd, flat_bwd, args, name)
    avals = [core.get_aval(a) for a in args]
    with core.set_current_trace(core.eval_trace):
        jaxpr, consts = _stage(flat_fun, avals, f"custom_vjp of {name}")
    return custom_vjp_call_p.bind(*consts, *args, call_jaxpr=jaxpr,
                                  rules=_VjpRules(flat_fwd, flat_bwd, name), num_consts=len(consts))


class _VjpRules:
    """fwd and bwd of a custom_vjp function, as an equation parameter."""

    def __init__(self, fwd, bwd, name):
        self.fwd, self.bwd, self.name = fwd, bwd, name

    def __repr__(self):
        return f"fwd_bwd({self.name})"


@dataclasses.dataclass
class CustomVJPPrimal:
    """Primal to a ``custom_vjp``'s forward rule when ``symbolic_zeros`` is set: the value
    and whether it has a (nonzero) tangent."""
    value: object
    perturbed: bool


def custom_vjp_primal_tree_values(tree):
    """Strip the perturbation information from forward-rule arguments (CustomVJPPrimal
    leaves) given with ``symbolic_zeros``, leaving their values."""
    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"unexpected leaf type {type(leaf)}")
        return leaf.value
    return tree_map(value, tree)


def _custom_vjp_at_jvp_trace(trace, flat_fun, flat_fwd, flat_bwd, args, name):
    primals, tangents = zip(*(trace.primal_tangent(a) for a in args)) if args else ((), ())
    with core.set_current_trace(trace.parent):
        if all(type(t) is ad.Zero for t in tangents):
            return bind_custom_vjp(flat_fun, flat_fwd, flat_bwd, list(primals), name)
        out_p, res, res_tree = flat_fwd(*primals,
                                        perturbed=[type(t) is not ad.Zero for t in tangents])
        out_avals = [ad.tangent_aval(core.get_aval(o)) for o in out_p]
        lin_tangents = [ad.instantiate(t) for t in tangents]
        out_t = custom_lin_p.bind(*res, *lin_tangents, num_res=len(res),
                                  bwd=_BwdFn(flat_bwd, res_tree, name, res), out_avals=tuple(out_avals))
    return [trace.wrap(p, t) for p, t in zip(out_p, out_t)]


class _BwdFn:
    """The bwd rule of one application, with the avals of the residuals that were arrays."""

    def __init__(self, fn, res_tree, name, res):
        self.fn, self.res_tree, self.name = fn, res_tree, name
        self.array_avals = [core.get_aval(r) if isinstance(r, basearray.Array) else None
                            for r in res]

    def __call__(self, res, cts):
        return self.fn(self.res_tree, self._as_arrays(res), cts)

    def _as_arrays(self, res):
        """A scalar residual staged as a literal comes back a host scalar: bwd gets the Array
        that fwd returned, as in JAX (a Python scalar residual stays one)."""
        from fluxion._src.array import make_array
        return [make_array(r, aval.dtype, aval.weak_type)
                if aval is not None and not isinstance(r, basearray.Array) else r
                for r, aval in zip(res, self.array_avals)]

    def __repr__(self):
        return f"bwd({self.name})"


def _custom_vjp_at_batch_trace(trace, flat_fun, flat_fwd, flat_bwd, args, name):
    vals = _all_batched(trace, args)
    fun_b = _batched_fn(trace, flat_fun)
    res_tree_box = []

    def fwd_b(*xs, perturbed=None):
        def fwd_lists(*xs):
            out, res, res_tree = flat_fwd(*xs, perturbed=perturbed)
            res_tree_box.append((len(out), res_tree))
            return list(out) + list(res)
        outs = _batched_fn(trace, fwd_lists)(*xs)
        n_out, res_tree = res_tree_box[-1]
        return outs[:n_out], outs[n_out:], res_tree

    def bwd_b(res_tree, res, cts):
        def bwd_lists(*xs):
            r, c = xs[:len(res)], xs[len(res):]
            return [ad.instantiate(x) for x in flat_bwd(res_tree, list(r), list(c))]
        return _batched_fn(trace, bwd_lists)(*res, *[ad.instantiate(c) for c in cts])

    with core.set_current_trace(trace.parent):
        outs = bind_custom_vjp(fun_b, fwd_b, bwd_b, vals, name)
    return [trace.wrap(o, 0) for o in outs]


def _custom_vjp_call_impl(*args, call_jaxpr, rules, num_consts):
    return core.eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)


def _custom_vjp_call_jvp(primals, tangents, *, call_jaxpr, rules, num_consts):
    if any(type(t) is not ad.Zero for t in tangents[:num_consts]):
        raise NotImplementedError("differentiating a custom_vjp function with respect to values "
                                  "it closes over is not supported; pass them as arguments")
    args, arg_tangents = primals[num_consts:], tangents[num_consts:]
    perturbed = [type(t) is not ad.Zero for t in arg_tangents]
    out_p, res, res_tree = rules.fwd(*args, perturbed=perturbed)
    out_avals = [ad.tangent_aval(core.get_aval(o)) for o in out_p]
    out_t = custom_lin_p.bind(*res, *[ad.instantiate(t) for t in arg_tangents], num_res=len(res),
                              bwd=_BwdFn(rules.bwd, res_tree, rules.name, res),
                              out_avals=tuple(out_avals))
    return out_p, out_t


def _custom_vjp_call_batch(trace, vals, dims, *, call_jaxpr, rules, num_consts):
    return _rebind_under(trace, vals, dims, call_jaxpr, num_consts, lambda fun, xs: bind_custom_vjp(
        fun, rules.fwd, rules.bwd, xs, rules.name))


batching.trace_rules[custom_vjp_call_p] = _custom_vjp_call_batch
custom_vjp_call_p.def_impl(_custom_vjp_call_impl)
custom_vjp_call_p.def_abstract_eval(lambda *avals, call_jaxpr, **_: call_jaxpr.out_avals)
ad.primitive_jvps[custom_vjp_call_p] = _custom_vjp_call_jvp
lowering.register_lowering(custom_vjp_call_p,
                           lambda ctx, *args, call_jaxpr, **_: ctx.lower_jaxpr(call_jaxpr, args))


def _custom_lin_impl(*args, **params):
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals):
    res = args[:num_res]
    cts = list(cts)  # symbolic zeros stay so: bwd instantiates them unless symbolic_zeros
    cts_in = bwd(list(res), cts)
    return [None] * num_res + list(cts_in)


custom_lin_p.def_impl(_custom_lin_impl)
# Under jit the linear part is staged and, unless transposed away (grad), reaches lowering:
lowering.register_lowering(custom_lin_p, lambda ctx, *args, **params: _custom_lin_impl())
custom_lin_p.def_abstract_eval(lambda *avals, out_avals, **_: list(out_avals))
ad.primitive_transposes[custom_lin_p] = _custom_lin_transpose


def _custom_lin_jvp(primals, tangents, **params):
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


ad.primitive_jvps[custom_lin_p] = _custom_lin_jvp


def _custom_lin_batch(args, dims, **params):
    # Reached only when the linear part is evaluated with batched tangents (jacfwd, vmap of jvp)
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


batching.primitive_batchers[custom_lin_p] = _custom_lin_batch
