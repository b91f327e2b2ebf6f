"""fluxion.tree_util against jax.tree_util as the oracle."""
import collections
import dataclasses
import functools
import operator

import jax.tree_util as jtu
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fluxion
import fluxion.numpy as jnp
import fluxion.tree_util as ftu

LIBS = (ftu, jtu)
hypothesis_settings = settings(max_examples=60, deadline=None, derandomize=True, database=None)


# ---------------------------------------------------------------------------------------------
# Container types registered with both libraries

Point = collections.namedtuple("Point", "x y")


class Pair:
    """A custom node registered without keys; `tag` is aux data."""

    def __init__(self, a, b, tag="p"):
        self.a, self.b, self.tag = a, b, tag

    def __eq__(self, other):
        return type(other) is Pair and (self.a, self.b, self.tag) == (other.a, other.b, other.tag)

    def __repr__(self):
        return f"Pair({self.a!r}, {self.b!r}, {self.tag!r})"


class Keyed:
    """A custom node registered with keys."""

    def __init__(self, u, v):
        self.u, self.v = u, v

    def __eq__(self, other):
        return type(other) is Keyed and (self.u, self.v) == (other.u, other.v)


@jtu.register_pytree_node_class
@ftu.register_pytree_node_class
class Box:
    """A class registered through its own tree_flatten / tree_unflatten."""

    def __init__(self, content, label):
        self.content, self.label = content, label

    def tree_flatten(self):
        return (self.content,), self.label

    @classmethod
    def tree_unflatten(cls, label, children):
        return cls(children[0], label)

    def __eq__(self, other):
        return type(other) is Box and (self.content, self.label) == (other.content, other.label)


@jtu.register_dataclass
@ftu.register_dataclass
@dataclasses.dataclass
class Params:
    w: object
    b: object
    act: str = dataclasses.field(default="relu", metadata=dict(static=True))


@jtu.register_static
@ftu.register_static
@dataclasses.dataclass(frozen=True)
class Config:
    depth: int


def _pair_flatten(p):
    return (p.a, p.b), p.tag


def _pair_unflatten(tag, children):
    return Pair(*children, tag=tag)


def _keyed_flatten_with_keys(k):
    return [(jtu.GetAttrKey("u"), k.u), (jtu.GetAttrKey("v"), k.v)], None


def _keyed_flatten_with_fluxion_keys(k):
    return [(ftu.GetAttrKey("u"), k.u), (ftu.GetAttrKey("v"), k.v)], None


for _lib in LIBS:
    _lib.register_pytree_node(Pair, _pair_flatten, _pair_unflatten)
jtu.register_pytree_with_keys(Keyed, _keyed_flatten_with_keys, lambda _, c: Keyed(*c))
ftu.register_pytree_with_keys(Keyed, _keyed_flatten_with_fluxion_keys, lambda _, c: Keyed(*c))


# ---------------------------------------------------------------------------------------------
# Trees described by specs, built for either library (only Partial differs between them)

def build(spec, lib):
    kind, *parts = spec
    if kind == "leaf":
        return parts[0]
    if kind == "none":
        return None
    if kind == "static":
        return Config(parts[0])
    children = [build(c, lib) for c in parts[0]]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "point":
        return Point(*children)
    if kind == "pair":
        return Pair(*children, tag=parts[1])
    if kind == "keyed":
        return Keyed(*children)
    if kind == "box":
        return Box(children[0], parts[1])
    if kind == "params":
        return Params(*children, act=parts[1])
    if kind == "partial":
        return lib.Partial(operator.add, *children[:-1], k=children[-1])
    keys = parts[1]
    if kind == "dict":
        return dict(zip(keys, children))
    if kind == "ordered":
        return collections.OrderedDict(zip(keys, children))
    if kind == "default":
        return collections.defaultdict(list, zip(keys, children))
    raise AssertionError(kind)


def relabel(spec, counter):
    """The spec with its integer leaves renumbered 1000, 1001, ... (same structure)."""
    kind, *parts = spec
    if kind == "leaf":
        return ("leaf", 1000 + next(counter))
    if kind in ("none", "static"):
        return spec
    return (kind, [relabel(c, counter) for c in parts[0]], *parts[1:])


_keys = st.lists(st.sampled_from("abcdef"), min_size=0, max_size=4, unique=True)


