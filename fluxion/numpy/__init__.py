"""fluxion.numpy: NumPy's API on fluxion arrays, traceable by every transformation."""
import numpy as _np

from fluxion._src.numpy import array_methods as _array_methods  # noqa: F401  (installs operators)
from fluxion._src.numpy import indexing as _indexing  # noqa: F401  (installs __getitem__ and .at)
from fluxion._src.basearray import Array as ndarray  # noqa: F401

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

from fluxion._src.numpy.number_functions import (  # noqa: F401
    acos, acosh, asin, asinh, atan, atanh, atan2, gcd, lcm, frexp, ldexp, modf, nextafter,
    spacing, fabs, bitwise_count, i0)

from fluxion._src.numpy.index_tricks import (  # noqa: F401
    r_, c_, s_, index_exp, mgrid, ogrid, ix_, indices, tril_indices, triu_indices,
    tril_indices_from, triu_indices_from, diag_indices, diag_indices_from, mask_indices,
    ravel_multi_index, unravel_index, fill_diagonal)

from fluxion._src.numpy.array_edits import (  # noqa: F401
    block, insert, delete, resize, rollaxis, unstack, trim_zeros, apply_along_axis,
    apply_over_axes, put, put_along_axis, place, packbits, unpackbits, vander, diagflat,
    array_equiv, geomspace)

from fluxion._src.numpy.vector_products import (  # noqa: F401
    vecdot, matvec, vecmat, cumulative_sum, cumulative_prod)

# The built-in ufuncs replace the plain functions of the same names imported above.
from fluxion._src.numpy.ufunc_objects import (  # noqa: F401,E402
    ufunc, frompyfunc, add, multiply, subtract, maximum, minimum, bitwise_and, bitwise_or,
    bitwise_xor, logical_and, logical_or, logical_xor, logaddexp, logaddexp2, negative)

from fluxion._src.numpy.io import (  # noqa: F401,E402
    load, save, savez, frombuffer, fromfile, fromstring, fromfunction, fromiter, from_dlpack,
    array_repr, array_str, printoptions, get_printoptions, set_printoptions, iterable,
    isscalar, iscomplex, iscomplexobj, isreal, isrealobj)

from fluxion._src.numpy.scalar_types import (  # noqa: F401,E402
    bool_ as bool, object_, flexible, character, ComplexWarning)

from fluxion._src.numpy.scalar_types import (  # noqa: F401,E402
    float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2,
    float8_e5m2fnuz, float8_e8m0fnu, float4_e2m1fn, float6_e2m3fn, float6_e3m2fn, int1, int2,
    int4, uint1, uint2, uint4)
from fluxion.numpy import fft  # noqa: F401,E402  (the jnp.fft submodule)
# Set operations, statistics, searching/sorting, calculus, polynomials, windows, Array API.
from fluxion._src.numpy.setops import (  # noqa: F401,E402
    unique, unique_all, unique_counts, unique_inverse, unique_values, union1d, intersect1d,
    setdiff1d, setxor1d, isin)
from fluxion._src.numpy.searching import (  # noqa: F401,E402
    searchsorted, lexsort, partition, argpartition, sort_complex, argwhere, flatnonzero,
    extract, compress, select, piecewise, choose)
from fluxion._src.numpy.statistics import (  # noqa: F401,E402
    median, quantile, percentile, nanmedian, nanquantile, nanpercentile, nanvar, nanstd,
    nanargmax, nanargmin, cov, corrcoef, histogram, histogram2d, histogramdd,
    histogram_bin_edges, bincount, digitize)
from fluxion._src.numpy.calculus import (  # noqa: F401,E402
    diff, ediff1d, gradient, trapezoid, interp, convolve, correlate, unwrap, cross)
from fluxion._src.numpy.polynomial import (  # noqa: F401,E402
    poly, polyadd, polysub, polymul, polydiv, polyder, polyint, polyval, polyfit, roots)
from fluxion._src.numpy.windows import bartlett, blackman, hamming, hanning, kaiser  # noqa: F401,E402,E501
from fluxion._src.numpy.array_api import (  # noqa: F401,E402
    __array_api_version__, __array_namespace_info__, astype)
# numpy.linalg on LAPACK (issue 10 item 2)
from fluxion.numpy import linalg  # noqa: F401,E402
