"""What a user registers for `export`: how custom pytree nodes are serialized
(`register_pytree_node_serialization`, `register_namedtuple_serialization`), and the safety
checks an export may disable (`DisabledSafetyCheck`)."""
from __future__ import annotations

import collections
import json
from typing import Any, Callable

from fluxion._src import tree_util

# type -> (serialized name, serialize_auxdata); serialized name -> (type, deserialize_auxdata,
# from_children)
_by_type: dict = {}
_by_name: dict = {}


def register_pytree_node_serialization(nodetype: type, *, serialized_name: str,
                                       serialize_auxdata: Callable[[Any], bytes],
                                       deserialize_auxdata: Callable[[bytes], Any],
                                       from_children: Callable | None = None) -> type:
    """Let `Exported.serialize` store pytree nodes of `nodetype` (as JAX's).

    Parameters
    ----------
    nodetype : type
        A type registered with `tree_util.register_pytree_node` (or, with `from_children`,
        any container type).
    serialized_name : str
        The name stored in the artifact; deserializing looks the registration up by it.
    serialize_auxdata : callable
        The node's aux data (from its flatten function) to `bytes`.
    deserialize_auxdata : callable
        Those bytes back to the aux data.
    from_children : callable, optional
        ``from_children(aux, children)`` builds a node; default: the registered unflatten.

    Returns
    -------
    `nodetype`, so that this can decorate a class.
    """
    if nodetype in _by_type:
        raise ValueError(f"Duplicate serialization registration for type `{nodetype}`. "
                         f"Previous registration was with serialized_name "
                         f"`{_by_type[nodetype][0]}`.")
    if serialized_name in _by_name:
        raise ValueError(f"Duplicate serialization registration for serialized_name "
                         f"`{serialized_name}`. Previous registration was for type "
                         f"`{_by_name[serialized_name][0]}`.")
    if from_children is None:
        unflatten = tree_util.registered_unflatten(nodetype)
        if unflatten is None:
            raise ValueError(f"If `from_children` is not present, you must call first "
                             f"`tree_util.register_pytree_node` for `{nodetype}`")
        from_children = unflatten
    _by_type[nodetype] = (serialized_name, serialize_auxdata)
    _by_name[serialized_name] = (nodetype, deserialize_auxdata, from_children)
    return nodetype


def register_namedtuple_serialization(nodetype: type, *, serialized_name: str) -> type:
    """Let `Exported.serialize` store `nodetype`, a `collections.namedtuple` class; its field
    names are stored, and must match when the artifact is read."""
    if not (isinstance(nodetype, type) and issubclass(nodetype, tuple)
            and hasattr(nodetype, "_fields")):
        raise ValueError("Use `export.register_pytree_node_serialization` for types other "
                         "than `collections.namedtuple`.")

    def serialize_auxdata(_aux) -> bytes:
        return json.dumps(list(nodetype._fields)).encode()

    def deserialize_auxdata(data: bytes):
        return json.loads(bytes(data).decode())

    def from_children(fields, children):
        if len(fields) != len(children):
            raise ValueError(f"the serialized {nodetype.__name__} has {len(fields)} fields "
                             f"but {len(children)} children")
        return nodetype(**dict(zip(fields, children)))

    return register_pytree_node_serialization(
        nodetype, serialized_name=serialized_name, serialize_auxdata=serialize_auxdata,
        deserialize_auxdata=deserialize_auxdata, from_children=from_children)


def _serialize_ordereddict_keys(keys) -> bytes:
    if not all(isinstance(k, str) for k in keys):
        raise NotImplementedError("Serialization of collections.OrderedDict is supported only "
                                  f"when the keys are strings. Found keys: {keys}.")
    return json.dumps(list(keys)).encode("utf-8")


# Stored under JAX's name, so that artifacts with OrderedDicts cross in both directions.
register_pytree_node_serialization(
    collections.OrderedDict, serialized_name="collections.OrderedDict",
    serialize_auxdata=_serialize_ordereddict_keys,
    deserialize_auxdata=lambda data: json.loads(bytes(data).decode("utf-8")),
    from_children=lambda keys, children: collections.OrderedDict(zip(keys, children)))


def _register_key_arrays() -> None:
    """fluxion's typed PRNG keys are pytree nodes over their uint32 data (JAX's are leaves
    of a key dtype): stored as such a node, named for its only implementation."""
    from fluxion._src.random.keys import IMPL_NAME, PRNGKeyArray

    def deserialize_auxdata(data: bytes):
        if bytes(data):
            raise ValueError(f"corrupt PRNG key node aux data {bytes(data)!r}")
    register_pytree_node_serialization(
        PRNGKeyArray, serialized_name=f"fluxion.PRNGKeyArray[{IMPL_NAME}]",
        serialize_auxdata=lambda _: b"", deserialize_auxdata=deserialize_auxdata)


_register_key_arrays()


