"""Calling jaxlib's LAPACK FFI kernels from a CPU lowering rule.

The kernels take BLAS/LAPACK from SciPy; `_lapack.initialize()` imports it (~0.3 s), so it
runs on the first linear-algebra lowering, never at `import fluxion`.
"""
from __future__ import annotations

import threading

import numpy as np

from fluxion._src.compiler import backend
from fluxion._src.core import ShapedArray

_lock = threading.Lock()
_ready = False

_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}
# Hermitian/unitary spellings of the complex kernels.
_COMPLEX_NAMES = {"syevd": "heevd", "orgqr": "ungqr", "ormqr": "unmqr", "sytrd": "hetrd"}


def ensure_initialized() -> None:
    """Initialize jaxlib's LAPACK kernels and register them with XLA (once)."""
    global _ready
    if _ready:
        return
    with _lock:
        if _ready:
            return
        from jaxlib import xla_client
        from jaxlib.cpu import _lapack
        _lapack.initialize()
        for name, capsule in _lapack.registrations().items():
            xla_client.register_custom_call_target(
                name, capsule, platform="cpu", api_version=1 if name.endswith("_ffi") else 0)
        _ready = True


backend.register_kernel_registrar("lapack_", ensure_initialized)
backend.register_kernel_registrar("tridiagonal_solve_perturbed_ffi", ensure_initialized)


def target_name(op: str, dtype) -> str:
    """The jaxlib target for LAPACK routine `op` ("potrf", "syevd", ...) on `dtype`."""
    dtype = np.dtype(dtype)
    if dtype not in _PREFIX:
        raise TypeError(f"LAPACK {op} does not support dtype {dtype.name}")
    prefix = _PREFIX[dtype]
    if prefix in "cz":
        op = _COMPLEX_NAMES.get(op, op)
    return f"lapack_{prefix}{op}_ffi"


def _layout(ndim: int, matrix: bool):
    if matrix and ndim >= 2:
        return [ndim - 2, ndim - 1] + list(range(ndim - 3, -1, -1))
    return list(range(ndim - 1, -1, -1))


def char(c: str) -> str:
    return f"{ord(c)} : ui8"


def call(ctx, op: str, dtype, operands, result_avals, attrs=None, matrix_operands=None,
         matrix_results=None, alias=(0, 0)):
    """Emit one LAPACK custom call; matrices travel column-major, leading dims are batch.

    `alias` is an (output, operand) pair, or a list of them, for kernels working in place.
    """
    ensure_initialized()
    return kernel_call(ctx, target_name(op, dtype), operands, result_avals, attrs,
                       matrix_operands, matrix_results, alias)


def kernel_call(ctx, target: str, operands, result_avals, attrs=None, matrix_operands=None,
                matrix_results=None, alias=(0, 0), column_major: bool = True):
    """Emit one FFI call of a linear-algebra kernel (LAPACK on CPU, cuSOLVER on GPUs).

    Matrices (operands and results of rank >= 2, unless `matrix_operands`/`matrix_results` say
    otherwise) travel column-major when `column_major`; leading dims are batch. `alias` is an
    (output, operand) pair, or a list of them, for kernels working in place.
    """
    matrix_operands = matrix_operands or [True] * len(operands)
    matrix_results = matrix_results or [a.ndim >= 2 for a in result_avals]
    extra = None
    if alias is not None:  # the kernel works in place: result alias[0] reuses operand alias[1]
        pairs = alias if isinstance(alias, list) else [alias]
        extra = {"output_operand_aliases": "[" + ", ".join(
            f"#stablehlo.output_operand_alias<output_tuple_indices = "
            f"[{out if len(result_avals) > 1 else ''}], operand_index = {arg}, "
            f"operand_tuple_indices = []>" for out, arg in pairs) + "]"}
    return ctx.custom_call(
        target, operands, result_avals, backend_config=dict(attrs or {}),
        operand_layouts=[_layout(x.aval.ndim, m and column_major)
                         for x, m in zip(operands, matrix_operands)],
        result_layouts=[_layout(a.ndim, m and column_major)
                        for a, m in zip(result_avals, matrix_results)],
        extra_attrs=extra)


def nan_where_failed(ctx, info, x, batch_ndim: int):
    """x with NaN in every batch member whose LAPACK info is non-zero (JAX's convention)."""
    ok = ctx.compare(info, ctx.constant(0, np.int32, info.shape), "EQ")
    ok = ctx.broadcast_in_dim(ok, x.shape, list(range(batch_ndim)))
    nan = ctx.constant(np.nan, x.dtype, x.shape)
    return ctx.select(ok, x, nan)


def info_aval(batch_shape) -> ShapedArray:
    return ShapedArray(tuple(batch_shape), np.dtype(np.int32))
