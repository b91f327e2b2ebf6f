"""Static type annotations (`jax.typing`): `ArrayLike` for array inputs, `DTypeLike` for
dtype arguments; annotate outputs with `fluxion.Array`."""
from typing import Any, Protocol, Union

import numpy as np

from fluxion._src.basearray import Array


class SupportsDType(Protocol):
    @property
    def dtype(self) -> np.dtype: ...


ArrayLike = Union[Array, np.ndarray, np.bool_, np.number, bool, int, float, complex]
DTypeLike = Union[str, type[Any], np.dtype, SupportsDType]
