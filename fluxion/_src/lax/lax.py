"""Public `lax` functions for elementwise, conversion, shape, reduction and dot primitives.

These are thin: they canonicalize arguments and bind the primitive. lax does not promote
dtypes (jnp does); Python scalars enter as weak-typed values of the default dtype.
"""
from __future__ import annotations

import operator
from typing import Sequence

import numpy as np

from fluxion._src.export.shape_poly import DimExpr, dimension_as_value
from fluxion._src import core, dtypes
from fluxion._src.array import Array, make_array, scalar_array
from fluxion._src.lax import contractions, elementwise as ew, reductions, shapes
from fluxion._src.lax.contractions import Precision, canonicalize_precision
from fluxion._src.lax.elementwise import RoundingMethod
from fluxion._src.sharding_types import accepts_out_sharding, apply_out_sharding


def _unary(prim, doc):
    def fn(x):
        return prim.bind(x)
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = doc
    return fn


def _unary_with_accuracy(prim, doc):
    """A unary op taking JAX's `accuracy` keyword; only the default (None) is supported."""
    def fn(x, *, accuracy=None):
        if accuracy is not None:
            raise NotImplementedError(f"lax.{prim.name}: the accuracy argument is not supported "
                                      f"by fluxion (got accuracy={accuracy!r}).")
        return prim.bind(x)
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = doc
    return fn


def _binary(prim, doc):
    def fn(x, y):
        return prim.bind(x, y)
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = doc
    return fn


add = _binary(ew.add_p, "Elementwise addition: x + y.")
sub = _binary(ew.sub_p, "Elementwise subtraction: x - y.")


def mul(x, y, *, out_dtype=None):
    """Elementwise multiplication: x * y.

    Parameters
    ----------
    x, y : array_like
        Operands of one dtype, unless `out_dtype` is given.
    out_dtype : dtype, optional
        The result's dtype: both operands are converted to it before they are multiplied
        (so their dtypes may differ). The result is weak-typed only if both operands are.
    """
    if out_dtype is None:
        return ew.mul_p.bind(x, y)
    out_dtype = dtypes.check_user_dtype(out_dtype, "mul")
    weak = core.get_aval(x).weak_type and core.get_aval(y).weak_type
    return ew.mul_p.bind(_convert_element_type(x, out_dtype, weak_type=weak),
                         _convert_element_type(y, out_dtype, weak_type=weak))

div = _binary(ew.div_p, "Elementwise division: x / y (integer division rounds toward zero).")
rem = _binary(ew.rem_p, "Elementwise remainder with the sign of the dividend (C fmod).")
max = _binary(ew.max_p, "Elementwise maximum (NaN-propagating; complex numbers lexicographically).")
min = _binary(ew.min_p, "Elementwise minimum (NaN-propagating; complex numbers lexicographically).")
atan2 = _binary(ew.atan2_p, "Elementwise arc tangent of x / y, in the quadrant of (y, x).")
pow = _binary(ew.pow_p, "Elementwise power x ** y; y may be an integer array.")
complex = _binary(ew.complex_p, "Elementwise x + 1j * y, for float32 or float64 x and y.")
bitwise_and = _binary(ew.and_p, "Elementwise bitwise AND (logical AND for booleans).")
bitwise_or = _binary(ew.or_p, "Elementwise bitwise OR (logical OR for booleans).")
bitwise_xor = _binary(ew.xor_p, "Elementwise bitwise XOR (logical XOR for booleans).")
shift_left = _binary(ew.shift_left_p, "Elementwise x << y; 0 where y is negative or >= the bit width.")
shift_right_logical = _binary(ew.shift_right_logical_p,
                              "Elementwise logical right shift; 0 where y is negative or >= the bit width.")
shift_right_arithmetic = _binary(ew.shift_right_arithmetic_p,
                                 "Elementwise arithmetic right shift; the sign fill where y is "
                                 "negative or >= the bit width.")
eq = _binary(ew.eq_p, "Elementwise x == y.")
ne = _binary(ew.ne_p, "Elementwise x != y.")
lt = _binary(ew.lt_p, "Elementwise x < y.")
le = _binary(ew.le_p, "Elementwise x <= y.")
gt = _binary(ew.gt_p, "Elementwise x > y.")
ge = _binary(ew.ge_p, "Elementwise x >= y.")


def polygamma(m, x):
    """Elementwise polygamma function: the m-th derivative of digamma at x."""
    return ew.polygamma_p.bind(m, x)


def nextafter(x1, x2):
    """Elementwise next representable value after x1 in the direction of x2."""
    return ew.nextafter_p.bind(x1, x2)


