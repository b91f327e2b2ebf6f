"""Foreign function calls (`jax.ffi`): compiled code registered with XLA, called from traced code.

`register_ffi_target` hands a handler (a PyCapsule holding its function pointer) to jaxlib,
which installs it in the PJRT client's FFI registry. `ffi_call(name, result_shape_dtypes)`
returns a function that binds `ffi_call_p`; its lowering is a `stablehlo.custom_call` to the
target, with the call's static keyword arguments as the `backend_config` dictionary (typed FFI,
`api_version = 4`). Eagerly the primitive is compiled alone, as every lax primitive.

Under `vmap` the call is batched as `vmap_method` says ("sequential" loops with `scan`,
"expand_dims"/"broadcast_all" hand the target a leading batch dimension); without one, vmap
is an error.
"""
from __future__ import annotations

import ctypes
import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from fluxion._src import ad, batching, core, effects
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray
from fluxion._src.ffi_attributes import attribute_text

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized", None)


# ---------------------------------------------------------------------------------------------
# Registration

def _xla_client():
    from fluxion._src.compiler import backend
    return backend._jaxlib()[0]


def register_ffi_target(name: str, fn: Any, platform: str = "cpu", api_version: int = 1,
                        **kwargs: Any) -> None:
    """Register a foreign function target with XLA.

    Parameters
    ----------
    name : the target's name, as `ffi_call` will name it.
    fn : a PyCapsule holding the handler's function pointer (see `pycapsule`), or a dict
        from FFI stage names ("execute", "instantiate", ...) to such capsules.
    platform : the platform the handler runs on ("cpu", "cuda", ...).
    api_version : 1 (the default) for the typed FFI, 0 for the legacy custom call API.
    **kwargs : passed on to jaxlib's `register_custom_call_target`.
    """
    _xla_client().register_custom_call_target(name, fn, platform, api_version, **kwargs)


def register_ffi_type_id(name: str, obj: Any, platform: str = "cpu") -> None:
    """Not supported by jaxlib 0.10 (as in JAX): use `register_ffi_type`."""
    raise ValueError("register_ffi_type_id is not supported after jaxlib version 381.")


def register_ffi_type(name: str, type_registration: Mapping[str, Any],
                      platform: str = "cpu") -> None:
    """Register a custom FFI type: `type_registration` maps "type_id" (and optionally
    "type_info") to PyCapsules of the XLA_FFI_TypeId / XLA_FFI_TypeInfo."""
    _xla_client().register_custom_type(name, type_registration, platform=platform)


def register_ffi_target_as_batch_partitionable(name: str) -> None:
    """Let the partitioner split calls of `name` along their leading (batch) dimension."""
    _xla_client().register_custom_call_as_batch_partitionable(name)


def pycapsule(funcptr) -> Any:
    """Wrap a ctypes function pointer (e.g. `ctypes.cdll.LoadLibrary(path).handler`) in a
    PyCapsule, the form `register_ffi_target` takes."""
    destructor = ctypes.CFUNCTYPE(None, ctypes.py_object)
    builder = ctypes.pythonapi.PyCapsule_New
    builder.restype = ctypes.py_object
    builder.argtypes = (ctypes.c_void_p, ctypes.c_char_p, destructor)
    return builder(funcptr, None, destructor(0))


def include_dir() -> str:
    """The directory of the XLA FFI headers bundled with jaxlib (`xla/ffi/api/ffi.h`)."""
    import jaxlib
    if getattr(jaxlib, "__file__", None) is not None:
        return os.path.join(os.path.dirname(os.path.abspath(jaxlib.__file__)), "include")
    paths = list(getattr(jaxlib, "__path__", []))
    if not paths:
        raise RuntimeError("Cannot determine jaxlib directory: neither __file__ nor __path__ "
                           "is available")
    return os.path.join(paths[0], "include")


# ---------------------------------------------------------------------------------------------
# Layouts: ffi_call takes major-to-minor orders; the custom call wants minor-to-major.

def _default_layout(aval) -> tuple:
    return tuple(reversed(range(len(aval.shape))))


def _minor_to_major(aval, layout, major_to_minor: bool) -> tuple:
    if layout is None:
        return _default_layout(aval)
    if hasattr(layout, "major_to_minor"):  # a Layout object
        if getattr(layout, "tiling", None) is not None:
            raise ValueError("The FFI does not support layouts with tiling")
        return tuple(layout.major_to_minor[::-1])
    layout = tuple(int(d) for d in layout)
    return layout[::-1] if major_to_minor else layout


# ---------------------------------------------------------------------------------------------
# The primitive

ffi_call_p = core.Primitive("ffi_call")
ffi_call_p.multiple_results = True


