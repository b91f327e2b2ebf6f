"""`fwd_and_bwd`: the forward and backward passes of a function as two functions, so that a
jitted backward pass compiles once and is reused across iterations."""
from __future__ import annotations

from typing import Callable, Sequence

from fluxion._src.ad_api import diff_positions, fun_of_diff_args, vjp
from fluxion._src.api import check_callable, jit


def fwd_and_bwd(fun: Callable, argnums: int | Sequence[int], has_aux: bool = False,
                jitted: bool = True) -> tuple[Callable, Callable]:
    """Returns ``(fwd, bwd)`` for `fun` differentiated with respect to ``args[argnums]``.

    ``fwd(*args)`` returns ``(fun(*args), residuals)`` (and the auxiliary data with
    ``has_aux``), like `vjp`; ``bwd(residuals, cotangent)`` returns the cotangents of the
    arguments named by `argnums` (one value for an int, a tuple for a sequence). With
    ``jitted`` (the default) both are `jit`-compiled.
    """
    check_callable(fun)
    if isinstance(argnums, int):
        nums = (argnums,)
    else:
        nums = tuple(argnums)
        if not all(isinstance(a, int) for a in nums):
            raise TypeError(f"argnums must be an int or a sequence of ints, got {argnums!r}")

    def fwd(*args, **kwargs):
        idx = diff_positions(len(args), nums, argnums)
        return vjp(fun_of_diff_args(fun, args, kwargs, idx), *[args[i] for i in idx],
                   has_aux=has_aux)

    def bwd(f_vjp, outgrad):
        g = f_vjp(outgrad)
        return g[0] if isinstance(argnums, int) else g

    if jitted:
        fwd, bwd = jit(fwd), jit(bwd)
    return fwd, bwd
