"""Pytrees: nested containers of leaves, flattened and rebuilt with optree (namespace 'fluxion').

As in JAX, None is an empty subtree, dicts flatten in sorted key order, and tuples, lists, dicts,
namedtuples, OrderedDicts (insertion order) and defaultdicts are containers. Flattening and
unflattening run in optree's C++; key paths, structure errors and registration live here.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import operator
import textwrap
from typing import Any, Callable, Hashable, Iterable

import warnings

import optree
from optree import PyTreeKind

NAMESPACE = "fluxion"
PyTreeDef = optree.PyTreeSpec
KeyEntry = Hashable
KeyPath = tuple[KeyEntry, ...]

_MISSING = object()


# ---------------------------------------------------------------------------------------------
# Flattening and unflattening (direct optree calls: jit flattens its arguments on every call)

def tree_flatten(tree, is_leaf: Callable[[Any], bool] | None = None):
    """Flatten a pytree into (leaves, treedef)."""
    leaves, treedef = optree.tree_flatten(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)
    return leaves, sorted_dicts(treedef)


def tree_flatten_unordered(tree, is_leaf: Callable[[Any], bool] | None = None):
    """`tree_flatten` whose treedef may rebuild dicts in their insertion order: for the hot
    paths that only compare treedefs (dispatch cache keys), never unflatten them."""
    return optree.tree_flatten(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


# Treedef -> the same treedef rebuilding dicts in sorted key order. Equal treedefs differ at
# most in that order, so one entry serves them all.
_SORTED_DICTS: dict = {}
_MAX_SORTED_DICTS = 4096


def sorted_dicts(treedef: PyTreeDef) -> PyTreeDef:
    """`treedef` with every dict and defaultdict rebuilt in sorted key order, as JAX's
    unflatten builds them (optree keeps the flattened dict's insertion order)."""
    try:
        return _SORTED_DICTS[treedef]
    except KeyError:
        pass
    except TypeError:  # unhashable node metadata
        return treedef.transform(f_node=_sorted_dict_node)
    ordered = treedef.transform(f_node=_sorted_dict_node)
    if len(_SORTED_DICTS) >= _MAX_SORTED_DICTS:
        _SORTED_DICTS.clear()
    _SORTED_DICTS[treedef] = ordered
    return ordered


def _sorted_dict_node(node: PyTreeDef) -> PyTreeDef:
    kind = node.kind
    if kind is not PyTreeKind.DICT and kind is not PyTreeKind.DEFAULTDICT:
        return node
    keys = node.entries()
    try:
        keys = sorted(keys)
    except TypeError:  # keys of mixed types: optree's order stands
        return node
    leaf = optree.treespec_leaf(none_is_leaf=False, namespace=NAMESPACE)
    children = dict.fromkeys(keys, leaf)
    if kind is PyTreeKind.DICT:
        return optree.treespec_dict(children, none_is_leaf=False, namespace=NAMESPACE)
    factory = node.unflatten([0] * node.num_children).default_factory
    return optree.treespec_defaultdict(factory, children, none_is_leaf=False, namespace=NAMESPACE)


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable):
    """Rebuild a pytree from a treedef and an iterable of leaves."""
    return treedef.unflatten(leaves)