class FfiEffect(effects.Effect):
    """The effect of an FFI call with `has_side_effect=True` (never dead code)."""

    def __repr__(self):
        return "FFI"


ffi_effect = FfiEffect()


def _abstract_eval(*avals_in, result_avals, **_):
    return list(result_avals)


def _effects(params) -> frozenset:
    return frozenset([ffi_effect]) if params["has_side_effect"] else effects.no_effects


def _not_differentiable(*args, target_name, **_):
    raise ValueError(f"The FFI call to `{target_name}` cannot be differentiated. You can use "
                     "`fluxion.custom_jvp` or `fluxion.custom_vjp` to add support.")


def _aliases_attr(aliases, n_results: int) -> str:
    return "[" + ", ".join(
        f"#stablehlo.output_operand_alias<output_tuple_indices = "
        f"[{out if n_results > 1 else ''}], operand_index = {arg}, operand_tuple_indices = []>"
        for arg, out in aliases) + "]"


def emit_ffi_call(ctx, target_name: str, operands, result_avals, *, operand_layouts,
                  result_layouts, attributes: Sequence[tuple[str, str]] = (),
                  has_side_effect: bool = False, api_version: int = 4,
                  backend_config: str | None = None, aliases=()) -> list:
    """Emit the custom call; `attributes` are (name, MLIR attribute text) pairs."""
    if api_version >= 4:
        config = {k: v for k, v in attributes}
    else:
        if attributes:
            raise ValueError("The use of ffi_call attributes requires a custom call API "
                             f"version of at least 4; got api_version={api_version}.")
        config = backend_config if backend_config is not None else ""
    extra = {"output_operand_aliases": _aliases_attr(aliases, len(result_avals))} if aliases \
        else None
    return ctx.custom_call(target_name, operands, result_avals, backend_config=config,
                           has_side_effect=has_side_effect, api_version=api_version,
                           operand_layouts=operand_layouts, result_layouts=result_layouts,
                           extra_attrs=extra)


def _lowering(ctx, *operands, target_name, result_avals, has_side_effect, input_layouts,
              output_layouts, input_output_aliases, custom_call_api_version,
              legacy_backend_config, attributes, **_):
    return emit_ffi_call(ctx, target_name, operands, result_avals,
                         operand_layouts=input_layouts, result_layouts=output_layouts,
                         attributes=attributes, has_side_effect=has_side_effect,
                         api_version=custom_call_api_version,
                         backend_config=legacy_backend_config, aliases=input_output_aliases)


def _batched_layout(layout):
    """A minor-to-major layout with a new leading (slowest) batch dimension."""
    return None if layout is None else tuple(n + 1 for n in layout) + (0,)


def _batch(args, dims, *, vmap_method, result_avals, **params):
    from fluxion._src import machinery_ops
    size = next(core.get_aval(a).shape[d] for a, d in zip(args, dims)
                if d is not batching.not_mapped)
    mapped = [d is not batching.not_mapped for d in dims]
    args = [batching.moveaxis(a, d, 0) if m else a for a, d, m in zip(args, dims, mapped)]
    batched_avals = tuple(r if getattr(r, "is_token", False) else
                          ShapedArray((size, *r.shape), r.dtype, r.weak_type)
                          for r in result_avals)
    if vmap_method in ("sequential", "sequential_unrolled"):
        from fluxion._src.lax.control_flow import scan
        fixed = [a for a, m in zip(args, mapped) if not m]
        looped = [a for a, m in zip(args, mapped) if m]

        def body(carry, xs):
            it_fixed, it_xs = iter(fixed), iter(xs)
            merged = [next(it_xs) if m else next(it_fixed) for m in mapped]
            return carry, ffi_call_p.bind(*merged, vmap_method=vmap_method,
                                          result_avals=result_avals, **params)
        _, outs = scan(body, (), looped, unroll=vmap_method == "sequential_unrolled")
        return list(outs), [0] * len(outs)
    if vmap_method not in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        raise NotImplementedError(
            "vmap is only supported for the ffi_call primitive when vmap_method is one of "
            "'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method!r}.")
    params["output_layouts"] = tuple(_batched_layout(l) for l in params["output_layouts"])
    if vmap_method == "legacy_vectorized":
        params["input_layouts"] = tuple(_batched_layout(l) if m else l
                                        for l, m in zip(params["input_layouts"], mapped))
    else:
        n = size if vmap_method == "broadcast_all" else 1
        args = [a if m else machinery_ops.broadcast_in_dim(
            a, (n, *core.get_aval(a).shape), tuple(range(1, core.get_aval(a).ndim + 1)))
            for a, m in zip(args, mapped)]
        params["input_layouts"] = tuple(_batched_layout(l) for l in params["input_layouts"])
    outs = ffi_call_p.bind(*args, vmap_method=vmap_method, result_avals=batched_avals,
                           **params)
    return list(outs), [0] * len(outs)


