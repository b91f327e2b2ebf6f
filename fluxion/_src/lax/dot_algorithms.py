"""Dot algorithms: `lax.DotAlgorithm` and `lax.DotAlgorithmPreset`, the `precision` values that
fix the operand and accumulation types of a dot_general (StableHLO's `dot_algorithm`)."""
from __future__ import annotations

import enum
from typing import Any, NamedTuple

import numpy as np

from fluxion._src import dtypes
from fluxion._src.compiler.hlo import element_type


def _algorithm_text(lhs: str, rhs: str, accumulation: str, lhs_components: int = 1,
                    rhs_components: int = 1, operations: int = 1,
                    imprecise: bool = False) -> str:
    """The `#stablehlo.dot_algorithm<...>` attribute, given MLIR element type names."""
    return (f"#stablehlo.dot_algorithm<lhs_precision_type = {lhs}, rhs_precision_type = {rhs}, "
            f"accumulation_type = {accumulation}, lhs_component_count = {lhs_components}, "
            f"rhs_component_count = {rhs_components}, num_primitive_operations = {operations}, "
            f"allow_imprecise_accumulation = {str(bool(imprecise)).lower()}>")


class DotAlgorithm(NamedTuple):
    """An explicit algorithm for dot products: the types the operands are rounded to and the
    accumulation type, and for algorithms emulating a higher precision the number of
    components of each operand and of primitive operations.

    As `precision` of `lax.dot_general` (and the functions built on it), the operands are
    converted to `lhs_precision_type` / `rhs_precision_type` and the product accumulated in
    `accumulation_type`; the result keeps the usual dot result type (or
    `preferred_element_type`)."""

    lhs_precision_type: Any
    rhs_precision_type: Any
    accumulation_type: Any
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False

    def _hlo_attr(self, lhs_dtype, rhs_dtype) -> str:
        del lhs_dtype, rhs_dtype  # the algorithm names its own types
        return _algorithm_text(
            element_type(np.dtype(self.lhs_precision_type)),
            element_type(np.dtype(self.rhs_precision_type)),
            element_type(np.dtype(self.accumulation_type)), self.lhs_component_count,
            self.rhs_component_count, self.num_primitive_operations,
            self.allow_imprecise_accumulation)


