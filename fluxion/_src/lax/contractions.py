"""Contractions: dot_general, and the Precision values that matmul-like ops accept."""
from __future__ import annotations

import enum

import numpy as np

from fluxion._src import ad, batching, core, dtypes
from fluxion._src.compiler import lowering
from fluxion._src.config import config
from fluxion._src.core import ShapedArray
from fluxion._src.lax import dot_algorithms
from fluxion._src.lax.base import ANY, check_dtype, standard_primitive
from fluxion._src.lax.dot_algorithms import DotAlgorithmPreset, is_algorithm


class Precision(enum.Enum):
    """Precision of matmul-like ops on accelerators (`lax.Precision`).

    Also constructible from JAX's strings: `Precision('highest')`.
    """
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        return _PRECISION_STRINGS.get(value)

    def __repr__(self):
        return f"Precision.{self.name}"

    def __str__(self):
        return self.name


_PRECISION_STRINGS = {
    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST,
    "high": Precision.HIGH, "bfloat16_3x": Precision.HIGH, "tensorfloat32": Precision.HIGH,
    "default": Precision.DEFAULT, "bfloat16": Precision.DEFAULT, "fastest": Precision.DEFAULT,
}


def canonicalize_precision(precision):
    """None, a Precision, one of JAX's precision strings, a pair of Precisions or of strings,
    a DotAlgorithm, a DotAlgorithmPreset or a preset's name -> None, a pair of Precisions or
    the algorithm. None takes `config.default_matmul_precision` (read when the operation is
    bound, so jit caches key on it through `config.trace_key`)."""
    if precision is None:
        return _default_precision()
    if isinstance(precision, str):
        if precision in _PRECISION_STRINGS:
            return (_PRECISION_STRINGS[precision],) * 2
        if precision in DotAlgorithmPreset.__members__:
            return DotAlgorithmPreset[precision]
    elif isinstance(precision, Precision):
        return (precision, precision)
    elif is_algorithm(precision):
        return precision
    elif isinstance(precision, (tuple, list)) and len(precision) == 2:
        if all(isinstance(p, Precision) for p in precision):
            return tuple(precision)
        if all(isinstance(p, str) for p in precision):
            return tuple(_one_of_pair(p) for p in precision)
    raise ValueError("Precision argument must be one of:\n"
                     "- None,\n"
                     f"- a string in {_precision_string_list()},\n"
                     "- a lax.Precision value,\n"
                     "- a tuple of two lax.Precision values or strings,\n"
                     "- a lax.DotAlgorithmPreset or the name of one of these presets, or\n"
                     "- a lax.DotAlgorithm value;\n"
                     f"but got {precision}.")


def _one_of_pair(name: str) -> Precision:
    """One string of a pair: a bad one is reported alone, as JAX does."""
    canonical = canonicalize_precision(name)
    if not isinstance(canonical, tuple):  # JAX fails here with a TypeError too
        raise TypeError(f"A pair of precisions takes lax.Precision values or their strings, "
                        f"not the name of a lax.DotAlgorithmPreset; got {name!r}.")
    return canonical[0]


def _precision_string_list() -> list:
    # JAX's table also maps None (to DEFAULT), and its message lists it.
    return list(_PRECISION_STRINGS) + [None]


def _default_precision():
    default = config.default_matmul_precision
    if default is None:
        return None
    try:
        return canonicalize_precision(default)
    except ValueError:
        raise ValueError(f"jax_default_matmul_precision flag must be set to None, a value in "
                         f"{_precision_string_list()}, or the name of a "
                         f"lax.DotAlgorithmPreset, but got {default}") from None


def _bit_width(dt: np.dtype) -> int:
    """Bits of a scalar, of one component for complex types (as XLA counts them)."""
    if dt == dtypes.bool_:
        return 1
    return dt.itemsize * 4 if dt.kind == "c" else dt.itemsize * 8


def _type_rank(dt: np.dtype) -> tuple:
    """XLA's order on element types for mixed-dtype dots: the higher type is the result's."""
    real = np.dtype(np.float32 if dt == dtypes.complex64 else np.float64) if dt.kind == "c" else dt
    if dtypes.is_float(real):
        info = dtypes.finfo(real)
        exponent, mantissa = info.maxexp, info.nmant
    else:
        exponent = mantissa = -1
    return (dt.kind == "c", exponent, mantissa, _bit_width(real), real.kind != "u")


