"""`jnp.vectorize`: NumPy's vectorize (with generalized-ufunc signatures), built on vmap."""
from __future__ import annotations

import functools
import re

from fluxion._src import core

_DIM = r"\w+"
_CORE = rf"(?:{_DIM}(?:,\s*{_DIM})*)?"
_ARG = rf"\({_CORE}\)"
_ARGS = rf"{_ARG}(?:,\s*{_ARG})*"
_SIGNATURE = re.compile(rf"^({_ARGS})->({_ARGS})$")


def _parse_signature(signature: str):
    """'(m,n),(n)->(m)' -> ([('m','n'), ('n',)], [('m',)])."""
    match = _SIGNATURE.match(signature.replace(" ", ""))
    if match is None:
        raise ValueError(f"not a valid gufunc signature: {signature}")

    def parse(group):
        return [tuple(d for d in arg.strip("()").split(",") if d) for arg in re.findall(_ARG, group)]
    return parse(match.group(1)), parse(match.group(2))


def vectorize(pyfunc, *, excluded=frozenset(), signature: str | None = None):
    """Vectorize `pyfunc` over leading (broadcast) dimensions, like numpy.vectorize.

    Parameters
    ----------
    pyfunc : callable on arrays of the core shapes given by `signature` (scalars if None).
    excluded : set of int or str
        Positional indices or keyword names passed to `pyfunc` unvectorized.
    signature : str, optional
        A generalized-ufunc signature such as ``'(n),(n)->()'``.
    """
    from fluxion._src.vmap import vmap
    import fluxion.numpy as jnp
    in_core, out_core = _parse_signature(signature) if signature else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        excluded_pos = {i for i in excluded if isinstance(i, int)}
        static_kwargs = {k: v for k, v in kwargs.items() if k in excluded}
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in excluded}
        names = list(dyn_kwargs)
        dyn_pos = [i for i in range(len(args)) if i not in excluded_pos]
        arrays = [jnp.asarray(args[i]) for i in dyn_pos] + [jnp.asarray(dyn_kwargs[k]) for k in names]
        cores = in_core if in_core is not None else [()] * len(arrays)
        if len(cores) != len(arrays):
            raise TypeError(f"wrong number of positional arguments: expected {len(cores)}, "
                            f"got {len(arrays)}")
        sizes: dict[str, int] = {}
        loop_shapes = []
        for a, dims in zip(arrays, cores):
            shape = core.get_aval(a).shape
            if len(shape) < len(dims):
                raise ValueError(f"input with shape {shape} does not have enough dimensions for "
                                 f"its core dimensions {dims} in signature {signature}")
            core_shape = shape[len(shape) - len(dims):]
            for name, size in zip(dims, core_shape):
                if sizes.setdefault(name, size) != size:
                    raise ValueError(f"inconsistent size for core dimension {name!r}: "
                                     f"{sizes[name]} vs {size}")
            loop_shapes.append(shape[:len(shape) - len(dims)])
        from fluxion._src.numpy.util import broadcast_shapes
        loop_shape = broadcast_shapes(*loop_shapes) if loop_shapes else ()
        arrays = [jnp.broadcast_to(a, loop_shape + core.get_aval(a).shape[len(ls):])
                  for a, ls in zip(arrays, loop_shapes)]

        def call(*xs):
            full = list(args)
            for i, x in zip(dyn_pos, xs):
                full[i] = x
            kw = dict(static_kwargs)
            kw.update(zip(names, xs[len(dyn_pos):]))
            out = pyfunc(*full, **kw)
            if out_core is not None:
                outs = out if isinstance(out, tuple) else (out,)
                if len(outs) != len(out_core):
                    raise ValueError(f"wrong number of outputs from pyfunc: expected "
                                     f"{len(out_core)}, got {len(outs)}")
                for o, dims in zip(outs, out_core):
                    if jnp.ndim(o) != len(dims):
                        raise ValueError(f"output with shape {jnp.shape(o)} does not match "
                                         f"its core dimensions {dims}")
            return out

        fn = call
        for _ in loop_shape:
            fn = vmap(fn)
        return fn(*arrays)

    return wrapped
