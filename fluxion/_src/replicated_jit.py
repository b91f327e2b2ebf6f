"""A jitted program holding `pmap`s: compiled as `num_replicas` replicas (the product of its
pmap axis sizes, see pmap_primitive.jaxpr_replicas). Outside the pmaps every replica computes
the same values. As in JAX, results that are a pmap's mapped results come back sharded over
the replica devices along the mapped axis, the others replicated over them
(replicated_outputs.py)."""
from __future__ import annotations

import numpy as np

from fluxion._src import replicated_outputs
from fluxion._src.compiler import backend
from fluxion._src.lax import parallel_lowering


class ReplicatedExecutable:
    """Called like dispatch.CompiledFunction."""

    __slots__ = ("exe", "devices", "in_avals", "out_avals", "out_axes", "axis_name",
                 "_shardings")

    def __call__(self, args) -> list:
        from fluxion._src import placement, pmap
        placement.activate()  # the results are committed to the replica devices
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
        return [self._result(bufs, aval, axis)
                for bufs, aval, axis in zip(outs, self.out_avals, self.out_axes)]

    def _result(self, bufs, aval, axis):
        from fluxion._src import global_array, pmap
        if axis == 0:
            return pmap.ShardedOutput(bufs, self.devices, aval, self.axis_name)
        sharding = self._shardings.get((axis, aval.ndim))
        if sharding is None:
            from fluxion._src.mesh import Mesh, PartitionSpec
            from fluxion._src.sharding_impls import NamedSharding
            mesh = Mesh(np.array(self.devices, dtype=object), (self.axis_name,))
            spec = PartitionSpec() if axis is None else PartitionSpec(*[None] * axis,
                                                                      self.axis_name)
            sharding = self._shardings[(axis, aval.ndim)] = NamedSharding(mesh, spec)
        return global_array.from_buffers(bufs, aval, sharding)

    @property
    def executable(self):
        """The compiled replicas (`.loaded`), for `Compiled.as_text` and its analyses."""
        return self.exe

    def array_call(self, single_output: bool):
        if single_output:
            return lambda args: self(args)[0]
        return self


def compile_replicated(closed, name: str, num_replicas: int, text=None) -> ReplicatedExecutable:
    from fluxion._src import pmap
    devs = pmap._replica_devices(num_replicas, None, None)
    out_axes, axis_name = replicated_outputs.layout(closed, num_replicas)
    exe = ReplicatedExecutable()
    exe.exe = pmap._compile(replicated_outputs.sliced(closed, out_axes),
                            [(parallel_lowering.EXTRA_REPLICAS, num_replicas)], devs, None,
                            text=text)
    exe.devices, exe.in_avals, exe.out_avals = devs, list(closed.in_avals), list(closed.out_avals)
    exe.out_axes, exe.axis_name, exe._shardings = out_axes, axis_name, {}
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
    out_axes, _ = replicated_outputs.layout(closed, replicas)
    return pmap.lower_replicated(replicated_outputs.sliced(closed, out_axes),
                                 [(parallel_lowering.EXTRA_REPLICAS, replicas)],
                                 platform, name=name)
