"""Lowering jaxprs to StableHLO modules, one rule per primitive and platform."""
from __future__ import annotations

import warnings
from typing import Callable, Sequence

import numpy as np

from fluxion._src import core, op_attributes
from fluxion._src.compiler import hlo
from fluxion._src.compiler.hlo import Block, HloOps, Module, Value
from fluxion._src.core import ClosedJaxpr, Jaxpr, Literal, ShapedArray
from fluxion._src.export import shape_poly
from fluxion._src.export.shape_poly import InconclusiveDimensionOperation
from fluxion._src.traceback_util import user_stacklevel

# primitive -> {platform or None: rule}
_lowerings: dict[core.Primitive, dict[str | None, Callable]] = {}

_PLATFORM_ALIASES = {"gpu": ("cuda", "rocm"), "cuda": ("cuda",), "rocm": ("rocm",)}


def register_lowering(prim: core.Primitive, rule: Callable, platform: str | None = None) -> Callable:
    """Register `rule(ctx, *operands, **params)` as the lowering of `prim` on `platform`.

    `platform=None` registers the generic rule; a platform-specific rule ("cpu", "cuda",
    "rocm", or "gpu" for both GPU platforms) wins over it.
    """
    table = _lowerings.setdefault(prim, {})
    for name in _PLATFORM_ALIASES.get(platform, (platform,)):
        table[name] = rule
    return rule


def get_lowering(prim: core.Primitive, platform: str) -> Callable:
    table = _lowerings.get(prim, {})
    rule = table.get(platform) or table.get(None)
    if rule is None:
        raise NotImplementedError(
            f"No lowering rule for primitive '{prim.name}' on platform '{platform}'. Register "
            f"one with fluxion.interpreters.mlir.register_lowering({prim.name}_p, rule, "
            f"platform={platform!r}) (or platform=None for every platform).")
    return rule


class LoweringRuleContext(HloOps):
    """What a lowering rule receives as `ctx`: the builder plus the equation's types."""

    __slots__ = ("block", "avals_in", "avals_out", "platform", "module")

    def __init__(self, block: Block, avals_in, avals_out, platform: str):
        self.block = block
        self.module = block.module
        self.avals_in = avals_in
        self.avals_out = avals_out
        self.platform = platform

    def lower_jaxpr(self, jaxpr: Jaxpr | ClosedJaxpr, args: Sequence[Value],
                    block: Block | None = None) -> list[Value]:
        """Lower a sub-jaxpr inline (into `block`, default the current one)."""
        return lower_jaxpr_into(block or self.block, jaxpr, args)


def _literal_value(ctx: HloOps, lit: Literal) -> Value:
    return ctx.constant(np.asarray(lit.val, dtype=lit.aval.dtype), lit.aval.dtype)


def lower_jaxpr_into(block: Block, jaxpr: Jaxpr | ClosedJaxpr, args: Sequence[Value]) -> list[Value]:
    """Emit the equations of `jaxpr` into `block`, with `args` bound to its invars.

    A ClosedJaxpr's consts are embedded as constants."""
    consts: list[Value] = []
    if isinstance(jaxpr, ClosedJaxpr):
        consts = [block.constant(np.asarray(c), v.aval.dtype)
                  for c, v in zip(jaxpr.consts, jaxpr.jaxpr.constvars)]
        jaxpr = jaxpr.jaxpr
    elif jaxpr.constvars:
        raise ValueError("lower_jaxpr_into needs a ClosedJaxpr when the jaxpr has constvars")
    env: dict[int, Value] = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[id(v)] = x
    for v, x in zip(jaxpr.invars, args):
        env[id(v)] = x
    platform = block.module.platform

    def read(v):
        if type(v) is Literal:
            return _literal_value(block, v)
        return env[id(v)]

    lines = block.lines
    for eqn in jaxpr.eqns:
        rule = get_lowering(eqn.primitive, platform)
        ctx = LoweringRuleContext(block, [v.aval for v in eqn.invars],
                                  [v.aval for v in eqn.outvars], platform)
        first_line = len(lines)
        try:
            outs = rule(ctx, *[read(v) for v in eqn.invars], **eqn.params)
        except InconclusiveDimensionOperation as e:
            if str(e).startswith("The lowering of"):  # from a nested jaxpr: already named
                raise
            raise InconclusiveDimensionOperation(
                f"The lowering of '{eqn.primitive.name}' does not support symbolic dimensions "
                f"with these operands ({', '.join(a.str_short() for a in ctx.avals_in)}): "
                f"{str(e).splitlines()[0]}") from None
        if eqn.source_info is not None:  # the user's file:line and name stack on its ops
            loc = eqn.source_info.loc(eqn.primitive.name)
            for i in range(first_line, len(lines)):
                line = lines[i]
                if "\n" in line:  # an op with regions: their ops get the location too
                    lines[i] = _with_region_locs(line, loc)
                elif not line.endswith(":0))"):  # ops of an inlined jit keep their own
                    lines[i] = line + loc
        if isinstance(outs, Value):
            outs = [outs]
        if not isinstance(outs, (list, tuple)) or not all(isinstance(o, Value) for o in outs):
            raise TypeError(f"lowering rule of '{eqn.primitive.name}' returned {outs!r}; a rule "
                            "returns a Value or a list of Values (one per result)")
        outs = list(outs)
        if eqn.source_info is not None and eqn.source_info.attrs:
            op_attributes.tag_equation(lines, first_line, outs, eqn.source_info.attrs)
        if len(outs) != len(eqn.outvars):
            raise ValueError(f"lowering rule of '{eqn.primitive.name}' returned {len(outs)} "
                             f"values, expected {len(eqn.outvars)}")
        for v, out in zip(eqn.outvars, outs):
            if out.shape != v.aval.shape or out.dtype != v.aval.dtype:
                raise TypeError(f"lowering rule of '{eqn.primitive.name}' produced "
                                f"{out.aval.str_short()} where its abstract evaluation says "
                                f"{v.aval.str_short()}")
            env[id(v)] = out
    return [read(v) for v in jaxpr.outvars]