def dot_result_dtype(opname: str, lhs: np.dtype, rhs: np.dtype, preferred_element_type,
                     check_bit_width: bool = True) -> np.dtype:
    """The element type of a dot-like op (shared with convolution). A preferred type narrower
    than a non-float result is a TypeError unless `check_bit_width` is off (as for dots with
    an algorithm, whose result type is the caller's choice)."""
    lrank, rrank = _type_rank(lhs), _type_rank(rhs)
    if lrank == rrank and lhs != rhs:
        raise TypeError(f"lax.{opname} argument type error: {lhs.name}, {rhs.name}")
    result = lhs if lrank >= rrank else rhs
    if preferred_element_type is None or preferred_element_type == result:
        return result
    preferred = np.dtype(preferred_element_type)
    if (check_bit_width and not dtypes.is_float(result)
            and _bit_width(preferred) < _bit_width(result)):
        raise TypeError(f"`preferred_element_type` must not be narrower than the original type, "
                        f"got preferred_element_type of {preferred.name} for result type of "
                        f"{result.name}.")
    return preferred


def _check_dimension_numbers(lhs, rhs, dimension_numbers) -> None:
    (lc, rc), (lb, rb) = dimension_numbers
    for side, aval, contract, batch in (("lhs", lhs, lc, lb), ("rhs", rhs, rc, rb)):
        if any(not 0 <= d < aval.ndim for d in contract + batch):
            raise TypeError(f"dot_general requires {side} dimension numbers to be nonnegative and "
                            f"less than the number of axes of the {side} value, got {side}_batch "
                            f"of {batch} and {side}_contracting of {contract} for {side} of rank "
                            f"{aval.ndim}")
    if len(lb) != len(rb):
        raise TypeError(f"dot_general requires equal numbers of lhs_batch and rhs_batch "
                        f"dimensions, got lhs_batch {lb} and rhs_batch {rb}.")
    for what, dims in (("lhs batch", lb), ("rhs batch", rb), ("lhs contracting", lc),
                       ("rhs contracting", rc)):
        if len(set(dims)) != len(dims):
            raise TypeError(f"dot_general requires {what} dimensions to be distinct, got "
                            f"{what.replace(' ', '_')} {dims}.")
    for side, batch, contract in (("lhs", lb, lc), ("rhs", rb, rc)):
        if set(batch) & set(contract):
            raise TypeError(f"dot_general requires {side} batch dimensions to be disjoint from "
                            f"contracting dimensions, got {side}_batch {batch} and "
                            f"{side}_contracting {contract}.")
    lb_shape, rb_shape = tuple(lhs.shape[d] for d in lb), tuple(rhs.shape[d] for d in rb)
    if lb_shape != rb_shape:
        raise TypeError(f"dot_general requires lhs batch dimensions and rhs batch dimensions to "
                        f"have the same shape, got {lb_shape} and {rb_shape}.")
    lc_shape, rc_shape = tuple(lhs.shape[d] for d in lc), tuple(rhs.shape[d] for d in rc)
    if lc_shape != rc_shape:
        raise TypeError(f"dot_general requires contracting dimensions to have the same shape, "
                        f"got {lc_shape} and {rc_shape}.")


def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, precision=None,
                               preferred_element_type=None, out_sharding=None):
    check_dtype("dot_general", lhs, ANY, 0)
    check_dtype("dot_general", rhs, ANY, 1)
    _check_dimension_numbers(lhs, rhs, dimension_numbers)
    dtype = dot_result_dtype("dot_general", lhs.dtype, rhs.dtype, preferred_element_type,
                             check_bit_width=not is_algorithm(precision))
    (lc, rc), (lb, rb) = dimension_numbers
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    shape = (tuple(lhs.shape[d] for d in lb) + tuple(lhs.shape[d] for d in lfree)
             + tuple(rhs.shape[d] for d in rfree))
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)


