"""The type of mutable references (`AbstractRef`), the eager `Ref` object and state effects."""
from __future__ import annotations

import numpy as np

from fluxion._src import core, effects
from fluxion._src.core import ShapedArray


class AbstractRef:
    """The abstract value of a mutable reference to an array (JAX's `AbstractRef`).

    A Ref is not an array: it is read and written only through the state primitives
    (`ref[idx]`, `ref[idx] = v`, `ref[idx] += v`). `memory_space` names where the buffer
    lives (None: the default memory; Pallas kernels use it for scratch and `ANY`).
    """

    __slots__ = ("inner_aval", "memory_space", "kind")
    array_abstraction_level = 1

    def __init__(self, inner_aval: ShapedArray, memory_space=None, kind=None):
        if isinstance(inner_aval, AbstractRef):
            raise TypeError("a Ref cannot hold another Ref")
        self.inner_aval = inner_aval  # a weak type stays: reads are weakly typed, as in JAX
        self.memory_space = memory_space
        self.kind = kind

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)
    ndim = property(lambda self: len(self.inner_aval.shape))
    size = property(lambda self: self.inner_aval.size)
    weak_type = False

    def update(self, shape=None, dtype=None, weak_type=None, memory_space=None) -> "AbstractRef":
        inner = self.inner_aval.update(shape=shape, dtype=dtype)
        return AbstractRef(inner, self.memory_space if memory_space is None else memory_space,
                           self.kind)

    def strip_weak_type(self) -> "AbstractRef":
        return self

    def str_short(self, short_dtypes: bool = True) -> str:
        space = "" if self.memory_space is None else f"<{self.memory_space}>"
        return f"Ref{space}{{{self.inner_aval.str_short(short_dtypes)}}}"

    __repr__ = __str__ = lambda self: self.str_short(short_dtypes=False)

    def __eq__(self, other):
        return (type(other) is AbstractRef and other.inner_aval is self.inner_aval
                and other.memory_space == self.memory_space and other.kind == self.kind)

    def __hash__(self):
        return hash((AbstractRef, self.inner_aval, self.memory_space, self.kind))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    # What a traced Ref does when indexed (see array_methods): the state primitives.
    def _getitem(self, tracer, idx):
        from fluxion._src.state import primitives
        return primitives.get(tracer, idx)

    def _setitem(self, tracer, idx, value):
        from fluxion._src.state import primitives
        primitives.set(tracer, idx, value)

    def _addupdate(self, tracer, value, idx=()):
        from fluxion._src.state import primitives
        primitives.addupdate(tracer, idx, value)


def is_ref_aval(aval) -> bool:
    return type(aval) is AbstractRef


def is_ref(x) -> bool:
    """True for a Ref: the eager object, or a tracer whose type is a Ref."""
    if type(x) is Ref:
        return True
    return isinstance(x, core.Tracer) and type(x.aval) is AbstractRef


class _RefMeta(type):
    def __instancecheck__(cls, x):
        # As in JAX, a traced Ref is an instance of Ref too.
        return type(x) is Ref or (isinstance(x, core.Tracer) and type(x.aval) is AbstractRef)


class Ref(metaclass=_RefMeta):
    """A mutable array (`fluxion.Ref`, made by `fluxion.new_ref`).

    Read with ``ref[idx]`` (``ref[...]`` for all of it), write with ``ref[idx] = value`` or
    ``ref[idx] += value``. Refs may be closed over or passed to `jit`-compiled functions and
    read and written inside `jit`, `scan`, `fori_loop` and `cond`; the compiled program takes
    their values in and gives the new values back, which are stored here.
    """

    __slots__ = ("_value", "_aval", "_frozen", "__weakref__")

    def __init__(self, value, aval: AbstractRef):
        self._value = value
        self._aval = aval
        self._frozen = False

    @property
    def aval(self) -> AbstractRef:
        return self._aval

    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)
    ndim = property(lambda self: self._aval.ndim)
    size = property(lambda self: self._aval.size)

    # What the buffer holding the value reports (as JAX's Ref forwards to its buffer).
    sharding = property(lambda self: self._read_value().sharding)
    format = property(lambda self: self._read_value().format)
    committed = property(lambda self: True)

    def unsafe_buffer_pointer(self) -> int:
        """The address of the buffer now holding the Ref's value."""
        return self._read_value().unsafe_buffer_pointer()

    def _check_live(self):
        if self._frozen:
            raise ValueError("This Ref was frozen (fluxion.ref.freeze) or freed and can no "
                             "longer be used.")

    def _read_value(self):
        self._check_live()
        return self._value

    def _store(self, value):
        """Keep `value` (the Ref's new contents from a compiled program): a write gives the
        buffer the Ref's own type, so a weak type is dropped, as in JAX."""
        from fluxion._src.array import Array
        if type(value) is Array and value.aval.weak_type:
            value = Array(value._buf, value.aval.strip_weak_type())
        self._value = value

    def __getitem__(self, idx):
        from fluxion._src.state import primitives
        return primitives.get(self, idx)

    def __setitem__(self, idx, value):
        from fluxion._src.state import primitives
        primitives.set(self, idx, value)

    @property
    def at(self):
        """``ref.at[idx]``: a view of part of the Ref (read and written through it)."""
        from fluxion._src.state import views
        return views.RefAt(self)

    def addupdate(self, x, idx=()):
        """``ref[idx] += x`` as one operation (the whole Ref for the default ``idx``)."""
        from fluxion._src.state import primitives
        primitives.addupdate(self, idx, x)

    def __len__(self):
        return len(self._aval)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._read_value(), dtype=dtype)

    def __repr__(self):
        if self._frozen:
            return f"Ref(<frozen>, dtype={self.dtype.name})"
        value = self._value
        if isinstance(value, core.Tracer) or not hasattr(value, "weak_type"):
            value = np.asarray(value)
        weak = ", weak_type=True" if getattr(value, "weak_type", False) else ""
        body = np.array2string(np.asarray(value), separator=", ", prefix="Ref(")
        return f"Ref({body}, dtype={self.dtype.name}{weak})"

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def __reduce__(self):
        raise TypeError("Refs cannot be pickled")


core.register_aval_handler(Ref, lambda r: r._aval)
core.register_aval_type(AbstractRef)


# ---------------------------------------------------------------------------------------------
# Effects: a read, write or accumulation of a Ref. Unordered (the discharge pass orders state
# by data dependence); they keep state equations from being removed as dead code.

class RefEffect(effects.Effect):
    pass


ref_effect = RefEffect()
