"""Differences, integrals, interpolation and 1-D convolution of fluxion.numpy: diff, ediff1d,
gradient, trapezoid, interp, convolve, correlate, unwrap and cross."""
from __future__ import annotations

import operator

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.numpy import util
from fluxion._src.numpy.eager import eager_compiled


def _jnp():
    import fluxion.numpy as jnp
    return jnp


def _slice_axis(x, start, stop, axis):
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, stop)
    return x[tuple(index)]


@eager_compiled(static_argnames=('n', 'axis'))
def diff(a, n: int = 1, axis: int = -1, prepend=None, append=None):
    """n-th discrete difference along `axis` (booleans: elementwise not-equal)."""
    jnp = _jnp()
    arr = util.ensure_arraylike("diff", a)
    n = core.concrete_or_error(n, "'n' argument of jnp.diff")
    n = operator.index(n)
    if n == 0:
        return arr
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    if arr.ndim == 0:
        raise ValueError(f"diff requires input that is at least one dimensional; got {a}")
    axis = util.canonicalize_axis(axis, arr.ndim)
    parts = []
    if prepend is not None:
        parts.append(_edge(arr, prepend, axis))
    parts.append(arr)
    if append is not None:
        parts.append(_edge(arr, append, axis))
    if len(parts) > 1:
        arr = jnp.concatenate(parts, axis)
    op = jnp.not_equal if arr.dtype == dtypes.bool_ else jnp.subtract
    for _ in range(n):
        arr = op(_slice_axis(arr, 1, None, axis), _slice_axis(arr, None, -1, axis))
    return arr


