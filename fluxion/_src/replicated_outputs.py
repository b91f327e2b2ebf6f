"""How the results of a jit holding pmaps are laid out over its replicas, as JAX lays them out.

Every replica of such a program holds every result whole (a pmap's mapped results are
all-gathered). A result that is a pmap's mapped result, or an elementwise function of such
results, leaves the program as that replica's block along the mapped axis, so it comes back
sharded over the replica devices; every other result is replicated over them.
"""
from __future__ import annotations

import numpy as np

from fluxion._src import core, staging
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray


# Primitives whose result at an index depends only on their operands at that index.
_ELEMENTWISE = frozenset("""
    abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp conj convert_element_type
    copy copy_p cos cosh div eq erf erf_inv erfc exp exp2 expm1 floor ge gt imag integer_pow
    is_finite le lgamma digamma log log1p logistic lt max min mul ne neg nextafter not or pow real
    reduce_precision rem round rsqrt select_n sign sin sinh sqrt square sub tan tanh xor
    """.split())

replica_index_p = core.Primitive("replica_index")


def _replica_index_abstract_eval():
    return ShapedArray((), np.int32)


def _replica_index_lowering(ctx):
    rid = ctx.op1("stablehlo.replica_id", [], ShapedArray((), np.uint32))
    return ctx.convert(rid, np.int32)


replica_index_p.def_abstract_eval(_replica_index_abstract_eval)
lowering.register_lowering(replica_index_p, _replica_index_lowering)


def layout(closed, num_replicas: int):
    """(mapped axis or None for each result of `closed`, the mesh axis name).

    Only pmaps over all `num_replicas` replicas at the top level of the program count: the
    block of replica r along their mapped axis is slice r."""
    from fluxion._src.pmap import _INTERNAL_AXIS_NAME
    from fluxion._src.pmap_primitive import xla_pmap_p
    jaxpr = closed.jaxpr
    mapped: dict = {}
    name = None
    for eqn in jaxpr.eqns:
        if eqn.primitive is xla_pmap_p:
            if eqn.params["axis_size"] != num_replicas:
                continue
            if name is None:
                name = eqn.params["axis_name"]
            for v, a in zip(eqn.outvars, eqn.params["out_axes"]):
                if a is not None:
                    mapped[v] = a
        elif eqn.primitive.name in _ELEMENTWISE and len(eqn.outvars) == 1:
            out = eqn.outvars[0]
            axes, ok = set(), True
            for v in eqn.invars:
                if isinstance(v, core.Literal) or not v.aval.shape:
                    continue  # scalars broadcast
                if v in mapped:
                    axes.add(mapped[v])
                elif v.aval.shape != out.aval.shape:
                    ok = False
            if ok and len(axes) == 1:
                mapped[out] = axes.pop()
    axes = [None if isinstance(v, core.Literal) else mapped.get(v) for v in jaxpr.outvars]
    return axes, name if isinstance(name, str) else _INTERNAL_AXIS_NAME


def sliced(closed, axes):
    """`closed` returning, for each result mapped along axis a, the replica's block: squeezed
    along axis 0 (a pmap result's per-device buffer), kept as a size-1 dimension elsewhere."""
    from fluxion._src.lax import structural
    if all(a is None for a in axes):
        return closed

    def per_replica(*xs):
        outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *xs)
        idx = replica_index_p.bind()
        return [o if a is None else structural.dynamic_slice_in_dim(o, idx, 1, a,
                                                                    allow_negative_indices=False)
                if a else structural.dynamic_index_in_dim(o, idx, 0, keepdims=False,
                                                          allow_negative_indices=False)
                for o, a in zip(outs, axes)]

    return staging.trace_to_jaxpr(per_replica, list(closed.in_avals), origin="jit")
