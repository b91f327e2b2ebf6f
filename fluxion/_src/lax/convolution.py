"""Convolution: conv_general_dilated, its conveniences, dimension numbers and padding helpers."""
from __future__ import annotations

import enum
import operator
from typing import NamedTuple, Sequence

import numpy as np

from fluxion._src.export import shape_poly
from fluxion._src.export.shape_poly import is_symbolic_shape, max_dim
from fluxion._src import ad, batching, core, dtypes
from fluxion._src.compiler.hlo import bool_array, dense_i64, i64_array
from fluxion._src.compiler.lowering import register_lowering
from fluxion._src.core import ShapedArray
from fluxion._src.lax import lax
from fluxion._src.lax.base import ANY, check_dtype, standard_primitive
from fluxion._src.lax.contractions import canonicalize_precision, precision_config_names
from fluxion._src.lax.structural import rev, transpose
from fluxion._src.sharding_types import apply_out_sharding

__all__ = ["ConvDimensionNumbers", "conv", "conv_dimension_numbers",
           "conv_general_dilated", "conv_general_dilated_p", "conv_general_permutations",
           "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose",
           "conv_with_general_padding", "padtype_to_pads"]


class ConvDimensionNumbers(NamedTuple):
    """Where the batch, feature and spatial dimensions of a convolution's arrays are.

    lhs_spec: (batch dimension, feature dimension, spatial dimensions...)
    rhs_spec: (out feature dimension, in feature dimension, spatial dimensions...)
    out_spec: (batch dimension, feature dimension, spatial dimensions...)
    """
    lhs_spec: Sequence[int]
    rhs_spec: Sequence[int]
    out_spec: Sequence[int]


class PaddingType(enum.Enum):
    VALID = 1
    SAME = 2
    SAME_LOWER = 3


# ---------------------------------------------------------------------------------------------
# Shape helpers (shared with reduce_window)

def dilate_dim(size: int, dilation: int) -> int:
    """The size of a dimension of `size` elements with `dilation - 1` holes between them."""
    return 0 if size == 0 else 1 + dilation * (size - 1)


def stride_dim(size: int, window: int, stride: int) -> int:
    """How many windows of `window` elements, `stride` apart, fit in `size` elements."""
    return shape_poly.stride_dim(size, window, stride)


