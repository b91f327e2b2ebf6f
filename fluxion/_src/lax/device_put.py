"""device_put_p: `device_put` of traced values, as an identity primitive (JAX's `device_put_p`).

Inside a traced function the transfer is the identity (one program runs on one device); the
equation records the target devices, as in JAX's jaxprs. Concrete values take `device_put`'s
direct path and never bind it.
"""
from __future__ import annotations

from jaxlib.xla_client import ArrayCopySemantics

from fluxion._src import ad, batching, core
from fluxion._src.compiler import lowering

device_put_p = core.Primitive("device_put")
device_put_p.multiple_results = True


def _abstract_eval(*avals, devices, srcs, copy_semantics):
    return list(avals)


def _impl(*xs, devices, srcs, copy_semantics):
    from fluxion._src import api
    return [api.device_put(x, d) for x, d in zip(xs, devices)]


def _jvp(primals, tangents, *, devices, srcs, copy_semantics):
    out = device_put_p.bind(*primals, devices=devices, srcs=srcs,
                            copy_semantics=copy_semantics)
    nz = [i for i, t in enumerate(tangents) if type(t) is not ad.Zero]
    tan = [ad.Zero.from_primal_value(o) for o in out]
    if nz:
        moved = device_put_p.bind(*[tangents[i] for i in nz],
                                  devices=tuple(devices[i] for i in nz),
                                  srcs=tuple(srcs[i] for i in nz),
                                  copy_semantics=tuple(copy_semantics[i] for i in nz))
        for i, t in zip(nz, moved):
            tan[i] = t
    return out, tan


def _transpose(cts, *args, devices, srcs, copy_semantics):
    nz = [i for i, ct in enumerate(cts) if type(ct) is not ad.Zero]
    result = [None if not ad.is_undefined_primal(x) else ad.Zero(x.aval) for x in args]
    if nz:
        # Cotangents travel back to where the primals came from, as copies.
        moved = device_put_p.bind(*[cts[i] for i in nz], devices=tuple(srcs[i] for i in nz),
                                  srcs=tuple(devices[i] for i in nz),
                                  copy_semantics=(ArrayCopySemantics.ALWAYS_COPY,) * len(nz))
        for i, ct in zip(nz, moved):
            if ad.is_undefined_primal(args[i]):
                result[i] = ct
    return result


def _batch(args, dims, **params):
    return device_put_p.bind(*args, **params), list(dims)


device_put_p.def_abstract_eval(_abstract_eval)
device_put_p.def_impl(_impl)
lowering.register_lowering(device_put_p, lambda ctx, *xs, **_: list(xs))
ad.primitive_jvps[device_put_p] = _jvp
ad.primitive_transposes[device_put_p] = _transpose
batching.primitive_batchers[device_put_p] = _batch


def _source(leaf):
    """Where a traced leaf's value lives, when its trace knows the value (a JVP tracer of a
    concrete Array): its device, or a global Array's sharding. Cotangents go back there, as
    JAX infers `src`; None (no move) otherwise."""
    from fluxion._src.array import Array
    value = leaf.to_concrete_value()
    if type(value) is Array:
        return value.device
    if isinstance(value, Array):  # a global or pmap-sharded Array
        return value.sharding
    return None


def bind_traced(leaves, device):
    """device_put_p applied to a list of traced leaves (the tracing path of device_put)."""
    n = len(leaves)
    return device_put_p.bind(*leaves, devices=(device,) * n,
                             srcs=tuple(_source(x) for x in leaves),
                             copy_semantics=(ArrayCopySemantics.REUSE_INPUT,) * n)