neg = _unary(ew.neg_p, "Elementwise negation.")
sign = _unary(ew.sign_p, "Elementwise sign: -1, 0 or 1 (x / |x| for complex).")
floor = _unary(ew.floor_p, "Elementwise floor.")
ceil = _unary(ew.ceil_p, "Elementwise ceiling.")
is_finite = _unary(ew.is_finite_p, "Elementwise test for finiteness (not inf, not NaN).")
exp = _unary_with_accuracy(ew.exp_p, "Elementwise e ** x.")
exp2 = _unary_with_accuracy(ew.exp2_p, "Elementwise 2 ** x.")
expm1 = _unary_with_accuracy(ew.expm1_p, "Elementwise e ** x - 1, accurate near 0.")
log = _unary_with_accuracy(ew.log_p, "Elementwise natural logarithm.")
log1p = _unary_with_accuracy(ew.log1p_p, "Elementwise log(1 + x), accurate near 0.")
tanh = _unary_with_accuracy(ew.tanh_p, "Elementwise hyperbolic tangent.")
logistic = _unary_with_accuracy(ew.logistic_p, "Elementwise logistic sigmoid 1 / (1 + e ** -x).")
sin = _unary_with_accuracy(ew.sin_p, "Elementwise sine.")
cos = _unary_with_accuracy(ew.cos_p, "Elementwise cosine.")
tan = _unary_with_accuracy(ew.tan_p, "Elementwise tangent.")
sqrt = _unary_with_accuracy(ew.sqrt_p, "Elementwise square root.")
rsqrt = _unary_with_accuracy(ew.rsqrt_p, "Elementwise reciprocal square root.")
cbrt = _unary_with_accuracy(ew.cbrt_p, "Elementwise cube root.")
asin = _unary(ew.asin_p, "Elementwise arc sine.")
acos = _unary(ew.acos_p, "Elementwise arc cosine.")
atan = _unary(ew.atan_p, "Elementwise arc tangent.")
sinh = _unary(ew.sinh_p, "Elementwise hyperbolic sine.")
cosh = _unary(ew.cosh_p, "Elementwise hyperbolic cosine.")
asinh = _unary(ew.asinh_p, "Elementwise inverse hyperbolic sine.")
acosh = _unary(ew.acosh_p, "Elementwise inverse hyperbolic cosine.")
atanh = _unary(ew.atanh_p, "Elementwise inverse hyperbolic tangent.")
abs = _unary(ew.abs_p, "Elementwise absolute value (magnitude, a real number, for complex).")
erf = _unary(ew.erf_p, "Elementwise error function.")
erfc = _unary(ew.erfc_p, "Elementwise complementary error function.")
erf_inv = _unary(ew.erf_inv_p, "Elementwise inverse error function.")
lgamma = _unary(ew.lgamma_p, "Elementwise log of the absolute value of the gamma function.")
digamma = _unary(ew.digamma_p, "Elementwise digamma function.")
real = _unary(ew.real_p, "Elementwise real part.")
imag = _unary(ew.imag_p, "Elementwise imaginary part.")
bitwise_not = _unary(ew.not_p, "Elementwise bitwise NOT (logical NOT for booleans).")
population_count = _unary(ew.population_count_p, "Elementwise count of set bits.")
clz = _unary(ew.clz_p, "Elementwise count of leading zero bits.")
square = _unary(ew.square_p, "Elementwise x * x.")


def conj(x):
    """Elementwise complex conjugate; a float32 or float64 input becomes complex."""
    return ew.conj_p.bind(x, input_dtype=core.get_aval(x).dtype)


def integer_pow(x, y: int):
    """Elementwise x ** y for a static Python integer y (negative only for inexact x)."""
    try:
        y = operator.index(y)
    except TypeError:
        raise TypeError(f"integer_pow requires an integer exponent, got {y!r}") from None
    return ew.integer_pow_p.bind(x, y=y)


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """Elementwise rounding to the nearest integer.

    Ties round away from zero, or to the nearest even integer with
    `rounding_method=RoundingMethod.TO_NEAREST_EVEN` (or 1).
    """
    return ew.round_p.bind(x, rounding_method=RoundingMethod(rounding_method))


def reciprocal(x):
    """Elementwise 1 / x."""
    return integer_pow(x, -1)


# ---------------------------------------------------------------------------------------------
# Conversion

def _host_constant(value: np.ndarray, new_dtype, weak_type: bool) -> Array:
    """A device Array for a host value converted to new_dtype; scalars are cached. float0
    values (which have no data) stay NumPy arrays, as JAX's do."""
    if new_dtype == dtypes.float0:
        return np.zeros(np.shape(value), dtypes.float0)
    arr = _convert_on_host(value, new_dtype)
    if arr.ndim == 0:
        return scalar_array(arr, weak_type)
    return make_array(arr, weak_type=weak_type)