def padtype_to_pads(in_shape, window_shape, window_strides, padding) -> list[tuple[int, int]]:
    """(low, high) padding pairs for 'VALID', 'SAME' or 'SAME_LOWER' padding.

    'SAME' pads so that the output has ceil(in / stride) elements, the odd element at the end;
    'SAME_LOWER' puts it at the start.
    """
    if isinstance(padding, str):
        try:
            padding = PaddingType[padding.upper()]
        except KeyError:
            raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or "
                               f"'SAME_LOWER', got {padding}.") from None
    if padding == PaddingType.VALID:
        return [(0, 0)] * len(in_shape)
    if padding not in (PaddingType.SAME, PaddingType.SAME_LOWER):
        raise TypeError(f"Unknown padding type: {padding}.")
    pads = []
    for size, window, stride in zip(in_shape, window_shape, window_strides):
        # any of them may be symbolic (shape polymorphism): a window as long as an axis
        size, window, stride = (v if type(v) is shape_poly.DimExpr else int(v)
                                for v in (size, window, stride))
        out = -(-size // stride)
        total = max_dim(0, (out - 1) * stride + window - size)
        small, large = total // 2, total - total // 2
        pads.append((small, large) if padding == PaddingType.SAME else (large, small))
    return pads


def canonical_padding(opname: str, padding) -> tuple:
    """Explicit padding as a tuple of (int, int) pairs."""
    try:
        return tuple((core.canonicalize_dim(lo), core.canonicalize_dim(hi))
                     for lo, hi in padding)
    except (ValueError, TypeError) as e:
        raise ValueError(f"padding argument to {opname} should be a string or a sequence of "
                         f"(low, high) pairs, got {padding}") from e


def check_positive(opname: str, what: str, values, error=TypeError) -> None:
    if any(v <= 0 for v in values):
        raise error(f"{opname} {what} must have every element be strictly positive, got "
                    f"{tuple(values)}.")


# ---------------------------------------------------------------------------------------------
# Dimension numbers

def conv_general_permutations(dimension_numbers):
    """(lhs_perm, rhs_perm, out_perm) for string dimension numbers like ('NCHW', 'OIHW', 'NCHW').

    Spatial dimensions are ordered as they appear in the rhs spec."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    charpairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (a, b) in enumerate(charpairs):
        if not dimension_numbers[i].count(a) == dimension_numbers[i].count(b) == 1:
            raise TypeError(f"convolution dimension_numbers[{i}] must contain the characters "
                            f"'{a}' and '{b}' exactly once, got {dimension_numbers[i]}.")
        if len(dimension_numbers[i]) != len(set(dimension_numbers[i])):
            raise TypeError(f"convolution dimension_numbers[{i}] cannot have duplicate "
                            f"characters, got {dimension_numbers[i]}.")
    spatial = [set(spec) - set(pair) for spec, pair in zip(dimension_numbers, charpairs)]
    if not spatial[0] == spatial[1] == spatial[2]:
        raise TypeError(f"convolution dimension_numbers elements must each have the same set of "
                        f"spatial characters, got {tuple(dimension_numbers)}.")

    def perm(spec, pair):
        spatial_dims = sorted((i for i, c in enumerate(spec) if c not in pair),
                              key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial_dims)

    return tuple(perm(spec, pair) for spec, pair in zip(dimension_numbers, charpairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """Canonicalize None, a ConvDimensionNumbers or three spec strings to ConvDimensionNumbers."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(tuple(int(d) for d in spec) for spec in dimension_numbers))
    if len(lhs_shape) != len(rhs_shape):
        err = TypeError(f"convolution requires lhs and rhs ndim to be equal, got "
                        f"{len(lhs_shape)} and {len(rhs_shape)}.")
        core.note_user_line(err)
        raise err
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if not isinstance(dimension_numbers, (list, tuple)):
        raise TypeError(f"convolution dimension_numbers must be tuple/list or None, got "
                        f"{type(dimension_numbers)}.")
    if len(dimension_numbers) != 3:
        raise TypeError(f"convolution dimension_numbers list/tuple must be length 3, got "
                        f"{len(dimension_numbers)}.")
    if not all(isinstance(spec, str) for spec in dimension_numbers):
        raise TypeError(f"convolution dimension_numbers elements must be strings, got "
                        f"{tuple(type(spec) for spec in dimension_numbers)}.")
    for i, spec in enumerate(dimension_numbers):
        if len(spec) != len(lhs_shape):
            raise TypeError(f"convolution dimension_numbers[{i}] must have len equal to the ndim "
                            f"of lhs and rhs, got {len(spec)} for lhs and rhs shapes "
                            f"{tuple(lhs_shape)} and {tuple(rhs_shape)}.")
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count: int = 1) -> tuple:
    """Output shape of a convolution whose arrays are in (N, C, spatial...) order."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected "
                        f"{len(lhs_shape) - 2}, got {len(pads)}.")
    padded = [size + lo + hi for size, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(size < 0 for size in padded):
        raise ValueError(f"Negative padding is larger than the size of the corresponding "
                         f"dimension: got padding={tuple(pads)} for lhs_shape[2:]="
                         f"{tuple(lhs_shape[2:])}")
    spatial = tuple(stride_dim(size, window, stride)
                    for size, window, stride in zip(padded, rhs_shape[2:], strides))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + spatial


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """Output shape of conv_general_dilated (without dilation) for string dimension numbers."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple(tuple(np.take(lhs_shape, lhs_perm)), tuple(np.take(rhs_shape, rhs_perm)),
                           window_strides, padding)
    return tuple(int(d) for d in np.take(out, np.argsort(out_perm)))


# ---------------------------------------------------------------------------------------------
# The primitive

def _check_spec(name: str, spec, ndim: int) -> None:
    if sorted(spec) != list(range(ndim)):
        raise TypeError(f"conv_general_dilated dimension_numbers.{name} must be a permutation of "
                        f"range({ndim}), got {tuple(spec)}")