def _containers(children):
    def keyed_by(kind):
        return _keys.flatmap(lambda ks: st.tuples(
            st.just(kind), st.lists(children, min_size=len(ks), max_size=len(ks)), st.just(ks)))

    two = st.lists(children, min_size=2, max_size=2)
    return st.one_of(
        st.tuples(st.just("tuple"), st.lists(children, max_size=3)),
        st.tuples(st.just("list"), st.lists(children, max_size=3)),
        keyed_by("dict"), keyed_by("ordered"), keyed_by("default"),
        st.tuples(st.just("point"), two),
        st.tuples(st.just("pair"), two, st.sampled_from(["p", "q"])),
        st.tuples(st.just("keyed"), two),
        st.tuples(st.just("box"), st.lists(children, min_size=1, max_size=1),
                  st.sampled_from([0, 1])),
        st.tuples(st.just("params"), two, st.sampled_from(["relu", "tanh"])),
        st.tuples(st.just("partial"), st.lists(children, min_size=1, max_size=3)),
    )


_leaf_specs = st.one_of(st.tuples(st.just("leaf"), st.integers(-5, 5)),
                        st.just(("none",)), st.just(("static", 3)))
tree_specs = st.recursive(_leaf_specs, _containers, max_leaves=12)


def canonical(x):
    """A library-independent nested description of a tree, for comparing results."""
    if isinstance(x, (jtu.Partial, ftu.Partial)):
        return ("Partial", x.func, canonical(x.args), canonical(x.keywords))
    if isinstance(x, collections.OrderedDict):
        return ("OrderedDict", [(k, canonical(v)) for k, v in x.items()])
    if isinstance(x, dict):
        return (type(x).__name__, getattr(x, "default_factory", None),
                sorted((k, canonical(v)) for k, v in x.items()))
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, [canonical(c) for c in x])
    if isinstance(x, (Pair, Keyed, Box, Params)):
        return (type(x).__name__, canonical(vars(x)))
    return x


def on_both(fn):
    """(fn(fluxion.tree_util), fn(jax.tree_util))."""
    return fn(ftu), fn(jtu)


def path_strings(lib, tree, **kw):
    return [(lib.keystr(p), lib.keystr(p, simple=True, separator="/"), leaf)
            for p, leaf in lib.tree_leaves_with_path(tree, **kw)]


# ---------------------------------------------------------------------------------------------
# Flattening, key paths and structures on generated trees

@hypothesis_settings
@given(tree_specs)
def test_flatten_and_paths_match_jax(spec):
    ours, theirs = build(spec, ftu), build(spec, jtu)
    leaves, treedef = ftu.tree_flatten(ours)
    jleaves, jtreedef = jtu.tree_flatten(theirs)
    assert leaves == jleaves
    assert (treedef.num_leaves, treedef.num_nodes) == (jtreedef.num_leaves, jtreedef.num_nodes)
    assert ftu.tree_leaves(ours) == leaves and ftu.tree_structure(ours) == treedef
    assert path_strings(ftu, ours) == path_strings(jtu, theirs)
    path_leaves, path_treedef = ftu.tree_flatten_with_path(ours)
    assert path_treedef == treedef and [leaf for _, leaf in path_leaves] == leaves
    assert canonical(ftu.tree_unflatten(treedef, leaves)) == canonical(theirs)
    children = ftu.treedef_children(treedef)
    jchildren = jtu.treedef_children(jtreedef)
    assert [c.num_leaves for c in children] == [c.num_leaves for c in jchildren]
    assert ftu.treedef_is_leaf(treedef) == jtu.treedef_is_leaf(jtreedef)


@hypothesis_settings
@given(tree_specs)
def test_map_matches_jax(spec):
    other = relabel(spec, iter(range(10_000)))

    def maps(lib):
        tree, tree2 = build(spec, lib), build(other, lib)
        return [canonical(lib.tree_map(lambda x: x * 2, tree)),
                canonical(lib.tree_map(lambda x, y: (x, y), tree, tree2)),
                canonical(lib.tree_map_with_path(lambda p, x, y: (lib.keystr(p), x + y),
                                                 tree, tree2))]

    ours, theirs = on_both(maps)
    assert ours == theirs


