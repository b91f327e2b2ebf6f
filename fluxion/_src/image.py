"""Image resampling (`fluxion.image`): resize and scale_and_translate, as jax.image.

Each resampled axis is a contraction with a (input size x output size) weight matrix built
from the method's kernel, so resizing differentiates with respect to the image and, in
`scale_and_translate`, the scale and translation.
"""
from __future__ import annotations

import enum
import math

import numpy as np

import fluxion.numpy as jnp
from fluxion._src import core, dtypes
from fluxion._src.lax.contractions import Precision
from fluxion._src.numpy.eager import eager_compiled


class ResizeMethod(enum.Enum):
    """Resampling methods; `from_string` takes JAX's names ('bilinear', 'lanczos3', ...)."""

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> "ResizeMethod":
        for names, method in _NAMES:
            if s in names:
                return method
        raise ValueError(f'Unknown resize method "{s}"')


_NAMES = [
    (("nearest",), ResizeMethod.NEAREST),
    (("linear", "bilinear", "trilinear", "triangle"), ResizeMethod.LINEAR),
    (("lanczos3",), ResizeMethod.LANCZOS3),
    (("lanczos5",), ResizeMethod.LANCZOS5),
    (("cubic", "bicubic", "tricubic"), ResizeMethod.CUBIC),
    (("cubic-pytorch", "bicubic-pytorch"), ResizeMethod.CUBIC_PYTORCH),
    (("area",), ResizeMethod.AREA),
]


def _lanczos(radius):
    def kernel(x):
        y = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
        safe = jnp.where(x != 0, np.pi ** 2 * x ** 2, 1)
        out = jnp.where(x > 1e-3, y / safe, 1)
        return jnp.where(x > radius, 0.0, out)
    return kernel


def _cubic(a):
    """Keys' cubic convolution kernel with parameter `a` (-0.5: Keys, -0.75: OpenCV/PyTorch)."""
    def kernel(x):
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, far, near))
    return kernel


def _triangle(x):
    return jnp.maximum(0, 1 - jnp.abs(x))


_AREA = object()
_KERNELS = {  # method -> (radius, kernel)
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _cubic(-0.5)),
    ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)),
    ResizeMethod.AREA: (1, _AREA),
}


def _normalized(weights, dtype):
    """Columns divided by their sums; columns whose sum is ~0 become 0."""
    total = jnp.sum(weights, axis=0, keepdims=True)
    safe = jnp.where(total != 0, total, 1)
    return jnp.where(jnp.abs(total) > 1000.0 * float(np.finfo(np.float32).eps),
                     weights / safe, 0)


def _weight_matrix(in_size, out_size, scale, translation, kernel, antialias, edge_padding,
                   radius):
    dtype = dtypes.result_type(scale, translation)
    inv_scale = 1.0 / scale
    kernel_scale = jnp.maximum(inv_scale, 1.0) if antialias else 1.0
    sample = (jnp.arange(out_size, dtype=dtype) + 0.5) * inv_scale - translation * inv_scale - 0.5
    pad = 0
    if edge_padding:
        pad = radius
        if antialias:
            s = core.concrete_or_error(scale, "Antialiasing with edge padding requires a static "
                                              "scale.")
            pad = math.ceil(radius * max(1.0 / float(s), 1.0))
    positions = jnp.arange(-pad, in_size + pad, dtype=dtype)
    if kernel is _AREA:
        left_out = jnp.arange(out_size, dtype=dtype) * inv_scale - translation * inv_scale
        right_out = left_out + inv_scale
        left_in = jnp.arange(in_size, dtype=dtype)
        weights = jnp.maximum(0.0, jnp.minimum(right_out[None, :], left_in[:, None] + 1.0)
                              - jnp.maximum(left_out[None, :], left_in[:, None]))
    else:
        weights = kernel(jnp.abs(sample[None, :] - positions[:, None]) / kernel_scale)
    if edge_padding:  # taps beyond the edges read the edge pixel
        rows = jnp.clip(positions.astype(jnp.int32), 0, in_size - 1)
        cols = jnp.broadcast_to(jnp.arange(out_size)[None, :], (positions.shape[0], out_size))
        folded = jnp.zeros((in_size, out_size), dtype).at[rows[:, None], cols].add(weights)
        return _normalized(folded, dtype)
    weights = _normalized(weights, dtype)
    inside = (sample >= -0.5) & (sample <= in_size - 0.5)
    return jnp.where(inside[None, :], weights, 0)


