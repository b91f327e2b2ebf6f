"""`set_xla_metadata`: attributes attached to the ops traced inside it (or to given values),
as `mhlo.frontend_attributes` in the lowered StableHLO."""
from __future__ import annotations

import functools

from fluxion._src import ad, batching, core, op_attributes, tree_util
from fluxion._src.compiler import lowering


class _MetadataWrapper:
    """`f` decorated with a `set_xla_metadata` context: calls of it, and of its callable
    attributes (`.lower`, `.trace` of a jitted function), run inside the context."""

    def __init__(self, f, ctx):
        self._f = f
        self._ctx = ctx
        # Not f's __dict__: a jitted function keeps its methods (`lower`) there, and copies
        # of them would bypass __getattr__, so run outside the context.
        functools.update_wrapper(self, f, updated=())

    def __call__(self, *args, **kwargs):
        with self._ctx:
            return self._f(*args, **kwargs)

    def __getattr__(self, name):
        attr = getattr(self._f, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def wrapper(*args, **kwargs):
            with self._ctx:
                return attr(*args, **kwargs)
        return wrapper


class XlaMetadataContextManager:
    """Context manager (and decorator) adding `updates` to the XLA metadata of traced ops."""

    __slots__ = ("updates", "_cm")

    def __init__(self, updates):
        self.updates = updates

    def __enter__(self):
        self._cm = op_attributes.extend(self.updates)
        self._cm.__enter__()

    def __exit__(self, exc_type, exc_value, traceback):
        return self._cm.__exit__(exc_type, exc_value, traceback)

    def __call__(self, f):
        return _MetadataWrapper(f, self)


def set_xla_metadata(x=None, **kwargs):
    """Attach `kwargs` as XLA frontend attributes.

    Parameters
    ----------
    x : pytree of arrays, optional
        If given, the attributes go on the ops producing its leaves, which are returned.
        Otherwise a context manager (also usable as a decorator) is returned: the ops traced
        inside it get the attributes (a `None` value removes a name set by an outer one).
    """
    if x is None:
        return XlaMetadataContextManager(kwargs)
    kvs = tuple(sorted(kwargs.items()))
    return tree_util.tree_map(lambda v: xla_metadata_value_p.bind(v, xla_metadata_kvs=kvs), x)


def _value_lowering(ctx, x, *, xla_metadata_kvs):
    attrs = tuple((k, op_attributes._as_text(v)) for k, v in xla_metadata_kvs)
    if attrs:
        op_attributes.tag_results(ctx.block.lines, 0, [x], attrs)
    return x


xla_metadata_value_p = core.Primitive("xla_metadata_value")
xla_metadata_value_p.def_abstract_eval(lambda aval, *, xla_metadata_kvs: aval)
lowering.register_lowering(xla_metadata_value_p, _value_lowering)
batching.defvectorized(xla_metadata_value_p)
ad.deflinear(xla_metadata_value_p, lambda ct, x, **params: [ct])  # as JAX: ct passes through
