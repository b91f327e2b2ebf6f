"""`debug_key_reuse`: how typed-key consumption flows through traced functions.

Each typed key object carries its consumption: False, True, or a NumPy bool mask over its
elements (slicing ``keys[i]`` consumes element i of `keys`, as JAX's `slice` rule). A
higher-order primitive that stages a function (a `cond` branch, a loop body) traces it in a
`Scope`: keys the function closes over are consumed in the scope, not for good, and the
primitive's rule below decides what the whole call consumes (JAX's key reuse signatures,
jax/experimental/key_reuse/_core.py): a `cond` consumes what any branch consumes; a loop body
must not consume a key it closes over, and may consume a carried key only if it returns a
fresh one in its place. Transformations that run the function once (vmap, custom_jvp,
custom_vjp, checkpoint) pass consumption through to the caller's keys (`transparent`).

Nothing here runs unless the flag is set: callers check `config.debug_key_reuse` first.
"""
from __future__ import annotations

import functools
import threading
import weakref

import numpy as np

from fluxion._src import core, staging
from fluxion._src.errors import KeyReuseError
from fluxion._src.tree_util import tree_leaves

# PRNGKeyArray, registered by fluxion._src.random.keys (typed keys exist once it is imported).
KEY_TYPE: type | None = None


class _Scopes(threading.local):
    def __init__(self):
        self.stack: list[Scope] = []


_scopes = _Scopes()


def keys_by_leaf(tree) -> list:
    """(leaf index, key) for the typed keys among the pytree `tree` (a key is one leaf)."""
    if KEY_TYPE is None:
        return []
    leaves = tree_leaves(tree, is_leaf=lambda x: isinstance(x, KEY_TYPE))
    return [(i, x) for i, x in enumerate(leaves) if isinstance(x, KEY_TYPE)]


def _any(mask) -> bool:
    return bool(np.any(mask))


def _union(a, b):
    if a is True or b is True:
        return True
    if a is False:
        return b
    if b is False:
        return a
    out = np.logical_or(a, b)
    return True if out.all() else out


def _same_shape_or_whole(mask, key):
    """`mask` to set on `key`: itself if it fits the key's shape, else the whole key."""
    if isinstance(mask, bool) or np.shape(mask) == key.shape:
        return mask
    return _any(mask)


class Scope:
    """The keys consumed while a staged function is traced: its own arguments' keys (on
    the key objects themselves) and the keys it closes over (`closed`, here)."""

    def __init__(self):
        self.trace = None
        self.closed: dict[int, list] = {}  # id(key) -> [key, mask]
        self.in_keys: list = []  # (leaf index, key) of the function's arguments
        self.out_keys: list = []  # (leaf index, key) of its results

    def owns(self, key) -> bool:
        """Whether `key` was made in this scope, or in its trace (or one nested in it)."""
        if key._origin is self:
            return True
        base = key._base_array
        if not isinstance(base, core.Tracer):
            return False
        trace = base._trace
        while trace is not None:
            if trace is self.trace:
                return True
            trace = trace.parent
        return False

    # ---- the function's key signature once traced
    def sinks(self) -> dict:
        """Argument leaf index -> the mask of that key the function consumed."""
        out = {}
        for i, key in self.in_keys:
            if _any(key._consumed):
                out[i] = _union(out.get(i, False), key._consumed)
        return out

    def sources(self) -> set:
        """Result leaf indices holding a fresh, unconsumed key."""
        in_bases = {id(k._base_array) for _, k in self.in_keys}
        return {i for i, k in self.out_keys
                if id(k._base_array) not in in_bases and not _any(k._consumed)}

    def forwards(self) -> dict:
        """Result leaf index -> the argument leaf index it returns unchanged."""
        in_index = {id(k._base_array): i for i, k in self.in_keys}
        return {i: in_index[id(k._base_array)] for i, k in self.out_keys
                if id(k._base_array) in in_index}