def _check_groups(lhs, rhs, dnums, feature_group_count, batch_group_count) -> None:
    lhs_spec, rhs_spec, _ = dnums
    for name, count in (("feature_group_count", feature_group_count),
                        ("batch_group_count", batch_group_count)):
        if count <= 0:
            raise ValueError(f"conv_general_dilated {name} must be a positive integer, got "
                             f"{count}.")
    if feature_group_count > 1 and batch_group_count > 1:
        raise ValueError(f"At most one of batch_group_count and feature_group_count may be > 1, "
                         f"got batch_group_count={batch_group_count} and "
                         f"feature_group_count={feature_group_count}")
    in_features = lhs.shape[lhs_spec[1]]
    if in_features % feature_group_count:
        raise ValueError(f"conv_general_dilated feature_group_count must divide lhs feature "
                         f"dimension size, but {feature_group_count} does not divide "
                         f"{in_features}.")
    if in_features // feature_group_count != rhs.shape[rhs_spec[1]]:
        raise ValueError(f"conv_general_dilated lhs feature dimension size divided by "
                         f"feature_group_count must equal the rhs input feature dimension size, "
                         f"but {in_features} // {feature_group_count} != {rhs.shape[rhs_spec[1]]}.")
    out_features = rhs.shape[rhs_spec[0]]
    for name, count in (("feature_group_count", feature_group_count),
                        ("batch_group_count", batch_group_count)):
        if out_features % count:
            raise ValueError(f"conv_general_dilated rhs output feature dimension size must be a "
                             f"multiple of {name}, but {out_features} is not a multiple of "
                             f"{count}.")
    batch = lhs.shape[lhs_spec[0]]
    if batch % batch_group_count:
        raise ValueError(f"conv_general_dilated batch_group_count must divide lhs batch dimension "
                         f"size, but {batch_group_count} does not divide {batch}.")


def _check_preferred_element_type(input_dtype: np.dtype, preferred) -> None:
    """XLA's rules for an accumulation type (integer inputs may accumulate in floats)."""
    kinds = {"int": lambda dt: dt.kind in "iu", "float": dtypes.is_float,
             "complex": lambda dt: dt.kind == "c"}
    int_to_float = kinds["int"](input_dtype) and dtypes.is_float(preferred)
    if not int_to_float:
        if any(is_kind(input_dtype) and not is_kind(preferred) for is_kind in kinds.values()):
            raise TypeError("Input type is incompatible with `preferred_element_type`. The "
                            "compatible combinations of (input_type, preferred_element_type) are "
                            "(integral, integral), (integral, floating), (floating, floating), "
                            "(complex, complex).")
        if input_dtype.kind == "i" and preferred.kind != "i":
            raise TypeError("`preferred_element_type` must have the same signedness as the "
                            "original type.")
    if preferred.itemsize < input_dtype.itemsize:
        raise TypeError("`preferred_element_type` must not be narrower than the original type.")


def _conv_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
    name = "conv_general_dilated"
    if lhs.ndim != rhs.ndim:
        raise ValueError(f"{name} lhs and rhs must have the same number of dimensions, but got "
                         f"{lhs.shape} and {rhs.shape}.")
    if lhs.ndim < 2:
        raise TypeError(f"{name} requires arrays of rank >= 2 (batch and feature dimensions), got "
                        f"{lhs.shape} and {rhs.shape}.")
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        f"{lhs.dtype.name}, {rhs.dtype.name}.")
    check_dtype(name, lhs, ANY, 0)
    for spec_name, spec in zip(ConvDimensionNumbers._fields, dimension_numbers):
        _check_spec(spec_name, spec, lhs.ndim)
    _check_groups(lhs, rhs, dimension_numbers, feature_group_count, batch_group_count)
    n_spatial = lhs.ndim - 2
    for what, values in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                         ("rhs_dilation", rhs_dilation)):
        if len(values) != n_spatial:
            raise ValueError(f"{name} window and {what} must have the same number of dimensions, "
                             f"but got {n_spatial} and {len(values)}")
    check_positive(name, "window_strides", window_strides, ValueError)
    check_positive(name, "lhs_dilation", lhs_dilation)
    check_positive(name, "rhs_dilation", rhs_dilation)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_trans = [lhs.shape[d] for d in lhs_spec]
    rhs_trans = [rhs.shape[d] for d in rhs_spec]
    lhs_trans[2:] = [dilate_dim(s, d) for s, d in zip(lhs_trans[2:], lhs_dilation)]
    rhs_trans[2:] = [dilate_dim(s, d) for s, d in zip(rhs_trans[2:], rhs_dilation)]
    out_trans = conv_shape_tuple(lhs_trans, rhs_trans, window_strides, padding, batch_group_count)
    shape = tuple(out_trans[i] for i in np.argsort(out_spec))
    dtype = lhs.dtype
    if preferred_element_type is not None:
        _check_preferred_element_type(lhs.dtype, preferred_element_type)
        dtype = preferred_element_type
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)


