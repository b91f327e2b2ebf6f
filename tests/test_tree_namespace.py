"""fluxion.tree has every name of jax.tree, and each behaves as jax.tree's."""
import dataclasses

import jax
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp

TREE = {"a": (1.0, [2.0, 3.0]), "b": None, "c": {"d": 4.0}}


def test_every_name_of_jax_tree_exists():
    missing = {n for n in dir(jax.tree) if not n.startswith("_")} - set(dir(fluxion.tree))
    assert not missing


@pytest.mark.parametrize("name,args", [
    ("leaves", (TREE,)),
    ("all", ({"a": True, "b": [1, 0]},)),
    ("reduce", (lambda a, b: a + b, TREE)),
    ("reduce", (lambda a, b: a + b, TREE, 10.0)),
    ("reduce_associative", (lambda a, b: a * b, [1.0, 2.0, (3.0, 4.0)])),
    ("broadcast", ((1, 2), ((3, 4), [5, 6]))),
])
def test_functions_agree_with_jax(name, args):
    assert getattr(fluxion.tree, name)(*args) == getattr(jax.tree, name)(*args)


def test_map_flatten_unflatten_structure_transpose():
    doubled = fluxion.tree.map(lambda x, y: x + y, TREE, TREE)
    assert doubled == jax.tree.map(lambda x, y: x + y, TREE, TREE)
    leaves, treedef = fluxion.tree.flatten(TREE)
    assert fluxion.tree.unflatten(treedef, leaves) == TREE
    assert fluxion.tree.structure(TREE).num_leaves == 4
    outer = fluxion.tree.structure([0, 0])
    inner = fluxion.tree.structure((0, 0, 0))
    t = fluxion.tree.transpose(outer, inner, [(1, 2, 3), (4, 5, 6)])
    assert t == ([1, 4], [2, 5], [3, 6])


def test_with_path_functions_give_jax_key_strings():
    ours = [(fluxion.tree_util.keystr(p), v) for p, v in fluxion.tree.leaves_with_path(TREE)]
    theirs = [(jax.tree_util.keystr(p), v) for p, v in jax.tree.leaves_with_path(TREE)]
    assert ours == theirs
    mapped = fluxion.tree.map_with_path(lambda p, x: len(p) * x, TREE)
    assert mapped == jax.tree.map_with_path(lambda p, x: len(p) * x, TREE)
    flat, _ = fluxion.tree.flatten_with_path(TREE)
    assert [v for _, v in flat] == fluxion.tree.leaves(TREE)


def test_static_fields_of_registered_dataclasses():
    @fluxion.tree_util.register_dataclass
    @dataclasses.dataclass
    class Op:
        x: object
        y: object
        kind: str = fluxion.tree.static(default="add")

    op = Op(jnp.ones(3), jnp.arange(3.0))
    leaves, treedef = fluxion.tree.flatten(op)
    assert len(leaves) == 2
    rebuilt = fluxion.tree.unflatten(treedef, leaves)
    assert rebuilt.kind == "add"
    out = fluxion.jit(lambda o: o.x + o.y if o.kind == "add" else o.x)(op)
    np.testing.assert_allclose(out, [1.0, 2.0, 3.0])
    field = [f for f in dataclasses.fields(Op) if f.name == "kind"][0]
    assert field.metadata["static"] is True


def test_default_registry_acts_on_fluxions_registry():
    registry = fluxion.tree_util.default_registry
    leaves, treedef = registry.flatten({"a": 1, "b": (2, 3)})
    assert leaves == [1, 2, 3] and treedef == fluxion.tree.structure({"a": 0, "b": (0, 0)})

    class Box:
        def __init__(self, value):
            self.value = value

    registry.register_node(Box, lambda b: ((b.value,), None), lambda aux, children: Box(*children))
    assert registry.is_node(Box)
    assert fluxion.tree.leaves([Box(4), 5]) == [4, 5]
    assert registry.flatten_one_level((1, 2))[0] == [1, 2] or tuple(
        registry.flatten_one_level((1, 2))[0]) == (1, 2)