def current_scope():
    """The innermost scope (None outside staged functions); typed keys record where they
    were made."""
    stack = _scopes.stack
    return stack[-1] if stack else None


def state(key):
    """The consumption of `key` seen from the innermost scope: a staged function sees only
    its own uses of a key it closes over (JAX analyses each jaxpr alone; the primitive's rule
    then checks the caller's key)."""
    viewed = _viewed(key)
    stack = _scopes.stack
    if stack and not stack[-1].owns(viewed):
        entry = stack[-1].closed.get(id(viewed))
        consumed = False if entry is None else entry[1]
    else:
        consumed = viewed._consumed
    return consumed if viewed is key else _any(consumed)


def _viewed(key):
    """The key that `key` views in a jaxpr (itself unless forwarded)."""
    while key._forward is not None:
        key = key._forward
    return key


def _mark(key, mask) -> None:
    stack = _scopes.stack
    if stack and not stack[-1].owns(key):
        entry = stack[-1].closed.setdefault(id(key), [key, False])
        entry[1] = _union(entry[1], mask)
    else:
        key._consumed = _union(key._consumed, mask)


def staged() -> bool:
    """Whether a jaxpr is being built (JAX reports reuse found by its jaxpr analysis
    as "In <equation>, argument i is already consumed.")."""
    trace = core.current_trace()
    while trace is not None:
        if isinstance(trace, staging.JaxprTrace):
            return True
        trace = trace.parent
    return False


# The equation JAX names for reuse by a random function (its samplers are jitted functions).
_EAGER_NAMES = {"split": "random_split", "bits": "random_bits", "jit": "jit-compiled function"}
_STAGED_NAMES = {"split": "random_split", "bits": "random_bits"}
_OWN_NAMES = frozenset({"cond", "scan", "while", "slice", "transpose", "remat2",
                        "custom_jvp_call", "custom_vjp_call", "jit-compiled function"})


class _Registry(threading.local):
    def __init__(self):
        # id(traced key data) -> the first key made of it
        self.by_data = weakref.WeakValueDictionary()


_registry = _Registry()


def note_key(key) -> None:
    """Remember the first key made of each traced key data (see `forward_same_data`)."""
    if isinstance(key._base_array, core.Tracer):
        _registry.by_data.setdefault(id(key._base_array), key)


def forward_same_data(key) -> None:
    """`key`, rebuilt from traced data another key holds (a pytree passing through jit or a
    cond unchanged), is that key in the jaxpr: consuming one consumes the other."""
    first = _registry.by_data.get(id(key._base_array))
    if first is not None and first is not key and first._base_array is key._base_array:
        forward(first, key)


def forward(parent, child) -> None:
    """`child` is `parent` seen through an op JAX forwards (a traced index, `take`,
    `reshape`): in a jaxpr, consuming the child consumes the whole parent; eagerly the child
    starts as consumed as the parent."""
    if staged():
        child._forward = parent
    else:
        child._consumed = _any(state(parent))


def consume(name: str, key, mask=True, index: int = 0) -> None:
    """KeyReuseError if any element of `key` under `mask` was consumed; else consume them."""
    if key._forward is not None:  # a view consumes the whole key it views
        key, mask = _viewed(key), True
    if _any(np.logical_and(state(key), mask)):
        if staged():
            where = name if name in _OWN_NAMES else _STAGED_NAMES.get(name, "jit")
            raise KeyReuseError(f"In {where}, argument {index} is already consumed.")
        where = name if name in _OWN_NAMES else _EAGER_NAMES.get(name, "jit-compiled function")
        raise KeyReuseError(f"Previously-consumed key passed to {where} at index {index}")
    _mark(key, mask)


