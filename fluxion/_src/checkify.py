"""`checkify`: turn checks (user `check`s, NaNs, division by zero, out-of-bounds indexing) into
an error value the program returns, so they work under jit, vmap, grad and control flow.

`checkify(f, errors)` traces `f` to a jaxpr, then evaluates that jaxpr equation by equation at
the caller's trace, threading an error state through it. As in JAX, the check sites are grouped
by kind and payload types; per group the state holds `[failed, code, *payload]` of its first
failure, and the returned Error reports the failed group whose code is least. Codes number the
sites in the order JAX's checkify gives them (user checks when the function is traced, then
automatic checks as the interpreter reaches them); the sites are found in a first pass over the
jaxpr (nested jaxprs included), so loops and branches carry a state of fixed structure.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable

import numpy as np

from fluxion._src import core, effects, ad, batching
from fluxion._src.compiler import lowering


def _runtime_error(message: str) -> Exception:
    """What `Error.throw()` (and a failing `check` outside checkify) raises: jaxlib's
    JaxRuntimeError (`fluxion.errors.JaxRuntimeError`, a RuntimeError), as in JAX."""
    from fluxion._src.compiler import backend
    return backend.runtime_error_class()(message)


# ---------------------------------------------------------------------------------------------
# Error kinds (the `errors=` sets)

class ErrorKind:
    """A kind of check (`FailedCheckError`, `NaNError`, ...): the members of the `errors=`
    sets that `checkify` takes."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


ErrorCategory = ErrorKind  # JAX's name for the type of an error set's members

FailedCheckError = ErrorKind("FailedCheckError")
NaNError = ErrorKind("NaNError")
DivisionByZeroError = ErrorKind("DivisionByZeroError")
OOBError = ErrorKind("OOBError")