def tree_leaves(tree, is_leaf: Callable[[Any], bool] | None = None) -> list:
    """The leaves of a pytree, in flattening order."""
    return optree.tree_leaves(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def node_children(x):
    """The immediate children of a pytree node, or None for a leaf (None counts as a leaf)."""
    children, spec = optree.tree_flatten(x, is_leaf=lambda y: y is not x, none_is_leaf=True,
                                        namespace=NAMESPACE)
    return None if spec.is_leaf() else children


def broadcast_prefix(prefix, tree, is_prefix_leaf: Callable[[Any], bool],
                     mismatch: Callable[[Any, Any], Exception],
                     same_node_types: bool = True) -> list:
    """One entry of `prefix` per leaf of `tree`, where `prefix` is a pytree prefix of `tree`
    whose leaves satisfy `is_prefix_leaf` (in_axes, shardings, devices, ...).

    Where the structures disagree, raises `mismatch(p, t)` for the subtrees `p` of `prefix`
    and `t` of `tree`. Nodes must have the same type unless `same_node_types` is False (then
    a list may stand for a tuple); dicts must have the same keys.
    """
    out: list = []

    def walk(p, t):
        if is_prefix_leaf(p):
            out.extend([p] * len(tree_flatten(t)[0]))
            return
        p_children, t_children = node_children(p), node_children(t)
        if (p_children is None or t_children is None or len(p_children) != len(t_children)
                or same_node_types and type(p) is not type(t)
                or isinstance(p, dict) and (not isinstance(t, dict) or sorted(p) != sorted(t))):
            raise mismatch(p, t)
        for pc, tc in zip(p_children, t_children):
            walk(pc, tc)

    walk(prefix, tree)
    return out


def tree_structure(tree, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The treedef of a pytree."""
    return sorted_dicts(optree.tree_structure(tree, is_leaf, none_is_leaf=False,
                                              namespace=NAMESPACE))


# ---------------------------------------------------------------------------------------------
# Treedefs

def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The treedef of a tuple whose children have the given treedefs."""
    return optree.treespec_tuple(list(treedefs), none_is_leaf=False, namespace=NAMESPACE)


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The treedefs of the root's immediate children."""
    return treedef.children()


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether the treedef is a single node (a leaf, or an empty container such as None)."""
    return treedef.num_nodes == 1


def all_leaves(iterable: Iterable, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every element of `iterable` is a leaf."""
    if is_leaf is None:
        return optree.all_leaves(iterable, none_is_leaf=False, namespace=NAMESPACE)
    items = list(iterable)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(item is leaf for item, leaf in zip(items, leaves))


def is_tree_node(typ: type) -> bool:
    """Whether instances of `typ` are pytree containers (built in, namedtuple, or registered)."""
    return optree.register_pytree_node.get(typ, namespace=NAMESPACE) is not None


# ---------------------------------------------------------------------------------------------
# Maps and reductions

def tree_map(f: Callable, tree, *rest, is_leaf: Callable[[Any], bool] | None = None):
    """Apply `f` to corresponding leaves of `tree` and `rest`, keeping `tree`'s structure.

    Each tree in `rest` must have `tree`'s structure, or have it as a prefix (its subtrees at
    `tree`'s leaves are then passed to `f` whole).
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return treedef.unflatten(map(f, leaves))
    stop = _leaf_test(is_leaf, False)
    columns = [_subtrees_at_leaves(treedef, tree, other, stop, "tree_map tree") for other in rest]
    return treedef.unflatten(map(f, leaves, *columns))


def tree_reduce(function: Callable, tree, initializer: Any = _MISSING,
                is_leaf: Callable[[Any], bool] | None = None):
    """Fold `function` over the leaves, left to right (`functools.reduce`)."""
    if initializer is _MISSING:
        return functools.reduce(function, tree_leaves(tree, is_leaf))
    return functools.reduce(function, tree_leaves(tree, is_leaf), initializer)


def tree_reduce_associative(operation: Callable, tree, *, identity: Any = _MISSING,
                            is_leaf: Callable[[Any], bool] | None = None):
    """Reduce the leaves with an associative `operation`, pairing them as a balanced tree."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _MISSING:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    return _balanced_reduce(operation, leaves)


def _balanced_reduce(operation: Callable, items: list):
    if len(items) == 1:
        return items[0]
    half = len(items) // 2
    return operation(_balanced_reduce(operation, items[:half]),
                     _balanced_reduce(operation, items[half:]))


def tree_all(tree, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every leaf is truthy."""
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose):
    """Turn an outer-structure tree of inner-structure trees into an inner tree of outer trees.

    With `inner_treedef=None` the inner structure is that of the first outer leaf's subtree.
    """
    flat, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    inner_size, outer_size = inner_treedef.num_leaves, outer_treedef.num_leaves
    if treedef.num_leaves != inner_size * outer_size:
        raise TypeError(f"Mismatch\n{treedef}\n != \n{outer_treedef.compose(inner_treedef)}")
    rows = [flat[i * inner_size:(i + 1) * inner_size] for i in range(outer_size)]
    return inner_treedef.unflatten(outer_treedef.unflatten(column) for column in zip(*rows))


def tree_broadcast(prefix_tree, full_tree, is_leaf: Callable[[Any], bool] | None = None):
    """`full_tree`'s structure with each leaf taken from the `prefix_tree` leaf above it."""
    prefix_leaves, prefix_treedef = tree_flatten(prefix_tree, is_leaf)
    subtrees = _subtrees_at_leaves(prefix_treedef, prefix_tree, full_tree,
                                   _leaf_test(is_leaf, False), "broadcast_prefix prefix_tree")
    broadcast = [leaf for leaf, subtree in zip(prefix_leaves, subtrees)
                 for _ in range(tree_structure(subtree).num_leaves)]
    return tree_structure(full_tree).unflatten(broadcast)


def _subtrees_at_leaves(treedef: PyTreeDef, tree, other, stop, what: str) -> list:
    """The subtrees of `other` at the leaves of `tree` (whose treedef is given), or JAX's error.

    `stop(key_path, node)` is the is_leaf test that `tree` was flattened with, or None.
    """
    try:
        return treedef.flatten_up_to(other)
    except ValueError:
        _raise_structure_error(tree, other, stop, what)
        raise


# ---------------------------------------------------------------------------------------------
# Key paths

@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """The key of an element of a tuple or list."""
    idx: int

    def __post_init__(self):
        operator.index(self.idx)

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class DictKey:
    """The key of a value of a dict, OrderedDict or defaultdict."""
    key: Hashable

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """The key of an attribute: a namedtuple field or a registered dataclass's data field."""
    name: str

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise TypeError(f"GetAttrKey name must be a str, got {self.name!r}")

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    """The key of a child of a custom node registered without keys: its flattened position."""
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


def _simple_key_str(key) -> str:
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, GetAttrKey):
        return key.name
    if isinstance(key, (DictKey, FlattenedIndexKey)):
        return str(key.key)
    return str(key)


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: `['a'][0].x` by default, `a/0/x` with `simple=True, separator='/'`."""
    return separator.join(map(_simple_key_str if simple else str, keys))


# Types registered with a key-aware flatten: type -> (node -> [(key, child), ...]).
_key_flatteners: dict[type, Callable[[Any], list]] = {}

# Per type, how to list a node's (key, child) pairs, or None for leaf types; filled on first use
# (registering a type through this module drops its entry).
_keyed_flatten_by_type: dict[type, Callable[[Any], list] | None] = {}


def _keyed_children(node) -> list | None:
    """[(key, child), ...] for a container, None for a leaf."""
    node_type = type(node)
    try:
        flatten = _keyed_flatten_by_type[node_type]
    except KeyError:
        flatten = _keyed_flatten_by_type[node_type] = _keyed_flatten_for(node_type)
    return None if flatten is None else flatten(node)


def _keyed_flatten_for(node_type: type) -> Callable[[Any], list] | None:
    if node_type in _key_flatteners:
        return _key_flatteners[node_type]
    entry = optree.register_pytree_node.get(node_type, namespace=NAMESPACE)
    if entry is None:
        return None
    kind = entry.kind
    if kind in (PyTreeKind.TUPLE, PyTreeKind.LIST, PyTreeKind.DEQUE):
        return _sequence_children
    if kind in (PyTreeKind.DICT, PyTreeKind.DEFAULTDICT):
        return _sorted_mapping_children
    if kind == PyTreeKind.ORDEREDDICT:
        return lambda node: [(DictKey(key), value) for key, value in node.items()]
    if kind == PyTreeKind.NONE:
        return lambda node: []
    if kind in (PyTreeKind.NAMEDTUPLE, PyTreeKind.STRUCTSEQUENCE):
        fields = (node_type._fields if kind == PyTreeKind.NAMEDTUPLE
                  else optree.structseq_fields(node_type))
        keys = tuple(map(GetAttrKey, fields))
        return lambda node: list(zip(keys, node))
    return _flat_index_children


def _sequence_children(node) -> list:
    return [(SequenceKey(i), child) for i, child in enumerate(node)]


def _sorted_mapping_children(node) -> list:
    try:
        keys = sorted(node)
    except TypeError:  # optree orders keys of mixed types its own way
        keys = optree.tree_flatten_one_level(node, none_is_leaf=False, namespace=NAMESPACE).entries
    return [(DictKey(key), node[key]) for key in keys]


def _flat_index_children(node) -> list:
    children = optree.tree_flatten_one_level(node, none_is_leaf=False, namespace=NAMESPACE).children
    return [(FlattenedIndexKey(i), child) for i, child in enumerate(children)]


def _leaf_test(is_leaf, is_leaf_takes_path: bool) -> Callable[[KeyPath, Any], bool] | None:
    """`is_leaf` as a function of (key path, node)."""
    if is_leaf is None or is_leaf_takes_path:
        return is_leaf
    return lambda _, node: is_leaf(node)


def _collect_path_leaves(node, path: KeyPath, stop, out: list, stops: list) -> None:
    if stop is not None:
        stopped = bool(stop(path, node))
        stops.append(stopped)
        if stopped:
            out.append((path, node))
            return
    children = _keyed_children(node)
    if children is None:
        out.append((path, node))
        return
    for key, child in children:
        _collect_path_leaves(child, (*path, key), stop, out, stops)


def tree_flatten_with_path(tree, is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False):
    """Flatten into ([(key path, leaf), ...], treedef).

    `is_leaf(node)`, or `is_leaf(key_path, node)` with `is_leaf_takes_path`, stops the descent.
    """
    stop = _leaf_test(is_leaf, is_leaf_takes_path)
    path_leaves, stops = [], []
    _collect_path_leaves(tree, (), stop, path_leaves, stops)
    if stop is None:
        return path_leaves, tree_structure(tree)
    # optree asks is_leaf about the same nodes in the same order; replaying the answers keeps the
    # treedef consistent with the paths and calls the user's function once per node, as JAX does.
    answers = iter(stops)
    return path_leaves, tree_structure(tree, lambda _: next(answers))


def tree_leaves_with_path(tree, is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False) -> list:
    """[(key path, leaf), ...] in flattening order."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f: Callable, tree, *rest, is_leaf: Callable[..., bool] | None = None,
                       is_leaf_takes_path: bool = False):
    """Like `tree_map`, but `f` also receives each leaf's key path as its first argument."""
    path_leaves, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    paths = [path for path, _ in path_leaves]
    leaves = [leaf for _, leaf in path_leaves]
    stop = _leaf_test(is_leaf, is_leaf_takes_path)
    columns = [_subtrees_at_leaves(treedef, tree, other, stop, "tree_map_with_path tree")
               for other in rest]
    return treedef.unflatten(map(f, paths, leaves, *columns))


def flatten_one_level(tree) -> tuple[Iterable, Hashable]:
    """(children, aux data) of a container node; ValueError for a leaf."""
    entry = optree.register_pytree_node.get(type(tree), namespace=NAMESPACE)
    if entry is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    children, metadata, entries, _ = optree.tree_flatten_one_level(tree, none_is_leaf=False,
                                                                   namespace=NAMESPACE)
    kind = entry.kind
    if kind == PyTreeKind.NONE:
        return (), None
    if kind == PyTreeKind.TUPLE:
        return tuple(children), None
    if kind == PyTreeKind.LIST:
        return children, None
    if kind == PyTreeKind.DICT:
        return tuple(children), tuple(entries)
    if kind == PyTreeKind.ORDEREDDICT:
        return children, tuple(entries)
    if kind == PyTreeKind.DEFAULTDICT:
        return children, (tree.default_factory, tuple(entries))
    return children, metadata


def registered_unflatten(node_type: type) -> Callable | None:
    """The `unflatten_func(aux, children)` of a type registered with `register_pytree_node`
    (or a dataclass / class registration), or None for other types."""
    entry = optree.register_pytree_node.get(node_type, namespace=NAMESPACE)
    if entry is None or entry.kind != PyTreeKind.CUSTOM:
        return None
    return entry.unflatten_func


def flatten_one_level_with_keys(tree) -> tuple[list, Hashable]:
    """([(key, child), ...], aux data) of a container node; ValueError for a leaf."""
    _, aux = flatten_one_level(tree)
    return _keyed_children(tree), aux


# ---------------------------------------------------------------------------------------------
# Structure errors, worded as JAX words them

def _raise_structure_error(prefix, full, stop, what: str) -> None:
    """Raise the first way (in flattening order) in which `full` does not extend `prefix`."""
    error = _first_structure_error(prefix, full, stop, ())
    if error is not None:
        raise error(what) from None


def structure_error(prefix, full, name: str, is_prefix_leaf=None) -> ValueError | None:
    """JAX's "pytree structure error: ..." for the first place (in flattening order) where
    `full` does not extend `prefix`, the prefix called `name` in it; None where it does.
    Subtrees of `prefix` satisfying `is_prefix_leaf` count as leaves."""
    stop = None if is_prefix_leaf is None else (lambda _, p: is_prefix_leaf(p))
    error = _first_structure_error(prefix, full, stop, ())
    return None if error is None else error(name)


def _first_structure_error(prefix, full, stop, path: KeyPath) -> Callable[[str], ValueError] | None:
    """A function of the prefix tree's name giving the ValueError, or None if `full` fits."""
    if stop is not None and stop(path, prefix):
        return None
    prefix_children = _keyed_children(prefix)
    if prefix_children is None:
        return None  # a leaf is a prefix of any subtree
    if type(prefix) is not type(full):
        return functools.partial(_different_types_error, path, prefix, full)
    full_children = _keyed_children(full)
    if isinstance(prefix, (list, tuple)):
        if len(prefix) != len(full):
            return functools.partial(_different_lengths_error, path, prefix, full)
    elif len(prefix_children) != len(full_children):
        return functools.partial(_different_children_error, path, prefix, prefix_children,
                                 full_children)
    prefix_meta, full_meta = flatten_one_level(prefix)[1], flatten_one_level(full)[1]
    if prefix_meta != full_meta:
        return functools.partial(_different_metadata_error, path, prefix, prefix_meta, full_meta)
    for (key, prefix_child), (_, full_child) in zip(prefix_children, full_children):
        error = _first_structure_error(prefix_child, full_child, stop, (*path, key))
        if error is not None:
            return error
    return None


def _different_types_error(path, prefix, full, name: str) -> ValueError:
    return ValueError(
        "pytree structure error: different types at key path\n"
        f"    {name}{keystr(path)}\n"
        f"At that key path, the prefix pytree {name} has a subtree of type\n"
        f"    {type(prefix)}\n"
        "but at the same key path the full pytree has a subtree of different type\n"
        f"    {type(full)}.")


def _different_lengths_error(path, prefix, full, name: str) -> ValueError:
    type_name = type(prefix).__name__
    return ValueError(
        f"pytree structure error: different lengths of {type_name} at key path\n"
        f"    {name}{keystr(path)}\n"
        f"At that key path, the prefix pytree {name} has a subtree of type {type_name} of length "
        f"{len(prefix)}, but the full pytree has a subtree of the same type but of length "
        f"{len(full)}.")


def _different_children_error(path, prefix, prefix_children, full_children, name: str):
    prefix_keys = [key for key, _ in prefix_children]
    full_keys = [key for key, _ in full_children]
    only_one_side = ([k for k in prefix_keys if k not in full_keys]
                     + [k for k in full_keys if k not in prefix_keys])
    return ValueError(
        "pytree structure error: different numbers of pytree children at key path\n"
        f"    {name}{keystr(path)}\n"
        f"At that key path, the prefix pytree {name} has a subtree of type\n"
        f"    {type(prefix)}\n"
        f"with {len(prefix_keys)} child keys\n"
        f"    {keystr(prefix_keys, simple=True, separator=' ')}\n"
        "but at the same key path the full pytree has a subtree of the same type but with "
        f"{len(full_keys)} child keys\n"
        f"    {keystr(full_keys, simple=True, separator=' ')}\n"
        "so the symmetric difference on key sets is\n"
        f"    {keystr(only_one_side, simple=True, separator=' ')}")


def _different_metadata_error(path, prefix, prefix_meta, full_meta, name: str) -> ValueError:
    prefix_text, full_text = str(prefix_meta), str(full_meta)
    diff = "\n".join(difflib.ndiff(prefix_text.splitlines(), full_text.splitlines()))
    return ValueError(
        "pytree structure error: different pytree metadata at key path\n"
        f"    {name}{keystr(path)}\n"
        f"At that key path, the prefix pytree {name} has a subtree of type\n"
        f"    {type(prefix)}\n"
        "with metadata\n"
        f"    {prefix_text}\n"
        "but at the same key path the full pytree has a subtree of the same type but with "
        "metadata\n"
        f"    {full_text}\n"
        "so the diff in the metadata at these pytree nodes is\n"
        f"{textwrap.indent(diff, '    ')}")


# ---------------------------------------------------------------------------------------------
# Registering container types

def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Make `nodetype` a container.

    `flatten_func(x) -> (children, aux)`, `unflatten_func(aux, children) -> x`; aux data must be
    hashable and comparable (treedefs compare it). `flatten_with_keys_func(x) ->
    ([(key, child), ...], aux)` gives key paths; without it children are keyed by
    `FlattenedIndexKey(i)`.
    """
    with warnings.catch_warnings():
        # optree warns that a namedtuple subclass overrides the built-in namedtuple handling;
        # overriding it is the point of registering one (JAX allows it silently).
        warnings.filterwarnings("ignore", message=r"PyTree type .* is a subclass of "
                                r"`collections.namedtuple`")
        optree.register_pytree_node(nodetype, flatten_func, unflatten_func, namespace=NAMESPACE)
    _keyed_flatten_by_type.pop(nodetype, None)
    if flatten_with_keys_func is not None:
        _key_flatteners[nodetype] = lambda node: list(flatten_with_keys_func(node)[0])


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable,
                              unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
    """Make `nodetype` a container whose children have keys.

    `flatten_with_keys(x) -> ([(key, child), ...], aux)`; `flatten_func`, if given, must return
    the same children and aux without the keys (it is used when no paths are needed).
    """
    if flatten_func is None:
        flatten_func = _dropping_keys(flatten_with_keys)
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def _dropping_keys(flatten_with_keys: Callable) -> Callable:
    def flatten(node):
        keyed_children, aux = flatten_with_keys(node)
        return [child for _, child in keyed_children], aux
    return flatten


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: containers flattened by `x.tree_flatten() -> (children, aux)` and rebuilt
    by the classmethod `cls.tree_unflatten(aux, children)`."""
    register_pytree_node(cls, operator.methodcaller("tree_flatten"), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator: like `register_pytree_node_class`, with `x.tree_flatten_with_keys()`."""
    flatten_func = operator.methodcaller("tree_flatten") if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(cls, operator.methodcaller("tree_flatten_with_keys"),
                              cls.tree_unflatten, flatten_func)
    return cls


def register_static(cls: type) -> type:
    """Class decorator: instances are containers with no children, kept whole in the treedef.

    They must be hashable; `jit` then treats them as static.
    """
    register_pytree_with_keys(cls, lambda node: ((), node), lambda node, _: node)
    return cls


def register_dataclass(nodetype: type, data_fields=None, meta_fields=None, drop_fields=()):
    """Make a dataclass-like type a container (usable as a class decorator).

    `data_fields` are children (keyed `GetAttrKey(name)`), `meta_fields` are static aux data;
    rebuilding calls `nodetype(**fields)`. For a dataclass both may be omitted: fields marked
    `field(metadata=dict(static=True))` are meta fields, the others (but `drop_fields`) data.
    """
    if data_fields is None or meta_fields is None:
        data_fields, meta_fields = _infer_dataclass_fields(nodetype, data_fields, meta_fields,
                                                           drop_fields)
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    _check_dataclass_fields(nodetype, data_fields, meta_fields, drop_fields)
    get_data, get_meta = _attribute_tuple(data_fields), _attribute_tuple(meta_fields)
    data_keys = tuple(map(GetAttrKey, data_fields))

    def flatten(node):
        return get_data(node), get_meta(node)

    def flatten_with_keys(node):
        return list(zip(data_keys, get_data(node))), get_meta(node)

    def unflatten(meta, data):
        return nodetype(**dict(zip(meta_fields, meta)), **dict(zip(data_fields, data)))

    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


def _infer_dataclass_fields(nodetype, data_fields, meta_fields, drop_fields):
    if (data_fields is None) != (meta_fields is None):
        raise TypeError("register_dataclass: data_fields and meta_fields must both be specified "
                        f"when either is specified. Got {data_fields=} {meta_fields=}.")
    if not dataclasses.is_dataclass(nodetype):
        raise TypeError("register_dataclass: data_fields and meta_fields are required when "
                        f"nodetype is not a dataclass. Got {nodetype=}.")
    fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
    return ([f.name for f in fields if not f.metadata.get("static", False)],
            [f.name for f in fields if f.metadata.get("static", False)])


def _check_dataclass_fields(nodetype, data_fields, meta_fields, drop_fields) -> None:
    if dataclasses.is_dataclass(nodetype):
        init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        named = {*data_fields, *meta_fields}
        if named != init_fields:
            message = ("data_fields and meta_fields must include all dataclass fields with "
                       "``init=True`` and only them.")
            if missing := init_fields - named:
                message += (f" Missing fields: {missing}. Add them to drop_fields to suppress "
                            "this error.")
            if unexpected := named - init_fields:
                message += f" Unexpected fields: {unexpected}."
            raise ValueError(message)
    if overlap := set(data_fields) & set(meta_fields):
        raise ValueError(f"data_fields and meta_fields must not overlap. Overlapping fields: "
                         f"{overlap}.")


def _attribute_tuple(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    """A fast `node -> tuple(getattr(node, name) for name in names)`."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        get = operator.attrgetter(names[0])
        return lambda node: (get(node),)
    return lambda node: ()


# ---------------------------------------------------------------------------------------------
# Partial

class _OpaquePartial:
    """Calls, compares and hashes as the functools.partial it holds (which Partial must not merge
    into itself: only Partial's own arguments are children)."""

    __slots__ = ("partial",)

    def __init__(self, partial: functools.partial):
        self.partial = partial

    def __call__(self, *args, **kwargs):
        return self.partial(*args, **kwargs)

    def __eq__(self, other):
        if isinstance(other, _OpaquePartial):
            return self.partial == other.partial
        return self.partial == other

    def __hash__(self):
        return hash(self.partial)

    def __repr__(self):
        return f"_OpaquePartial({self.partial!r})"

    func = property(lambda self: self.partial.func)
    args = property(lambda self: self.partial.args)
    keywords = property(lambda self: self.partial.keywords)


class Partial(functools.partial):
    """A functools.partial that is a pytree: its bound args and kwargs are children, its function
    is aux data. It can be passed to and returned from `jit`-compiled functions.

    Bound arguments of a functools.partial given as `func` stay inside the function (they are not
    merged into this Partial's children).
    """

    def __new__(cls, func, *args, **kwargs):
        if isinstance(func, functools.partial):
            func = _OpaquePartial(func)
        return super().__new__(cls, func, *args, **kwargs)


register_pytree_node(
    Partial,
    lambda partial: ((partial.args, partial.keywords), partial.func),
    lambda func, children: Partial(func, *children[0], **children[1]),
)


class PyTreeRegistry:
    """The registry of container types, as an object (JAX's `tree_util.default_registry`);
    fluxion has one registry, and these methods act on it."""

    def flatten(self, tree, leaf_predicate=None):
        return tree_flatten(tree, leaf_predicate)

    def flatten_one_level(self, tree):
        return flatten_one_level(tree)

    def flatten_one_level_with_keys(self, tree):
        return flatten_one_level_with_keys(tree)

    def flatten_with_path(self, tree, leaf_predicate=None):
        return tree_flatten_with_path(tree, leaf_predicate)

    def is_node(self, type):
        return is_tree_node(type)

    def register_node(self, type, to_iterable, from_iterable, to_iterable_with_keys=None):
        register_pytree_node(type, to_iterable, from_iterable, to_iterable_with_keys)

    def register_dataclass_node(self, type, data_fields, meta_fields, /):
        register_dataclass(type, data_fields, meta_fields)


default_registry = PyTreeRegistry()
