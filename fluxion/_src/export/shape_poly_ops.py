"""`dim_as_value_p`: a symbolic dimension used as a value (the size in `mean`, `arange(b)`)."""
from __future__ import annotations

from fluxion._src import core, dtypes
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray
from fluxion._src.export.shape_poly import InconclusiveDimensionOperation

dim_as_value_p = core.Primitive("dim_as_value")


def _abstract_eval(*, dim):
    return ShapedArray((), dtypes.default_int_dtype(), weak_type=True)


def _impl(*, dim):
    raise InconclusiveDimensionOperation(
        f"Symbolic dimension '{dim}' has no value outside of tracing for export.")


def _lowering(ctx, *, dim):
    return ctx.convert(ctx.dim_value(dim), ctx.avals_out[0].dtype)


dim_as_value_p.def_abstract_eval(_abstract_eval)
dim_as_value_p.def_impl(_impl)
lowering.register_lowering(dim_as_value_p, _lowering)
