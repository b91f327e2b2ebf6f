"""Pytree utilities (`fluxion.tree_util`)."""
from fluxion._src.tree_util import (tree_flatten, tree_unflatten, tree_leaves, tree_structure,  # noqa: F401
                                    tree_map, register_pytree_node, PyTreeDef)
