"""`fluxion.tree`: the pytree functions under short names (as `jax.tree`)."""
import dataclasses as _dataclasses

from fluxion._src.tree_util import (  # noqa: F401
    tree_all as all,
    tree_broadcast as broadcast,
    tree_flatten as flatten,
    tree_flatten_with_path as flatten_with_path,
    tree_leaves as leaves,
    tree_leaves_with_path as leaves_with_path,
    tree_map as map,
    tree_map_with_path as map_with_path,
    tree_reduce as reduce,
    tree_reduce_associative as reduce_associative,
    tree_structure as structure,
    tree_transpose as transpose,
    tree_unflatten as unflatten,
)


def static(**kwargs):
    """A dataclass field that `tree_util.register_dataclass` treats as static metadata.

    Takes the arguments of `dataclasses.field`; adds ``static=True`` to its metadata.
    """
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return _dataclasses.field(metadata=metadata, **kwargs)
