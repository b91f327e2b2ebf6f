"""The operations the differential fuzzer composes, each written once over a framework.

An Op has a name, an arity, the dtype kinds it accepts, whether it is differentiable, and
`fn(np_module, lax_module, *arrays)`: the same code runs on fluxion.numpy/fluxion.lax and on
jax.numpy/jax.lax (the oracle). Shapes are chosen by the generator so that every op gets
operands it accepts (elementwise ops broadcast; shape-changing ops take one operand).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

FLOAT, INT, BOOL, COMPLEX = "f", "i", "b", "c"
NUMERIC = (FLOAT, INT)
INEXACT = (FLOAT, COMPLEX)
ANY = (FLOAT, INT, BOOL, COMPLEX)


@dataclasses.dataclass(frozen=True)
class Op:
    name: str
    arity: int
    kinds: tuple
    fn: Callable
    differentiable: bool = False
    min_rank: int = 0
    positive: bool = False  # operands shifted into (0.5, 1.5)-ish: log, sqrt, ...
    unit: bool = False  # operands squashed into (-0.9, 0.9): arcsin, arctanh, ...


def _unary(name, kinds=INEXACT, diff=True, **kw):
    return Op(name, 1, kinds, lambda m, lax, x: getattr(m, name)(x), diff, **kw)


def _binary(name, kinds=NUMERIC, diff=True, **kw):
    return Op(name, 2, kinds, lambda m, lax, x, y: getattr(m, name)(x, y), diff, **kw)


OPS = [
    # unary ufuncs
    *[_unary(n) for n in ["sin", "cos", "tanh", "exp", "expm1", "sinh", "cosh", "arctan",
                          "arcsinh", "square", "negative", "conjugate", "sinc"]],
    *[_unary(n, kinds=(FLOAT,)) for n in ["tan", "cbrt", "exp2", "rad2deg", "deg2rad",
                                          "floor", "ceil", "trunc", "rint", "sign"]],
    *[_unary(n, positive=True) for n in ["log", "log1p", "sqrt", "reciprocal"]],
    *[_unary(n, kinds=(FLOAT,), positive=True) for n in ["log2", "log10", "arccosh"]],
    *[_unary(n, kinds=(FLOAT,), unit=True) for n in ["arcsin", "arccos", "arctanh"]],
    _unary("abs", kinds=ANY), _unary("absolute", kinds=NUMERIC),
    *[_unary(n, kinds=ANY, diff=False) for n in ["isfinite", "isnan", "isinf", "logical_not"]],
    _unary("signbit", kinds=(FLOAT,), diff=False),
    _unary("real", kinds=ANY), _unary("imag", kinds=ANY), _unary("angle", kinds=INEXACT),
    _unary("invert", kinds=(INT, BOOL), diff=False),
    _unary("positive", kinds=NUMERIC),
    Op("nan_to_num", 1, INEXACT, lambda m, lax, x: m.nan_to_num(x), True),
    Op("clip", 1, (FLOAT, INT), lambda m, lax, x: m.clip(x, -0.5, 0.75), True),
    Op("round", 1, (FLOAT,), lambda m, lax, x: m.round(x, 1), True),
    Op("sigmoid", 1, (FLOAT,), lambda m, lax, x: lax.logistic(x), True),
    Op("erf", 1, (FLOAT,), lambda m, lax, x: lax.erf(x), True),
    Op("lgamma", 1, (FLOAT,), lambda m, lax, x: lax.lgamma(x), True, positive=True),
    Op("integer_pow3", 1, (FLOAT, INT), lambda m, lax, x: lax.integer_pow(x, 3), True),
    Op("cumsum", 1, NUMERIC, lambda m, lax, x: m.cumsum(x, axis=-1), True, min_rank=1),
    Op("cumprod", 1, (FLOAT,), lambda m, lax, x: m.cumprod(x, axis=0), True, min_rank=1),
    # binary ufuncs
    *[_binary(n) for n in ["add", "subtract", "multiply", "maximum", "minimum"]],
    *[_binary(n, kinds=(FLOAT,)) for n in ["arctan2", "hypot", "logaddexp", "copysign",
                                           "fmax", "fmin"]],
    _binary("true_divide", kinds=(FLOAT, COMPLEX)),
    _binary("power", kinds=(FLOAT,), positive=True),
    _binary("floor_divide", kinds=(FLOAT,), diff=False),
    _binary("remainder", kinds=(FLOAT,), diff=False),
    *[_binary(n, kinds=ANY, diff=False) for n in ["equal", "not_equal"]],
    *[_binary(n, kinds=(FLOAT, INT, BOOL), diff=False) for n in
      ["less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
       "logical_xor"]],
    *[_binary(n, kinds=(INT, BOOL), diff=False) for n in ["bitwise_and", "bitwise_or",
                                                          "bitwise_xor"]],
    Op("where", 2, ANY, lambda m, lax, x, y: m.where(m.real(x) > 0, x, y), True),
    Op("add_scalar", 1, ANY, lambda m, lax, x: x + 2, True),
    Op("mul_float_scalar", 1, ANY, lambda m, lax, x: x * 1.5, True),
    Op("rsub_scalar", 1, NUMERIC, lambda m, lax, x: 3 - x, True),
    Op("gt_scalar", 1, (FLOAT, INT), lambda m, lax, x: x > 0, False),
    # reductions
    *[Op(f"{n}_all", 1, kinds, (lambda n: lambda m, lax, x: getattr(m, n)(x))(n), diff)
      for n, kinds, diff in [("sum", ANY, True), ("prod", NUMERIC, True), ("mean", ANY, True),
                             ("max", (FLOAT, INT), True), ("min", (FLOAT, INT), True),
                             ("var", (FLOAT,), True), ("std", (FLOAT,), True),
                             ("any", ANY, False), ("all", ANY, False),
                             ("argmax", (FLOAT, INT), False), ("argmin", (FLOAT, INT), False),
                             ("count_nonzero", ANY, False), ("ptp", (FLOAT,), True)]],
    Op("sum_axis0_keep", 1, NUMERIC, lambda m, lax, x: m.sum(x, axis=0, keepdims=True), True,
       min_rank=1),
    Op("max_axis_last", 1, (FLOAT,), lambda m, lax, x: m.max(x, axis=-1), True, min_rank=1),
    Op("mean_axis0", 1, (FLOAT,), lambda m, lax, x: m.mean(x, axis=0), True, min_rank=1),
    Op("logsumexp", 1, (FLOAT,), lambda m, lax, x: m.log(m.sum(m.exp(x))), True),
    # structure
    Op("transpose", 1, ANY, lambda m, lax, x: m.transpose(x), True),
    Op("ravel", 1, ANY, lambda m, lax, x: m.ravel(x), True),
    Op("flip", 1, ANY, lambda m, lax, x: m.flip(x), True),
    Op("expand_dims", 1, ANY, lambda m, lax, x: m.expand_dims(x, 0), True),
    Op("reshape_flat2", 1, ANY, lambda m, lax, x: m.reshape(x, (1, -1)), True),
    Op("tile", 1, ANY, lambda m, lax, x: m.tile(x, 2), True),
    Op("repeat", 1, ANY, lambda m, lax, x: m.repeat(x, 2), True),
    Op("roll", 1, ANY, lambda m, lax, x: m.roll(x, 1), True),
    Op("concatenate_self", 1, ANY, lambda m, lax, x: m.concatenate([m.atleast_1d(x)] * 2), True),
    Op("stack_self", 1, ANY, lambda m, lax, x: m.stack([x, x]), True),
    Op("pad", 1, ANY, lambda m, lax, x: m.pad(x, 1), True),
    Op("sort", 1, (FLOAT, INT), lambda m, lax, x: m.sort(x, axis=-1), True, min_rank=1),
    Op("argsort", 1, (FLOAT, INT), lambda m, lax, x: m.argsort(x, axis=-1, stable=True),
       False, min_rank=1),
    Op("diff_rev", 1, NUMERIC, lambda m, lax, x: x[..., ::-1] - x, True),
    Op("slice_step", 1, ANY, lambda m, lax, x: x[::2], True, min_rank=1),
    Op("index_first", 1, ANY, lambda m, lax, x: x[0], True, min_rank=1),
    Op("take_wrap", 1, ANY, lambda m, lax, x: m.take(x, m.array([0, -1, 1]), mode="wrap"),
       True),
    Op("at_add", 1, NUMERIC, lambda m, lax, x: m.ravel(x).at[0].add(1), True),
    Op("triu", 1, ANY, lambda m, lax, x: m.triu(x), True, min_rank=2),
    Op("diagonal", 1, ANY, lambda m, lax, x: m.diagonal(x), True, min_rank=2),
    Op("astype_f32", 1, ANY, lambda m, lax, x: m.real(x).astype(m.float32), True),
    Op("astype_i32", 1, (FLOAT, INT, BOOL), lambda m, lax, x: m.asarray(x).astype(m.int32),
       False),
    # products
    Op("matmul_self_t", 1, (FLOAT, INT, COMPLEX),
       lambda m, lax, x: m.matmul(x, m.swapaxes(x, -1, -2)), True, min_rank=2),
    Op("dot_ravel", 1, NUMERIC, lambda m, lax, x: m.dot(m.ravel(x), m.ravel(x)), True),
    Op("outer_ravel", 1, NUMERIC, lambda m, lax, x: m.outer(m.ravel(x), m.ravel(x)[:2]), True),
    Op("einsum_trace", 1, NUMERIC, lambda m, lax, x: m.einsum("ii->", x[:2, :2]), True,
       min_rank=2),
    Op("kron", 1, NUMERIC, lambda m, lax, x: m.kron(m.ravel(x)[:3], m.array([1, 2])), True),
    Op("trace", 1, NUMERIC, lambda m, lax, x: m.trace(x), True, min_rank=2),
    # lax specifics
    Op("lax_rev", 1, ANY, lambda m, lax, x: lax.rev(x, tuple(range(x.ndim))), True),
    Op("lax_cummax", 1, (FLOAT, INT), lambda m, lax, x: lax.cummax(x, axis=0), True,
       min_rank=1),
    Op("lax_reduce_window", 1, (FLOAT,),
       lambda m, lax, x: lax.reduce_window(x, -m.inf, lax.max, (2,) * x.ndim, (1,) * x.ndim,
                                           "SAME"), True, min_rank=1),
    Op("lax_top_k", 1, (FLOAT,), lambda m, lax, x: lax.top_k(x, 1)[0], True, min_rank=1),
    Op("lax_select_n", 2, (FLOAT, INT), lambda m, lax, x, y: lax.select_n(x > y, x, y), True),
    Op("lax_clamp", 1, (FLOAT,), lambda m, lax, x: lax.clamp(-0.3, x, 0.4), True),
]
