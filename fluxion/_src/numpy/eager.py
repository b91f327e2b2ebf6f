"""Eager calls of jnp functions run as one cached executable, as JAX jits its jnp functions.

Outside any transformation, a function decorated with `@eager_compiled(...)` does not run its
primitives one by one (one executable each): the first call with a given signature (argument
types, static argument values, `config.trace_key`) traces the whole function and compiles it once; later calls
look the signature up and run that executable. Under a transformation (jit, grad, vmap, ...)
the function runs as written, so jaxprs stay flat.

Arrays and NumPy arrays are dynamic arguments, and so are Python scalars (weakly typed, as
under jit, so `x * 2` and `x * 3` share one executable); the arguments named static must be
hashable and are part of the signature. A call with any other kind of argument (a list of
scalars, an unhashable value) runs op by op, which is always correct.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from fluxion._src import config_flags, core, dispatch, nan_checks, placement, staging
from fluxion._src.array import Array
from fluxion._src.caches import compile_lock
from fluxion._src.traceback_util import strip_internal_frames
from fluxion._src.config import config
from fluxion._src.dispatch import compile_closed_jaxpr, to_device_buffer
from fluxion._src.numpy.util import check_python_int
from fluxion._src.tree_util import tree_flatten, tree_unflatten

# Signatures kept per function; the oldest is dropped past this (a loop over many shapes).
MAX_SIGNATURES_PER_FUNCTION = 64
# Executables compiled for eager calls of all functions together; past this every eager cache
# is emptied. Each XLA:CPU executable holds about 3-15 memory mappings of JIT code, and a
# process may have 65,530 (vm.max_map_count): past that XLA crashes while compiling. Several
# hundred functions at 64 signatures each could get there.
MAX_EAGER_EXECUTABLES = 512

_PYTHON_SCALARS = (bool, int, float, complex)
_NOT_CACHEABLE = object()


fast_caches: list = []  # every wrapper's fast-path cache (debug_nans empties them)
signature_caches: list = []  # every wrapper's signature -> executable cache
_compiled_since_flush = 0

# Programs that eager calls run on Arrays' buffers directly (`CompiledFunction.direct_parts`):
# (function, the Arrays' avals, config.trace_key) -> parts, one lookup on the hottest paths
# (the fronts; one to three positional Arrays, or one Array and static scalars, at the top of
# the wrapper). These calls skip the checks of the general path, so the cache is empty, and
# stays so, while a call must not run that way: under disable_jit, debug_nans or debug_infs,
# and once arrays may be placed on several devices.
_direct: dict = {}
_MAX_DIRECT = 4096
_direct_allowed = True


def _refresh_direct(*_) -> None:
    global _direct_allowed
    _direct_allowed = not (config.disable_jit or config.debug_nans or config.debug_infs
                           or dispatch.placing)
    if not _direct_allowed and _direct:
        _clear_direct()


def _clear_direct() -> None:
    _direct.clear()
    for cache in fast_caches:  # their hits would never refill `_direct` afterwards
        cache.clear()


def _direct_insert(key, parts) -> None:
    if _direct_allowed:
        if len(_direct) >= _MAX_DIRECT:
            _clear_direct()
        _direct[key] = parts


config._listeners.append(_refresh_direct)
placement.on_activate.append(_refresh_direct)
_refresh_direct()


def eager_compiled(static_argnames=()):
    """Decorator: eager calls of the function run as one executable per signature.

    `static_argnames` names the parameters that select what is computed (axes, dtypes,
    flags); they may also be passed positionally.
    """
    static_argnames = frozenset(static_argnames)

    def decorate(fun):
        params = list(inspect.signature(fun).parameters.values())
        static_positions = frozenset(i for i, p in enumerate(params) if p.name in static_argnames
                                     and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        # Calls with fewer positional arguments than this, all Arrays, and no keywords take the
        # fast path: their signature is just the avals.
        fast_arity = min(static_positions, default=len(params) + 1)
        cache: dict = {}
        signature_caches.append(cache)
        # Fast-path caches, one per `config.trace_key` (x64 and the other flags that change
        # tracing): keyed by the aval of a lone argument, or by the tuple of avals of several.
        fast_by_key = _FastCaches()
        fast_caches.append(fast_by_key)
        # Functions of one positional-only argument get a front of that signature (the unary
        # ufuncs); other calls with one or two positional Arrays and no keywords may run
        # directly at the top of the wrapper (see `_direct`).
        one_array = len(params) == 1 and params[0].kind is params[0].POSITIONAL_ONLY
        second_static = 1 in static_positions  # `sum(x, 0)` may run directly too
        trace_state, eval_trace = core._trace_state, core.eval_trace

        @functools.wraps(fun)
        def wrapper(*args, **kwargs):
            if trace_state.trace is eval_trace:
                nargs, direct = len(args), None
                if kwargs:  # static keywords (`sum(x, axis=0)`): one lookup, or none
                    nargs = -1
                    if len(args) == 1 and type(args[0]) is Array:
                        a, = args
                        key = _keyword_direct_key(fun, a.aval, kwargs)
                        if key is not None:
                            direct = _direct.get(key)
                            bufs = [a._buf]
                if nargs == 1:
                    a, = args
                    if type(a) is Array:
                        direct = _direct.get((fun, a.aval, config.trace_key))
                        bufs = [a._buf]
                elif nargs == 2:
                    a, b = args
                    if type(a) is Array:
                        if type(b) is Array:
                            direct = _direct.get((fun, a.aval, b.aval, config.trace_key))
                            bufs = [a._buf, b._buf]
                        elif second_static:  # `sum(x, 0)`
                            key = _static_second_key(fun, a.aval, b)
                            if key is not None:
                                direct = _direct.get(key)
                                bufs = [a._buf]
                elif nargs == 3:
                    a, b, c = args
                    if type(a) is Array and type(b) is Array and type(c) is Array:
                        direct = _direct.get((fun, a.aval, b.aval, c.aval, config.trace_key))
                        bufs = [a._buf, b._buf, c._buf]
                if direct is not None:
                    execute, handlers, out_aval = direct
                    try:
                        return Array(execute(bufs).consume_with_handlers(handlers)[0], out_aval)
                    except Exception:
                        pass  # the general path runs it again and explains the failure
            if trace_state.trace is not eval_trace or config.disable_jit:
                return fun(*args, **kwargs)
            try:
                fast_key = call = None
                nargs = len(args)
                if nargs <= fast_arity:
                    # Keys of one or two Arrays are built inline (the hottest calls); anything
                    # else (Python scalars, keywords, more arguments) goes to _mixed_key.
                    if kwargs:
                        fast_key = _mixed_key(args, kwargs, static_argnames)
                    elif nargs == 1 and type(args[0]) is Array:
                        fast_key = args[0].aval
                    elif nargs == 2 and type(args[0]) is Array and type(args[1]) is Array:
                        fast_key = (args[0].aval, args[1].aval)
                    else:
                        fast_key = _mixed_key(args, kwargs, static_argnames)
                    if fast_key is not None:
                        try:
                            call = fast_by_key[config.trace_key].get(fast_key)
                        except TypeError:  # an unhashable static argument
                            fast_key = None
                        if call is not None:
                            return call(args)
                # debug_nans/debug_infs: the program's outputs are checked (as JAX checks its
                # jitted jnp functions'); only a bad output re-runs the function op by op.
                checking = config.debug_nans or config.debug_infs
                signature, dynamic = _signature(args, kwargs, static_positions,
                                                static_argnames)
                if signature is _NOT_CACHEABLE:
                    return fun(*args, **kwargs)
                if config.no_execution:  # part of trace_key: no fast path ran
                    config_flags.check_execution_allowed(f"jit({fun.__name__})")
                entry = cache.get(signature)
                if entry is None:
                    with compile_lock:
                        entry = cache.get(signature)
                        if entry is None:
                            entry = _compile(fun, args, kwargs, static_positions,
                                             static_argnames)
                            _count_compiled()
                            _bounded_insert(cache, signature, entry)
                if checking:
                    out = entry(dynamic)
                    nan_checks.check_eager_outputs(fun.__name__, out,
                                                   lambda: fun(*args, **kwargs))
                    return out
                if fast_key is not None:
                    all_arrays = all(type(x) is Array for x in args)
                    _bounded_insert(fast_by_key[config.trace_key], fast_key,
                                    entry.array_call if all_arrays else entry)
                    # (fast_key is set: no argument up to here is static)
                    if all_arrays and entry.direct is not None:
                        if not kwargs and 0 < nargs <= 3:
                            _direct_insert((fun, *(x.aval for x in args), config.trace_key),
                                           entry.direct)
                        elif kwargs and nargs == 1:
                            key = _keyword_direct_key(fun, args[0].aval, kwargs)
                            if key is not None:
                                _direct_insert(key, entry.direct)
                elif (second_static and nargs == 2 and not kwargs and entry.direct is not None
                      and type(args[0]) is Array):
                    key = _static_second_key(fun, args[0].aval, args[1])
                    if key is not None:
                        _direct_insert(key, entry.direct)
                return entry(dynamic)
            except Exception as e:  # leaves with the user's line, not fluxion's frames
                strip_internal_frames(e)
                raise

        def clear_cache():
            cache.clear()
            fast_by_key.clear()
            for key in [k for k in _direct if k[0] is fun]:
                del _direct[key]

        if one_array:
            wrapper = _one_array_fast_path(wrapper, fun, trace_state, eval_trace)
        elif fast_arity > 2 and all(p.kind is p.POSITIONAL_ONLY or
                                    p.kind is p.POSITIONAL_OR_KEYWORD for p in params[:2]):
            wrapper = _two_array_fast_path(wrapper, fun, trace_state, eval_trace)
        wrapper.eager_cache = cache
        wrapper.clear_cache = clear_cache
        return wrapper
    return decorate



# Executables of `run_compiled`: (function, static part, config.trace_key, argument types) -> _Entry
_structured: dict = {}
signature_caches.append(_structured)


def run_compiled(fun, static, args: list):
    """`fun(static, *args)` outside any transformation, as one cached executable per
    (fun, static, argument types); None where it cannot run that way, and the caller then runs
    its general path (which also explains any error).

    This is the eager path of calls whose structure is not a plain signature: `x[idx]` and
    `x.at[idx].set(v)` pass the static part of the index as `static` (hashable) and its
    dynamic values in `args` (Arrays, Python scalars, NumPy arrays)."""
    if (core._trace_state.trace is not core.eval_trace or config.disable_jit
            or config.debug_nans or config.debug_infs or config.no_execution):
        return None
    key = [fun, static, config.trace_key]
    for x in args:
        k = _dynamic_key(x)
        if k is _NOT_CACHEABLE:
            return None
        key.append(k)
    key = tuple(key)
    try:
        entry = _structured.get(key)
    except TypeError:  # an unhashable static part (a mode given as a list)
        return None
    if entry is None:
        with compile_lock:
            entry = _structured.get(key)
            if entry is None:
                try:
                    entry = _compile(fun, (static, *args), {}, _FIRST, frozenset())
                except Exception:  # the general path raises its own, clearer error
                    return None
                _count_compiled()
                if len(_structured) >= _MAX_DIRECT:
                    _structured.clear()
                _structured[key] = entry
    return entry(args)


_FIRST = frozenset({0})


def compile_eagerly(namespace: dict, static_argnames: dict | None = None,
                    names=None, static_parameters=frozenset()) -> None:
    """Make the public functions in `namespace` (a module's dict), or those of `names`,
    `eager_compiled`, in place.

    `static_argnames` maps a function's name to the names of its static parameters;
    `static_parameters` names parameters static in every function that has them (flags,
    modes, sizes, dtypes). Classes, modules and functions already compiled are left as they
    are.
    """
    static_argnames = static_argnames or {}
    for name in list(namespace) if names is None else names:
        fn = namespace[name]
        if (name.startswith("_") or not callable(fn) or isinstance(fn, type)
                or hasattr(fn, "eager_cache")):
            continue
        static = set(static_argnames.get(name, ()))
        if static_parameters:
            static |= static_parameters & set(inspect.signature(fn).parameters)
        namespace[name] = eager_compiled(tuple(static))(fn)


def _one_array_fast_path(general, fun, trace_state, eval_trace):
    """A front for functions of one positional-only argument (the unary ufuncs): a lone
    Array whose program is cached runs it on its buffer, with no call in between (each
    Python call costs ~0.1 us of a ~5 us eager call). Everything else, and the explanation
    of a failed execution (a deleted buffer), goes to the general path. The exact
    one-argument signature is the cheapest call CPython makes (a `*args, **kwargs` front
    builds a tuple and a dict each call)."""

    @functools.wraps(general.__wrapped__)
    def one_array(x, /):
        if type(x) is Array and trace_state.trace is eval_trace:
            direct = _direct.get((fun, x.aval, config.trace_key))
            if direct is not None:
                execute, handlers, out_aval = direct
                try:
                    return Array(execute([x._buf]).consume_with_handlers(handlers)[0],
                                 out_aval)
                except Exception:
                    pass  # the general path runs it again and explains the failure
        try:
            return general(x)
        except Exception as e:  # leaves with the user's line, not fluxion's frames
            strip_internal_frames(e)
            raise
    return one_array


_UNSET = object()


def _two_array_fast_path(general, fun, trace_state, eval_trace):
    """`_one_array_fast_path` for functions whose first two parameters are positional (dot,
    where): two or three Arrays alone, whose program is cached, run it on their buffers.
    A front of two positional-only parameters with defaults is the cheapest CPython call that
    still takes any other call (it saves the argument tuple of a `*args` front)."""

    @functools.wraps(general.__wrapped__)
    def two_arrays(a=_UNSET, b=_UNSET, /, *rest, **kwargs):
        if (type(a) is Array and type(b) is Array and not kwargs
                and trace_state.trace is eval_trace):
            if not rest:
                direct = _direct.get((fun, a.aval, b.aval, config.trace_key))
                bufs = [a._buf, b._buf]
            elif len(rest) == 1 and type(rest[0]) is Array:  # where(c, x, y)
                c, = rest
                direct = _direct.get((fun, a.aval, b.aval, c.aval, config.trace_key))
                bufs = [a._buf, b._buf, c._buf]
            else:
                direct = None
            if direct is not None:
                execute, handlers, out_aval = direct
                try:
                    return Array(execute(bufs).consume_with_handlers(handlers)[0], out_aval)
                except Exception:
                    pass  # the general path runs it again and explains the failure
        try:
            if b is _UNSET:
                return general(**kwargs) if a is _UNSET else general(a, **kwargs)
            return general(a, b, *rest, **kwargs)
        except Exception as e:  # leaves with the user's line, not fluxion's frames
            strip_internal_frames(e)
            raise
    return two_arrays


class _FastCaches(dict):
    """One fast-path cache per trace key, made on first use."""

    def __missing__(self, trace_key):
        cache = self[trace_key] = {}
        return cache


class _MixedKey(tuple):
    """Fast-path key of positional Arrays and Python scalars (a scalar counts by its type:
    it is weakly typed, so its value does not select the executable) and static keyword
    arguments; its entry takes the positional arguments."""


def _keyword_direct_key(fun, aval, kwargs):
    """The `_direct` key of a call of one Array and static keyword arguments of scalar or
    None values (`sum(x, axis=0)`), or None for other values. Each value counts with its type:
    `axis=0.0` must not reuse the program of `axis=0` (it is an error)."""
    if len(kwargs) == 1:  # the usual call: one tuple, no loop
        for name, value in kwargs.items():
            t = type(value)
            return (fun, aval, config.trace_key, name, t, value) \
                if t in _DIRECT_KEYWORD_TYPES else None
    values = tuple(kwargs.values())
    types = tuple(map(type, values))
    for t in types:
        if t not in _DIRECT_KEYWORD_TYPES:
            return None
    return (fun, aval, config.trace_key, tuple(kwargs), values, types)


def _static_second_key(fun, aval, value):
    """The `_direct` key of a call of one Array and a static second argument of scalar or None
    value (`sum(x, 0)`), or None."""
    t = type(value)
    return (fun, aval, config.trace_key, 1, t, value) if t in _DIRECT_KEYWORD_TYPES else None


_DIRECT_KEYWORD_TYPES = frozenset({bool, int, float, str, type(None)})


def _typed(value):
    """A static argument as a cache key: with its type (and its elements', in a tuple), as
    `0`, `0.0` and `False` are equal keys but not equal arguments."""
    t = type(value)
    if t is tuple:
        return (tuple, tuple(map(_typed, value)))
    return (t, value)


def _mixed_key(args, kwargs, static_names):
    """The fast-path key of positional Arrays and Python scalars and static keyword
    arguments, or None."""
    key = []
    for x in args:
        t = type(x)
        if t is Array:
            key.append(x.aval)
        elif t in _PYTHON_SCALARS:
            key.append(t)
        else:
            return None
    for name, value in kwargs.items():
        if name not in static_names:
            return None
        key.append((name, _typed(value)))
    return _MixedKey(key)


def _count_compiled() -> None:
    """Count one more eager executable; past MAX_EAGER_EXECUTABLES empty every eager cache, so
    that the executables no other cache holds are freed."""
    global _compiled_since_flush
    _compiled_since_flush += 1
    if _compiled_since_flush > MAX_EAGER_EXECUTABLES:
        _compiled_since_flush = 1
        for cache in signature_caches:
            cache.clear()
        _clear_direct()


def _bounded_insert(cache: dict, key, value) -> None:
    if len(cache) >= MAX_SIGNATURES_PER_FUNCTION:
        del cache[next(iter(cache))]
    cache[key] = value


def _dynamic_key(x):
    """The signature entry of a dynamic argument, or _NOT_CACHEABLE."""
    t = type(x)
    if t is Array:
        return x.aval
    if t in _PYTHON_SCALARS:
        return t
    if t is np.ndarray or isinstance(x, np.generic):
        return ("np", x.shape, x.dtype)
    return _NOT_CACHEABLE


def _signature(args, kwargs, static_positions, static_names):
    """(signature, dynamic leaves) of a call, or (_NOT_CACHEABLE, None)."""
    key = [config.trace_key, len(args)]
    dynamic = []
    for i, x in enumerate(args):
        if i in static_positions:
            key.append(("static", _typed(x)))
            continue
        if type(x) in (list, tuple):
            entries = tuple(map(_dynamic_key, x))
            if _NOT_CACHEABLE in entries:
                return _NOT_CACHEABLE, None
            key.append((type(x), entries))
            dynamic.extend(x)
            continue
        k = _dynamic_key(x)
        if k is _NOT_CACHEABLE:
            if x is None:  # an optional argument left out
                key.append(None)
                continue
            return _NOT_CACHEABLE, None
        key.append(k)
        dynamic.append(x)
    for name, x in kwargs.items():
        if name in static_names or x is None:
            key.append((name, _typed(x)))
            continue
        k = _dynamic_key(x)
        if k is _NOT_CACHEABLE:
            return _NOT_CACHEABLE, None
        key.append((name, k))
        dynamic.append(x)
    key = tuple(key)
    try:
        hash(key)
    except TypeError:  # an unhashable static argument: op by op
        return _NOT_CACHEABLE, None
    return key, dynamic


class _Entry:
    """The compiled function of one signature; called with the dynamic arguments."""

    __slots__ = ("call", "array_call", "direct", "in_avals", "out_tree", "single")

    def __init__(self, compiled, out_tree):
        self.in_avals = compiled.in_avals
        self.out_tree = out_tree
        self.single = out_tree.num_leaves == 1 and out_tree == tree_flatten(0)[1]
        self.call = compiled.array_call(single_output=self.single)
        self.direct = compiled.direct_parts() if self.single else None
        if self.single:
            self.array_call = self.call  # for arguments that are all Arrays already
        else:
            call = self.call
            self.array_call = lambda args: tree_unflatten(out_tree, call(args))

    def __call__(self, dynamic):
        leaves = [x if type(x) is Array else _to_array(x, aval)
                  for x, aval in zip(dynamic, self.in_avals)]
        out = self.call(leaves)
        return out if self.single else tree_unflatten(self.out_tree, out)


_scalar_arrays: dict = {}  # (type, value, aval) -> Array: constants recur (x * 2, clip(x, 0, 1))


def _to_array(x, aval) -> Array:
    t = type(x)
    if t in _PYTHON_SCALARS and (x or t is not float):  # a float zero's key misses its sign
        key = (t, x, aval)
        cached = _scalar_arrays.get(key)
        if cached is None:
            check_python_int(x)
            cached = Array(to_device_buffer(x, aval), aval)
            if len(_scalar_arrays) >= 1024:
                _scalar_arrays.clear()
            _scalar_arrays[key] = cached
        return cached
    check_python_int(x)
    return Array(to_device_buffer(x, aval), aval)


def _compile(fun, args, kwargs, static_positions, static_names) -> _Entry:
    config_flags.check_tracing_allowed(fun)
    dyn_avals, rebuild = _abstract_call(args, kwargs, static_positions, static_names)
    out_tree_box = []

    def flat_fun(*leaves):
        call_args, call_kwargs = rebuild(leaves)
        out_leaves, out_tree = tree_flatten(fun(*call_args, **call_kwargs))
        out_tree_box.append(out_tree)
        return out_leaves

    name = getattr(fun, "__name__", "jnp_function")
    closed = staging.trace_to_jaxpr(flat_fun, dyn_avals, origin=f"jnp.{name}")
    return _Entry(compile_closed_jaxpr(closed, name=f"jnp_{name}"), out_tree_box[0])


def _abstract_call(args, kwargs, static_positions, static_names):
    """The avals of the dynamic arguments and a function putting tracers in their places."""
    avals, slots = [], []  # slots: ("arg", i) / ("seq", i, j) / ("kw", name)
    for i, x in enumerate(args):
        if i in static_positions or x is None:
            continue
        if type(x) in (list, tuple):
            for j, y in enumerate(x):
                avals.append(_aval_of(y))
                slots.append(("seq", i, j))
        else:
            avals.append(_aval_of(x))
            slots.append(("arg", i))
    for name, x in kwargs.items():
        if name in static_names or x is None:
            continue
        avals.append(_aval_of(x))
        slots.append(("kw", name))

    def rebuild(leaves):
        call_args = [list(x) if type(x) in (list, tuple) else x for x in args]
        call_kwargs = dict(kwargs)
        for slot, leaf in zip(slots, leaves):
            if slot[0] == "arg":
                call_args[slot[1]] = leaf
            elif slot[0] == "seq":
                call_args[slot[1]][slot[2]] = leaf
            else:
                call_kwargs[slot[1]] = leaf
        call_args = [type(orig)(new) if type(orig) in (list, tuple) else new
                     for orig, new in zip(args, call_args)]
        return call_args, call_kwargs
    return avals, rebuild


def _aval_of(x):
    if type(x) is Array:
        return x.aval
    return core.get_aval(x)  # a Python scalar is weakly typed, a NumPy value is not