def _resample(x, shape, spatial_dims, scale, translation, method, antialias, precision):
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    edge_padding = method == ResizeMethod.CUBIC_PYTORCH and not antialias
    for i, d in enumerate(spatial_dims):
        d = d % x.ndim
        w = _weight_matrix(x.shape[d], shape[d], scale[i], translation[i], kernel, antialias,
                           edge_padding, radius).astype(x.dtype)
        moved = jnp.moveaxis(x, d, -1)
        x = jnp.moveaxis(jnp.matmul(moved, w, precision=precision), -1, d)
    return x


def _inexact(x):
    x = jnp.asarray(x)
    return x if dtypes.is_inexact(x.dtype) else x.astype(dtypes.default_float_dtype())


def _method(method) -> ResizeMethod:
    return ResizeMethod.from_string(method) if isinstance(method, str) else method


def _check_rank(shape, image):
    if len(shape) != image.ndim:
        raise ValueError("shape must have length equal to the number of dimensions of x; "
                         f" {shape} vs {image.shape}")


def scale_and_translate(image, shape, spatial_dims, scale, translation, method,
                        antialias: bool = True, precision=Precision.HIGHEST):
    """Resample `image` to `shape` on `spatial_dims`: output pixel centres map to input
    coordinates by (out + 0.5 - translation) / scale - 0.5.

    Parameters
    ----------
    image : array
    shape : output shape (same rank as `image`).
    spatial_dims : the axes resampled; `scale` and `translation` give one value per axis.
    method : 'linear', 'lanczos3', 'lanczos5', 'cubic', 'cubic-pytorch' or 'area'
        (or a ResizeMethod); 'nearest' is not supported here.
    antialias : bool
        When downsampling, widen the kernel by 1/scale.
    """
    shape = _output_shape(shape, "scale_and_translate")
    image = jnp.asarray(image)
    _check_rank(shape, image)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for "
                         "scale_and_translate.")
    image = _inexact(image)
    scale, translation = _inexact(scale), _inexact(translation)
    dtype = dtypes.promote_types(scale.dtype, translation.dtype)
    scale, translation = scale.astype(dtype), translation.astype(dtype)
    for name, value in (("scale", scale), ("translation", translation)):
        if value.shape != (len(spatial_dims),):
            raise ValueError(f"scale_and_translate: {name} needs one value per spatial "
                             f"dimension {tuple(spatial_dims)}, got shape {value.shape}")
    if len(spatial_dims) == 0:
        return image
    return _resample(image, shape, tuple(spatial_dims), scale, translation, method, antialias,
                     precision)


def _resize_nearest(x, shape):
    for d, (m, n) in enumerate(zip(x.shape, shape)):
        if m == n:
            continue
        if n == 0:  # nothing to sample (m / n would divide by zero)
            x = jnp.take(x, jnp.zeros(0, np.int32), axis=d)
            continue
        offsets = jnp.floor((jnp.arange(n, dtype=np.float32) + 0.5) * (m / n)).astype(np.int32)
        x = jnp.take(x, offsets, axis=d)
    return x


@eager_compiled(static_argnames=("shape", "method", "antialias", "precision"))
def _resize(image, shape, method, antialias, precision):
    _check_rank(shape, image)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    image = _inexact(image)
    dims = tuple(d for d in range(len(shape)) if image.shape[d] != shape[d])
    scale = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
    return _resample(image, shape, dims, scale, [0.0] * len(dims), method, antialias, precision)


def resize(image, shape, method, antialias: bool = True, precision=Precision.HIGHEST):
    """Resize `image` to `shape` (every axis whose size changes is resampled).

    Parameters
    ----------
    image : array
    shape : the output shape, of the same rank as `image`.
    method : 'nearest', 'linear' ('bilinear', 'trilinear', 'triangle'), 'lanczos3',
        'lanczos5', 'cubic' ('bicubic', 'tricubic'), 'cubic-pytorch' or 'area', or a
        ResizeMethod.
    antialias : bool
        When downsampling, widen the kernel so it acts as a low-pass filter (not for
        'nearest').
    precision : lax.Precision of the contractions.
    """
    return _resize(jnp.asarray(image), _output_shape(shape, "resize"), method, antialias,
                   precision)


def _output_shape(shape, name: str) -> tuple:
    """The output shape as ints; a fractional size is a TypeError (it was truncated)."""
    from fluxion._src.numpy.util import canonicalize_shape
    return canonicalize_shape(shape, f"The shape argument of {name}")