def precision_config_names(precision) -> list | None:
    """The precision_config of a dot or convolution: an algorithm leaves it DEFAULT."""
    if precision is None:
        return None
    if is_algorithm(precision):
        return ["DEFAULT", "DEFAULT"]
    return [p.name for p in precision]


def _dot_with_algorithm(ctx, lhs, rhs, dimension_numbers, algorithm):
    """The operands take the algorithm's input types, the dot produces its accumulation
    type, which converts to the result type. Operands of different types stay so (as JAX
    emits them: XLA converts them itself, to the wider type rather than the result's)."""
    dot_algorithms.check_platform(algorithm, ctx.platform)
    out_dtype = ctx.avals_out[0].dtype
    lhs_type, rhs_type, accumulation = dot_algorithms.compute_types(
        algorithm, lhs.dtype, rhs.dtype, out_dtype)
    lhs, rhs = ctx.convert(lhs, lhs_type), ctx.convert(rhs, rhs_type)
    out = ctx.dot_general(lhs, rhs, dimension_numbers, ["DEFAULT", "DEFAULT"], accumulation,
                          algorithm=dot_algorithms.algorithm_attr(algorithm, lhs_type, rhs_type))
    return ctx.convert(out, out_dtype)


def _dot_general_lowering(ctx, lhs, rhs, *, dimension_numbers, precision=None,
                          preferred_element_type=None, out_sharding=None):
    both_bool = lhs.dtype == rhs.dtype == dtypes.bool_
    # (A boolean dot with the DEFAULT preset has no type to take: it lowers as without one.)
    if is_algorithm(precision) and not (both_bool and precision is DotAlgorithmPreset.DEFAULT):
        return _dot_with_algorithm(ctx, lhs, rhs, dimension_numbers, precision)
    out_dtype = ctx.avals_out[0].dtype
    names = precision_config_names(precision)
    if both_bool:
        # A boolean dot is an OR of ANDs: count in int32, then test for nonzero.
        li, ri = ctx.convert(lhs, np.int32), ctx.convert(rhs, np.int32)
        out = ctx.dot_general(li, ri, dimension_numbers, names, np.int32)
        if out_dtype == dtypes.bool_:
            return ctx.compare(out, ctx.constant(0, np.int32, out.shape), "NE")
        return ctx.convert(out, out_dtype)
    if lhs.dtype != rhs.dtype:
        # XLA's CPU and GPU backends only generate code for equal operand types.
        lhs, rhs = ctx.convert(lhs, out_dtype), ctx.convert(rhs, out_dtype)
    if lhs.dtype.kind == "c" and out_dtype.kind != "c":
        # A real result of complex operands is the product's real part (what XLA computes for
        # such a dot under its default flags; its classic emitters fail a RET_CHECK on it).
        out = ctx.dot_general(lhs, rhs, dimension_numbers, names, lhs.dtype)
        return ctx.convert(out, out_dtype)
    return ctx.dot_general(lhs, rhs, dimension_numbers, names, out_dtype)


def _dot_general_lowering_cuda(ctx, lhs, rhs, **params):
    """XLA:GPU gets integer dots whose result type differs from the operands' wrong: int8 x
    int8 -> int32 came out doubled and int32 -> float32 failed to compile (jaxlib 0.11.2 on an
    H200; JAX emits the same ops and gets the same). The operands take the result type first.
    The DEFAULT preset names no algorithm, so it takes the same path (int32 x int32 -> float16
    under it failed XLA:GPU's emitter)."""
    out_dtype = ctx.avals_out[0].dtype
    precision = params.get("precision")
    names_algorithm = is_algorithm(precision) and precision is not DotAlgorithmPreset.DEFAULT
    if (lhs.dtype == rhs.dtype and dtypes.is_integer(lhs.dtype) and out_dtype != lhs.dtype
            and not names_algorithm):
        lhs, rhs = ctx.convert(lhs, out_dtype), ctx.convert(rhs, out_dtype)
    return _dot_general_lowering(ctx, lhs, rhs, **params)


