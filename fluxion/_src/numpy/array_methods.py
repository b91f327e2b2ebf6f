"""Operators and methods shared by `Array` and every `Tracer`, defined once in terms of jnp."""
from __future__ import annotations

from fluxion._src import core
from fluxion._src.array import Array
from fluxion._src.numpy import ufuncs


def _defer(fn, swap=False):
    def op(self, other):
        if not _accepts(other):
            return NotImplemented
        return fn(other, self) if swap else fn(self, other)
    return op


def _accepts(other) -> bool:
    from fluxion._src.numpy.util import is_arraylike
    return is_arraylike(other) or isinstance(other, (list, tuple)) is False and hasattr(other, "__jax_array__")


_BINARY = {
    "add": ufuncs.add, "sub": ufuncs.subtract, "mul": ufuncs.multiply,
    "truediv": ufuncs.true_divide, "pow": ufuncs.power,
    "and": ufuncs.bitwise_and, "or": ufuncs.bitwise_or, "xor": ufuncs.bitwise_xor,
}
_COMPARE = {"eq": ufuncs.equal, "ne": ufuncs.not_equal, "lt": ufuncs.less, "le": ufuncs.less_equal,
            "gt": ufuncs.greater, "ge": ufuncs.greater_equal}


def _methods() -> dict:
    m = {}
    for name, fn in _BINARY.items():
        m[f"__{name}__"] = _defer(fn)
        m[f"__r{name}__"] = _defer(fn, swap=True)
    for name, fn in _COMPARE.items():
        m[f"__{name}__"] = _defer(fn)
    m["__neg__"] = lambda self: ufuncs.negative(self)
    m["__pos__"] = lambda self: self
    m["__abs__"] = lambda self: ufuncs.absolute(self)
    return m


def attach(extra: dict | None = None) -> None:
    """Install the operator methods (and `extra` methods) on Array and Tracer."""
    methods = _methods()
    if extra:
        methods.update(extra)
    for cls in (Array, core.Tracer):
        for name, fn in methods.items():
            setattr(cls, name, fn)


attach()