@hypothesis_settings
@given(tree_specs, tree_specs)
def test_structure_equality_matches_jax(spec_a, spec_b):
    relabelled = relabel(spec_a, iter(range(10_000)))
    for other in (spec_b, relabelled):
        ours = ftu.tree_structure(build(spec_a, ftu)) == ftu.tree_structure(build(other, ftu))
        theirs = jtu.tree_structure(build(spec_a, jtu)) == jtu.tree_structure(build(other, jtu))
        assert ours == theirs
    assert hash(ftu.tree_structure(build(spec_a, ftu))) == hash(
        ftu.tree_structure(build(relabelled, ftu)))


_od, _dd = collections.OrderedDict, collections.defaultdict
STRUCTURE_PAIRS = [
    ((1, 2), [1, 2]), ((1, 2), Point(1, 2)), ((), None), ({}, None), ({}, ()),
    ({"a": 1, "b": 2}, {"b": 3, "a": 4}), ({"a": 1}, {"b": 1}), ({"a": 1}, _od(a=1)),
    (_od(a=1, b=2), _od(b=1, a=2)), (_dd(list, a=1), _dd(dict, a=1)), (_dd(list, a=1), {"a": 1}),
    (Pair(1, 2, "p"), Pair(3, 4, "p")), (Pair(1, 2, "p"), Pair(1, 2, "q")),
    (Params(1, 2, "relu"), Params(3, 4, "tanh")), (Config(1), Config(1)), (Config(1), Config(2)),
    (Box(1, 0), Box((1,), 0)), (None, 1), ([None], [1]),
]


@pytest.mark.parametrize("a,b", STRUCTURE_PAIRS)
def test_curated_structure_equality_matches_jax(a, b):
    ours = ftu.tree_structure(a) == ftu.tree_structure(b)
    assert ours == (jtu.tree_structure(a) == jtu.tree_structure(b))
    if ours:
        assert hash(ftu.tree_structure(a)) == hash(ftu.tree_structure(b))


def test_dicts_flatten_in_sorted_key_order_ordered_dicts_in_insertion_order():
    tree = {"b": 1, "a": 2, "c": _od(z=3, y=4), "d": _dd(list, q=5, p=6)}
    assert ftu.tree_leaves(tree) == jtu.tree_leaves(tree) == [2, 1, 3, 4, 6, 5]
    rebuilt = ftu.tree_map(lambda x: x, tree)
    assert rebuilt == tree and type(rebuilt["c"]) is _od and rebuilt["d"].default_factory is list


def _key_orders(x):
    if isinstance(x, dict):
        return [list(x), *[_key_orders(v) for v in x.values()]]
    if isinstance(x, (list, tuple)):
        return [_key_orders(v) for v in x]
    return None


def test_rebuilt_dicts_have_sorted_keys_as_in_jax():
    """JAX rebuilds dicts (and defaultdicts) in sorted key order; OrderedDicts keep theirs."""
    tree = {"w": 1, "b": [{"z": 2, "a": 3}, _dd(list, q=5, p=6)], "c": _od(z=3, y=4)}

    def rebuilt(lib, tu):
        return [tu.tree_map(lambda x: x, tree),
                tu.tree_unflatten(*reversed(tu.tree_flatten(tree))),
                tu.tree_structure(tree).unflatten(tu.tree_leaves(tree)),
                lib.jit(lambda t: t)(tree),
                lib.grad(lambda t: 1.0 * t["w"])({"w": 1.0, "a": 2.0}),
                lib.vmap(lambda t: t)({"y": np.ones(2), "x": np.ones(2)})]
    import jax
    for a, b in zip(rebuilt(fluxion, ftu), rebuilt(jax, jtu)):
        assert _key_orders(a) == _key_orders(b)


def test_none_is_an_empty_subtree():
    tree = [None, (1, None), {"a": None}]
    assert ftu.tree_leaves(tree) == [1]
    treedef = ftu.tree_structure(None)
    assert (treedef.num_leaves, treedef.num_nodes) == (0, 1)
    assert ftu.treedef_is_leaf(treedef) and ftu.treedef_children(treedef) == []
    assert ftu.tree_map(lambda x: x + 1, tree) == [None, (2, None), {"a": None}]
    assert ftu.tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]


# ---------------------------------------------------------------------------------------------
# Keys