def _dimension_numbers_attr(dnums: ConvDimensionNumbers) -> str:
    def layout(spec, batch_char, feature_char):
        chars = [""] * len(spec)
        chars[spec[0]], chars[spec[1]] = batch_char, feature_char
        for i, d in enumerate(spec[2:]):
            chars[d] = str(i)
        return "[" + ", ".join(chars) + "]"
    lhs_spec, rhs_spec, out_spec = dnums
    return (f"#stablehlo.conv<{layout(lhs_spec, 'b', 'f')}x{layout(rhs_spec, 'o', 'i')}"
            f"->{layout(out_spec, 'b', 'f')}>")


def _conv_lowering(ctx, lhs, rhs, **params):
    return _emit_convolution(ctx, lhs, rhs, ctx.avals_out[0], **params)


def _emit_convolution(ctx, lhs, rhs, out_aval, *, window_strides, padding, lhs_dilation,
                      rhs_dilation, dimension_numbers, feature_group_count, batch_group_count,
                      precision, preferred_element_type):
    n_spatial = len(window_strides)
    attrs = {
        "dimension_numbers": _dimension_numbers_attr(dimension_numbers),
        "window_strides": i64_array(window_strides),
        "lhs_dilation": i64_array(lhs_dilation),
        "rhs_dilation": i64_array(rhs_dilation),
        "window_reversal": bool_array([False] * n_spatial),
        "feature_group_count": f"{feature_group_count} : i64",
        "batch_group_count": f"{batch_group_count} : i64",
    }
    if precision is not None:  # (as JAX, a dot algorithm is not passed on to convolutions)
        attrs["precision_config"] = "[" + ", ".join(
            f"#stablehlo<precision {p}>" for p in precision_config_names(precision)) + "]"
    if is_symbolic_shape(tuple(d for p in padding for d in p)):
        # padding that depends on symbolic dimensions: an operand; refinement makes it static
        pads = ctx.reshape(ctx.shape_value([d for p in padding for d in p]), (n_spatial, 2))
        return ctx.op1("stablehlo.dynamic_conv", [lhs, rhs, pads], out_aval, attrs)
    if n_spatial:  # an empty dense attribute does not parse; the default padding is zero
        attrs["padding"] = dense_i64([list(p) for p in padding], (n_spatial, 2))
    if batch_group_count > 1:
        rhs = _unsplit_rhs_input_features(ctx, rhs, dimension_numbers.rhs_spec[1])
    return ctx.op1("stablehlo.convolution", [lhs, rhs], out_aval, attrs)


def _unsplit_rhs_input_features(ctx, rhs, dim: int):
    """In a program partitioned over a mesh, keep the kernel's input-feature dimension
    unsplit: XLA's SPMD partitioner (jaxlib 0.10) gives wrong values for a convolution with
    batch_group_count > 1 whose lhs feature and rhs input-feature dimensions are split over
    the same mesh axis (JAX with Auto axes too). Such convolutions are the kernel gradients
    of grouped convolutions, where Shardy spreads the batch's axis onto the cotangent."""
    from fluxion._src import sharded_jit
    state = sharded_jit._lowering
    if getattr(state, "mesh", None) is None or getattr(state, "manual", ()):
        return rhs
    dims = ["{}" if d == dim else "{?}" for d in range(len(rhs.shape))]
    return ctx.op1("sdy.sharding_constraint", [rhs], rhs.aval,
                   {"sharding": f"#sdy.sharding<@mesh, [{', '.join(dims)}]>"})


def _complex_conv_lowering(ctx, lhs, rhs, **params):
    """A complex convolution as three real ones (Gauss's trick), as JAX lowers it on CPU and GPU:
    XLA's GPU backend has no complex convolution and its CPU one is slow."""
    if not dtypes.is_complex(lhs.dtype):
        return _conv_lowering(ctx, lhs, rhs, **params)
    out = ctx.avals_out[0]
    real_dtype = np.dtype(np.float32 if out.dtype == dtypes.complex64 else np.float64)
    real_out = ShapedArray(out.shape, real_dtype)

    def part(x, name):
        return ctx.op1(f"stablehlo.{name}", [x], x.aval.update(dtype=real_dtype))

    def real_conv(x, y):
        return _emit_convolution(ctx, x, y, real_out, **params)

    lhs_re, lhs_im, rhs_re, rhs_im = (part(lhs, "real"), part(lhs, "imag"), part(rhs, "real"),
                                      part(rhs, "imag"))
    k1 = real_conv(ctx.add(lhs_re, lhs_im), rhs_re)
    k2 = real_conv(lhs_re, ctx.sub(rhs_im, rhs_re))
    k3 = real_conv(lhs_im, ctx.add(rhs_re, rhs_im))
    return ctx.op1("stablehlo.complex", [ctx.sub(k1, k3), ctx.add(k1, k2)], out)


