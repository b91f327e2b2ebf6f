"""A typed builder that emits StableHLO as MLIR text (generic operation syntax).

`Value`s carry their abstract value, so every op knows its result type. `HloOps` holds the op
methods; both a function body (`Block`) and the per-equation context handed to lowering rules
(`LoweringRuleContext`) expose them, so a custom primitive's rule writes `ctx.max(x, 0.0)`.
"""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from fluxion._src import dtypes
from fluxion._src.core import ShapedArray
from fluxion._src.export.shape_poly import DimExpr, broadcast_shapes, is_symbolic_shape, stride_dim

_ELEMENT_TYPES = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "ui8", "uint16": "ui16", "uint32": "ui32", "uint64": "ui64",
    "bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64",
    "complex64": "complex<f32>", "complex128": "complex<f64>",
    # The narrow types of ml_dtypes, by their MLIR names.
    "float8_e3m4": "f8E3M4", "float8_e4m3": "f8E4M3", "float8_e4m3b11fnuz": "f8E4M3B11FNUZ",
    "float8_e4m3fn": "f8E4M3FN", "float8_e4m3fnuz": "f8E4M3FNUZ", "float8_e5m2": "f8E5M2",
    "float8_e5m2fnuz": "f8E5M2FNUZ", "float8_e8m0fnu": "f8E8M0FNU", "float6_e2m3fn": "f6E2M3FN",
    "float6_e3m2fn": "f6E3M2FN", "float4_e2m1fn": "f4E2M1FN",
    "int1": "i1", "int2": "i2", "int4": "i4", "uint1": "ui1", "uint2": "ui2", "uint4": "ui4",
}


def element_type(dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == dtypes.float0:
        return "i1"
    try:
        return _ELEMENT_TYPES[dtype.name]
    except KeyError:
        raise TypeError(f"dtype {dtype} has no StableHLO element type") from None


_tensor_types: dict = {}  # (shape, dtype) -> text; lowering asks for the same few many times


def tensor_type(aval) -> str:
    key = (aval.shape, aval.dtype)
    text = _tensor_types.get(key)
    if text is None:
        if len(_tensor_types) > 16384:
            _tensor_types.clear()
        if getattr(aval, "is_token", False):  # fluxion._src.tokens.AbstractToken
            text = _tensor_types[key] = "!stablehlo.token"
            return text
        dims = "".join("?x" if type(d) is DimExpr else f"{d}x" for d in aval.shape)
        text = _tensor_types[key] = f"tensor<{dims}{element_type(aval.dtype)}>"
    return text


def i64_array(values) -> str:
    return "array<i64" + (": " + ", ".join(str(int(v)) for v in values) if len(values) else "") + ">"


def bool_array(values) -> str:
    return "array<i1" + (": " + ", ".join("true" if v else "false" for v in values) if len(values) else "") + ">"


def dense_i64(values, shape=None) -> str:
    arr = np.asarray(values, dtype=np.int64)
    shape = arr.shape if shape is None else shape
    return f"dense<{_nested(arr.tolist())}> : tensor<{''.join(f'{d}x' for d in shape)}i64>"


def _nested(x) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(_nested(v) for v in x) + "]"
    return str(x)


def dense_attr(value: np.ndarray, aval: ShapedArray) -> str:
    """A `dense<...> : tensor<...>` attribute holding `value` (raw little-endian hex)."""
    arr = np.asarray(value, dtype=aval.dtype if aval.dtype != dtypes.float0 else np.bool_)
    if arr.size > 1 and _all_same_bits(arr):
        arr = arr.flat[:1]  # a splat: one element stands for all
    data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    return f'dense<"0x{data.hex().upper()}"> : {tensor_type(aval)}'


def _all_same_bits(arr: np.ndarray) -> bool:
    raw = np.ascontiguousarray(arr).view(np.uint8).reshape(arr.size, arr.dtype.itemsize)
    return bool((raw == raw[0]).all())


class Value:
    """An SSA value of a function being built."""

    __slots__ = ("name", "aval")

    def __init__(self, name: str, aval: ShapedArray):
        self.name = name
        self.aval = aval

    @property
    def type(self) -> str:
        return tensor_type(self.aval)

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)

    def __repr__(self):
        return f"{self.name}: {self.type}"