def _edge(arr, value, axis):
    jnp = _jnp()
    value = util.ensure_arraylike("diff", value)
    if value.ndim == 0:
        shape = list(arr.shape)
        shape[axis] = 1
        value = jnp.broadcast_to(value, tuple(shape))
    return value


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of consecutive elements of the flattened array, with optional ends."""
    jnp = _jnp()
    arr = jnp.ravel(util.ensure_arraylike("ediff1d", ary))
    result = arr[1:] - arr[:-1]
    if to_begin is not None:
        to_begin = util.ensure_arraylike("ediff1d", to_begin)
        result = jnp.concatenate([jnp.ravel(to_begin.astype(arr.dtype)), result])
    if to_end is not None:
        to_end = util.ensure_arraylike("ediff1d", to_end)
        result = jnp.concatenate([result, jnp.ravel(to_end.astype(arr.dtype))])
    return result


def _gradient_along_axis(a, h, axis):
    jnp = _jnp()

    def sl(start, stop, x=a):
        return _slice_axis(x, start, stop, axis)

    upper = sl(1, 2) - sl(0, 1)
    lower = sl(-1, None) - sl(-2, -1)
    if h.ndim == 0:
        inner = (sl(2, None) - sl(None, -2)) * 0.5 / h
        upper = upper / h
        lower = lower / h
    elif h.ndim == 1:
        if h.shape[0] != a.shape[axis]:
            raise ValueError("Spacing arrays must have the same length as the dimension along "
                             "which the gradient is calculated.")
        shape = [1] * a.ndim
        shape[axis] = h.shape[0]
        h = h.reshape(shape)
        upper = upper / (sl(1, 2, h) - sl(0, 1, h))
        lower = lower / (sl(-1, None, h) - sl(-2, -1, h))
        dx1 = sl(1, -1, h) - sl(0, -2, h)
        dx2 = sl(2, None, h) - sl(1, -1, h)
        ca = -dx2 / (dx1 * (dx1 + dx2))
        cb = (dx2 - dx1) / (dx1 * dx2)
        cc = dx1 / (dx2 * (dx1 + dx2))
        inner = ca * sl(0, -2) + cb * sl(1, -1) + cc * sl(2, None)
    else:
        raise ValueError("Spacing arrays must be 1D arrays or scalars.")
    return jnp.concatenate((upper, inner, lower), axis=axis)


def gradient(f, *varargs, axis=None, edge_order=None):
    """Second-order central differences inside, first-order at the edges.

    `varargs` are scalar spacings or 1-D coordinate arrays, one per axis (or one for all).
    """
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not supported.")
    a, *spacing = util.promote_dtypes_inexact(*util.ensure_arraylike("gradient", f, *varargs)) \
        if varargs else util.promote_dtypes_inexact(util.ensure_arraylike("gradient", f))
    if axis is None:
        axes = tuple(range(a.ndim))
    else:
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        axes = tuple(util.canonicalize_axis(i, a.ndim) for i in axes)
    if not axes:
        return []  # no axes (axis=(), or a 0-d array), no gradients, as in JAX
    if min(a.shape[i] for i in axes) < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                         "(edge_order + 1) elements are required.")
    if len(spacing) == 0:
        dx = [util.convert(1.0, a.dtype, True)] * len(axes)
    elif len(spacing) == 1:
        dx = list(spacing) * len(axes)
    elif len(spacing) == len(axes):
        dx = list(spacing)
    else:
        raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}")
    grads = [_gradient_along_axis(a, h, ax) for ax, h in zip(axes, dx)]
    return grads[0] if len(axes) == 1 else grads


@eager_compiled(static_argnames=('axis',))
def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """Integral of `y` along `axis` by the trapezoidal rule (samples at `x` or spacing `dx`)."""
    jnp = _jnp()
    if x is None:
        y_arr, = util.promote_dtypes_inexact(util.ensure_arraylike("trapezoid", y))
        d = dx
    else:
        y_arr, x_arr = util.promote_dtypes_inexact(*util.ensure_arraylike("trapezoid", y, x))
        d = diff(x_arr, axis=-1 if x_arr.ndim == 1 else axis)
    axis = util.canonicalize_axis(axis, y_arr.ndim)
    if x is not None and x_arr.ndim == 1:
        d = d.reshape(tuple(d.shape[0] if i == axis else 1 for i in range(y_arr.ndim)))
    # An array `d` (dx, or diff of an n-d x) broadcasts against y's intervals in y's own
    # layout, as in NumPy (moving y's axis last had paired dx's axes with the wrong ones).
    leading = (slice(None),) * axis
    upper, lower = y_arr[leading + (slice(1, None),)], y_arr[leading + (slice(None, -1),)]
    return 0.5 * jnp.sum(d * (upper + lower), axis=axis)


@eager_compiled(static_argnames=('left', 'right', 'period'))
def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points (xp, fp) at `x`.

    `left`/`right` give the values outside [xp[0], xp[-1]] (or 'extrapolate'); `period`
    makes the abscissa periodic.
    """
    jnp = _jnp()
    x, xp, fp = util.ensure_arraylike("interp", x, xp, fp)
    if xp.shape != fp.shape or xp.ndim != 1:
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    if xp.shape[0] == 0:
        raise ValueError("array of sample points is empty")
    x_arr, xp_arr = util.promote_dtypes_inexact(x, xp)
    fp_arr, = util.promote_dtypes_inexact(fp)
    extrapolate = []
    for name, side in (("left", left), ("right", right)):
        if isinstance(side, str):
            if side != "extrapolate":
                raise ValueError(f"the only valid string value of `{name}` is 'extrapolate', "
                                 f"but got: {side!r}")
            extrapolate.append(True)
        else:
            extrapolate.append(False)
    if dtypes.is_complex(x_arr.dtype):
        raise ValueError("jnp.interp: complex x values not supported.")
    if period is not None:
        if np.ndim(period) != 0:
            raise ValueError(f"period must be a scalar; got {period}")
        period = jnp.abs(period)
        x_arr = x_arr % period
        xp_arr = xp_arr % period
        from fluxion import lax
        xp_arr, fp_arr = lax.sort_key_val(xp_arr, fp_arr)
        xp_arr = jnp.concatenate([xp_arr[-1:] - period, xp_arr, xp_arr[:1] + period])
        fp_arr = jnp.concatenate([fp_arr[-1:], fp_arr, fp_arr[:1]])
    i = jnp.clip(jnp.searchsorted(xp_arr, x_arr, side="right"), 1, xp_arr.shape[0] - 1)
    df = fp_arr[i] - fp_arr[i - 1]
    dx = xp_arr[i] - xp_arr[i - 1]
    delta = x_arr - xp_arr[i - 1]
    epsilon = np.spacing(np.finfo(xp_arr.dtype).eps)
    dx0 = jnp.abs(dx) <= epsilon  # a where, not a division, keeps gradients finite
    f = jnp.where(dx0, fp_arr[i - 1], fp_arr[i - 1] + (delta / jnp.where(dx0, 1, dx)) * df)
    if not extrapolate[0] and period is None:
        f = jnp.where(x_arr < xp_arr[0], fp_arr[0] if left is None else left, f)
    if not extrapolate[1] and period is None:
        f = jnp.where(x_arr > xp_arr[-1], fp_arr[-1] if right is None else right, f)
    return f


