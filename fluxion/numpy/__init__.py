"""fluxion.numpy: NumPy's API on fluxion arrays, traceable by every transformation."""
from fluxion._src.numpy import array_methods as _array_methods  # noqa: F401  (installs operators)
from fluxion._src.numpy import indexing as _indexing  # noqa: F401  (installs __getitem__ and .at)
from fluxion._src.numpy.ufuncs import *  # noqa: F401,F403
from fluxion._src.dtypes import (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,  # noqa: F401
                                 bfloat16, float16, float32, float64, complex64, complex128,
                                 result_type, promote_types, issubdtype, finfo, iinfo)
from fluxion._src.array import Array as ndarray  # noqa: F401