def index_mask(shape: tuple, index):
    """The elements of a key array of `shape` that a static `index` selects (None if the
    index is not static: traced or advanced)."""
    parts = index if isinstance(index, tuple) else (index,)
    if not all(p is None or p is Ellipsis or isinstance(p, (int, np.integer, slice))
               for p in parts):
        return None
    if any(isinstance(p, slice) and not all(v is None or isinstance(v, (int, np.integer))
                                            for v in (p.start, p.stop, p.step)) for p in parts):
        return None
    mask = np.zeros(shape, dtype=bool)
    try:
        mask[parts] = True
    except IndexError:
        return None
    return mask


# ---------------------------------------------------------------------------------------------
# Staged functions (cond branches, loop bodies): traced in a Scope

def in_scope(fun, scope: Scope):
    """`fun`, traced in `scope`, recording the keys among its arguments and results."""
    @functools.wraps(fun)
    def scoped(*args, **kwargs):
        scope.trace = core.current_trace()
        scope.in_keys = keys_by_leaf((args, kwargs))
        _scopes.stack.append(scope)
        try:
            out = fun(*args, **kwargs)
        finally:
            _scopes.stack.pop()
        scope.out_keys = keys_by_leaf(out)
        return out
    return scoped


def _const_position(consts, key, offset: int) -> int:
    for i, c in enumerate(consts):
        if c is key._base_array:
            return offset + i
    return offset


def cond_rule(scopes, operands, consts) -> None:
    """A `cond`/`switch` consumes what any branch consumes (the index is argument 0)."""
    closed: dict[int, list] = {}
    for scope in scopes:
        for key, mask in scope.closed.values():
            entry = closed.setdefault(id(key), [key, False])
            entry[1] = _union(entry[1], mask)
    for key, mask in closed.values():
        consume("cond", key, _same_shape_or_whole(mask, key),
                _const_position(consts, key, 1))
    sinks: dict[int, object] = {}
    for scope in scopes:
        for i, mask in scope.sinks().items():
            sinks[i] = _union(sinks.get(i, False), mask)
    outer = dict(keys_by_leaf(operands))
    for i, mask in sinks.items():
        if i in outer:
            consume("cond", outer[i], _same_shape_or_whole(mask, outer[i]),
                    1 + len(consts) + i)


def _signature(scope: Scope, consts_sinks, offset: int) -> str:
    """JAX's repr of a loop body's key signature (its arguments: constants, then carry)."""
    items = [(0, "Sink", i) for i in consts_sinks]
    items += [(0, "Sink", offset + i) for i in scope.sinks()]
    items += [(1, "Source", i) for i in scope.sources()]
    items += [(2, "Forward", f"{offset + j}, {i}") for i, j in scope.forwards().items()]
    text = ", ".join(f"{kind}({i})" for _, kind, i in sorted(items, key=lambda t: t[:2]))
    return f"KeyReuseSignature({text},)" if len(items) == 1 else f"KeyReuseSignature({text})"


def _carry_in(scope: Scope, num_carry: int) -> dict:
    return {i: m for i, m in scope.sinks().items() if i < num_carry}


def scan_rule(scope: Scope, init, xs, num_carry: int) -> None:
    """A scan body runs repeatedly: it must not consume a key it closes over, nor a carried
    key it does not replace with a fresh one; the scan consumes the keys of `xs` it uses."""
    forwards = scope.forwards()
    carry_sinks = _carry_in(scope, num_carry)
    # JAX moves a carry the body returns unchanged to the constants.
    if scope.closed or any(forwards.get(i) == i for i in carry_sinks):
        raise KeyReuseError("scan body function leads to key reuse when repeatedly executed, "
                            "because key constants are repeatedly consumed:")
    if not set(carry_sinks) <= scope.sources():
        raise KeyReuseError("scan body function leads to key reuse when repeatedly executed, "
                            "because consumed inputs don't match sourced outputs:")
    _consume_outer(scope, (init, xs), "scan")