def _conv(x, y, mode, op, precision, preferred_element_type):
    jnp = _jnp()
    from fluxion import lax
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"{op}() only support 1-dimensional inputs.")
    if preferred_element_type is None:
        x, y = util.promote_dtypes_inexact(x, y)  # NumPy's default for convolutions
    else:
        x, y = util.promote_dtypes(x, y)
    if x.shape[0] == 0 or y.shape[0] == 0:
        raise ValueError(f"{op}: inputs cannot be empty, got shapes {x.shape} and {y.shape}.")
    out_order = slice(None)
    if op == "correlate":
        y = jnp.conj(y)
        if x.shape[0] < y.shape[0]:
            x, y = y, x
            out_order = slice(None, None, -1)
    else:
        if x.shape[0] < y.shape[0]:
            x, y = y, x
        y = jnp.flip(y)
    m = y.shape[0]
    if mode == "valid":
        padding = [(0, 0)]
    elif mode == "same":
        padding = [(m // 2, m - m // 2 - 1)]
    elif mode == "full":
        padding = [(m - 1, m - 1)]
    else:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    result = lax.conv_general_dilated(x[None, None, :], y[None, None, :], (1,), padding,
                                      precision=precision,
                                      preferred_element_type=preferred_element_type)
    return result[0, 0, out_order]


@eager_compiled(static_argnames=('mode', 'precision', 'preferred_element_type'))
def convolve(a, v, mode: str = "full", *, precision=None, preferred_element_type=None):
    """Discrete linear convolution of two 1-D arrays (modes 'full', 'same', 'valid')."""
    a, v = util.ensure_arraylike("convolve", a, v)
    return _conv(a, v, mode, "convolve", precision, preferred_element_type)


@eager_compiled(static_argnames=('mode', 'precision', 'preferred_element_type'))
def correlate(a, v, mode: str = "valid", *, precision=None, preferred_element_type=None):
    """Cross-correlation of two 1-D arrays (the second is conjugated)."""
    a, v = util.ensure_arraylike("correlate", a, v)
    return _conv(a, v, mode, "correlate", precision, preferred_element_type)


@eager_compiled(static_argnames=('axis',))
def unwrap(p, discont=None, axis: int = -1, period=2 * np.pi):
    """Unwrap phases: replace jumps larger than `discont` by their `period` complement."""
    jnp = _jnp()
    p = util.ensure_arraylike("unwrap", p)
    # Integer phases with an integer period stay integers (as in JAX).
    p, period = util.promote_dtypes(p, period)
    if dtypes.is_complex(p.dtype):
        raise ValueError("jnp.unwrap does not support complex inputs.")
    if p.shape[axis] == 0:
        return p
    if discont is None:
        discont = period / 2
    interval = period // 2 if dtypes.is_integer(p.dtype) else period / 2
    dd = diff(p, axis=axis)
    ddmod = jnp.remainder(dd + interval, period) - interval
    ddmod = jnp.where((ddmod == -interval) & (dd > 0), interval, ddmod)
    correction = jnp.where(jnp.abs(dd) < discont, 0, ddmod - dd)
    axis = util.canonicalize_axis(axis, p.ndim)
    return jnp.concatenate((_slice_axis(p, 0, 1, axis),
                            _slice_axis(p, 1, None, axis) + jnp.cumsum(correction, axis=axis)),
                           axis=axis)


@eager_compiled(static_argnames=('axisa', 'axisb', 'axisc', 'axis'))
def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None):
    """Cross product of (arrays of) 2- or 3-vectors."""
    jnp = _jnp()
    a, b = util.promote_dtypes(*util.ensure_arraylike("cross", a, b))
    if axis is not None:
        axisa = axisb = axisc = axis
    a = jnp.moveaxis(a, axisa, -1)
    b = jnp.moveaxis(b, axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError("Dimension must be either 2 or 3 for cross product")
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    a0, a1 = a[..., 0], a[..., 1]
    a2 = a[..., 2] if a.shape[-1] == 3 else jnp.zeros_like(a0)
    b0, b1 = b[..., 0], b[..., 1]
    b2 = b[..., 2] if b.shape[-1] == 3 else jnp.zeros_like(b0)
    c = jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])
    return jnp.moveaxis(c, 0, axisc)


def _compile_eager_calls():  # as in manipulation.py
    from fluxion._src.numpy.eager import compile_eagerly
    compile_eagerly(globals(), names=("gradient", "ediff1d"),
                    static_parameters=frozenset({"axis", "edge_order"}))


_compile_eager_calls()