ffi_call_p.def_abstract_eval(_abstract_eval)
effects.declare_effects(ffi_call_p, _effects, always=False)
ad.primitive_jvps[ffi_call_p] = _not_differentiable
ad.primitive_transposes[ffi_call_p] = _not_differentiable
batching.primitive_batchers[ffi_call_p] = _batch
lowering.register_lowering(ffi_call_p, _lowering)


# ---------------------------------------------------------------------------------------------
# Public API

def _result_avals(results) -> tuple:
    avals = []
    for i, r in enumerate(results):
        if getattr(r, "is_token", False):
            avals.append(r)
            continue
        if not hasattr(r, "shape") or not hasattr(r, "dtype"):
            raise ValueError("All elements of result_shape_dtypes must have 'shape' and "
                             f"'dtype' attributes. Got {r} at position {i}.")
        shape = tuple(int(d) if isinstance(d, (int, np.integer)) else d for d in r.shape)
        avals.append(ShapedArray(shape, np.dtype(r.dtype)))
    return tuple(avals)


def _encode_attributes(kwargs: dict) -> tuple:
    """(name, MLIR text) pairs, sorted by name: hashable params, errors at the call."""
    out = []
    for k, v in sorted(kwargs.items()):
        if isinstance(v, core.Tracer) or hasattr(v, "_buf"):
            raise TypeError(f"Non-hashable keyword argument to ffi_call {k}: {v}. Attributes "
                            "are static: pass NumPy values, not (traced) arrays")
        if not isinstance(v, (np.ndarray, dict)):
            try:
                hash(v)
            except TypeError as e:
                raise TypeError(f"Non-hashable keyword argument to ffi_call {k}: {v}") from e
        out.append((k, attribute_text(v)))
    return tuple(out)


def _as_operand(x):
    if isinstance(x, core.Tracer) or hasattr(x, "_buf"):
        return x
    import fluxion.numpy as jnp
    return jnp.asarray(x)


def _compatible(a, b) -> bool:
    if getattr(a, "is_token", False) and getattr(b, "is_token", False):
        return True
    return a.shape == b.shape and a.dtype == b.dtype



def _layouts(given, avals, what: str, layouts_what: str) -> tuple:
    """Minor-to-major layouts for `avals`: the row-major default, or `given` checked."""
    if given is None:
        return tuple(map(_default_layout, avals))
    if len(given) != len(avals):
        raise ValueError(f"The number of {what} ({len(avals)}) must equal the number of "
                         f"{layouts_what} ({len(given)}).")
    return tuple(_minor_to_major(a, l, True) for a, l in zip(avals, given))

def ffi_call(target_name: str, result_shape_dtypes, *, has_side_effect: bool = False,
             vmap_method: str | None = None, input_layouts=None, output_layouts=None,
             input_output_aliases: dict[int, int] | None = None,
             custom_call_api_version: int = 4,
             legacy_backend_config: str | None = None) -> Callable:
    """A function calling the FFI target `target_name` (`jax.ffi.ffi_call`).

    Parameters
    ----------
    target_name : a target registered with `register_ffi_target` (or one of jaxlib's).
    result_shape_dtypes : an object with `.shape` and `.dtype` (e.g. `ShapeDtypeStruct`),
        or a sequence of them; the returned function then returns a list (a tuple for a
        tuple) of results.
    has_side_effect : keep the call even when its results are unused.
    vmap_method : how `vmap` batches the call: "sequential" (a loop), "sequential_unrolled",
        "expand_dims" (unbatched arguments get a leading 1), "broadcast_all" (unbatched
        arguments are broadcast), "legacy_vectorized", or None (vmap raises).
    input_layouts, output_layouts : per argument/result, None (row-major) or the
        major-to-minor order of the dimensions the target expects.
    input_output_aliases : {input index: output index} for results written in place.
    custom_call_api_version : 4 for the typed FFI; lower for legacy custom calls.
    legacy_backend_config : the opaque configuration string of a legacy (< 4) target.

    Returns
    -------
    A function of the input arrays; its keyword arguments are the call's static
    attributes (Python and NumPy scalars, NumPy arrays, strings, dtypes, dicts, tuples).
    """
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"vmap_method must be on of the allowed methods {list(VMAP_METHODS)}, "
                         f"but got: {vmap_method}")
    if isinstance(result_shape_dtypes, Sequence):
        multiple_results = True
        result_avals = _result_avals(result_shape_dtypes)
        output_layouts_ = output_layouts
    else:
        multiple_results = False
        result_avals = _result_avals([result_shape_dtypes])
        output_layouts_ = (output_layouts,)
    if custom_call_api_version >= 4 and legacy_backend_config is not None:
        raise ValueError("The use of the legacy_backend_config parameter requires "
                         f"custom_call_api_version < 4; got {custom_call_api_version}.")

    def wrapped(*args, **kwargs):
        args = [_as_operand(x) for x in args]
        in_avals = [core.get_aval(x) for x in args]
        in_layouts = _layouts(input_layouts, in_avals, "input arguments", "input layouts")
        out_layouts = _layouts(output_layouts_, result_avals, "outputs", "output layouts")
        aliases = []
        for i, o in sorted((input_output_aliases or {}).items()):
            i, o = int(i), int(o)
            if i >= len(args):
                raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' with "
                                 f"input index {i} outside the range [0, {len(args)}).")
            if o >= len(result_avals):
                raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' with "
                                 f"output index {o} outside the range [0, "
                                 f"{len(result_avals)}).")
            if not _compatible(in_avals[i], result_avals[o]):
                raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' "
                                 f"referring to an input with abstract value {in_avals[i]} "
                                 "and an output with a different abstract value "
                                 f"{result_avals[o]}.")
            if in_layouts[i] != out_layouts[o]:
                raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' "
                                 f"referring to an input with layout {in_layouts[i]} and an "
                                 f"output with a different layout {out_layouts[o]}.")
            aliases.append((i, o))
        results = ffi_call_p.bind(
            *args, result_avals=result_avals, vmap_method=vmap_method,
            target_name=target_name, has_side_effect=bool(has_side_effect),
            input_layouts=in_layouts, output_layouts=out_layouts,
            input_output_aliases=tuple(aliases), custom_call_api_version=custom_call_api_version,
            legacy_backend_config=legacy_backend_config, attributes=_encode_attributes(kwargs))
        if multiple_results:
            return tuple(results) if isinstance(result_shape_dtypes, tuple) else list(results)
        return results[0]

    return wrapped