conv_general_dilated_p = standard_primitive("conv_general_dilated", _conv_abstract_eval,
                                            _conv_lowering)
register_lowering(conv_general_dilated_p, _complex_conv_lowering, platform="cpu")
register_lowering(conv_general_dilated_p, _complex_conv_lowering, platform="gpu")


# ---------------------------------------------------------------------------------------------
# Public wrappers

def _spatial_tuple(opname: str, what: str, values, n_spatial: int) -> tuple:
    if values is None:
        return (1,) * n_spatial
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{opname} {what} must be a sequence of integers, got {values!r}") from None


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision=None, preferred_element_type=None,
                         out_sharding=None):
    """General n-dimensional convolution with strides, padding and dilation (XLA's Conv).

    Parameters
    ----------
    lhs, rhs : arrays of rank n + 2: the input and the kernel.
    window_strides : n integers.
    padding : 'VALID', 'SAME', 'SAME_LOWER', or n (low, high) integer pairs.
    lhs_dilation, rhs_dilation : None or n integers (lhs dilation is transposed convolution,
        rhs dilation is atrous convolution).
    dimension_numbers : None (('NCHW', 'OIHW', 'NCHW') and its n-d analogues), a
        ConvDimensionNumbers, or three strings such as ('NHWC', 'HWIO', 'NHWC').
    feature_group_count, batch_group_count : grouped convolution (see XLA's Conv).
    precision : None, a Precision, a precision string or a pair of them.
    preferred_element_type : None or the dtype to accumulate in and return.
    out_sharding : None, or a NamedSharding or PartitionSpec laying the result out (on
        Explicit mesh axes, needed where the result's sharding is ambiguous).
    """
    if out_sharding is not None:
        return apply_out_sharding(lambda: conv_general_dilated(
            lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
            feature_group_count, batch_group_count, precision, preferred_element_type),
            out_sharding)
    lhs_shape, rhs_shape = core.get_aval(lhs).shape, core.get_aval(rhs).shape
    dnums = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    n_spatial = len(lhs_shape) - 2
    name = "conv_general_dilated"
    window_strides = _spatial_tuple(name, "window_strides", window_strides, n_spatial)
    lhs_dilation = _spatial_tuple(name, "lhs_dilation", lhs_dilation, n_spatial)
    rhs_dilation = _spatial_tuple(name, "rhs_dilation", rhs_dilation, n_spatial)
    check_positive(name, "window_strides", window_strides, ValueError)  # before 'SAME' divides
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_dilation):
            raise ValueError("String padding is not implemented for transposed convolution using "
                             "this op. Please either exactly specify the required padding or use "
                             "conv_transpose.")
        lhs_spec, rhs_spec, _ = dnums
        window = [dilate_dim(rhs_shape[d], r) for d, r in zip(rhs_spec[2:], rhs_dilation)]
        padding = padtype_to_pads([lhs_shape[d] for d in lhs_spec[2:]], window, window_strides,
                                  padding)
    padding = canonical_padding(name, padding)
    pet = None if preferred_element_type is None else dtypes.canonicalize_dtype(
        dtypes.dtype(preferred_element_type))
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dnums,
        feature_group_count=operator.index(feature_group_count),
        batch_group_count=operator.index(batch_group_count),
        precision=canonicalize_precision(precision), preferred_element_type=pet)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """Convolution of an NCHW-style input with an OIHW-style kernel ('SAME' or 'VALID')."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """Convolution in NCHW/OIHW layout with explicit padding and dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_DEFAULT_DIMENSION_NUMBERS = {
    2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
    5: ("NHWDC", "HWDIO", "NHWDC"),
}