def _dot_general_lowering_cpu(ctx, lhs, rhs, **params):
    """XLA:CPU runs a float16/bfloat16 dot with a wider float result in some programs only:
    followed by a transpose (which it folds into the dot), it fails at run time ("Unsupported
    element type for DotThunk::Execute: BF16 x BF16 = F32"; JAX's einsum hits it too when it
    transposes the result). The operands take the result type first: their products are
    exact in it, so the values are those of the mixed dot."""
    out_dtype = ctx.avals_out[0].dtype
    if (lhs.dtype == rhs.dtype and lhs.dtype in (dtypes.float16, dtypes.bfloat16)
            and dtypes.is_float(out_dtype) and out_dtype.itemsize > lhs.dtype.itemsize
            and not is_algorithm(params.get("precision"))):
        lhs, rhs = ctx.convert(lhs, out_dtype), ctx.convert(rhs, out_dtype)
    return _dot_general_lowering(ctx, lhs, rhs, **params)


dot_general_p = standard_primitive("dot_general", _dot_general_abstract_eval, _dot_general_lowering)


def _dot_general_pp_rule(eqn, context):
    # As JAX prints it: unset params and out_sharding (the binder's type) left out, the
    # dimension numbers as lists.
    params = {k: v for k, v in eqn.params.items() if v is not None and k != "out_sharding"}
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    params["dimension_numbers"] = ((list(lc), list(rc)), (list(lb), list(rb)))
    return core.pp_eqn_default(eqn.replace(params=params), context)


core.pp_eqn_rules[dot_general_p] = _dot_general_pp_rule
lowering.register_lowering(dot_general_p, _dot_general_lowering_cuda, platform="cuda")
lowering.register_lowering(dot_general_p, _dot_general_lowering_cpu, platform="cpu")


# ---------------------------------------------------------------------------------------------
# Differentiation and batching rules of dot_general

def _has_tangent(t) -> bool:
    return type(t) is not ad.Zero and core.get_aval(t).dtype != dtypes.float0


def _dot_general_jvp(primals, tangents, **params):
    """Bilinear: d(lhs . rhs) = dlhs . rhs + lhs . drhs."""
    (lhs, rhs), (t_lhs, t_rhs) = primals, tangents
    out = dot_general_p.bind(lhs, rhs, **params)
    terms = []
    if dtypes.is_inexact(core.get_aval(out).dtype):
        if _has_tangent(t_lhs):
            terms.append(dot_general_p.bind(_typed_like(t_lhs, lhs), rhs, **params))
        if _has_tangent(t_rhs):
            terms.append(dot_general_p.bind(lhs, _typed_like(t_rhs, rhs), **params))
    if not terms:
        return out, ad.Zero.from_primal_value(out)
    return out, terms[0] if len(terms) == 1 else ad.add_tangents(*terms)


def _typed_like(tangent, primal):
    """On Explicit mesh axes, `tangent` typed as its primal: transposed, the operand's
    cotangent takes the operand's sharding, as JAX's transpose gives it `out_sharding` of the
    operand's type (else the transposed dot may name a mesh axis twice, e.g. a weight's
    contracted axis and the activation's batch axis)."""
    from fluxion._src import sharding_types
    if not isinstance(primal, core.Tracer) or not sharding_types.has_explicit_axes(
            sharding_types.current_abstract_mesh()):
        return tangent
    from fluxion._src.sharded_jit import sharding_like
    return sharding_like(tangent, primal)


def _operand_aval(x):
    return x.aval if ad.is_undefined_primal(x) else core.get_aval(x)


def _free_dims(ndim: int, contracting, batch) -> list:
    return [d for d in range(ndim) if d not in contracting and d not in batch]