KEY_CASES = [("SequenceKey", 0), ("SequenceKey", 3), ("DictKey", "a"), ("DictKey", 1),
             ("DictKey", (1, "x")), ("GetAttrKey", "weight"), ("FlattenedIndexKey", 2)]


@pytest.mark.parametrize("cls_name,value", KEY_CASES)
def test_key_str_repr_and_equality_match_jax(cls_name, value):
    ours, theirs = getattr(ftu, cls_name)(value), getattr(jtu, cls_name)(value)
    assert (str(ours), repr(ours)) == (str(theirs), repr(theirs))
    same = getattr(ftu, cls_name)(value)
    assert ours == same and hash(ours) == hash(same)
    assert ours != value
    other_cls = "FlattenedIndexKey" if cls_name == "SequenceKey" else "SequenceKey"
    if isinstance(value, int):
        assert ours != getattr(ftu, other_cls)(value)
    assert ftu.keystr((ours,), simple=True) == jtu.keystr((theirs,), simple=True)


def test_key_fields_and_pattern_matching():
    match ftu.SequenceKey(2), ftu.DictKey("k"), ftu.GetAttrKey("n"), ftu.FlattenedIndexKey(1):
        case ftu.SequenceKey(i), ftu.DictKey(k), ftu.GetAttrKey(n), ftu.FlattenedIndexKey(f):
            fields = (i, k, n, f)
        case _:
            fields = None
    assert fields == (2, "k", "n", 1)
    assert ftu.SequenceKey(np.int32(4)).idx == 4
    for bad in (lambda: ftu.SequenceKey("a"), lambda: ftu.GetAttrKey(3)):
        with pytest.raises(TypeError):
            bad()


def test_keystr_matches_jax():
    def texts(lib):
        path = (lib.DictKey("a"), lib.SequenceKey(0), lib.GetAttrKey("w"),
                lib.FlattenedIndexKey(1), "s")
        return [lib.keystr(path), lib.keystr(path, simple=True, separator="/"),
                lib.keystr(path, separator=" ")]

    ours, theirs = on_both(texts)
    assert ours == theirs
    assert ftu.keystr(()) == ""


def test_is_leaf_with_and_without_path_matches_jax():
    tree = {"a": [1, (2, 3)], "b": Point((4,), None), "c": Pair([5], 6)}

    def results(lib):
        calls = []

        def is_leaf(x):
            calls.append(repr(x))
            return isinstance(x, tuple) and not isinstance(x, Point)

        def is_leaf_at(path, x):
            return lib.keystr(path) in ("['a']", "['c'][<flat index 0>]")

        leaves, _ = lib.tree_flatten(tree, is_leaf)
        return [
            leaves, calls, path_strings(lib, tree, is_leaf=is_leaf),
            path_strings(lib, tree, is_leaf=is_leaf_at, is_leaf_takes_path=True),
            lib.tree_flatten_with_path(tree, is_leaf_at, True)[1].num_leaves,
            canonical(lib.tree_map(lambda x: [x], tree, is_leaf=is_leaf)),
            canonical(lib.tree_map_with_path(lambda p, x: lib.keystr(p), tree, is_leaf=is_leaf_at,
                                             is_leaf_takes_path=True)),
            lib.all_leaves([(1, 2), 3], is_leaf), lib.all_leaves([(1, 2), 3]),
            lib.all_leaves([None]), lib.all_leaves([1, np.ones(2)]),
        ]

    ours, theirs = on_both(results)
    assert ours == theirs


def test_path_is_leaf_is_called_once_per_node():
    calls = []
    tree = {"a": [1, 2], "b": (3,)}
    _, treedef = ftu.tree_flatten_with_path(tree, lambda x: calls.append(x) or False)
    assert len(calls) == 6 and treedef == ftu.tree_structure(tree)


# ---------------------------------------------------------------------------------------------
# Structure errors

MISMATCHES = [
    ((1, 2), (1, 2, 3)),
    ({"a": 1}, {"b": 1}),
    ({"a": 1}, {"a": 1, "b": 2}),
    ((1, [2]), (1, (2,))),
    ([1, None], [1, 2]),
    ((1, {"a": (1, 2)}), (1, {"a": (1, 2, 3)})),
    ([Pair(1, 2, "p")], [Pair(1, 2, "q")]),
    ({"k": Params(1, 2, "relu")}, {"k": Params(1, 2, "tanh")}),
    (Point(1, 2), (1, 2)),
    ([Keyed(1, [2])], [Keyed(1, (2,))]),
]


