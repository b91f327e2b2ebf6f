"""Print a function's IR: `python -m fluxion.tools.to_ir module:function SHAPE... [options]`.

Shapes are written as XLA prints them: `f32[2,3]`, `s32[]`, `pred[4]`, or a tuple
`(f32[2], i32[])`. `--constants name=value` binds keyword arguments to Python values (static).

    python -m fluxion.tools.to_ir mypkg.model:loss "f32[8,4]" "f32[8]" --format stablehlo
    python -m fluxion.tools.to_ir mypkg.model:step "f32[3]" --constants "lr=0.1" --format hlo

Formats: jaxpr, stablehlo, hlo (XLA's HLO before optimization), optimized-hlo (after XLA's
passes). The `to_ir(fun, shapes, constants, format)` function returns the same text.
"""
from __future__ import annotations

import argparse
import ast
import functools
import importlib
import re
import sys

import numpy as np

_DTYPES = {
    "pred": np.bool_, "bool": np.bool_,
    "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128,
}
_SHAPE_RE = re.compile(r"^\s*([a-z]+[0-9]*)\s*\[\s*([0-9,\s]*)\]\s*(\{[0-9,\s]*\})?\s*$")


def parse_shape_str(text: str):
    """`"f32[2,3]"` -> ShapeDtypeStruct((2, 3), float32); `"(f32[], s32[4])"` -> a tuple."""
    from fluxion import ShapeDtypeStruct
    from fluxion._src import dtypes
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        inner = text[1:-1].strip()
        if not inner:
            return ()
        return tuple(parse_shape_str(part) for part in _split_top_level(inner))
    m = _SHAPE_RE.match(text)
    if m is None:
        raise ValueError(f"Invalid shape string {text!r}: expected e.g. 'f32[2,3]' or 's32[]'")
    name, dims, _layout = m.groups()
    if name == "bf16":
        dtype = dtypes.bfloat16
    elif name in _DTYPES:
        dtype = np.dtype(_DTYPES[name])
    else:
        raise ValueError(f"Unknown element type {name!r} in shape string {text!r}; known: "
                         f"{sorted(_DTYPES) + ['bf16']}")
    shape = tuple(int(d) for d in dims.split(",") if d.strip())
    return ShapeDtypeStruct(shape, dtype)


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in (p.strip() for p in parts) if p]


def _placeholder(spec):
    if isinstance(spec, tuple):
        return tuple(_placeholder(s) for s in spec)
    return spec


def to_ir(fun, input_shapes, constants: dict | None = None, format: str = "stablehlo") -> str:  # noqa: A002
    """The IR of `fun` for arguments of `input_shapes` (shape strings or ShapeDtypeStructs)."""
    import fluxion
    specs = [parse_shape_str(s) if isinstance(s, str) else s for s in input_shapes]
    if constants:
        fun = functools.partial(fun, **constants)
    if format == "jaxpr":
        return str(fluxion.make_jaxpr(fun)(*specs))
    lowered = fluxion.jit(fun).lower(*specs)
    if format == "stablehlo":
        return lowered.as_text()
    if format == "hlo":
        return lowered.compiler_ir("hlo").as_hlo_text()  # with the ops' source metadata
    if format == "optimized-hlo":
        return lowered.compile().as_text()
    raise ValueError(f"format must be one of jaxpr, stablehlo, hlo, optimized-hlo; got {format!r}")


def _load(target: str):
    if ":" not in target:
        raise SystemExit(f"expected module:function, got {target!r}")
    mod_name, _, attr = target.partition(":")
    module = importlib.import_module(mod_name)
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _parse_constant(text: str):
    name, eq, value = text.partition("=")
    if not eq:
        raise SystemExit(f"--constants takes name=value, got {text!r}")
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        parsed = value
    if isinstance(parsed, list):
        parsed = np.asarray(parsed)
    return name.strip(), parsed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fluxion.tools.to_ir",
                                     description="Print the IR of a fluxion/JAX function.")
    parser.add_argument("function", help="module:function")
    parser.add_argument("shapes", nargs="*", help="argument shapes, e.g. f32[2,3] s32[]")
    parser.add_argument("--format", default="stablehlo",
                        choices=["jaxpr", "stablehlo", "hlo", "optimized-hlo"])
    parser.add_argument("--constants", action="append", default=[],
                        help="name=value keyword argument bound as a constant (repeatable)")
    parser.add_argument("--output", "-o", default=None, help="write here instead of stdout")
    args = parser.parse_args(argv)
    sys.path.insert(0, "")
    fun = _load(args.function)
    constants = dict(_parse_constant(c) for c in args.constants)
    text = to_ir(fun, args.shapes, constants, args.format)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