# ---------------------------------------------------------------------------------------------
# Lowering rules for users' own primitives

def build_ffi_lowering_function(call_target_name: str, *, operand_layouts=None,
                                result_layouts=None, backend_config=None,
                                skip_ffi_layout_processing: bool = False,
                                **lowering_args: Any) -> Callable:
    """A function `(ctx, *operands, **attributes)` emitting a call of `call_target_name`
    for a primitive's lowering rule; it returns the call's result values.

    Layouts here are minor-to-major (XLA's order), unlike `ffi_call`'s. `lowering_args` may
    hold `has_side_effect`, `api_version` (default 4) and `operand_output_aliases`
    ({operand index: result index}).
    """
    def lower(ctx, *operands, **params):
        api_version = lowering_args.get("api_version", 4)
        if api_version >= 4:
            if backend_config is not None and not isinstance(backend_config, dict):
                raise ValueError("When api_version > 4, backend_config must be a dictionary.")
            attrs = {**(backend_config or {}), **params}
            attributes = tuple((k, attribute_text(v)) for k, v in attrs.items())
            legacy = None
        else:
            if params:
                raise ValueError("The use of ffi_call attributes requires a custom call API "
                                 f"version of at least 4; got api_version={api_version}.")
            attributes, legacy = (), backend_config
        if skip_ffi_layout_processing:
            in_layouts = out_layouts = None
        else:
            in_layouts = [_minor_to_major(a, l, False) for a, l in
                          zip(ctx.avals_in, operand_layouts or [None] * len(ctx.avals_in))]
            out_layouts = [_minor_to_major(a, l, False) for a, l in
                           zip(ctx.avals_out, result_layouts or [None] * len(ctx.avals_out))]
        aliases = sorted((lowering_args.get("operand_output_aliases") or {}).items())
        return emit_ffi_call(ctx, call_target_name, operands, list(ctx.avals_out),
                             operand_layouts=in_layouts, result_layouts=out_layouts,
                             attributes=attributes,
                             has_side_effect=bool(lowering_args.get("has_side_effect", False)),
                             api_version=api_version, backend_config=legacy, aliases=aliases)
    return lower


def ffi_lowering(call_target_name: str, *, operand_layouts=None, result_layouts=None,
                 backend_config=None, skip_ffi_layout_processing: bool = False,
                 **lowering_args: Any) -> Callable:
    """A lowering rule (for `fluxion.interpreters.mlir.register_lowering`) calling the FFI
    target `call_target_name`; the primitive's params become the call's attributes."""
    build = build_ffi_lowering_function(
        call_target_name, operand_layouts=operand_layouts, result_layouts=result_layouts,
        backend_config=backend_config, skip_ffi_layout_processing=skip_ffi_layout_processing,
        **lowering_args)

    def rule(ctx, *operands, **params):
        return build(ctx, *operands, **params)
    return rule
