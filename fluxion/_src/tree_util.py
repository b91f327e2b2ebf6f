"""Pytrees: nested containers of leaves, flattened and rebuilt with optree (namespace 'fluxion').

None is an empty subtree, dict keys are sorted, and namedtuples, OrderedDict and defaultdict
keep their types, as in JAX.
"""
from __future__ import annotations

from typing import Any, Callable

import optree

NAMESPACE = "fluxion"
PyTreeDef = optree.PyTreeSpec


def tree_flatten(tree, is_leaf: Callable[[Any], bool] | None = None):
    """Flatten a pytree into (leaves, treedef)."""
    return optree.tree_flatten(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def tree_unflatten(treedef: PyTreeDef, leaves):
    """Rebuild a pytree from a treedef and an iterable of leaves."""
    return treedef.unflatten(leaves)


def tree_leaves(tree, is_leaf=None) -> list:
    return optree.tree_leaves(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def tree_structure(tree, is_leaf=None) -> PyTreeDef:
    return optree.tree_structure(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def tree_map(f: Callable, tree, *rest, is_leaf=None):
    """Apply `f` to corresponding leaves of `tree` and `rest`, keeping `tree`'s structure."""
    return optree.tree_map(f, tree, *rest, is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Register a container type: flatten_func(x) -> (children, aux); unflatten_func(aux, children)."""
    optree.register_pytree_node(nodetype, flatten_func,
                                lambda aux, children: unflatten_func(aux, children),
                                namespace=NAMESPACE)