def _error_text(fn, *args, **kwargs):
    with pytest.raises(ValueError) as info:
        fn(*args, **kwargs)
    return str(info.value)


@pytest.mark.parametrize("a,b", MISMATCHES)
def test_tree_map_structure_errors_match_jax(a, b):
    f = lambda *x: x  # noqa: E731
    assert _error_text(ftu.tree_map, f, a, b) == _error_text(jtu.tree_map, f, a, b)
    assert (_error_text(ftu.tree_map_with_path, f, a, b)
            == _error_text(jtu.tree_map_with_path, f, a, b))


def test_tree_map_accepts_a_prefix_tree_like_jax():
    prefix = {"a": 1, "b": (2, None)}
    full = {"a": [10, 20], "b": ({"x": 3}, None)}
    ours, theirs = on_both(lambda lib: (lib.tree_map(lambda p, sub: (p, sub), prefix, full),
                                        lib.tree_broadcast(prefix, full)))
    assert ours == theirs
    assert (_error_text(ftu.tree_broadcast, (1, 2), (1, 2, 3))
            == _error_text(jtu.tree_broadcast, (1, 2), (1, 2, 3)))


# ---------------------------------------------------------------------------------------------
# Reductions, transposes, treedef helpers

def test_reductions_match_jax():
    tree = [1, (2, {"a": 3, "b": None}), Pair(4, 5)]
    ours, theirs = on_both(lambda lib: [
        lib.tree_reduce(operator.add, tree), lib.tree_reduce(operator.add, tree, 10),
        lib.tree_reduce(lambda acc, x: acc + [x], tree, [], is_leaf=lambda x: isinstance(x, Pair)),
        lib.tree_reduce_associative(lambda x, y: f"({x}{y})", tree),
        lib.tree_reduce_associative(operator.add, [], identity=7),
        lib.tree_all(tree), lib.tree_all([1, 0]), lib.tree_all([]),
        lib.tree_all([[], 1], is_leaf=lambda x: x == [])])
    assert ours == theirs
    with pytest.raises(TypeError, match="reduce"):
        ftu.tree_reduce(operator.add, [None])
    with pytest.raises(TypeError, match="identity"):
        ftu.tree_reduce_associative(operator.add, ())


def test_transpose_matches_jax():
    tree = [{"a": 1, "b": (2, 3)}, {"a": 4, "b": (5, 6)}]
    def transposes(lib):
        outer, inner = lib.tree_structure([0, 0]), lib.tree_structure({"a": 0, "b": (0, 0)})
        with pytest.raises(TypeError, match="Mismatch"):
            lib.tree_transpose(outer, lib.tree_structure((0, 0)), tree)
        return [lib.tree_transpose(outer, inner, tree), lib.tree_transpose(outer, None, tree)]

    ours, theirs = on_both(transposes)
    assert ours == theirs


def test_treedef_helpers_match_jax():
    parts = [(1, 2), 3, {"a": 4}, None, Pair(5, [6])]
    def helpers(lib):
        treedef = lib.tree_structure(parts)
        children = lib.treedef_children(treedef)
        rebuilt = lib.treedef_tuple(lib.tree_structure(p) for p in parts)
        return canonical([
            [(c.num_leaves, c.num_nodes, lib.treedef_is_leaf(c)) for c in children],
            children == [lib.tree_structure(p) for p in parts],
            rebuilt == lib.tree_structure(tuple(parts)), rebuilt.num_nodes,
            lib.is_tree_node(tuple), lib.is_tree_node(Point), lib.is_tree_node(Pair),
            lib.is_tree_node(_od), lib.is_tree_node(int), lib.is_tree_node(type(None)),
            treedef.unflatten(range(6))])

    ours, theirs = on_both(helpers)
    assert ours == theirs


@pytest.mark.parametrize("tree", [(1, 2), [1, 2], {"b": 1, "a": 2}, None, _od(b=1, a=2),
                                  _dd(list, b=1, a=2), Pair(1, 2), Params(1, 2)])