def _transpose_operand(ct, y, x_aval, x_dims, y_dims, x_free_in_ct, y_free_in_ct, params):
    """The cotangent of operand x of a dot_general with operand y, given the output cotangent.

    x_dims and y_dims are (contracting, batch) of each operand; x_free_in_ct / y_free_in_ct
    are the positions of each operand's free dimensions in the output. The cotangent is
    ct . y contracting y's free dimensions, which gives (batch, x free, y contracting in
    increasing order); a transpose puts these in x's order."""
    (xc, xb), (yc, yb) = x_dims, y_dims
    n_batch = len(xb)
    y_free = _free_dims(core.get_aval(y).ndim, yc, yb)
    x_free = _free_dims(x_aval.ndim, xc, xb)
    dims = ((tuple(y_free_in_ct), tuple(y_free)), (tuple(range(n_batch)), tuple(yb)))
    result = dot_general_p.bind(ct, y, dimension_numbers=dims, **params)
    position = {d: i for i, d in enumerate(xb)}
    position.update({d: n_batch + j for j, d in enumerate(x_free)})
    y_contract_order = sorted(yc)
    position.update({xd: n_batch + len(x_free) + y_contract_order.index(yd)
                     for xd, yd in zip(xc, yc)})
    perm = tuple(position[d] for d in range(x_aval.ndim))
    from fluxion._src.lax import lax, structural
    result = structural.transpose(result, perm)
    if core.get_aval(result).dtype != x_aval.dtype:
        result = lax._convert_element_type(result, x_aval.dtype, x_aval.weak_type)
    return result


def _dot_general_transpose(ct, lhs, rhs, *, dimension_numbers, precision=None,
                           preferred_element_type=None, out_sharding=None):
    lhs_linear, rhs_linear = ad.is_undefined_primal(lhs), ad.is_undefined_primal(rhs)
    if lhs_linear and rhs_linear:
        raise NotImplementedError("dot_general transpose: both operands are linear inputs; a "
                                  "linear function multiplies by at most one of them.")
    x_aval = (lhs if lhs_linear else rhs).aval
    if type(ct) is ad.Zero or x_aval.dtype == dtypes.float0:
        return [ad.Zero(x_aval) if lhs_linear else None, ad.Zero(x_aval) if rhs_linear else None]
    (lc, rc), (lb, rb) = dimension_numbers
    n_batch = len(lb)
    n_lhs_free = len(_free_dims(_operand_aval(lhs).ndim, lc, lb))
    n_rhs_free = len(_free_dims(_operand_aval(rhs).ndim, rc, rb))
    lhs_free_in_ct = range(n_batch, n_batch + n_lhs_free)
    rhs_free_in_ct = range(n_batch + n_lhs_free, n_batch + n_lhs_free + n_rhs_free)
    # The transposed dots keep the precision as it is, a pair of Precisions too (as JAX: for
    # the rhs cotangent, ct takes the lhs slot and lhs the rhs slot, unswapped).
    params = dict(precision=precision, preferred_element_type=preferred_element_type,
                  out_sharding=out_sharding)
    if lhs_linear:
        ct_lhs = _transpose_operand(ct, rhs, x_aval, (lc, lb), (rc, rb), lhs_free_in_ct,
                                    rhs_free_in_ct, params)
        return [ct_lhs, None]
    ct_rhs = _transpose_operand(ct, lhs, x_aval, (rc, rb), (lc, lb), rhs_free_in_ct,
                                lhs_free_in_ct, params)
    return [None, ct_rhs]


def _dot_general_batch(args, dims, *, dimension_numbers, **params):
    """A batch dimension of both operands becomes a dot_general batch dimension (the
    output's first); one of only one operand becomes a free dimension. Nothing is moved."""
    (lhs, rhs), (ld, rd) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers

    def shift(ds, d):
        return ds if d is None else tuple(x + (x >= d) for x in ds)

    lc, lb, rc, rb = shift(lc, ld), shift(lb, ld), shift(rc, rd), shift(rb, rd)
    lhs_free = _free_dims(core.get_aval(lhs).ndim, lc, lb)
    if ld is not None and rd is not None:
        new_dims = ((lc, rc), ((ld,) + lb, (rd,) + rb))
        out_dim = 0
    elif ld is not None:
        new_dims = ((lc, rc), (lb, rb))
        out_dim = len(lb) + lhs_free.index(ld)
    else:
        new_dims = ((lc, rc), (lb, rb))
        rhs_free = _free_dims(core.get_aval(rhs).ndim, rc, rb)
        out_dim = len(lb) + len(lhs_free) + rhs_free.index(rd)
    return dot_general_p.bind(lhs, rhs, dimension_numbers=new_dims, **params), out_dim


ad.primitive_jvps[dot_general_p] = _dot_general_jvp
ad.primitive_transposes[dot_general_p] = _dot_general_transpose
batching.primitive_batchers[dot_general_p] = _dot_general_batch
