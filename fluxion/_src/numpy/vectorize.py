"""`jnp.vectorize`: NumPy's vectorize (with generalized-ufunc signatures), built on vmap."""
from __future__ import annotations

import functools
import re
import warnings

import numpy as np

from fluxion._src import core
from fluxion._src.config import config

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


def _check_excluded(excluded):
    if any(not isinstance(e, (int, str)) for e in excluded):
        raise TypeError("jax.numpy.vectorize can only exclude integer or string arguments, "
                        f"but excluded={excluded!r}")
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"excluded={excluded!r} contains negative numbers")


def _record_core_sizes(sizes, shape, dims, context):
    """Check the trailing `dims` of `shape` against (and add them to) the known core sizes."""
    core_shape = shape[len(shape) - len(dims):] if dims else ()
    for name, size in zip(dims, core_shape):
        if sizes.setdefault(name, size) != size:
            raise ValueError(f"inconsistent size for core dimension {name!r}: "
                             f"{size} vs {sizes[name]} {context}")


def _loop_shapes(arrays, cores, context):
    """The non-core (loop) shape of each input; the core sizes the inputs agree on."""
    if len(cores) != len(arrays):
        raise TypeError(f"wrong number of positional arguments: expected {len(cores)}, "
                        f"got {len(arrays)} {context}")
    sizes: dict[str, int] = {}
    loop_shapes = []
    for a, dims in zip(arrays, cores):
        shape = core.get_aval(a).shape
        if len(shape) < len(dims):
            raise ValueError(f"input with shape {shape} does not have enough dimensions for all "
                             f"core dimensions {dims} {context}")
        _record_core_sizes(sizes, shape, dims, context)
        loop_shapes.append(shape[:len(shape) - len(dims)])
    return loop_shapes, sizes


def _check_rank_promotion(arrays, loop_shapes, signature):
    """Warn or raise (per jax_numpy_rank_promotion) when non-scalar inputs differ in loop rank."""
    if config.numpy_rank_promotion == "allow":
        return
    ranks = {len(ls) for a, ls in zip(arrays, loop_shapes) if core.get_aval(a).ndim}
    if len(ranks) < 2:
        return
    shapes = [core.get_aval(a).shape for a in arrays]
    msg = (f"operands with shapes {shapes} require rank promotion for jnp.vectorize function "
           f"with signature {signature}. Set the jax_numpy_rank_promotion config option to "
           "'allow' to disable this message; for more information, see "
           "https://docs.jax.dev/en/latest/rank_promotion_warning.html.")
    if config.numpy_rank_promotion == "warn":
        warnings.warn(msg, stacklevel=4)
    else:
        raise ValueError(msg)


def _check_outputs(out, out_core, sizes, context):
    """Check `pyfunc`'s per-example outputs against the signature's output core dimensions."""
    if len(out_core) > 1 and not isinstance(out, tuple):
        raise TypeError("output must be a tuple when multiple outputs are expected, "
                        f"got: {out!r}\n{context}")
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(out_core):
        raise TypeError(f"wrong number of output arguments: expected {len(out_core)}, "
                        f"got {len(outs)} {context}")
    sizes = dict(sizes)
    for o, dims in zip(outs, out_core):
        shape = np.shape(o)
        if len(shape) != len(dims):
            raise ValueError(f"output shape {shape} does not match core dimensions {dims} "
                             f"{context}")
        _record_core_sizes(sizes, shape, dims, context)


def vectorize(pyfunc, *, excluded=frozenset(), signature: str | None = None):
    """Vectorize `pyfunc` over leading (broadcast) dimensions, like numpy.vectorize.

    Parameters
    ----------
    pyfunc : callable on arrays of the core shapes given by `signature` (scalars if None).
    excluded : set of int or str
        Positional indices or keyword names passed to `pyfunc` unvectorized. Arguments that
        are None are passed unvectorized too (their core dimensions must be empty).
    signature : str, optional
        A generalized-ufunc signature such as ``'(n),(n)->()'``.
    """
    from fluxion._src.vmap import vmap
    import fluxion.numpy as jnp
    from fluxion._src.numpy.util import broadcast_shapes
    _check_excluded(excluded)
    in_core, out_core = _parse_signature(signature) if signature else (None, None)
    context = f"on vectorized function with excluded={excluded!r} and signature={signature!r}"

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        cores = list(in_core) if in_core is not None else [()] * len(args)
        none_pos = {i for i, a in enumerate(args) if a is None and i not in excluded}
        if any(i < len(cores) and cores[i] for i in none_pos):
            raise ValueError(f"Cannot pass None at locations {none_pos} with "
                             f"signature={signature!r}")
        static_pos = {i for i in excluded if isinstance(i, int)} | none_pos
        dyn_pos = [i for i in range(len(args)) if i not in static_pos]
        cores = [c for i, c in enumerate(cores) if i not in none_pos]
        static_kwargs = {k: v for k, v in kwargs.items() if k in excluded or v is None}
        names = [k for k in kwargs if k not in static_kwargs]
        arrays = [jnp.asarray(args[i]) for i in dyn_pos] + [jnp.asarray(kwargs[k]) for k in names]
        if in_core is None:
            cores = [()] * len(arrays)
        loop_shapes, sizes = _loop_shapes(arrays, cores, context)
        _check_rank_promotion(arrays, loop_shapes, signature)
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
                _check_outputs(out, out_core, sizes, context)
            return out

        fn = call
        for _ in loop_shape:
            fn = vmap(fn)
        return fn(*arrays)

    return wrapped