def test_flatten_one_level_matches_jax(tree):
    children, aux = ftu.flatten_one_level(tree)
    jchildren, jaux = jtu.flatten_one_level(tree)
    assert (list(children), aux) == (list(jchildren), jaux)
    keyed, keyed_aux = ftu.flatten_one_level_with_keys(tree)
    jkeyed, _ = jtu.flatten_one_level_with_keys(tree)
    assert [(str(k), c) for k, c in keyed] == [(str(k), c) for k, c in jkeyed] and keyed_aux == aux


def test_flatten_one_level_of_a_leaf_raises_like_jax():
    assert _error_text(ftu.flatten_one_level, 1) == _error_text(jtu.flatten_one_level, 1)


def test_treedef_object():
    tree = (1, {"a": [2, 3], "b": Point(4, None)})
    treedef = ftu.tree_structure(tree)
    assert isinstance(treedef, ftu.PyTreeDef)
    assert (treedef.num_leaves, treedef.num_nodes) == (4, 9)
    assert treedef.unflatten(iter("wxyz")) == ("w", {"a": ["x", "y"], "b": Point("z", None)})
    assert ftu.tree_unflatten(treedef, range(4)) == (0, {"a": [1, 2], "b": Point(3, None)})
    assert {treedef: 1}[ftu.tree_structure(tree)] == 1
    assert treedef != ftu.tree_structure([1, {"a": [2, 3], "b": Point(4, None)}])
    with pytest.raises(ValueError, match="Too few leaves"):
        treedef.unflatten([1, 2])
    with pytest.raises(ValueError, match="Too many leaves"):
        treedef.unflatten(range(5))


# ---------------------------------------------------------------------------------------------
# Registration

def test_register_pytree_node_with_keys_func():
    class Duo:
        def __init__(self, left, right):
            self.left, self.right = left, right

    ftu.register_pytree_node(
        Duo, lambda d: ((d.left, d.right), None), lambda _, c: Duo(*c),
        lambda d: (((ftu.GetAttrKey("left"), d.left), (ftu.GetAttrKey("right"), d.right)), None))
    tree = {"d": Duo(1, [2])}
    paths = [ftu.keystr(p) for p, _ in ftu.tree_leaves_with_path(tree)]
    assert paths == ["['d'].left", "['d'].right[0]"]
    assert ftu.tree_leaves(ftu.tree_map(lambda x: x + 1, tree)) == [2, 3]
    with pytest.raises(ValueError):
        ftu.register_pytree_node(Duo, lambda d: ((), None), lambda _, c: Duo(1, 2))


def test_register_pytree_with_keys_class_matches_jax():
    def make(lib):
        class Special:
            def __init__(self, x, y):
                self.x, self.y = x, y

            def tree_flatten_with_keys(self):
                return ((lib.GetAttrKey("x"), self.x), (lib.DictKey("why"), self.y)), "aux"

            @classmethod
            def tree_unflatten(cls, aux, children):
                return cls(*children)

        return lib.register_pytree_with_keys_class(Special)

    def uses(lib):
        obj = make(lib)(1, (2, 3))
        return [path_strings(lib, obj), lib.tree_leaves(obj),
                lib.tree_map(lambda v: -v, obj).y, lib.tree_structure(obj).num_nodes]

    ours, theirs = on_both(uses)
    assert ours == theirs


def test_register_static_is_kept_whole_in_the_treedef():
    tree = {"cfg": Config(2), "x": 1}
    assert ftu.tree_leaves(tree) == [1]
    assert ftu.tree_structure(tree) == ftu.tree_structure({"cfg": Config(2), "x": 5})
    assert ftu.tree_structure(tree) != ftu.tree_structure({"cfg": Config(3), "x": 1})
    assert ftu.tree_map(lambda x: x + 1, tree) == {"cfg": Config(2), "x": 2}