def _convert_on_host(value: np.ndarray, new_dtype) -> np.ndarray:
    """NumPy's astype, with XLA's results where NumPy's are undefined: complex values lose
    their imaginary part, and floats become integers by truncation with NaN -> 0 and
    out-of-range values saturating."""
    if value.dtype == new_dtype:
        return value
    if dtypes.is_complex(value.dtype) and not dtypes.is_complex(new_dtype):
        value = value.real
    if not (dtypes.is_float(value.dtype) and dtypes.is_integer(new_dtype)):
        with np.errstate(over="ignore"):  # overflow gives inf, as on the device
            return value.astype(new_dtype)
    info = dtypes.iinfo(new_dtype)
    value = value.astype(np.float64)
    too_big, too_small, nan = value >= float(info.max), value <= float(info.min), np.isnan(value)
    out = np.where(too_big | too_small | nan, 0, value).astype(new_dtype)
    out[too_big] = info.max
    out[too_small] = info.min
    return out


def convert_element_type(operand, new_dtype):
    """Elementwise conversion to `new_dtype` (64-bit types are narrowed unless x64 is enabled).

    Complex to real conversion keeps the real part; conversion to bool tests x != 0; float to
    integer conversion truncates toward zero, saturates out-of-range values and maps NaN to 0.
    """
    if new_dtype is None:
        raise ValueError("convert_element_type: new_dtype must be specified.")
    return _convert_element_type(operand, dtypes.check_user_dtype(new_dtype,
                                                                  "convert_element_type"),
                                 weak_type=False)


def _convert_element_type(operand, new_dtype=None, weak_type: bool = False):
    """convert_element_type that can also set the weak type; `new_dtype=None` keeps the dtype.

    Host values (NumPy arrays, Python scalars) are converted on the host; NumPy values are
    first canonicalized, as arrays of them would be."""
    if type(operand) is DimExpr:  # a symbolic dimension used as a value
        operand = dimension_as_value(operand)
    if type(operand) is Array:
        aval = operand.aval
        if (aval.dtype is new_dtype or new_dtype is None) and aval.weak_type == weak_type:
            return operand  # the common no-op, decided before any canonicalization
    else:
        aval = core.get_aval(operand)
    new_dtype = aval.dtype if new_dtype is None else dtypes.canonicalize_dtype(
        dtypes.dtype(new_dtype))
    weak_type = bool(weak_type)
    if not isinstance(operand, (Array, core.Tracer)):
        value = np.asarray(operand)
        if not dtypes.is_python_scalar(operand):  # Python scalars convert from their exact value
            value = value.astype(aval.dtype)
        return _host_constant(value, new_dtype, weak_type)
    if aval.dtype == new_dtype and aval.weak_type == weak_type:
        return operand
    return shapes.convert_element_type_p.bind(operand, new_dtype=new_dtype, weak_type=weak_type)


def bitcast_convert_type(operand, new_dtype):
    """Reinterpret the bits of an array as `new_dtype` (sizes adjust the last dimension)."""
    from fluxion._src.lax import structural
    return structural.bitcast_convert_type(operand, new_dtype)


# ---------------------------------------------------------------------------------------------
# Shapes

def broadcast_in_dim(operand, shape: Sequence[int], broadcast_dimensions: Sequence[int], *,
                     out_sharding=None):
    """Broadcast `operand` to `shape`, mapping its dimension i to broadcast_dimensions[i];
    `out_sharding` lays the result out."""
    if out_sharding is not None:  # (a keyword here, not a wrapper: fluxion calls this a lot)
        return apply_out_sharding(lambda: broadcast_in_dim(operand, shape, broadcast_dimensions),
                                  out_sharding)
    shape = tuple(map(core.canonicalize_dim, shape))
    broadcast_dimensions = tuple(int(d) for d in broadcast_dimensions)
    aval = core.get_aval(operand)
    if aval.shape == shape and broadcast_dimensions == tuple(range(len(shape))) and isinstance(
            operand, (Array, core.Tracer)):
        return operand
    return shapes.broadcast_in_dim_p.bind(operand, shape=shape,
                                          broadcast_dimensions=broadcast_dimensions, sharding=None)


def broadcast(operand, sizes: Sequence[int]):
    """Add leading dimensions of the given sizes."""
    ndim = core.get_aval(operand).ndim
    sizes = tuple(sizes)
    return broadcast_in_dim(operand, sizes + core.get_aval(operand).shape,
                            tuple(range(len(sizes), len(sizes) + ndim)))


def broadcast_to_rank(x, rank: int):
    ndim = core.get_aval(x).ndim
    if ndim == rank:
        return x
    return broadcast(x, (1,) * (rank - ndim))


