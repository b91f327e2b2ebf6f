"""dtype utilities (`fluxion.dtypes`)."""
from fluxion._src.dtypes import (float0, bfloat16, canonicalize_dtype, result_type,  # noqa: F401
                                 promote_types, issubdtype, is_weakly_typed, finfo, iinfo, dtype,
                                 scalar_type_of, TypePromotionError)
from fluxion._src.dtypes import extended, prng_key, itemsize_bits  # noqa: E402,F401
