"""Sharding rules on Explicit mesh axes of the lax.linalg primitives (JAX's
`linalg_sharding_rule` and `_tri_solve_sharding`): leading batch dimensions keep their
sharding, the matrix (or vector) dimensions must be unsharded."""
from __future__ import annotations

from fluxion._src.sharding_types import (_TRANSPOSED, ShardingTypeError, _backward_aware,
                                         _entry, pspec_string, rules)

# primitive name -> the rank of each operand's non-batch part
_RANKS = {
    "cholesky": (2,), "cholesky_update": (2, 1), "eig": (2,), "eigh": (2,),
    "hessenberg": (2,), "householder_product": (2, 1), "ormqr": (2, 1, 2), "lu": (2,),
    "lu_pivots_to_permutation": (1,), "geqrf": (2,), "geqp3": (2, 1), "qr": (2,),
    "schur": (2,), "svd": (2,), "symmetric_product": (2, 2), "tridiagonal": (2,),
    "tridiagonal_solve": (1, 1, 1, 2),
}


def _tuple_string(spec) -> str:
    """A slice of a spec as JAX prints a slice of a PartitionSpec (a tuple): ('x', None)."""
    entries = [repr(_entry(e)) for e in spec]
    return "(" + ", ".join(entries) + ("," if len(entries) == 1 else "") + ")"


def _linalg_rule(name, ranks):
    def rule(ctx, ins, in_avals, out_avals, params):
        batch_specs = []
        for i, (rank, spec) in enumerate(zip(ranks, ins)):
            batch, rest = spec[:len(spec) - rank], spec[len(spec) - rank:]
            if any(rest):
                raise ShardingTypeError(f"Input {i} to {name} must be unsharded on non-batch "
                                        f"dimensions, but got {pspec_string(spec)}.")
            batch_specs.append(batch)
        batch = _common_batch(batch_specs, params)
        if batch is None:
            raise ShardingTypeError(
                f"All inputs to {name} must have the same batch sharding, but got "
                f"[{', '.join(_tuple_string(b) for b in batch_specs)}].")
        return [tuple(batch) + ((),) * (len(a.shape) - len(batch)) for a in out_avals]
    return rule


def _common_batch(batch_specs, params):
    """The operands' common batch sharding, None if they differ. In a backward pass an
    unsharded batch dimension takes the others' sharding: there JAX has given the cotangent
    its primal's sharding, where fluxion's may come unsharded (from a broadcast)."""
    if all(b == batch_specs[0] for b in batch_specs[1:]):
        return batch_specs[0]
    if not params.get(_TRANSPOSED):
        return None
    out = []
    for entries in zip(*batch_specs):
        sharded = {e for e in entries if e}
        if len(sharded) > 1:
            return None
        out.append(sharded.pop() if sharded else ())
    return tuple(out)


def _triangular_solve_rule(ctx, ins, in_avals, out_avals, params):
    a, b = ins
    left_side, transpose_a = bool(params["left_side"]), bool(params["transpose_a"])
    batch = _common_batch([a[:-2], b[:-2]], params)
    if batch is None:
        raise ShardingTypeError("All inputs to triangular_solve must have the same batch "
                                f"sharding, but got {_tuple_string(a[:-2])} and "
                                f"{_tuple_string(b[:-2])}.")
    a_mat, b_mat = a[-2:], b[-2:]
    flags = f"left_side={left_side} and transpose_a={transpose_a}"
    if a_mat[left_side ^ transpose_a]:
        raise ShardingTypeError("triangular solve input `a` must be unsharded on the "
                                f"contracting axis, but got {pspec_string(a)} with {flags}.")
    if b_mat[not left_side]:
        raise ShardingTypeError("triangular solve input `b` must be unsharded on the "
                                f"contracting axis, but got {pspec_string(b)} with {flags}.")
    out = ((a_mat[transpose_a], b_mat[1]) if left_side
           else (b_mat[0], a_mat[not transpose_a]))
    return [tuple(batch) + out]


def register():
    """Put the rules of the linalg primitives in sharding_types' registry."""
    from fluxion._src.lax.linalg import cholesky_update, condensed, ormqr, primitives
    for name, ranks in _RANKS.items():
        for mod in (primitives, condensed, cholesky_update, ormqr):
            p = getattr(mod, f"{name}_p", None)
            if p is not None:
                rules[p] = _linalg_rule(name, ranks)
                _backward_aware.add(p)
                break
        else:
            raise AssertionError(f"no linalg primitive {name}")
    rules[primitives.triangular_solve_p] = _triangular_solve_rule
    _backward_aware.add(primitives.triangular_solve_p)