class Module:
    """Shared state of one module being emitted: names and extra functions."""

    def __init__(self, platform: str):
        self.platform = platform
        self._counter = itertools.count()
        self.functions: list[str] = []

    def fresh(self, prefix: str = "") -> str:
        return f"%{prefix}{next(self._counter)}"


_DIRECTIONS = {"EQ", "NE", "LT", "LE", "GT", "GE"}


class HloOps:
    """Op-emitting methods. Subclasses provide `block` (the Block to append to)."""

    block: "Block"

    # ---- the one primitive: emit any op in generic syntax
    def op(self, name: str, operands: Sequence[Value], result_avals: Sequence[ShapedArray],
           attrs: dict | None = None, regions: Sequence["Block"] = ()) -> list[Value]:
        return self.block.emit(name, operands, result_avals, attrs, regions)

    def op1(self, name, operands, result_aval, attrs=None, regions=()) -> Value:
        return self.block.emit(name, operands, [result_aval], attrs, regions)[0]

    # ---- constants and shapes
    def constant(self, value, dtype=None, shape=None) -> Value:
        """A constant array; `shape` broadcasts a scalar value."""
        if dtype is None:
            dtype = getattr(value, "dtype", None)
            if dtype is None:
                dtype = dtypes.dtype(value, canonicalize=True)
        arr = np.asarray(value, dtype=np.dtype(dtype))
        scalar_aval = ShapedArray(arr.shape, arr.dtype)
        if arr.dtype == dtypes.bool_:
            as_int = self.op1("stablehlo.constant", [], ShapedArray(arr.shape, np.uint8),
                              {"value": dense_attr(arr.astype(np.uint8), ShapedArray(arr.shape, np.uint8))})
            out = self.convert(as_int, dtypes.bool_)
        else:
            out = self.op1("stablehlo.constant", [], scalar_aval, {"value": dense_attr(arr, scalar_aval)})
        if shape is not None and tuple(shape) != arr.shape:
            out = self.broadcast(out, shape)
        return out

    def _as_value(self, x, like: Value) -> Value:
        if isinstance(x, Value):
            return x
        return self.constant(x, like.dtype)

    # ---- symbolic dimensions (shape polymorphism): values computed from the arguments' sizes
    def dim_value(self, d) -> Value:
        """A dimension as a `tensor<i32>`: a constant, or computed from the dimension variables
        that the exported function's @main read off its arguments."""
        if type(d) is not DimExpr:
            return self.constant(np.int32(d), np.int32)
        env = getattr(self.block.module, "dim_env", None)
        if env is None:
            raise ValueError(f"Symbolic dimension '{d}' can only be lowered inside "
                             "fluxion.export.export (use concrete shapes for jit).")
        return d.evaluate(env, self._dim_ops())

    def _dim_ops(self) -> dict:
        def floordiv(a, b):  # stablehlo.divide truncates; round towards -inf
            q, r = self.div(a, b), self.rem(a, b)
            fix = self.and_(self.compare(r, 0, "NE"),
                            self.compare(self.compare(r, 0, "LT"), self.compare(b, 0, "LT"), "NE"))
            return self.select(fix, self.sub(q, 1), q)

        def mod(a, b):
            r = self.rem(a, b)
            fix = self.and_(self.compare(r, 0, "NE"),
                            self.compare(self.compare(r, 0, "LT"), self.compare(b, 0, "LT"), "NE"))
            return self.select(fix, self.add(r, b), r)

        return {"const": lambda c: self.constant(np.int32(c), np.int32), "add": self.add,
                "mul": self.mul, "floordiv": floordiv, "mod": mod, "max": self.max,
                "min": self.min}

    def shape_value(self, shape) -> Value:
        """A shape as a `tensor<rank x i32>` (for the dynamic ops)."""
        dims = [self.reshape(self.dim_value(d), (1,)) for d in shape]
        if not dims:
            return self.constant(np.zeros((0,), np.int32), np.int32)
        return dims[0] if len(dims) == 1 else self.concatenate(dims, 0)

    def broadcast_in_dim(self, x: Value, shape, broadcast_dimensions) -> Value:
        shape = tuple(shape)
        attrs = {"broadcast_dimensions": i64_array(broadcast_dimensions)}
        if is_symbolic_shape(shape):
            return self.op1("stablehlo.dynamic_broadcast_in_dim", [x, self.shape_value(shape)],
                            x.aval.update(shape=shape), attrs)
        return self.op1("stablehlo.broadcast_in_dim", [x], x.aval.update(shape=shape), attrs)

    def broadcast(self, x: Value, shape) -> Value:
        """Broadcast `x` to `shape`, aligning trailing dimensions (NumPy rules)."""
        shape = tuple(shape)
        if x.shape == shape:
            return x
        offset = len(shape) - x.aval.ndim
        return self.broadcast_in_dim(x, shape, range(offset, len(shape)))

    def reshape(self, x: Value, shape) -> Value:
        shape = tuple(shape)
        if is_symbolic_shape(shape) or is_symbolic_shape(x.shape):
            return self.op1("stablehlo.dynamic_reshape", [x, self.shape_value(shape)],
                            x.aval.update(shape=shape))
        return self.op1("stablehlo.reshape", [x], x.aval.update(shape=shape))

    def transpose(self, x: Value, perm) -> Value:
        shape = tuple(x.shape[p] for p in perm)
        return self.op1("stablehlo.transpose", [x], x.aval.update(shape=shape),
                        {"permutation": i64_array(perm)})

    def slice(self, x: Value, start, limit, strides=None) -> Value:
        strides = tuple(strides) if strides is not None else (1,) * len(start)
        if is_symbolic_shape(tuple(start) + tuple(limit) + strides):
            # (the slice abstract evaluation's expression, so that the two agree symbolically)
            shape = tuple(hi - lo if s == 1 else stride_dim(hi - lo, 1, s)
                          for lo, hi, s in zip(start, limit, strides))
            return self.op1("stablehlo.real_dynamic_slice",
                            [x, self.shape_value(start), self.shape_value(limit),
                             self.shape_value(strides)], x.aval.update(shape=shape))
        shape = tuple(max(0, -(-(hi - lo) // s)) for lo, hi, s in zip(start, limit, strides))
        return self.op1("stablehlo.slice", [x], x.aval.update(shape=shape),
                        {"start_indices": i64_array(start), "limit_indices": i64_array(limit),
                         "strides": i64_array(strides)})

    def convert(self, x: Value, dtype) -> Value:
        dtype = np.dtype(dtype)
        if x.dtype == dtype:
            return x
        return self.op1("stablehlo.convert", [x], x.aval.update(dtype=dtype, weak_type=False))

    def bitcast_convert(self, x: Value, aval: ShapedArray) -> Value:
        return self.op1("stablehlo.bitcast_convert", [x], aval)

    def iota(self, aval: ShapedArray, dimension: int) -> Value:
        if is_symbolic_shape(aval.shape):
            return self.op1("stablehlo.dynamic_iota", [self.shape_value(aval.shape)], aval,
                            {"iota_dimension": f"{dimension} : i64"})
        return self.op1("stablehlo.iota", [], aval, {"iota_dimension": f"{dimension} : i64"})

    def concatenate(self, xs: Sequence[Value], dimension: int) -> Value:
        shape = list(xs[0].shape)
        shape[dimension] = sum(x.shape[dimension] for x in xs)
        return self.op1("stablehlo.concatenate", list(xs), xs[0].aval.update(shape=tuple(shape)),
                        {"dimension": f"{dimension} : i64"})

    # ---- elementwise
    def _binary(self, name, x, y) -> Value:
        if not isinstance(x, Value):
            x = self.constant(x, y.dtype)
        y = self._as_value(y, x)
        if x.shape != y.shape:
            shape = broadcast_shapes(x.shape, y.shape)
            x, y = self.broadcast(x, shape), self.broadcast(y, shape)
        return self.op1(name, [x, y], x.aval.update(weak_type=False))

    def _unary(self, name, x) -> Value:
        return self.op1(name, [x], x.aval)

    def add(self, x, y): return self._binary("stablehlo.add", x, y)
    def sub(self, x, y): return self._binary("stablehlo.subtract", x, y)
    def mul(self, x, y): return self._binary("stablehlo.multiply", x, y)
    def div(self, x, y): return self._binary("stablehlo.divide", x, y)
    def rem(self, x, y): return self._binary("stablehlo.remainder", x, y)
    def pow(self, x, y): return self._binary("stablehlo.power", x, y)
    def max(self, x, y): return self._binary("stablehlo.maximum", x, y)
    def min(self, x, y): return self._binary("stablehlo.minimum", x, y)
    def atan2(self, x, y): return self._binary("stablehlo.atan2", x, y)
    def and_(self, x, y): return self._binary("stablehlo.and", x, y)
    def or_(self, x, y): return self._binary("stablehlo.or", x, y)
    def xor(self, x, y): return self._binary("stablehlo.xor", x, y)
    def shift_left(self, x, y): return self._binary("stablehlo.shift_left", x, y)
    def shift_right_logical(self, x, y): return self._binary("stablehlo.shift_right_logical", x, y)
    def shift_right_arithmetic(self, x, y): return self._binary("stablehlo.shift_right_arithmetic", x, y)

    def neg(self, x): return self._unary("stablehlo.negate", x)
    def exp(self, x): return self._unary("stablehlo.exponential", x)
    def log(self, x): return self._unary("stablehlo.log", x)
    def log1p(self, x): return self._unary("stablehlo.log_plus_one", x)
    def expm1(self, x): return self._unary("stablehlo.exponential_minus_one", x)
    def tanh(self, x): return self._unary("stablehlo.tanh", x)
    def sqrt(self, x): return self._unary("stablehlo.sqrt", x)
    def rsqrt(self, x): return self._unary("stablehlo.rsqrt", x)
    def abs(self, x):
        out_dtype = np.dtype(np.float32 if x.dtype == dtypes.complex64 else np.float64) \
            if dtypes.is_complex(x.dtype) else x.dtype
        return self.op1("stablehlo.abs", [x], x.aval.update(dtype=out_dtype))
    def not_(self, x): return self._unary("stablehlo.not", x)

    def compare(self, x, y, direction: str, compare_type: str | None = None) -> Value:
        direction = direction.upper()
        if direction not in _DIRECTIONS:
            raise ValueError(f"comparison direction must be one of {sorted(_DIRECTIONS)}, got {direction!r}")
        if not isinstance(x, Value):
            x = self.constant(x, y.dtype)
        y = self._as_value(y, x)
        if x.shape != y.shape:
            shape = broadcast_shapes(x.shape, y.shape)
            x, y = self.broadcast(x, shape), self.broadcast(y, shape)
        if compare_type is None:
            dt = x.dtype
            compare_type = ("FLOAT" if dtypes.is_inexact(dt) else "UNSIGNED"
                            if dtypes._kind(dt) in "ub" else "SIGNED")
        attrs = {"comparison_direction": f"#stablehlo<comparison_direction {direction}>",
                 "compare_type": f"#stablehlo<comparison_type {compare_type}>"}
        return self.op1("stablehlo.compare", [x, y], x.aval.update(dtype=dtypes.bool_, weak_type=False), attrs)

    def select(self, pred: Value, on_true, on_false) -> Value:
        if not isinstance(on_true, Value):
            on_true = self.constant(on_true, on_false.dtype, on_false.shape)
        if not isinstance(on_false, Value):
            on_false = self.constant(on_false, on_true.dtype, on_true.shape)
        return self.op1("stablehlo.select", [pred, on_true, on_false], on_true.aval.update(weak_type=False))

    def clamp(self, lo: Value, x: Value, hi: Value) -> Value:
        return self.op1("stablehlo.clamp", [lo, x, hi], x.aval)

    # ---- contractions
    def dot_general(self, x: Value, y: Value, dimension_numbers, precision=None,
                    preferred_element_type=None, algorithm: str | None = None) -> Value:
        """`dimension_numbers` = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch));
        `algorithm` the text of a `#stablehlo.dot_algorithm` attribute."""
        (lc, rc), (lb, rb) = dimension_numbers
        lfree = [d for d in range(x.aval.ndim) if d not in lc and d not in lb]
        rfree = [d for d in range(y.aval.ndim) if d not in rc and d not in rb]
        shape = tuple(x.shape[d] for d in lb) + tuple(x.shape[d] for d in lfree) + tuple(
            y.shape[d] for d in rfree)
        dtype = np.dtype(preferred_element_type) if preferred_element_type is not None else x.dtype
        attrs = {"dot_dimension_numbers": (
            "#stablehlo.dot<lhs_batching_dimensions = [" + ", ".join(map(str, lb)) + "], "
            "rhs_batching_dimensions = [" + ", ".join(map(str, rb)) + "], "
            "lhs_contracting_dimensions = [" + ", ".join(map(str, lc)) + "], "
            "rhs_contracting_dimensions = [" + ", ".join(map(str, rc)) + "]>")}
        if precision is not None:
            attrs["precision_config"] = "[" + ", ".join(
                f"#stablehlo<precision {p}>" for p in precision) + "]"
        if algorithm is not None:
            attrs["algorithm"] = algorithm
        return self.op1("stablehlo.dot_general", [x, y], ShapedArray(shape, dtype), attrs)

    # ---- calls out of XLA
    def custom_call(self, target: str, operands: Sequence[Value], result_avals: Sequence[ShapedArray],
                    backend_config=None, has_side_effect: bool = False, api_version: int = 4,
                    operand_layouts=None, result_layouts=None, extra_attrs: dict | None = None,
                    shape_operands: bool = True) -> list[Value]:
        """Call a function registered with XLA under `target` (api_version 4 = typed FFI).

        When a result shape is symbolic (and `shape_operands`), each result's shape goes as one
        more operand, listed in `indices_of_shape_operands` (as JAX does), so that shape
        refinement can make the results static once the arguments' sizes are known.
        """
        operands = list(operands)
        if shape_operands and any(is_symbolic_shape(a.shape) for a in result_avals):
            first = len(operands)
            operands += [self.shape_value(a.shape) for a in result_avals]
            extra_attrs = dict(extra_attrs or {})
            extra_attrs["indices_of_shape_operands"] = dense_i64(
                list(range(first, len(operands))))
            if operand_layouts is not None:
                operand_layouts = list(operand_layouts) + [[0]] * len(result_avals)
        attrs = {"call_target_name": f'"{target}"',
                 "has_side_effect": "true" if has_side_effect else "false",
                 "api_version": f"{api_version} : i32"}
        if backend_config is not None:
            if isinstance(backend_config, dict):
                attrs["backend_config"] = "{" + ", ".join(f"{k} = {v}" for k, v in backend_config.items()) + "}"
            else:
                if isinstance(backend_config, bytes):
                    backend_config = backend_config.decode()
                attrs["backend_config"] = '"' + str(backend_config).replace('"', '\\"') + '"'
        if operand_layouts is not None:
            attrs["operand_layouts"] = "[" + ", ".join(f"dense<{_nested(list(l))}> : tensor<{len(l)}xindex>"
                                                      if len(l) else "dense<> : tensor<0xindex>"
                                                      for l in operand_layouts) + "]"
        if result_layouts is not None:
            attrs["result_layouts"] = "[" + ", ".join(f"dense<{_nested(list(l))}> : tensor<{len(l)}xindex>"
                                                     if len(l) else "dense<> : tensor<0xindex>"
                                                     for l in result_layouts) + "]"
        if extra_attrs:
            attrs.update(extra_attrs)
        return self.op("stablehlo.custom_call", list(operands), list(result_avals), attrs)

    # ---- regions
    def new_block(self, arg_avals: Sequence[ShapedArray]) -> "Block":
        """A fresh block (for a region: a reduction body, a comparator, a loop body)."""
        return Block(self.block.module, arg_avals)

    # CamelCase aliases, for rules written against the XlaBuilder-style names.
    def Add(self, x, y): return self.add(x, y)
    def Sub(self, x, y): return self.sub(x, y)
    def Mul(self, x, y): return self.mul(x, y)
    def Div(self, x, y): return self.div(x, y)
    def Max(self, x, y): return self.max(x, y)
    def Min(self, x, y): return self.min(x, y)
    def Neg(self, x): return self.neg(x)
    def Exp(self, x): return self.exp(x)
    def Log(self, x): return self.log(x)
    def Log1p(self, x): return self.log1p(x)
    def Tanh(self, x): return self.tanh(x)
    def Broadcast(self, x, shape): return self.broadcast(x, shape)
    def Reshape(self, x, shape): return self.reshape(x, shape)
    def Transpose(self, x, perm): return self.transpose(x, perm)
    def Select(self, p, a, b): return self.select(p, a, b)
    def DotGeneral(self, x, y, dimension_numbers): return self.dot_general(x, y, dimension_numbers)
    def ConstantElement(self, value, dtype): return self.constant(value, dtype)


class Block(HloOps):
    """A list of operations with block arguments: a function body or a region."""

    def __init__(self, module: Module, arg_avals: Sequence[ShapedArray], arg_names=None):
        self.module = module
        self.lines: list[str] = []
        # "%argN" names belong to @main's arguments; a region must not shadow them.
        names = arg_names or [module.fresh("region_arg") for _ in arg_avals]
        self.args = [Value(n, a) for n, a in zip(names, arg_avals)]
        self.block = self

    def emit(self, name, operands, result_avals, attrs=None, regions=()) -> list[Value]:
        operand_text = ", ".join(v.name for v in operands)
        in_types = ", ".join(v.type for v in operands)
        out_types = [tensor_type(a) for a in result_avals]
        out_text = out_types[0] if len(out_types) == 1 else "(" + ", ".join(out_types) + ")"
        attr_text = ""
        if attrs:
            attr_text = " {" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}"
        region_text = ""
        if regions:
            region_text = " (" + ", ".join(r.region_text() for r in regions) + ")"
        signature = f" : ({in_types}) -> {out_text}"
        if not result_avals:
            self.lines.append(f'"{name}"({operand_text}){region_text}{attr_text}{signature}')
            return []
        base = self.module.fresh()
        if len(result_avals) == 1:
            results = [Value(base, result_avals[0])]
            lhs = base
        else:
            results = [Value(f"{base}#{i}", a) for i, a in enumerate(result_avals)]
            lhs = f"{base}:{len(result_avals)}"
        self.lines.append(f'{lhs} = "{name}"({operand_text}){region_text}{attr_text}{signature}')
        return results

    def ret(self, values: Sequence[Value], op_name: str = "stablehlo.return") -> None:
        types = ", ".join(v.type for v in values)
        self.lines.append(f'"{op_name}"({", ".join(v.name for v in values)}) : ({types}) -> ()')

    def region_text(self) -> str:
        args = ", ".join(f"{v.name}: {v.type}" for v in self.args)
        body = "\n".join("    " + line for line in self.lines)
        return "{\n  ^bb0(" + args + "):\n" + body + "\n  }"


def function_text(name: str, block: Block, results: Sequence[Value], visibility: str = "public",
                  arg_attrs: Sequence[str | None] | None = None,
                  result_attrs: Sequence[str | None] | None = None) -> str:
    args = []
    for i, v in enumerate(block.args):
        extra = arg_attrs[i] if arg_attrs and arg_attrs[i] else None
        args.append(f"{v.name}: {v.type}" + (f" {{{extra}}}" if extra else ""))
    outs = []
    for i, v in enumerate(results):
        extra = result_attrs[i] if result_attrs and result_attrs[i] else None
        outs.append(v.type + (f" {{{extra}}}" if extra else ""))
    body = "\n".join("    " + line for line in block.lines)
    ret_types = ", ".join(v.type for v in results)
    ret = f'    "func.return"({", ".join(v.name for v in results)}) : ({ret_types}) -> ()'
    return (f"  func.func {visibility} @{name}({', '.join(args)}) -> ({', '.join(outs)}) {{\n"
            f"{body}\n{ret}\n  }}")