user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
div_checks = frozenset({DivisionByZeroError})
index_checks = frozenset({OOBError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


# ---------------------------------------------------------------------------------------------
# check_p: a user's check, an effect until checkify functionalizes it

check_p = core.Primitive("check")
check_p.multiple_results = True
error_check_effect = type("ErrorCheckEffect", (effects.Effect,), {})()


def _format_message(fmt: str, tree, values) -> str:
    from fluxion import tree_util
    from fluxion._src.callbacks import _as_fluxion_array
    # Arrays, as JAX formats them (a pytree argument prints Array(...), not array(...))
    args, kwargs = tree_util.tree_unflatten(
        tree, [_as_fluxion_array(np.asarray(v), False) for v in values])
    return fmt.format(*args, **kwargs)


def _check_impl(pred, *fmt_args, msg, fmt_tree, where, debug):
    if not debug and not bool(np.all(np.asarray(pred))):
        raise _runtime_error(_format_message(msg, fmt_tree, fmt_args) + _at(where))
    return []


def _at(where) -> str:
    return f" (check failed at {where})" if where else ""


def _check_lowering(ctx, *args, **params):
    raise ValueError("Cannot abstractly evaluate a checkify.check which was not functionalized. "
                     "This probably means you tried to stage (jit/scan/pmap/...) a `check` "
                     "without functionalizing it through `checkify.checkify`.")


def _user_check_lowering(ctx, *args, debug, **params):
    if debug:  # a debug_check outside checkify is dropped
        return []
    return _check_lowering(ctx, *args, **params)


def _check_jvp(primals, tangents, **params):
    check_p.bind(*primals, **params)
    return [], []


def _check_batch(args, dims, **params):
    """A batched check fails if any element fails; its payload is the last failing one's (as
    JAX's, which takes the last of a stable argsort of the failures)."""
    from fluxion import lax
    pred, *fmt = args
    pdim, *fdims = dims
    size = next(core.get_aval(a).shape[d] for a, d in zip(args, dims) if d is not batching.not_mapped)
    if pdim is batching.not_mapped:
        pred_b = lax.broadcast_in_dim(pred, (size,) + core.get_aval(pred).shape,
                                      tuple(range(1, core.get_aval(pred).ndim + 1)))
    else:
        pred_b = batching.moveaxis(pred, pdim, 0)
    ok_per_elem = lax.reduce_and(pred_b, tuple(range(1, core.get_aval(pred_b).ndim)))
    last_bad = (size - 1) - lax.argmin(lax.rev(ok_per_elem, (0,)).astype("int32"), 0, "int32")
    new_fmt = []
    for a, d in zip(fmt, fdims):
        if d is batching.not_mapped:
            new_fmt.append(a)
        else:
            a = batching.moveaxis(a, d, 0)
            new_fmt.append(lax.dynamic_index_in_dim(a, last_bad, 0, keepdims=False))
    check_p.bind(lax.reduce_and(ok_per_elem, (0,)), *new_fmt, **params)
    return [], []


check_p.def_impl(_check_impl)
check_p.def_abstract_eval(lambda *avals, **params: [])
lowering.register_lowering(check_p, _user_check_lowering)
ad.primitive_jvps[check_p] = _check_jvp
batching.primitive_batchers[check_p] = _check_batch
effects.declare_effects(check_p, lambda params: frozenset([error_check_effect]))


def check(pred, msg: str, *fmt_args, **fmt_kwargs) -> None:
    """Check that `pred` holds; otherwise fail with `msg` formatted (`str.format`) with the
    runtime values of `fmt_args`/`fmt_kwargs`.

    Eagerly a failing check raises at once; under `checkify` it becomes part of the returned
    Error; staged (jit, scan, ...) without `checkify` it is an error."""
    _check(pred, msg, False, fmt_args, fmt_kwargs)


def debug_check(pred, msg: str, *fmt_args, **fmt_kwargs) -> None:
    """Check that `pred` holds when running under `checkify` (as `check` does); anywhere else
    (eagerly, or staged without `checkify`) the check is dropped."""
    _check(pred, msg, True, fmt_args, fmt_kwargs)


def _check(pred, msg: str, debug: bool, fmt_args, fmt_kwargs) -> None:
    from fluxion import tree_util
    from fluxion._src import source_info
    from fluxion._src.array import Array
    import fluxion.numpy as jnp
    if not isinstance(msg, str):
        raise TypeError(f"check takes a string message, got {type(msg).__name__}")
    pred = jnp.asarray(pred)
    name = "debug_check" if debug else "check"
    if pred.ndim != 0:  # (as JAX: reduce with jnp.all/any first)
        raise TypeError(f"{name} takes a scalar pred as argument, got {pred}")
    if pred.dtype != np.bool_:
        raise TypeError(f"{name} takes a scalar boolean pred as argument, got dtype "
                        f"{pred.dtype}")
    leaves, tree = tree_util.tree_flatten((fmt_args, fmt_kwargs))
    for x in leaves:  # as JAX: a Python number would be baked into the message's program
        if not isinstance(x, (Array, core.Tracer, np.ndarray)):
            raise TypeError(f"Formatting arguments to checkify.check need to be PyTrees of "
                            f"arrays, but got {x!r} of type {type(x)}.")
    leaves = [jnp.asarray(x) for x in leaves]
    info = source_info.current()
    where = info.summary() if info is not None else None
    check_p.bind(pred, *leaves, msg=msg, fmt_tree=tree, where=where, debug=debug)


# ---------------------------------------------------------------------------------------------
# Error values

@dataclasses.dataclass(frozen=True)
class _Site:
    """One place that can fail: its kind, message (a format string) and payload types."""
    kind: ErrorKind
    message: str
    payload_avals: tuple
    fmt_tree: Any = None  # user checks: how payload values fill the message
    suffix: str = ""  # user checks: where the check is

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other


class Error:
    """The error state a checkified function returns (`jax.experimental.checkify.Error`)."""

    def __init__(self, code, payloads, sites: tuple, offsets: tuple | None = None):
        self._code = code
        self._payloads = list(payloads)
        self._sites = sites
        if offsets is None:  # each site its own payload slots
            offsets = tuple(np.cumsum([0] + [len(s.payload_avals) for s in sites])[:-1].tolist())
        self._offsets = offsets  # where each site's payload values start in `_payloads`

    def _failures(self):
        """[(site, payload values, mapped index)] of the failures, one per mapped index."""
        codes = np.asarray(self._code)
        out = []
        for idx in np.ndindex(*codes.shape):
            code = int(codes[idx])
            if code < 0:
                continue
            values = [np.asarray(p)[idx] for p in self._site_payloads(code)]
            out.append((self._sites[code], values, idx))
        return out

    def _site_payloads(self, code: int) -> list:
        start = self._offsets[code]
        return self._payloads[start:start + len(self._sites[code].payload_avals)]

    @staticmethod
    def _message(site, values) -> str:
        if site.fmt_tree is not None:
            return _format_message(site.message, site.fmt_tree, values) + site.suffix
        return site.message.format(*[v.item() for v in values])

    def get(self) -> str | None:
        """The message of the first failed check (under vmap, of each failing element, a line
        each), or None when nothing failed."""
        failures = self._failures()
        if not failures:
            return None
        return "\n".join(
            (f"at mapped index {', '.join(str(int(i)) for i in idx)}: " if idx != () else "")
            + self._message(site, values) for site, values, idx in failures)

    def get_exception(self) -> Exception | None:
        msg = self.get()
        return None if msg is None else _runtime_error(msg)

    def throw(self) -> None:
        """Raise JaxRuntimeError if a check failed."""
        exc = self.get_exception()
        if exc is not None:
            raise exc

    def __repr__(self):
        try:
            msg = self.get()
        except Exception:  # noqa: BLE001 - traced
            return "Error(<traced>)"
        return f"Error({msg!r})" if msg is not None else "Error(None)"

    __str__ = __repr__


def _error_flatten(err: Error):
    return [err._code, *err._payloads], (err._sites, err._offsets)


def _error_unflatten(aux, children):
    sites, offsets = aux
    return Error(children[0], children[1:], sites, offsets)


def _register_error_pytree():
    from fluxion import tree_util
    tree_util.register_pytree_node(Error, _error_flatten, _error_unflatten)


_register_error_pytree()

init_error = Error(np.int32(-1), [], ())  # the Error of no failure


def check_error(error: Error) -> None:
    """Raise if `error` holds a failure (eagerly); inside `checkify`, carry it into the
    checkified function's own Error."""
    if not isinstance(error, Error):
        raise TypeError(f"check_error takes a checkify.Error, got {type(error).__name__}")
    leaves = [error._code, *error._payloads]
    if not any(isinstance(x, core.Tracer) for x in leaves):
        error.throw()
        return
    check_error_p.bind(*leaves, sites=error._sites, offsets=error._offsets)


check_error_p = core.Primitive("check_error")
check_error_p.multiple_results = True
check_error_p.def_abstract_eval(lambda *avals, **params: [])
check_error_p.def_impl(
    lambda *leaves, sites, offsets: (_error_unflatten((sites, offsets), list(leaves)).throw(), [])[1])
lowering.register_lowering(check_error_p, _check_lowering)
effects.declare_effects(check_error_p, lambda params: frozenset([error_check_effect]))


# ---------------------------------------------------------------------------------------------
# Finding the sites

# The primitives whose outputs JAX's checkify tests for NaNs (those that can make one), by name.
_NAN_PRIMS = frozenset({
    "acos", "acosh", "add", "asin", "asinh", "atan2", "atan", "atanh", "bessel_i0e", "bessel_i1e",
    "cbrt", "conv_general_dilated", "cos", "cosh", "cumlogsumexp", "cummax", "cummin", "cumprod",
    "cumsum", "digamma", "div", "dot_general", "erf_inv", "erf", "erfc", "exp", "expm1", "fft",
    "igamma_grad_a", "igamma", "igammac", "integer_pow", "lgamma", "custom_linear_solve",
    "log1p", "log", "logistic", "mul", "pad", "pow", "psum", "reduce", "reduce_prod",
    "reduce_sum", "reduce_window", "reduce_window_sum", "regularized_incomplete_beta", "rem",
    "rng_uniform", "rsqrt", "sin", "sinh", "sqrt", "sub", "tan", "tanh",
    "scatter", "scatter-add", "scatter-sub", "scatter-mul", "scatter-min", "scatter-max"})
_SCATTER_PRIMS = frozenset({"scatter", "scatter-add", "scatter-sub", "scatter-mul", "scatter-min",
                            "scatter-max"})
_INDEX_PRIMS = frozenset({"gather", "dynamic_slice", "dynamic_update_slice"}) | _SCATTER_PRIMS


def _where(eqn) -> str:
    info = eqn.source_info
    return f" at {info.summary()}" if info is not None else ""


class _Sites:
    """The check sites of a jaxpr, numbered in the order JAX's checkify traces its checks (that
    number is the error code), and grouped as JAX groups them: by kind and payload types.

    A site is keyed by its equation and the context it runs in (`ctx`): a while_loop's
    cond_fun runs once on the initial carry and again after each body, and JAX counts those as
    two sets of checks."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.sites: list[_Site] = []
        self.site_group: list[int] = []
        self.groups: dict[tuple, int] = {}
        self.group_avals: list[tuple] = []
        self.by_eqn: dict[tuple, int] = {}
        self.keep: list = []  # keep eqns alive: they are keyed by id
        self.ctx: tuple = ()

    def add(self, eqn, tag, site: _Site):
        key = self._key(eqn, tag)
        if key in self.by_eqn:
            return  # a jaxpr called twice (a jitted function's cached trace): one site
        self.by_eqn[key] = len(self.sites)
        group = (site.kind, tuple((a.shape, np.dtype(a.dtype)) for a in site.payload_avals))
        if group not in self.groups:
            self.groups[group] = len(self.group_avals)
            self.group_avals.append(site.payload_avals)
        self.site_group.append(self.groups[group])
        self.sites.append(site)
        self.keep.append(eqn)

    def _key(self, eqn, tag):
        # A user check's code is fixed when the user's function is traced, whichever context
        # it then runs in.
        ctx = () if tag == "user" or isinstance(tag, tuple) else self.ctx
        return ctx, id(eqn), tag

    def index(self, eqn, tag):
        return self.by_eqn.get(self._key(eqn, tag))

    @contextlib.contextmanager
    def context(self, marker):
        outer, self.ctx = self.ctx, self.ctx + (marker,)
        try:
            yield
        finally:
            self.ctx = outer

    def scan(self, jaxpr):
        """Number the sites as JAX does: user checks (and nested Errors) get their codes when
        the function is traced, so before any automatic check, which gets its code as
        checkify's interpreter reaches it."""
        self._scan(jaxpr, user=True)
        self._scan(jaxpr, user=False)

    def _scan(self, jaxpr, user: bool):
        covered: set[int] = set()  # ids of vars whose NaNs an earlier NaN check has seen
        for eqn in jaxpr.eqns:
            if eqn.primitive is check_p:
                if user and FailedCheckError in self.enabled:
                    avals = tuple(v.aval for v in eqn.invars[1:])
                    where = eqn.params["where"]
                    self.add(eqn, "user", _Site(FailedCheckError, eqn.params["msg"], avals,
                                                eqn.params["fmt_tree"], _at(where)))
                continue
            if eqn.primitive is check_error_p:
                if user:
                    for j, s in enumerate(eqn.params["sites"]):
                        self.add(eqn, ("nested", j), s)
                continue
            if not user:
                self._automatic(eqn, covered)
            name = eqn.primitive.name
            if name == "while":
                # the cond on the initial carry, the body, then the cond on each new carry
                p = eqn.params
                self._scan(p["cond_jaxpr"].jaxpr, user)
                self._scan(p["body_jaxpr"].jaxpr, user)
                with self.context(("after body", id(eqn))):
                    self._scan(p["cond_jaxpr"].jaxpr, user)
            elif name in _control_flow_rules:
                for sub in _checked_subjaxprs(eqn):
                    self._scan(sub, user)

    def _automatic(self, eqn, covered):
        name = eqn.primitive.name
        where = _where(eqn).replace("{", "{{").replace("}", "}}")
        # In JAX's order: a division's zero check before its NaN check, an index check before
        # a scatter's NaN check.
        if DivisionByZeroError in self.enabled and name == "div":
            self.add(eqn, "div", _Site(DivisionByZeroError, "division by zero" + where, ()))
        if OOBError in self.enabled and name in _INDEX_PRIMS:
            msg = ("out-of-bounds indexing for array of shape "
                   f"{eqn.invars[0].aval.shape}: index {{}} is out of bounds for axis {{}} "
                   "with size {}" + where)
            i32 = core.ShapedArray((), np.int32)
            self.add(eqn, "oob", _Site(OOBError, msg, (i32, i32, i32)))
        if NaNError not in self.enabled:
            return
        if name in _NAN_PRIMS and any(np.issubdtype(v.aval.dtype, np.inexact)
                                      for v in eqn.outvars):
            if not _makes_no_nan(eqn, covered):
                self.add(eqn, "nan", _Site(NaNError, f"nan generated by primitive: {name}"
                                           + where, ()))
            covered.update(id(v) for v in eqn.outvars)
        elif name in _NAN_PASS_THROUGH and _all_covered(eqn.invars, covered):
            covered.update(id(v) for v in eqn.outvars)


# Dropping NaN checks that cannot be the first to fail. A group reports its first failure, so
# the check of an equation that makes no NaN of its own (a NaN out means a NaN in) whose
# inputs an earlier NaN check has all seen can never decide the error: whenever it fails, that
# earlier one failed first. (In the gradient of a tanh MLP this is a third of the checks.)

# Elementwise functions of one argument that are finite or infinite for every non-NaN input.
_NAN_FREE_UNARY = frozenset({"tanh", "logistic", "exp", "expm1", "integer_pow", "atan", "erf",
                             "erfc"})
# Primitives that make no NaN and whose outputs hold only values (or NaNs) of their inputs.
_NAN_PASS_THROUGH = frozenset({
    "broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "slice", "rev",
    "copy", "neg", "abs", "concatenate", "select_n", "max", "min", "reduce_max", "reduce_min",
    "convert_element_type"})


def _finite_literal(v, nonzero: bool = False) -> bool:
    if type(v) is not core.Literal:
        return False
    with np.errstate(over="ignore", under="ignore"):
        val = np.asarray(v.val).astype(v.aval.dtype)  # as the program holds it: 1e30 in f16 is inf
    return bool(np.all(np.isfinite(val)) and (not nonzero or np.all(val != 0)))


def _is_covered(v, covered) -> bool:
    if not np.issubdtype(v.aval.dtype, np.inexact):
        return True
    return id(v) in covered or _finite_literal(v)


def _all_covered(invars, covered) -> bool:
    return all(_is_covered(v, covered) for v in invars)


def _makes_no_nan(eqn, covered) -> bool:
    """Whether `eqn`'s output can hold a NaN only where a covered input does."""
    name, ins = eqn.primitive.name, eqn.invars
    if not all(np.issubdtype(v.aval.dtype, np.floating) for v in [*ins, *eqn.outvars]):
        return False  # complex arithmetic makes NaNs of infinities (exp(inf + inf j))
    if not _all_covered(ins, covered):
        return False
    if name in _NAN_FREE_UNARY:
        return True
    if len(ins) != 2:
        return False
    x, y = ins
    same = type(x) is not core.Literal and x is y
    if name == "mul":  # x * x, or a finite non-zero constant times x
        return same or _finite_literal(x, True) or _finite_literal(y, True)
    if name == "add":  # x + x, or x plus a finite constant
        return same or _finite_literal(x) or _finite_literal(y)
    if name == "sub":
        return _finite_literal(x) or _finite_literal(y)
    if name == "div":
        return _finite_literal(y, True)
    return False


def _checked_subjaxprs(eqn):
    """The sub-jaxprs whose checks checkify threads (a custom_jvp's or custom_vjp's rules and
    a custom_linear_solve's functions are not checked, as in JAX)."""
    p = eqn.params
    name = eqn.primitive.name
    if name == "cond":
        return [b.jaxpr for b in p["branches"]]
    if name == "custom_jvp_call" or name == "custom_vjp_call":
        return [p["call_jaxpr"].jaxpr]
    jaxpr = p["jaxpr"]
    return [jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr]


# ---------------------------------------------------------------------------------------------
# The error-threading interpreter

class _State:
    """Values of the error state, as a flat list: per group of sites (JAX's error effects: one
    kind and payload type), whether one of them failed, the code of the first that did
    (meaningful only once one did) and its payload.

    As in JAX, a record costs an `or` and a select per value: a group's code and payload
    follow each record until its first failure, then stay. The Error reports the failed group
    whose code is least (the check traced first), as JAX's does."""

    def __init__(self, table: "_Sites", values):
        self.table = table
        self.values = list(values)
        self.offsets = []
        off = 0
        for avals in table.group_avals:
            self.offsets.append(off)
            off += 2 + len(avals)

    def record(self, index: int, failed, payload=()):
        import fluxion.numpy as jnp
        if not isinstance(failed, core.Tracer) and not np.any(np.asarray(failed)):
            return  # known at trace time not to fail (a constant divisor, a static index)
        off = self.offsets[self.table.site_group[index]]
        before = self.values[off]
        if not isinstance(before, core.Tracer) and not np.any(np.asarray(before)):
            self.values[off], self.values[off + 1] = failed, np.int32(index)  # none failed yet
            for k, v in enumerate(payload):
                self.values[off + 2 + k] = jnp.asarray(v).astype(self.values[off + 2 + k].dtype)
            return
        self.values[off] = jnp.logical_or(before, failed)
        self.values[off + 1] = jnp.where(before, self.values[off + 1], np.int32(index))
        for k, v in enumerate(payload):
            old = self.values[off + 2 + k]
            self.values[off + 2 + k] = jnp.where(before, old, jnp.asarray(v).astype(old.dtype))

    def error(self) -> "Error":
        import fluxion.numpy as jnp
        table = self.table
        preds = [self.values[off] for off in self.offsets]
        codes = [self.values[off + 1] for off in self.offsets]
        payloads, group_start = [], []
        for off, avals in zip(self.offsets, table.group_avals):
            group_start.append(len(payloads))
            payloads.extend(self.values[off + 2:off + 2 + len(avals)])
        with _eagerly_if_concrete(preds + codes):
            code, found = None, None
            for pred, c in zip(preds, codes):
                if not isinstance(pred, core.Tracer) and not np.any(np.asarray(pred)):
                    continue  # a group that cannot have failed
                if code is None:
                    code, found = jnp.where(pred, c, np.int32(-1)), pred
                    continue
                take = jnp.logical_and(pred, jnp.logical_or(jnp.logical_not(found), c < code))
                code, found = jnp.where(take, c, code), jnp.logical_or(found, pred)
            if code is None:
                code = jnp.asarray(np.int32(-1))
        offsets = tuple(group_start[g] for g in table.site_group)
        return Error(code, payloads, tuple(table.sites), offsets)


def _initial_values(table: _Sites):
    import fluxion.numpy as jnp
    vals = []
    for avals in table.group_avals:
        vals += [jnp.asarray(False), jnp.asarray(np.int32(-1))]
        vals.extend(jnp.zeros(a.shape, a.dtype) for a in avals)
    return vals


def _eval(jaxpr, consts, args, state: _State, table: _Sites) -> list:
    return core.eval_jaxpr_with(jaxpr, consts, args,
                                lambda eqn, ins: _eval_eqn(eqn, ins, state, table))


def _eval_eqn(eqn, ins, state: _State, table: _Sites) -> list:
    import fluxion.numpy as jnp
    prim = eqn.primitive
    name = prim.name
    if prim is check_p:
        index = table.index(eqn, "user")
        if index is not None:
            state.record(index, jnp.logical_not(jnp.all(ins[0])), ins[1:])
        return []
    if prim is check_error_p:
        code, *payloads = ins
        for j, (s, off) in enumerate(zip(eqn.params["sites"], eqn.params["offsets"])):
            index = table.index(eqn, ("nested", j))
            state.record(index, code == j, payloads[off:off + len(s.payload_avals)])
        return []
    rule = _control_flow_rules.get(name)
    if rule is not None:
        return rule(eqn, ins, state, table)
    if name == "custom_linear_solve" and not any(isinstance(x, core.Tracer) for x in ins) \
            and _has_checks(eqn):
        # As JAX, eagerly the functions run one primitive at a time, so a `check` in them
        # raises when it fails (staged, it is refused as unfunctionalized).
        from fluxion._src.lax import control_flow
        out = control_flow._linear_solve_impl(*ins, **eqn.params)
    else:
        out = prim.bind(*ins, **eqn.params)
    outs = list(out) if prim.multiple_results else [out]
    key = id(eqn)
    index = table.index(eqn, "div")
    if index is not None:
        with _eagerly_if_concrete(ins[1:2]):
            state.record(index, jnp.any(jnp.asarray(ins[1]) == 0))
    index = table.index(eqn, "oob")
    if index is not None:
        indices = {"dynamic_slice": ins[1:], "dynamic_update_slice": ins[2:]}.get(name, ins[1:2])
        with _eagerly_if_concrete(indices):
            failed, payload = _oob(eqn, ins)
        state.record(index, failed, payload)
    index = table.index(eqn, "nan")
    if index is not None:
        bad = None
        for o in outs:
            if np.issubdtype(core.get_aval(o).dtype, np.inexact):
                b = jnp.any(jnp.isnan(o))
                bad = b if bad is None else jnp.logical_or(bad, b)
        if bad is not None:
            state.record(index, bad)
    return outs


def _has_checks(eqn) -> bool:
    return any(e.primitive is check_p or e.primitive is check_error_p or _has_checks(e)
               for sub in core.subjaxprs(eqn.params) for e in sub.eqns)


def _eagerly_if_concrete(values):
    """Compute a check at once when what it tests is known at trace time (it then emits
    nothing unless it fails)."""
    if any(isinstance(v, core.Tracer) for v in values):
        return contextlib.nullcontext()
    return core.set_current_trace(core.eval_trace)


def _oob(eqn, ins):
    """(any index out of bounds, [first bad index, its axis, that axis's size]): the first in
    the index array's row-major order, as JAX reports it."""
    import fluxion.numpy as jnp
    name = eqn.primitive.name
    shape = core.get_aval(ins[0]).shape
    if name == "gather" or name in _SCATTER_PRIMS:
        dnums, indices = eqn.params["dimension_numbers"], jnp.asarray(ins[1])
        if name == "gather":
            axes, sizes = dnums.start_index_map, eqn.params["slice_sizes"]
        else:
            axes = dnums.scatter_dims_to_operand_dims
            update_shape, window = core.get_aval(ins[2]).shape, iter(dnums.update_window_dims)
            sizes = [1 if d in dnums.inserted_window_dims or d in dnums.operand_batching_dims
                     else update_shape[next(window)] for d in range(len(shape))]
    else:
        starts = ins[1:] if name == "dynamic_slice" else ins[2:]
        sizes = eqn.params["slice_sizes"] if name == "dynamic_slice" else \
            core.get_aval(ins[1]).shape
        axes = tuple(range(len(shape)))
        indices = jnp.stack([jnp.asarray(i) for i in starts]) if starts else \
            jnp.zeros((0,), np.int32)
    if not axes or indices.size == 0:
        return jnp.asarray(False), [np.int32(0)] * 3
    upper = np.array([shape[d] - sizes[d] for d in axes], np.int64)
    upper = np.minimum(upper, np.iinfo(indices.dtype).max).astype(indices.dtype)
    bad = jnp.ravel(jnp.logical_or(indices < 0, indices > upper))
    first = jnp.argmax(bad)
    axis = jnp.asarray(np.array(axes, np.int32))[first % len(axes)]
    size = jnp.asarray(np.array(shape, np.int32))[axis]
    return jnp.any(bad), [jnp.ravel(indices)[first].astype(np.int32), axis, size]


def _jit_rule(eqn, ins, state, table):
    closed = eqn.params["jaxpr"]
    return _eval(closed.jaxpr, closed.consts, ins, state, table)


def _cond_rule(eqn, ins, state, table):
    from fluxion import lax
    index, *ops = ins
    branches = eqn.params["branches"]

    def branch_fun(closed):
        def run(state_vals, ops):
            st = _State(table, state_vals)
            outs = _eval(closed.jaxpr, closed.consts, ops, st, table)
            return st.values, outs
        return run

    new_vals, outs = lax.switch(index, [branch_fun(b) for b in branches], state.values, ops)
    state.values = list(new_vals)
    return list(outs)


def _while_rule(eqn, ins, state, table):
    """Checks in `cond_fun` count at every evaluation of it: once on the initial carry here,
    then, as in JAX, on each new carry at the end of the body (the loop's own predicate runs
    on a scratch state whose records are dropped)."""
    from fluxion import lax
    p = eqn.params
    cond_closed, body_closed = p["cond_jaxpr"], p["body_jaxpr"]
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cond_consts, body_consts, init = ins[:nc], ins[nc:nc + nb], ins[nc + nb:]
    from fluxion._src.lax import control_flow
    if cond_closed.jaxpr.debug_info == control_flow.BATCHED_PREDICATE:
        # the body runs on every member, finished or not: its checks would see values the
        # loop discards
        raise ValueError("Checkify does not support batched while-loops "
                         "(checkify-of-vmap-of-while). \nHint: if possible, move the vmap to "
                         "the outer level to get vmap-of-checkify-of-while.")
    _eval(cond_closed.jaxpr, cond_closed.consts, [*cond_consts, *init], state, table)

    def cond_fun(carry):
        _, vals = carry
        scratch = _State(table, _initial_values(table))
        out, = _eval(cond_closed.jaxpr, cond_closed.consts, [*cond_consts, *vals], scratch, table)
        return out

    def body_fun(carry):
        state_vals, vals = carry
        st = _State(table, state_vals)
        outs = _eval(body_closed.jaxpr, body_closed.consts, [*body_consts, *vals], st, table)
        with table.context(("after body", id(eqn))):
            _eval(cond_closed.jaxpr, cond_closed.consts, [*cond_consts, *outs], st, table)
        return st.values, outs

    new_vals, outs = lax.while_loop(cond_fun, body_fun, (state.values, list(init)))
    state.values = list(new_vals)
    return list(outs)


def _scan_rule(eqn, ins, state, table):
    from fluxion import lax
    p = eqn.params
    closed = p["jaxpr"]
    nconsts, ncarry = p["num_consts"], p["num_carry"]
    consts, init, xs = ins[:nconsts], ins[nconsts:nconsts + ncarry], ins[nconsts + ncarry:]

    def body(carry, x):
        state_vals, c = carry
        st = _State(table, state_vals)
        outs = _eval(closed.jaxpr, closed.consts, [*consts, *c, *x], st, table)
        return (st.values, outs[:ncarry]), outs[ncarry:]

    (new_vals, carry), ys = lax.scan(body, (state.values, list(init)), list(xs),
                                     length=p["length"], reverse=p["reverse"])
    state.values = list(new_vals)
    return [*carry, *ys]


def _checked_body(closed, nstate, table):
    """`closed` as a flat function of (error state, inputs) to (error state, outputs)."""
    def run(*xs):
        st = _State(table, xs[:nstate])
        outs = _eval(closed.jaxpr, closed.consts, list(xs[nstate:]), st, table)
        return [*st.values, *outs]
    return run


@contextlib.contextmanager
def _own_lines():
    """Run a user's rule with its own source lines (not the equation being interpreted)."""
    state = core._trace_state
    outer, state.source_info = state.source_info, None
    try:
        yield
    finally:
        state.source_info = outer


def _custom_jvp_rule(eqn, ins, state, table):
    """The function's body is checked; its JVP rule is not (as in JAX: differentiated, the
    error passes through the rule unchanged)."""
    from fluxion._src import custom_derivatives as cd
    p = eqn.params
    n, nconsts, jvp_fn = len(state.values), p["num_consts"], p["jvp_fn"]

    def jvp(primals, tangents):
        with _own_lines():
            out_p, out_t = jvp_fn(list(primals[n + nconsts:]), list(tangents[n + nconsts:]))
        return [*primals[:n], *out_p], [*tangents[:n], *out_t]

    outs = cd.bind_custom_jvp(_checked_body(p["call_jaxpr"], n, table), jvp,
                              [*state.values, *ins], p["symbolic_zeros"], "checkify")
    state.values = list(outs[:n])
    return list(outs[n:])


def _custom_vjp_rule(eqn, ins, state, table):
    """The function's body is checked; `fwd` and `bwd` are not (as in JAX)."""
    from fluxion._src import ad
    from fluxion._src import custom_derivatives as cd
    p = eqn.params
    n, nconsts, rules = len(state.values), p["num_consts"], p["rules"]
    state_avals = [core.get_aval(v) for v in state.values]

    def fwd(*xs, perturbed=None):
        own = None if perturbed is None else list(perturbed[n + nconsts:])
        with _own_lines():
            out, res, res_tree = rules.fwd(*xs[n + nconsts:], perturbed=own)
        return [*xs[:n], *out], list(res), res_tree

    def bwd(res_tree, res, cts):
        zeros = [ad.Zero(ad.tangent_aval(a)) for a in state_avals]
        const_zeros = [ad.Zero(ad.tangent_aval(core.get_aval(c))) for c in ins[:nconsts]]
        with _own_lines():
            cts_in = rules.bwd(res_tree, res, list(cts[n:]))
        return [*zeros, *const_zeros, *cts_in]

    outs = cd.bind_custom_vjp(_checked_body(p["call_jaxpr"], n, table), fwd, bwd,
                              [*state.values, *ins], rules.name)
    state.values = list(outs[:n])
    return list(outs[n:])


def _checkpoint_rule(eqn, ins, state, table):
    from fluxion._src import checkpoint, staging
    from fluxion._src.call_transforms import closure_convert
    p = dict(eqn.params)
    n = len(state.values)
    args = [*state.values, *ins]
    with core.set_current_trace(core.eval_trace):
        closed = staging.trace_to_jaxpr(_checked_body(p.pop("jaxpr"), n, table),
                                        [core.get_aval(a) for a in args], origin="checkify")
    closed, consts = closure_convert(closed)
    outs = checkpoint.checkpoint_p.bind(*consts, *args, jaxpr=closed, **p)
    state.values = list(outs[:n])
    return list(outs[n:])


_control_flow_rules: dict[str, Callable] = {
    "jit": _jit_rule, "cond": _cond_rule, "while": _while_rule, "scan": _scan_rule,
    "custom_jvp_call": _custom_jvp_rule, "custom_vjp_call": _custom_vjp_rule,
    "checkpoint": _checkpoint_rule,
}


# ---------------------------------------------------------------------------------------------
# checkify

def checkify(f: Callable, errors: frozenset = user_checks) -> Callable:
    """`f` made to return `(Error, out)`: the checks in `errors` (user_checks, nan_checks,
    div_checks, index_checks, float_checks, automatic_checks, all_checks) that fail while it
    runs are recorded in the Error instead of raising. Works under jit, vmap and grad, and
    through cond, scan and while_loop."""
    errors = frozenset(errors)
    unknown = [e for e in errors if not isinstance(e, ErrorKind)]
    if unknown:
        raise TypeError(f"checkify errors must be sets of checkify error kinds, got {unknown}")

    def checked(*args, **kwargs):
        from fluxion import tree_util
        from fluxion._src import staging
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        out_tree_box = []

        def flat_fun(*xs):
            a, kw = tree_util.tree_unflatten(in_tree, list(xs))
            out = f(*a, **kw)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_tree_box.append(out_tree)
            return out_leaves

        avals = [core.get_aval(x) for x in leaves]
        closed = staging.trace_to_jaxpr(flat_fun, avals, origin="checkify")
        table = _Sites(errors)
        table.scan(closed.jaxpr)
        state = _State(table, _initial_values(table))
        outs = _eval(closed.jaxpr, closed.consts, leaves, state, table)
        err = state.error()
        return err, tree_util.tree_unflatten(out_tree_box[0], outs)

    return checked
