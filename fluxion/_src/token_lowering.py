"""Threading the ordered-effects token through control flow.

Ordered callbacks chain on a `!stablehlo.token` kept per block (`Block._ordered_token`, see
`callbacks.py`). A `while` or `cond` whose body has ordered effects takes the enclosing block's
token as an extra operand, hands it to its regions (a loop carry; a captured value in branches)
and returns the token its regions end with, so effects before, inside and after the loop or
branch happen in program order. `scan` and `fori_loop` lower through `while`, and a nested `jit`
is inlined into its caller's block, so they are covered. Without ordered effects the original
rules run unchanged.
"""
from __future__ import annotations

from fluxion._src import effects
from fluxion._src.compiler import lowering
from fluxion._src.compiler.hlo import Value, tensor_type

TOKEN_TYPE = "!stablehlo.token"


class TokenValue(Value):
    """An SSA value of type !stablehlo.token."""

    __slots__ = ()

    def __init__(self, name: str):
        super().__init__(name, None)

    @property
    def type(self) -> str:
        return TOKEN_TYPE


def block_token(block) -> str:
    """The name of `block`'s current token, creating one with after_all if it has none."""
    token = block.__dict__.get("_ordered_token")
    if token is None:
        token = block.module.fresh("tok")
        block.lines.append(f'{token} = "stablehlo.after_all"() : () -> {TOKEN_TYPE}')
        block._ordered_token = token
    return token


def _emit(block, name, operands, result_types, regions=(), attrs=""):
    operand_text = ", ".join(v.name for v in operands)
    in_types = ", ".join(v.type for v in operands)
    region_text = " (" + ", ".join(r.region_text() for r in regions) + ")" if regions else ""
    base = block.module.fresh()
    n = len(result_types)
    lhs = base if n == 1 else f"{base}:{n}"
    out = result_types[0] if n == 1 else "(" + ", ".join(result_types) + ")"
    block.lines.append(f'{lhs} = "{name}"({operand_text}){region_text}{attrs} : ({in_types}) -> {out}')
    return [f"{base}#{i}" if n > 1 else base for i in range(n)]


def _has_ordered(*jaxprs) -> bool:
    return any(effects.ordered_effects(j) for j in jaxprs)


def _while_with_token(original):
    def rule(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
        if not _has_ordered(cond_jaxpr, body_jaxpr):
            return original(ctx, *args, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                            cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
        cond_consts = list(args[:cond_nconsts])
        body_consts = list(args[cond_nconsts:cond_nconsts + body_nconsts])
        init = list(args[cond_nconsts + body_nconsts:])
        carry_avals = [x.aval for x in init]
        parent = ctx.block
        token = TokenValue(block_token(parent))

        def region():
            block = ctx.new_block(carry_avals)
            arg = TokenValue(block.module.fresh("region_arg"))
            block.args.insert(0, arg)
            block._ordered_token = arg.name
            return block

        cond_region = region()
        cond_region.ret(ctx.lower_jaxpr(cond_jaxpr, cond_consts + cond_region.args[1:],
                                        block=cond_region))
        body_region = region()
        outs = ctx.lower_jaxpr(body_jaxpr, body_consts + body_region.args[1:], block=body_region)
        body_region.ret([TokenValue(body_region._ordered_token), *outs])
        names = _emit(parent, "stablehlo.while", [token, *init],
                      [TOKEN_TYPE] + [tensor_type(a) for a in carry_avals],
                      regions=[cond_region, body_region])
        parent._ordered_token = names[0]
        return [Value(n, a) for n, a in zip(names[1:], carry_avals)]
    return rule


def _cond_with_token(original):
    def rule(ctx, index, *args, branches):
        if not _has_ordered(*branches):
            return original(ctx, index, *args, branches=branches)
        parent = ctx.block
        token = block_token(parent)
        regions = []
        for branch in branches:
            block = ctx.new_block([])
            block._ordered_token = token  # captured from the enclosing block
            outs = ctx.lower_jaxpr(branch, list(args), block=block)
            block.ret([TokenValue(block._ordered_token), *outs])
            regions.append(block)
        names = _emit(parent, "stablehlo.case", [index],
                      [TOKEN_TYPE] + [tensor_type(a) for a in ctx.avals_out], regions=regions)
        parent._ordered_token = names[0]
        return [Value(n, a) for n, a in zip(names[1:], ctx.avals_out)]
    return rule


def install() -> None:
    """Wrap the lowerings of while and cond on the platforms with host callbacks."""
    from fluxion._src.lax import control_flow
    for platform in ("cpu", "cuda"):
        for prim, wrap in ((control_flow.while_p, _while_with_token),
                           (control_flow.cond_p, _cond_with_token)):
            original = lowering.get_lowering(prim, platform)
            if getattr(original, "_threads_tokens", False):
                continue
            rule = wrap(original)
            rule._threads_tokens = True
            lowering.register_lowering(prim, rule, platform=platform)