def reshape(operand, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None, *,
            out_sharding=None):
    """Reshape to `new_sizes`; `dimensions` first transposes the operand. `out_sharding` lays
    the result out."""
    if out_sharding is not None:  # (a keyword here, not a wrapper: fluxion calls this a lot)
        return apply_out_sharding(lambda: reshape(operand, new_sizes, dimensions), out_sharding)
    try:
        new_sizes = tuple(map(core.canonicalize_dim, new_sizes))
    except TypeError as e:
        raise TypeError("Shapes must be 1D sequences of concrete values of integer type, got "
                        f"{tuple(new_sizes)}.") from e
    aval = core.get_aval(operand)
    dims = None if dimensions is None or tuple(dimensions) == tuple(range(aval.ndim)) else tuple(dimensions)
    if aval.shape == new_sizes and dims is None and isinstance(operand, (Array, core.Tracer)):
        return operand
    return shapes.reshape_p.bind(operand, new_sizes=new_sizes, dimensions=dims, sharding=None)


# ---------------------------------------------------------------------------------------------
# Reductions

def _axes(axes) -> tuple:
    return tuple(int(a) for a in axes)


def reduce_sum(operand, axes):
    """Sum over `axes`."""
    return reductions.reduce_sum_p.bind(operand, axes=_axes(axes), out_sharding=None)


def reduce_prod(operand, axes):
    """Product over `axes`."""
    return reductions.reduce_prod_p.bind(operand, axes=_axes(axes), out_sharding=None)


def reduce_max(operand, axes):
    """Maximum over `axes`."""
    return reductions.reduce_max_p.bind(operand, axes=_axes(axes), out_sharding=None)


def reduce_min(operand, axes):
    """Minimum over `axes`."""
    return reductions.reduce_min_p.bind(operand, axes=_axes(axes), out_sharding=None)


def reduce_and(operand, axes):
    """Logical/bitwise AND over `axes`."""
    return reductions.reduce_and_p.bind(operand, axes=_axes(axes), out_sharding=None)


def reduce_or(operand, axes):
    """Logical/bitwise OR over `axes`."""
    return reductions.reduce_or_p.bind(operand, axes=_axes(axes), out_sharding=None)


def reduce_xor(operand, axes):
    """Logical/bitwise XOR over `axes`."""
    return reductions.reduce_xor_p.bind(operand, axes=_axes(axes), out_sharding=None)


# ---------------------------------------------------------------------------------------------
# Contractions

def _index_tuple(dims) -> tuple:
    """Dimension numbers as a tuple of ints; a single int stands for itself alone (JAX)."""
    if np.ndim(dims) == 0:
        return (operator.index(dims),)
    return tuple(operator.index(d) for d in dims)


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None,
                out_sharding=None):
    """General tensor contraction.

    dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)); the
    result has the batch dimensions, then lhs free dimensions, then rhs free dimensions.
    """
    if out_sharding is not None:
        return apply_out_sharding(lambda: dot_general(lhs, rhs, dimension_numbers, precision,
                                                      preferred_element_type), out_sharding)
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((_index_tuple(lc), _index_tuple(rc)), (_index_tuple(lb), _index_tuple(rb)))
    pet = None if preferred_element_type is None else dtypes.canonicalize_dtype(preferred_element_type)
    return contractions.dot_general_p.bind(lhs, rhs, dimension_numbers=dn,
                                           precision=canonicalize_precision(precision),
                                           preferred_element_type=pet, out_sharding=None)


def _definitely_equal(a, b) -> bool:
    """a == b for sizes that may be symbolic; False where that cannot be decided."""
    from fluxion._src.export.shape_poly import InconclusiveDimensionOperation
    try:
        return bool(a == b)
    except InconclusiveDimensionOperation:
        return False


@accepts_out_sharding
def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None):
    """Vector/matrix products, or any contraction given `dimension_numbers`.

    Parameters
    ----------
    lhs, rhs : array_like
    dimension_numbers : ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), optional
        As for `dot_general`. Without it, the operands must be vectors or matrices and the
        last axis of `lhs` is contracted with the first axis of `rhs`.
    precision, preferred_element_type
        As for `dot_general`.
    """
    if dimension_numbers is None:
        l, r = core.get_aval(lhs).shape, core.get_aval(rhs).shape
        if not (1 <= len(l) <= 2 and 1 <= len(r) <= 2 and _definitely_equal(l[-1], r[0])):
            e = ValueError("jax.lax.dot: dimension_numbers must be specified when not "
                           "performing simple un-batched matrix-matrix, matrix-vector, or "
                           f"vector-vector products; got lhs_shape={l} rhs_shape={r}")
            core.note_user_line(e, "dot")
            raise e
        dimension_numbers = (((len(l) - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type)
