"""A jitted program holding `pmap`s: compiled as `num_replicas` replicas (the product of its
pmap axis sizes, see pmap_primitive.jaxpr_replicas). Outside the pmaps every replica computes
the same values; the results are read from the first replica."""
from __future__ import annotations

from fluxion._src.array import Array
from fluxion._src.compiler import backend
from fluxion._src.lax import parallel_lowering


class ReplicatedExecutable:
    """Called like dispatch.CompiledFunction."""

    __slots__ = ("exe", "devices", "in_avals", "out_avals")

    def __call__(self, args) -> list:
        from fluxion._src import placement, pmap
        placement.activate()  # the results are committed to the first replica's device
        exe, devs = self.exe, self.devices
        if exe.const_arrays is None:
            exe.const_arrays = [backend.assemble_array(
                v.aval, exe.sharding, pmap._per_device_buffers(c, None, devs, v.aval))
                for c, v in zip(exe.consts, exe.constvars)]
        garrs = list(exe.const_arrays)
        for x, aval in zip(args, self.in_avals):
            garrs.append(backend.assemble_array(
                aval, exe.sharding, pmap._per_device_buffers(x, None, devs, aval)))
        outs = exe.loaded.execute_sharded(garrs).disassemble_into_single_device_arrays()
        return [Array(bufs[0], aval) for bufs, aval in zip(outs, self.out_avals)]

    def array_call(self, single_output: bool):
        if single_output:
            return lambda args: self(args)[0]
        return self


def compile_replicated(closed, name: str, num_replicas: int, text=None) -> ReplicatedExecutable:
    from fluxion._src import pmap
    devs = pmap._replica_devices(num_replicas, None, None)
    exe = ReplicatedExecutable()
    exe.exe = pmap._compile(closed, [(parallel_lowering.EXTRA_REPLICAS, num_replicas)], devs,
                            None, text=text)
    exe.devices, exe.in_avals, exe.out_avals = devs, list(closed.in_avals), list(closed.out_avals)
    return exe


def replicas_needed(closed) -> int:
    from fluxion._src import pmap_primitive
    return pmap_primitive.jaxpr_replicas(closed)


def maybe_compile(closed, name: str, text=None):
    """The replicated executable of `closed` if it holds a pmap, else None."""
    replicas = replicas_needed(closed)
    return None if replicas == 1 else compile_replicated(closed, name, replicas, text)


def maybe_lower(closed, name: str, platform: str):
    """The module text of `closed` as replicas if it holds a pmap, else None."""
    from fluxion._src import pmap
    replicas = replicas_needed(closed)
    if replicas == 1:
        return None
    pmap._replica_devices(replicas, None, None)
    return pmap.lower_replicated(closed, [(parallel_lowering.EXTRA_REPLICAS, replicas)],
                                 platform, name=name)