def _conv_transpose_padding(kernel: int, stride: int, padding) -> tuple[int, int]:
    """Padding of the dilated input that makes a conv the transpose of a forward conv with
    `padding` ('SAME', 'VALID' or a (low, high) pair) and `stride`."""
    if padding == "SAME":
        total = kernel + stride - 2
        low = kernel - 1 if stride > kernel - 1 else -(-total // 2)
    elif padding == "VALID":
        total = kernel + stride - 2 + max(kernel - stride, 0)
        low = kernel - 1
    elif isinstance(padding, tuple):
        low = kernel - padding[0] - 1
        total = low + kernel - padding[1] - 1
    else:
        raise ValueError(f"Invalid padding mode: {padding}")
    return low, total - low


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel: bool = False, precision=None, preferred_element_type=None,
                   use_consistent_padding: bool = False):
    """Transposed (fractionally strided) convolution, as JAX's `lax.conv_transpose`.

    Parameters
    ----------
    lhs, rhs : input and kernel of rank n + 2.
    strides : n integers: the dilation of the input.
    padding : 'SAME' or 'VALID' (the forward conv's padding), or n (low, high) pairs: the
        transposed conv's own padding, or the forward conv's with `use_consistent_padding`.
    rhs_dilation : None or n integers.
    dimension_numbers : as for conv_general_dilated; default the TensorFlow layout
        (('NHWC', 'HWIO', 'NHWC') for n = 2).
    transpose_kernel : flip the kernel's spatial dimensions and swap its feature dimensions,
        giving the gradient of a forward conv with this kernel.
    """
    lhs_shape, rhs_shape = core.get_aval(lhs).shape, core.get_aval(rhs).shape
    ndim = len(lhs_shape)
    if dimension_numbers is None:
        if ndim not in _TRANSPOSE_DEFAULT_DIMENSION_NUMBERS:
            raise ValueError(f"conv_transpose has no default dimension_numbers for rank {ndim}.")
        dimension_numbers = _TRANSPOSE_DEFAULT_DIMENSION_NUMBERS[ndim]
    dnums = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    name = "conv_transpose"
    strides = _spatial_tuple(name, "strides", strides, ndim - 2)
    rhs_dilation = _spatial_tuple(name, "rhs_dilation", rhs_dilation, ndim - 2)
    if use_consistent_padding or padding in ("SAME", "VALID"):
        kernel = [dilate_dim(rhs_shape[d], r) for d, r in zip(dnums.rhs_spec[2:], rhs_dilation)]
        forward = [padding] * len(strides) if isinstance(padding, str) else [
            tuple(p) for p in padding]
        padding = [_conv_transpose_padding(k, s, p) for k, s, p in zip(kernel, strides, forward)]
    if transpose_kernel:
        out_feature, in_feature = dnums.rhs_spec[:2]
        perm = list(range(ndim))
        perm[out_feature], perm[in_feature] = in_feature, out_feature
        rhs = transpose(rev(rhs, dnums.rhs_spec[2:]), perm)
    return conv_general_dilated(lhs, rhs, (1,) * (ndim - 2), padding, strides, rhs_dilation,
                                dnums, precision=precision,
                                preferred_element_type=preferred_element_type)


# ---------------------------------------------------------------------------------------------
# Differentiation and batching rules
#
# Per spatial dimension, output element o reads padded, dilated input position
# o * stride + k * rhs_dilation for kernel tap k, where input element i sits at position
# i * lhs_dilation + pad_low. Both transposes are convolutions again: the lhs one slides the
# reversed kernel over the cotangent dilated by the strides; the rhs one slides the cotangent
# (dilated by the strides) over the input. Feature and batch groups swap roles between them.

def _has_tangent(t) -> bool:
    return type(t) is not ad.Zero and core.get_aval(t).dtype != dtypes.float0


def _conv_jvp(primals, tangents, **params):
    """Bilinear: d(lhs * rhs) = dlhs * rhs + lhs * drhs."""
    (lhs, rhs), (t_lhs, t_rhs) = primals, tangents
    out = conv_general_dilated_p.bind(lhs, rhs, **params)
    terms = []
    if _has_tangent(t_lhs):
        terms.append(conv_general_dilated_p.bind(t_lhs, rhs, **params))
    if _has_tangent(t_rhs):
        terms.append(conv_general_dilated_p.bind(lhs, t_rhs, **params))
    if not terms or not dtypes.is_inexact(core.get_aval(out).dtype):
        return out, ad.Zero.from_primal_value(out)
    return out, terms[0] if len(terms) == 1 else ad.add_tangents(*terms)