def _with_region_locs(text: str, loc: str) -> str:
    """`loc` appended to every op line of a multi-line op (its regions' ops and itself)
    that has no location yet."""
    out = []
    for segment in text.split("\n"):
        if " : (" in segment and not segment.endswith(":0))"):
            segment += loc
        out.append(segment)
    return "\n".join(out)


def lower_jaxpr_to_module(jaxpr: Jaxpr, platform: str, name: str = "main",
                          donated_invars: Sequence[bool] | None = None, *,
                          num_partitions: int = 1, arg_attrs: Sequence[str | None] | None = None,
                          result_attrs: Sequence[str | None] | None = None,
                          preamble: str = "") -> str:
    """A StableHLO module whose @main takes the jaxpr's constvars then invars as arguments.

    A partitioned program (sharded_jit.py) passes its partition count, the attributes of the
    arguments (constvars first) and results, and the module-level ops (`sdy.mesh`)."""
    module = Module(platform)
    arg_avals = [v.aval for v in jaxpr.constvars] + [v.aval for v in jaxpr.invars]
    # Symbolic shapes (`jit(f).lower(ShapeDtypeStruct((b, 3)))`): as in JAX, @main takes each
    # dimension variable first, as a tensor<i32> marked `jax.global_constant`.
    dim_vars = shape_poly.all_dim_vars(arg_avals)
    n_dims = len(dim_vars)
    block = Block(module, [ShapedArray((), np.dtype(np.int32))] * n_dims + arg_avals,
                  [f"%arg{i}" for i in range(n_dims + len(arg_avals))])
    if dim_vars:
        module.dim_env = dict(zip(dim_vars, block.args[:n_dims]))
        dim_attrs = [f'jax.global_constant = "{v}"' for v in dim_vars]
        arg_attrs = dim_attrs + (list(arg_attrs) if arg_attrs is not None
                                 else [None] * len(arg_avals))
    n_consts = n_dims + len(jaxpr.constvars)
    inner = Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.outvars, jaxpr.eqns)
    outs = lower_jaxpr_into(block, inner, block.args[n_dims:])
    arg_attrs = list(arg_attrs) if arg_attrs is not None else None
    if donated_invars is not None and any(donated_invars):
        arg_attrs = arg_attrs or [None] * (n_dims + len(arg_avals))
        used_outputs: set[int] = set()
        unused: list[str] = []
        for i, donated in enumerate(donated_invars):
            if not donated:
                continue
            aval = jaxpr.invars[i].aval
            for j, out in enumerate(jaxpr.outvars):
                if j not in used_outputs and out.aval.shape == aval.shape and out.aval.dtype == aval.dtype:
                    used_outputs.add(j)
                    alias = f"tf.aliasing_output = {j} : i32"
                    other = arg_attrs[n_consts + i]
                    arg_attrs[n_consts + i] = f"{other}, {alias}" if other else alias
                    break
            else:  # no output of its shape and dtype is left to reuse its buffer
                unused.append(str(aval))
        if unused:
            warnings.warn(f"Some donated buffers were not usable: {', '.join(unused)}.\n"
                          "See an explanation at "
                          "https://docs.jax.dev/en/latest/faq.html#buffer-donation.",
                          stacklevel=user_stacklevel())
    text = hlo.function_text("main", block, outs, arg_attrs=arg_attrs, result_attrs=result_attrs)
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "main"
    preamble += "".join(f"  {op}\n" for op in module.__dict__.get("module_ops", ()))
    header = (f"module @{safe} attributes {{mhlo.num_partitions = {num_partitions} : i32, "
              f"mhlo.num_replicas = 1 : i32}} {{\n{preamble}")
    text = header + text + "\n" + "\n".join(module.functions) + ("\n" if module.functions else "") + "}\n"
    host_callbacks = module.__dict__.get("host_callbacks")
    if host_callbacks:  # Python callables the compiled program calls (see callbacks.py)
        text = ModuleText(text)
        text.host_callbacks = host_callbacks
    return text


class ModuleText(str):
    """Module text that carries the host callbacks its custom calls index into."""

    host_callbacks: list = []


def with_text(module_text: str, new_text: str) -> str:
    """`new_text` (an edit of `module_text`) carrying `module_text`'s host callbacks."""
    host_callbacks = getattr(module_text, "host_callbacks", None)
    if not host_callbacks:
        return new_text
    out = ModuleText(new_text)
    out.host_callbacks = host_callbacks
    return out


def lower_fun(fun: Callable, multiple_results: bool = True) -> Callable:
    """Turn a function written with fluxion ops into a lowering rule (it is traced, then inlined).

    As in JAX, `fun` returns a list of outputs unless `multiple_results=False`."""
    from fluxion._src import staging

    def rule(ctx: LoweringRuleContext, *args, **params):
        def flat(*xs):
            out = fun(*xs, **params)
            if not multiple_results:
                return [out]
            if not isinstance(out, (list, tuple)):
                raise TypeError(f"lower_fun: {getattr(fun, '__name__', fun)} returned "
                                f"{type(out).__name__}, but multiple_results=True expects a list "
                                "or tuple of outputs; pass multiple_results=False for one output.")
            return list(out)
        closed = staging.trace_to_jaxpr(flat, [a.aval for a in args], origin="lower_fun")
        outs = lower_jaxpr_into(ctx.block, closed, list(args))
        return outs if multiple_results else outs[0]

    return rule