def test_register_dataclass_inferred_and_explicit_fields():
    p = Params(np.float32(1), (2, 3), act="tanh")
    assert path_strings(ftu, p) == path_strings(jtu, p)
    assert ftu.tree_map(lambda x: x * 2, p) == Params(np.float32(2), (4, 6), act="tanh")

    @functools.partial(ftu.register_dataclass, data_fields=["y"], meta_fields=["name"])
    @dataclasses.dataclass(frozen=True)
    class Frozen:
        y: int
        name: str

    treedef = ftu.tree_structure(Frozen(1, "n"))
    assert treedef.unflatten([5]) == Frozen(5, "n")
    assert treedef != ftu.tree_structure(Frozen(1, "m"))

    class Plain:
        def __init__(self, a, s):
            self.a, self.s = a, s

    ftu.register_dataclass(Plain, data_fields=("a",), meta_fields=("s",))
    rebuilt = ftu.tree_map(str, Plain(1, "meta"))
    assert (rebuilt.a, rebuilt.s) == ("1", "meta")


def _dataclass_with_late_field():
    @dataclasses.dataclass
    class Late:
        x: int
        y: int = dataclasses.field(init=False, default=0)
    return Late


def _plain_class():
    return type("Plain", (), {})


DATACLASS_ERRORS = [
    (_plain_class, {}),
    (lambda: Params, dict(data_fields=["w", "b"])),
    (lambda: Params, dict(data_fields=["w"], meta_fields=["act"])),
    (lambda: Params, dict(data_fields=["w", "b", "act", "zz"], meta_fields=[])),
    (_plain_class, dict(data_fields=["a"], meta_fields=["a"])),
    (_dataclass_with_late_field, {}),
]


@pytest.mark.parametrize("make_type,kwargs", DATACLASS_ERRORS)
def test_register_dataclass_errors_match_jax(make_type, kwargs):
    def error(lib):
        with pytest.raises((TypeError, ValueError)) as info:
            lib.register_dataclass(make_type(), **kwargs)
        return type(info.value), str(info.value)

    ours, theirs = on_both(error)
    assert ours == theirs


def test_register_dataclass_infers_fields_minus_drop_fields():
    Late = _dataclass_with_late_field()
    ftu.register_dataclass(Late, drop_fields=["y"])
    assert ftu.tree_leaves(Late(4)) == [4]


# ---------------------------------------------------------------------------------------------
# Partial

def test_partial_is_a_pytree_like_jax():
    inner = functools.partial(operator.sub, 1)

    def uses(lib):
        part = lib.Partial(max, 10, key=None)
        nested = lib.Partial(inner, 2)
        rebuilt = lib.tree_map(lambda x: x * 3, lib.Partial(operator.sub, 10))
        structure = lib.tree_structure
        return [path_strings(lib, part), part(30), path_strings(lib, nested),
                nested(), nested.func == inner, nested.func.func, nested.func.args,
                structure(lib.Partial(max, 1)) == structure(lib.Partial(max, 2)),
                structure(lib.Partial(max, 1)) == structure(lib.Partial(min, 1)),
                structure(nested) == structure(lib.Partial(inner, 5)),
                type(rebuilt) is lib.Partial, rebuilt(4)]

    ours, theirs = on_both(uses)
    assert ours == theirs


def test_partial_through_jit():
    calls = []

    @fluxion.jit
    def apply(f, x):
        calls.append(1)
        return f(x)

    add = ftu.Partial(jnp.add, np.ones(3, np.float32))
    np.testing.assert_array_equal(apply(add, 2.0), np.full(3, 3.0, np.float32))
    np.testing.assert_array_equal(apply(ftu.Partial(jnp.add, np.zeros(3, np.float32)), 1.0),
                                  np.ones(3, np.float32))
    assert len(calls) == 1
    out = fluxion.jit(lambda p: p)(ftu.Partial(jnp.multiply, 2.0))
    assert isinstance(out, ftu.Partial) and float(out(3.0)) == 6.0


def test_dataclass_meta_and_static_are_static_under_jit():
    traces = []

    @fluxion.jit
    def step(p, cfg):
        traces.append((p.act, cfg.depth))
        return p.w * cfg.depth + (p.b if p.act == "relu" else -p.b)

    w, b = np.float32(2), np.float32(1)
    assert float(step(Params(w, b, "relu"), Config(3))) == 7.0
    assert float(step(Params(w + 1, b, "relu"), Config(3))) == 10.0
    assert float(step(Params(w, b, "tanh"), Config(3))) == 5.0
    assert float(step(Params(w, b, "relu"), Config(1))) == 3.0
    assert traces == [("relu", 3), ("tanh", 3), ("relu", 1)]