def serialize_aux(nodetype: type, aux) -> tuple[str, bytes]:
    """(serialized name, aux bytes) of a registered custom node type and its aux data."""
    entry = _by_type.get(nodetype)
    if entry is None:
        raise ValueError(f"Cannot serialize PyTreeDef containing an unregistered type "
                         f"`{nodetype}`. Use `export.register_pytree_node_serialization` or "
                         "`export.register_namedtuple_serialization`.")
    name, serialize_auxdata = entry
    data = serialize_auxdata(aux)
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"The custom serialization function for `{nodetype}` must return a "
                         f"`bytes` object. It returned a {type(data)}.")
    return name, bytes(data)


def deserialize_node(name: str, data: bytes, children: list):
    """The node that `serialize_aux` described, with these children."""
    entry = _by_name.get(name)
    if entry is None:
        raise ValueError(f"Cannot deserialize a PyTreeDef containing an unregistered type "
                         f"`{name}`. Use `export.register_pytree_node_serialization` or "
                         "`export.register_namedtuple_serialization`.")
    _, deserialize_auxdata, from_children = entry
    return from_children(deserialize_auxdata(data), children)


class DisabledSafetyCheck:
    """A safety check of `export` to skip: `platform()` (calling an artifact on a platform
    it was not exported for runs its first platform's code) or `custom_call(target)`
    (exporting a module that calls a custom-call target without compatibility guarantees).
    """

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    @classmethod
    def platform(cls) -> "DisabledSafetyCheck":
        return cls("platform")

    @classmethod
    def custom_call(cls, target_name: str) -> "DisabledSafetyCheck":
        return cls(f"custom_call:{target_name}")

    @classmethod
    def shape_assertions(cls) -> "DisabledSafetyCheck":
        return cls("shape_assertions")

    def is_custom_call(self) -> str | None:
        """The custom-call target this check allows, or None."""
        return self._name[len("custom_call:"):] if self._name.startswith("custom_call:") \
            else None

    def __str__(self):
        return self._name

    def __repr__(self):
        return f"DisabledSafetyCheck({self._name!r})"

    def __eq__(self, other):
        return isinstance(other, DisabledSafetyCheck) and other._name == self._name

    def __hash__(self):
        return hash(self._name)


def as_safety_check(check) -> DisabledSafetyCheck:
    """A DisabledSafetyCheck from one, or from its text (as artifacts store it)."""
    if isinstance(check, DisabledSafetyCheck):
        return check
    if isinstance(check, str) and (check in ("platform", "shape_assertions")
                                   or check.startswith("custom_call:")):
        return DisabledSafetyCheck(check)
    raise TypeError(f"disabled_checks must hold export.DisabledSafetyCheck values, got "
                    f"{check!r}")


# Custom-call targets whose behaviour jaxlib keeps stable across versions (JAX's list):
# modules calling other targets are not exported unless DisabledSafetyCheck.custom_call allows.
def _lapack(name: str, complex_name: str | None = None) -> list:
    return [f"lapack_{t}{complex_name if complex_name and t in 'cz' else name}_ffi"
            for t in "sdcz"]


_LAPACK = [*_lapack("potrf"), *_lapack("geqrf"), *_lapack("orgqr", "ungqr"),
           *_lapack("syevd", "heevd"), *_lapack("geev"), *_lapack("gesdd"), *_lapack("getrf"),
           *_lapack("sytrd", "hetrd"), *_lapack("gehrd"), *_lapack("gees"), *_lapack("trsm"),
           *_lapack("gtsv")]
_GPU = ["cu_lu_pivots_to_permutation", "cusolver_getrf_ffi", "hip_lu_pivots_to_permutation",
        "hipsolver_getrf_ffi", "cusolver_geqrf_ffi", "cusolver_orgqr_ffi", "hipsolver_geqrf_ffi",
        "hipsolver_orgqr_ffi", "cusolver_potrf_ffi", "hipsolver_potrf_ffi", "cusolver_syevd_ffi",
        "hipsolver_syevd_ffi", "cusolver_gesvd_ffi", "cusolver_gesvdj_ffi", "hipsolver_gesvd_ffi",
        "hipsolver_gesvdj_ffi", "hipsolver_gesdd_ffi", "cusolver_sytrd_ffi",
        "hipsolver_sytrd_ffi", "cusparse_gtsv2_ffi"]
STABLE_CUSTOM_CALL_TARGETS = frozenset([
    *_LAPACK, *_GPU, "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
    "annotate_device_placement", "cu_threefry2x32_ffi", "hip_threefry2x32_ffi", "Eigh", "Qr",
    "ProductOfElementaryHouseholderReflectors", "LuDecomposition", "ApproxTopK",
    "stablehlo.dynamic_approx_top_k", "tf.call_tf_function", "tpu_custom_call",
    "AllocateBuffer", "mosaic_gpu_v2", "stablehlo.dynamic_reduce_window",
    "stablehlo.dynamic_rng_bit_generator", "stablehlo.dynamic_top_k", "shape_assertion"])