_FLOAT8_NAMES = ("float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                 "float8_e5m2fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu")
# The float8 types a preset may output into (ANY_F8_ANY_F8_F32 and its fast variant).
_FLOAT8_OUTPUT_NAMES = ("float8_e4m3fn", "float8_e5m2", "float8_e5m2fnuz", "float8_e4m3fnuz",
                        "float8_e4m3b11fnuz")


class DotAlgorithmPreset(enum.Enum):
    """Named dot-product algorithms, `LHS_RHS_ACCUMULATION` (a `_X<n>` suffix: emulated with n
    operations). Pass one, or its name, as `precision` of `lax.dot` and friends."""

    DEFAULT = 1
    ANY_F8_ANY_F8_F32 = 2
    ANY_F8_ANY_F8_F32_FAST_ACCUM = 3
    ANY_F8_ANY_F8_ANY = 4
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = 5
    F16_F16_F16 = 6
    F16_F16_F32 = 7
    BF16_BF16_BF16 = 8
    BF16_BF16_F32 = 9
    BF16_BF16_F32_X3 = 10
    BF16_BF16_F32_X6 = 11
    BF16_BF16_F32_X9 = 12
    TF32_TF32_F32 = 13
    TF32_TF32_F32_X3 = 14
    F32_F32_F32 = 15
    F64_F64_F64 = 16

    def __repr__(self):
        return f"{self.__class__.__name__}.{self.name}"

    def __str__(self):
        return self.name

    def _is_float8(self) -> bool:
        return self.name.startswith("ANY_F8")

    @property
    def supported_lhs_types(self) -> tuple | None:
        """The operand types the algorithm takes as they are (others convert to the first);
        None: any."""
        if self is DotAlgorithmPreset.DEFAULT or self._is_float8():
            return None
        if self.name.startswith("F16_"):
            return (np.dtype(np.float16),)
        if self in (DotAlgorithmPreset.BF16_BF16_BF16, DotAlgorithmPreset.BF16_BF16_F32):
            return (np.dtype(dtypes.bfloat16), np.dtype(np.float32))
        if self is DotAlgorithmPreset.F64_F64_F64:
            return (np.dtype(np.float64),)
        return (np.dtype(np.float32),)

    @property
    def supported_rhs_types(self) -> tuple | None:
        return self.supported_lhs_types

    @property
    def accumulation_type(self) -> np.dtype | None:
        """The accumulation type; None where the output type decides."""
        if self in (DotAlgorithmPreset.DEFAULT, DotAlgorithmPreset.ANY_F8_ANY_F8_ANY,
                    DotAlgorithmPreset.ANY_F8_ANY_F8_ANY_FAST_ACCUM):
            return None
        return np.dtype({DotAlgorithmPreset.F16_F16_F16: np.float16,
                         DotAlgorithmPreset.BF16_BF16_BF16: dtypes.bfloat16,
                         DotAlgorithmPreset.F64_F64_F64: np.float64}.get(self, np.float32))

    def supported_output_types(self, lhs_dtype, rhs_dtype) -> tuple | None:
        """The result types the algorithm produces directly (others are converted from the
        first); None: any."""
        if self in (DotAlgorithmPreset.ANY_F8_ANY_F8_F32,
                    DotAlgorithmPreset.ANY_F8_ANY_F8_F32_FAST_ACCUM):
            return (np.dtype(np.float32), np.dtype(np.float16), np.dtype(dtypes.bfloat16),
                    *(np.dtype(getattr(dtypes, n)) for n in _FLOAT8_OUTPUT_NAMES))
        narrow = {DotAlgorithmPreset.F16_F16_F32: np.dtype(np.float16),
                  DotAlgorithmPreset.BF16_BF16_F32: np.dtype(dtypes.bfloat16)}.get(self)
        if narrow is not None:  # the narrow output only from narrow inputs
            both = dtypes.promote_types(lhs_dtype, rhs_dtype)
            return (np.dtype(np.float32), narrow) if both == narrow else (np.dtype(np.float32),)
        accumulation = self.accumulation_type
        return None if accumulation is None else (accumulation,)

    def _hlo_attr(self, lhs_dtype, rhs_dtype) -> str | None:
        if self is DotAlgorithmPreset.DEFAULT:
            return None
        if self._is_float8():
            float8 = {np.dtype(getattr(dtypes, n)) for n in _FLOAT8_NAMES}
            if np.dtype(lhs_dtype) not in float8 or np.dtype(rhs_dtype) not in float8:
                raise ValueError(f"The dot algorithm '{self}' requires both inputs to have "
                                 f"float8 dtypes. Got {np.dtype(lhs_dtype)} and "
                                 f"{np.dtype(rhs_dtype)} instead.")
            fast = self is DotAlgorithmPreset.ANY_F8_ANY_F8_F32_FAST_ACCUM
            return _algorithm_text(element_type(lhs_dtype), element_type(rhs_dtype), "f32",
                                   imprecise=fast)
        lhs, rhs, accumulation, *suffix = self.name.lower().split("_")
        operations = int(suffix[0][1:]) if suffix else 1  # the _X<n> suffix
        return _algorithm_text(lhs, rhs, accumulation, operations=operations)


# The presets XLA:CPU computes; it would silently ignore the others.
_CPU_PRESETS = frozenset({
    DotAlgorithmPreset.DEFAULT, DotAlgorithmPreset.F16_F16_F16, DotAlgorithmPreset.F32_F32_F32,
    DotAlgorithmPreset.F64_F64_F64, DotAlgorithmPreset.BF16_BF16_F32,
    DotAlgorithmPreset.BF16_BF16_F32_X3, DotAlgorithmPreset.BF16_BF16_F32_X6})


def is_algorithm(precision) -> bool:
    return isinstance(precision, (DotAlgorithm, DotAlgorithmPreset))


def check_platform(algorithm, platform: str) -> None:
    """ValueError for an algorithm the platform cannot run (as JAX: only CPU is checked)."""
    if platform == "cpu" and algorithm not in _CPU_PRESETS:
        raise ValueError(f"The precision '{algorithm}' is not supported by dot_general on CPU")


def _pick(dtype: np.dtype, supported) -> np.dtype:
    if supported is None or dtype in supported:
        return dtype
    return np.dtype(supported[0])


def compute_types(algorithm, lhs_dtype, rhs_dtype, out_dtype) -> tuple:
    """(lhs, rhs, accumulation) types of a dot with `algorithm`; accumulation None: the
    output type."""
    if isinstance(algorithm, DotAlgorithm):
        return (np.dtype(algorithm.lhs_precision_type), np.dtype(algorithm.rhs_precision_type),
                np.dtype(algorithm.accumulation_type))
    lhs = _pick(np.dtype(lhs_dtype), algorithm.supported_lhs_types)
    rhs = _pick(np.dtype(rhs_dtype), algorithm.supported_rhs_types)
    accumulation = _pick(np.dtype(out_dtype), algorithm.supported_output_types(lhs, rhs))
    return lhs, rhs, accumulation


def algorithm_attr(algorithm, lhs_dtype, rhs_dtype) -> str | None:
    """The dot_general `algorithm` attribute text (None for the DEFAULT preset)."""
    return algorithm._hlo_attr(lhs_dtype, rhs_dtype)
