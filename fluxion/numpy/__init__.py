"""fluxion.numpy: NumPy's API on fluxion arrays, traceable by every transformation."""
import numpy as _np

from fluxion._src.numpy import array_methods as _array_methods  # noqa: F401  (installs operators)
from fluxion._src.numpy import indexing as _indexing  # noqa: F401  (installs __getitem__ and .at)
from fluxion._src.array import Array as ndarray  # noqa: F401

from fluxion._src.numpy.scalar_types import (  # noqa: F401
    bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bfloat16, float16, float32,
    float64, complex64, complex128, int_, uint, float_, complex_, single, double, csingle,
    cdouble, generic, number, inexact, floating, complexfloating, integer, signedinteger,
    unsignedinteger, dtype, can_cast, iinfo, finfo, issubdtype, isdtype, result_type,
    promote_types)

from fluxion._src.numpy.creation import (  # noqa: F401
    array, asarray, zeros, ones, empty, full, zeros_like, ones_like, empty_like, full_like,
    arange, linspace, logspace, eye, identity, tri, tril, triu, diag, meshgrid)

from fluxion._src.numpy.ufuncs import (  # noqa: F401
    add, subtract, multiply, divide, true_divide, floor_divide, remainder, mod, divmod, fmod,
    power, pow, float_power, negative, positive, absolute, abs, sign, floor, ceil, trunc, fix,
    rint, round, around, exp, exp2, expm1, log, log2, log10, log1p, sqrt, cbrt, square,
    reciprocal, sin, cos, tan, arcsin, arccos, arctan, arctan2, sinh, cosh, tanh, arcsinh,
    arccosh, arctanh, deg2rad, rad2deg, degrees, radians, hypot, logaddexp, logaddexp2, sinc,
    maximum, minimum, fmax, fmin, clip, isnan, isinf, isfinite, isposinf, isneginf, signbit,
    copysign, heaviside, nan_to_num, real, imag, conj, conjugate, angle, logical_and, logical_or,
    logical_xor, logical_not, bitwise_and, bitwise_or, bitwise_xor, bitwise_not, bitwise_invert,
    invert, left_shift, right_shift, bitwise_left_shift, bitwise_right_shift, equal, not_equal,
    less, less_equal, greater, greater_equal, isclose, allclose, array_equal, where, nonzero)

from fluxion._src.numpy.reductions import (  # noqa: F401
    sum, prod, max, min, amax, amin, all, any, mean, var, std, ptp, count_nonzero, average,
    nansum, nanprod, nanmax, nanmin, nanmean, argmax, argmin, cumsum, cumprod, nancumsum,
    nancumprod)

from fluxion._src.numpy.manipulation import (  # noqa: F401
    shape, ndim, size, reshape, ravel, transpose, permute_dims, matrix_transpose, swapaxes,
    moveaxis, expand_dims, squeeze, concatenate, concat, stack, vstack, hstack, dstack,
    column_stack, append, atleast_1d, atleast_2d, atleast_3d, split, array_split, vsplit, hsplit,
    dsplit, tile, repeat, flip, fliplr, flipud, rot90, roll, broadcast_to, broadcast_arrays,
    broadcast_shapes, pad, sort, argsort, astype, copy)

from fluxion._src.numpy.linalg_ops import (  # noqa: F401
    dot, vdot, matmul, tensordot, inner, outer, kron, diagonal, trace)

from fluxion._src.numpy.einsum import einsum, einsum_path  # noqa: F401

from fluxion._src.numpy.indexing import take, take_along_axis  # noqa: F401

pi = _np.pi
e = _np.e
euler_gamma = _np.euler_gamma
inf = _np.inf
nan = _np.nan
newaxis = None
from fluxion._src.numpy.vectorize import vectorize  # noqa: F401

# numpy.linalg on LAPACK (issue 10 item 2)
from fluxion.numpy import linalg  # noqa: F401,E402