def _regroup(x, src: int, dst: int, groups: int):
    """Split dimension `src` of `x` into (groups, size // groups) and merge the groups into
    dimension `dst` as its major part (`src` shrinks and `dst` grows by `groups`)."""
    shape = core.get_aval(x).shape
    split = shape[:src] + (groups, shape[src] // groups) + shape[src + 1:]
    x = lax.reshape(x, split)
    dst_in_split = dst + (dst > src)
    perm = [a for a in range(len(split)) if a != src]
    perm.insert(perm.index(dst_in_split), src)
    new_shape = list(shape)
    new_shape[src] //= groups
    new_shape[dst] *= groups
    return lax.reshape(x, tuple(new_shape), tuple(perm))


def _cast(x, dtype):
    return x if core.get_aval(x).dtype == dtype else lax.convert_element_type(x, dtype)


def _nothing_flows(ct, *arrays_or_avals) -> bool:
    """A symbolic zero cotangent, or an empty array anywhere, contributes nothing."""
    if type(ct) is ad.Zero:
        return True
    return any((a if isinstance(a, ShapedArray) else core.get_aval(a)).size == 0
               for a in (ct, *arrays_or_avals))


def _conv_transpose_lhs(ct, rhs, lhs_aval, *, window_strides, padding, lhs_dilation,
                        rhs_dilation, dimension_numbers, feature_group_count, batch_group_count,
                        precision, preferred_element_type):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if _nothing_flows(ct, rhs, lhs_aval):
        return ad.Zero(lhs_aval)
    rhs_aval = core.get_aval(rhs)
    groups = feature_group_count * batch_group_count  # at most one of them exceeds 1
    if groups > 1:
        rhs = _regroup(rhs, rhs_spec[0], rhs_spec[1], groups)
    rhs = rev(_cast(rhs, core.get_aval(ct).dtype), rhs_spec[2:])
    pads = []
    for d_in, d_rhs, d_out, stride, (lo, _), l_dil, r_dil in zip(
            lhs_spec[2:], rhs_spec[2:], out_spec[2:], window_strides, padding, lhs_dilation,
            rhs_dilation):
        kernel = dilate_dim(rhs_aval.shape[d_rhs], r_dil)
        low = kernel - 1 - lo
        high = (dilate_dim(lhs_aval.shape[d_in], l_dil) + kernel - 1
                - dilate_dim(core.get_aval(ct).shape[d_out], stride) - low)
        pads.append((low, high))
    trans_dnums = ConvDimensionNumbers(out_spec, (rhs_spec[1], rhs_spec[0]) + rhs_spec[2:],
                                       lhs_spec)
    out = conv_general_dilated_p.bind(
        ct, rhs, window_strides=lhs_dilation, padding=tuple(pads), lhs_dilation=window_strides,
        rhs_dilation=rhs_dilation, dimension_numbers=trans_dnums, feature_group_count=groups,
        batch_group_count=1, precision=precision, preferred_element_type=None)
    if batch_group_count > 1:
        out = _regroup(out, lhs_spec[1], lhs_spec[0], batch_group_count)
    return _cast(out, lhs_aval.dtype)


def _conv_transpose_rhs(ct, lhs, rhs_aval, *, window_strides, padding, lhs_dilation,
                        rhs_dilation, dimension_numbers, feature_group_count, batch_group_count,
                        precision, preferred_element_type):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if _nothing_flows(ct, lhs, rhs_aval):
        return ad.Zero(rhs_aval)
    lhs_aval = core.get_aval(lhs)
    pads = []
    for d_in, d_rhs, d_out, stride, (lo, _), l_dil, r_dil in zip(
            lhs_spec[2:], rhs_spec[2:], out_spec[2:], window_strides, padding, lhs_dilation,
            rhs_dilation):
        # Just enough high padding for rhs-sized output: the taps past the last window
        # position that the forward convolution used contribute nothing.
        high = (dilate_dim(rhs_aval.shape[d_rhs], r_dil) - 1
                + dilate_dim(core.get_aval(ct).shape[d_out], stride)
                - dilate_dim(lhs_aval.shape[d_in], l_dil) - lo)
        pads.append((lo, high))

    def swap(spec):
        return (spec[1], spec[0]) + tuple(spec[2:])

    trans_dnums = ConvDimensionNumbers(swap(lhs_spec), swap(out_spec), swap(rhs_spec))
    out = conv_general_dilated_p.bind(
        _cast(lhs, core.get_aval(ct).dtype), ct, window_strides=rhs_dilation,
        padding=tuple(pads), lhs_dilation=lhs_dilation, rhs_dilation=window_strides,
        dimension_numbers=trans_dnums, feature_group_count=batch_group_count,
        batch_group_count=feature_group_count, precision=precision, preferred_element_type=None)
    return _cast(out, rhs_aval.dtype)


def _conv_transpose(ct, lhs, rhs, **params):
    lhs_linear, rhs_linear = ad.is_undefined_primal(lhs), ad.is_undefined_primal(rhs)
    if lhs_linear and rhs_linear:
        raise NotImplementedError("conv_general_dilated transpose: both operands are linear "
                                  "inputs; a linear function convolves with at most one of them.")
    if lhs_linear:
        return [_conv_transpose_lhs(ct, rhs, lhs.aval, **params), None]
    return [None, _conv_transpose_rhs(ct, lhs, rhs.aval, **params)]


def _fold_batch(x, bdim: int, dim: int, groups: int = 1):
    """Merge batch dimension `bdim` of `x` into dimension `dim` (numbered without the batch
    dimension), which is read as (groups, size // groups): the result's `dim` is laid out as
    (groups, batch, size // groups)."""
    shape = core.get_aval(x).shape
    at = dim + (dim >= bdim)
    new_shape = [n for i, n in enumerate(shape) if i != bdim]
    new_shape[dim] *= shape[bdim]
    if groups > 1:
        x = lax.reshape(x, shape[:at] + (groups, shape[at] // groups) + shape[at + 1:])
        bdim += bdim > at
        at += 1
    perm = [a for a in range(core.get_aval(x).ndim) if a != bdim]
    perm.insert(perm.index(at), bdim)
    return lax.reshape(x, tuple(new_shape), tuple(perm))


def _unfold_batch(x, dim: int, size: int, groups: int = 1):
    """Inverse of _fold_batch: split dimension `dim`, laid out as (groups, batch, rest), and
    return the result with the batch dimension at `dim`."""
    shape = core.get_aval(x).shape
    rest = shape[dim] // (groups * size)
    if groups == 1:
        return lax.reshape(x, shape[:dim] + (size, rest) + shape[dim + 1:])
    x = lax.reshape(x, shape[:dim] + (groups, size, rest) + shape[dim + 1:])
    perm = list(range(len(shape) + 2))
    perm[dim], perm[dim + 1] = dim + 1, dim
    return lax.reshape(x, shape[:dim] + (size, groups * rest) + shape[dim + 1:], tuple(perm))


def _without_dim(x, dim) -> ShapedArray:
    aval = core.get_aval(x)
    if dim is None:
        return aval
    return aval.update(shape=aval.shape[:dim] + aval.shape[dim + 1:])


def _conv_batch(args, dims, *, dimension_numbers, feature_group_count, batch_group_count,
                **params):
    """Fold the vmapped dimension into the convolution's own batch or feature dimensions
    (using feature or batch groups when both operands are batched)."""
    (lhs, rhs), (lhs_bdim, rhs_bdim) = args, dims
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    size = (core.get_aval(lhs).shape[lhs_bdim] if lhs_bdim is not None
            else core.get_aval(rhs).shape[rhs_bdim])

    def bind(lhs, rhs, feature_groups=feature_group_count, batch_groups=batch_group_count):
        return conv_general_dilated_p.bind(
            lhs, rhs, dimension_numbers=dimension_numbers, feature_group_count=feature_groups,
            batch_group_count=batch_groups, **params)

    if size == 0:  # nothing to fold into: the (empty) result of the per-example type
        example = _conv_abstract_eval(
            *(_without_dim(x, d) for x, d in zip(args, dims)), dimension_numbers=dimension_numbers,
            feature_group_count=feature_group_count, batch_group_count=batch_group_count,
            **params)
        return ad.zeros_like_aval(example.update(shape=(0,) + example.shape)), 0
    if lhs_bdim is not None and rhs_bdim is not None:
        rhs = _fold_batch(rhs, rhs_bdim, rhs_spec[0])
        if batch_group_count > 1:
            lhs = _fold_batch(lhs, lhs_bdim, lhs_spec[0])
            out = bind(lhs, rhs, batch_groups=size * batch_group_count)
        else:
            lhs = _fold_batch(lhs, lhs_bdim, lhs_spec[1])
            out = bind(lhs, rhs, feature_groups=size * feature_group_count)
        return _unfold_batch(out, out_spec[1], size), out_spec[1]
    if lhs_bdim is not None:
        out = bind(_fold_batch(lhs, lhs_bdim, lhs_spec[0], batch_group_count), rhs)
        return _unfold_batch(out, out_spec[0], size), out_spec[0]
    groups = feature_group_count * batch_group_count
    out = bind(lhs, _fold_batch(rhs, rhs_bdim, rhs_spec[0], groups))
    return _unfold_batch(out, out_spec[1], size, groups), out_spec[1]


ad.primitive_jvps[conv_general_dilated_p] = _conv_jvp
ad.primitive_transposes[conv_general_dilated_p] = _conv_transpose
batching.primitive_batchers[conv_general_dilated_p] = _conv_batch