def while_rule(cond_scope: Scope, body_scope: Scope, init) -> None:
    """A while loop runs its cond and body repeatedly (the rules of `scan_rule`), and they
    must not both consume one carried key."""
    cond_sinks, body_sinks = cond_scope.sinks(), body_scope.sinks()
    sources = body_scope.sources()
    consts = range(len(cond_scope.closed))
    if cond_scope.closed or not set(cond_sinks) <= sources:
        raise KeyReuseError("while_loop cond function leads to key reuse when repeatedly "
                            "executed:   cond_signature="
                            + _signature(cond_scope, consts, len(cond_scope.closed)))
    consts = range(len(body_scope.closed))
    if body_scope.closed or not set(body_sinks) <= sources:
        raise KeyReuseError("while_loop body function leads to key reuse when repeatedly "
                            "executed:   body_signature="
                            + _signature(body_scope, consts, len(body_scope.closed)))
    if set(cond_sinks) & set(body_sinks):
        raise KeyReuseError("while_loop cond and body functions both use the same key:   "
                            "cond_signature=" + _signature(cond_scope, (), 0))
    _consume_outer(body_scope, init, "while")


def _consume_outer(scope: Scope, args, name: str) -> None:
    """The loop consumes the caller's keys its body consumed (a carried key consumed and
    replaced each step too), each key whole."""
    outer = dict(keys_by_leaf(args))
    for i in scope.sinks():
        if i in outer:
            consume(name, outer[i], True, i)


# ---------------------------------------------------------------------------------------------
# Transformations running the function once: consumption passes through

def transparent(fun, outer):
    """`fun`, called with arguments of the pytree structure of `outer` (the caller's
    (args, kwargs)): its argument keys start as consumed as the caller's, and the caller's
    keys are consumed as the function consumed them."""
    if not keys_by_leaf(outer):
        return fun

    @functools.wraps(fun)
    def passing(*args, **kwargs):
        inner = (args, kwargs)
        pass_in(outer, inner)
        out = fun(*args, **kwargs)
        pass_back(outer, inner)
        return out
    return passing


def pass_in(outer, inner) -> None:
    """The keys of `inner` (a pytree of `outer`'s structure) take the consumption of
    `outer`'s."""
    outer_keys = dict(keys_by_leaf(outer))
    for i, key in keys_by_leaf(inner):
        if i in outer_keys and key is not outer_keys[i]:
            key._consumed = _same_shape_or_whole(state(outer_keys[i]), key)


def pass_back(outer, inner) -> None:
    """`outer`'s keys are consumed as the keys of `inner` (of the same structure) were."""
    outer_keys = dict(keys_by_leaf(outer))
    for i, key in keys_by_leaf(inner):
        if i in outer_keys and key is not outer_keys[i] and _any(key._consumed):
            _mark(outer_keys[i], _same_shape_or_whole(key._consumed, outer_keys[i]))


class StagedCall:
    """A function staged as one equation (`checkpoint`'s remat2): the call consumes the
    caller's keys the function consumed, checked as that equation's arguments."""

    def __init__(self, outer):
        self.outer = outer
        self.inner = []

    def wrap(self, fun):
        @functools.wraps(fun)
        def recording(*args, **kwargs):
            self.inner.append((args, kwargs))
            return fun(*args, **kwargs)
        return recording

    def finish(self, name: str) -> None:
        outer_keys = dict(keys_by_leaf(self.outer))
        sinks: dict[int, object] = {}
        for inner in self.inner:
            for i, key in keys_by_leaf(inner):
                if _any(key._consumed):
                    sinks[i] = _union(sinks.get(i, False), key._consumed)
        for i, mask in sinks.items():
            if i in outer_keys:
                consume(name, outer_keys[i], _same_shape_or_whole(mask, outer_keys[i]), i)


def consume_all(name: str, args) -> None:
    """An equation JAX has no key rule for consumes every key passed to it."""
    for i, key in keys_by_leaf(args):
        consume(name, key, True, i)
