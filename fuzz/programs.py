"""Random programs over fuzz.ops, and running one on fluxion and on JAX (the oracle).

A program is built from a seed: one or two inputs (random dtype and shape, 0-d and empty
included; the second operand of a binary op is sometimes a Python scalar) and a chain of 1-4
ops. One seed in five is an x64 program: it runs with 64-bit types enabled on both sides and
draws float64/int64/uint64/complex128 inputs too. `check(program)` runs it on JAX and on
fluxion eagerly, under jit, under vmap (against a loop) and, when every op is differentiable
and the dtype is float, through grad; it returns the list of mismatches (empty when all
agree). Even seeds apply vmap and grad eagerly (primitive by primitive), odd seeds under jit
(one compiled program), so both paths are covered at half the compile cost of running both.
"""
from __future__ import annotations

import contextlib
import dataclasses

import numpy as np

from fuzz.ops import BOOL, COMPLEX, FLOAT, INT, OPS

SHAPES = [(), (0,), (3,), (2, 3), (3, 3), (1, 3), (2, 1, 3)]
DTYPES = {FLOAT: ["float32", "float32", "float32", "float16", "bfloat16"],
          INT: ["int32", "int32", "int8", "uint8", "uint32"], BOOL: ["bool"],
          COMPLEX: ["complex64"]}
DTYPES_X64 = {FLOAT: ["float64", "float64", "float32", "float16"],
              INT: ["int64", "int64", "int32", "uint64", "uint8"], BOOL: ["bool"],
              COMPLEX: ["complex128", "complex64"]}
KIND_WEIGHTS = [(FLOAT, 0.55), (INT, 0.2), (BOOL, 0.1), (COMPLEX, 0.15)]
PYTHON_SCALAR = {FLOAT: float, INT: int, BOOL: bool, COMPLEX: complex}


def is_x64(seed: int) -> bool:
    return seed % 5 == 4


@dataclasses.dataclass
class Program:
    seed: int
    inputs: list  # NumPy arrays, or a Python scalar as a binary op's second operand
    ops: list  # fuzz.ops.Op, applied in a chain; binary ops take the next input too

    @property
    def x64(self) -> bool:
        return is_x64(self.seed)

    def describe(self) -> str:
        args = ", ".join(f"{a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray)
                         else f"{type(a).__name__} {a!r}" for a in self.inputs)
        return (f"seed {self.seed}{' (x64)' if self.x64 else ''}: ({args}) -> "
                + " -> ".join(op.name for op in self.ops))

    def run(self, np_module, lax_module, inputs):
        x, rest = inputs[0], list(inputs[1:])
        for op in self.ops:
            if op.arity == 2:
                x = op.fn(np_module, lax_module, x, rest[0] if rest else x)
            else:
                x = op.fn(np_module, lax_module, x)
        return x


def _kind_of(dtype: str) -> str:
    return {"f": FLOAT, "i": INT, "u": INT, "b": BOOL, "c": COMPLEX, "V": FLOAT}[
        np.dtype(dtype).kind]


def _values(rng, shape, dtype, op):
    return np.asarray(_draw(rng, shape, dtype, op))


def _draw(rng, shape, dtype, op):
    import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy)
    kind = _kind_of(dtype)
    if kind == BOOL:
        return rng.random(shape) > 0.5
    if kind == INT:
        lo = 0 if np.dtype(dtype).kind == "u" else -5
        return rng.integers(lo, 6, shape).astype(dtype)
    x = rng.standard_normal(shape)
    if op is not None and op.positive:
        x = 0.5 + np.abs(x)
    if op is not None and op.unit:
        x = np.tanh(x) * 0.9
    if kind == COMPLEX:
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def make_program(seed: int) -> Program:
    rng = np.random.default_rng(seed)
    kinds, weights = zip(*KIND_WEIGHTS)
    kind = kinds[rng.choice(len(kinds), p=np.array(weights) / sum(weights))]
    dtype = rng.choice((DTYPES_X64 if is_x64(seed) else DTYPES)[kind])
    shape = SHAPES[rng.integers(len(SHAPES))]
    ops, rank = [], len(shape)
    for _ in range(rng.integers(1, 5)):
        candidates = [op for op in OPS if kind in op.kinds and rank >= op.min_rank]
        if not candidates:
            break
        op = candidates[rng.integers(len(candidates))]
        ops.append(op)
        break  # the kind and rank after an op are not known statically: one op per level
    first = ops[0] if ops else None
    inputs = [_values(rng, shape, dtype, first)]
    if first is not None and first.arity == 2:
        draw = rng.random()
        other = () if draw < 0.3 else shape
        value = _values(rng, other, dtype, first)
        inputs.append(PYTHON_SCALAR[kind](value.item()) if draw < 0.12 else value)
    # Further ops are chosen from the first op's result type, found by running it on NumPy
    # would be circular; instead chain only ops that keep every kind (elementwise on floats).
    if kind == FLOAT and first is not None and first.differentiable:
        for _ in range(rng.integers(0, 3)):
            follow = [op for op in OPS if op.arity == 1 and FLOAT in op.kinds and op.min_rank == 0
                      and not op.positive and not op.unit and op.differentiable]
            ops.append(follow[rng.integers(len(follow))])
    return Program(seed, inputs, ops)


# ---------------------------------------------------------------------------------------------
# Running and comparing

def _tolerance(dtype) -> tuple[float, float]:
    name = np.dtype(dtype).name
    if name in ("float16", "bfloat16"):
        return 2e-2, 2e-2
    if name in ("float32", "complex64"):
        return 2e-4, 2e-5
    return 1e-10, 1e-12


def _same(got, want, input_dtypes=()) -> str | None:
    """None if `got` (fluxion) matches `want` (JAX): dtype, weak type, shape, values. Values
    computed from 16-bit inputs get 16-bit tolerances, whatever the output type: XLA may keep
    excess precision inside a compiled program (a bfloat16 product converted to float32 is not
    rounded to bfloat16 in between), as it does for JAX's jitted programs too."""
    got_dtype, want_dtype = np.dtype(got.dtype), np.dtype(want.dtype)
    if got_dtype != want_dtype:
        return f"dtype {got_dtype} != {want_dtype}"
    if getattr(got, "weak_type", False) != getattr(want, "weak_type", False):
        return f"weak_type {getattr(got, 'weak_type', False)} != {want.weak_type}"
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"shape {g.shape} != {w.shape}"
    if g.dtype.kind in "biu":
        return None if np.array_equal(g, w) else f"values differ:\n{g}\n{w}"
    g64 = g.astype(np.complex128 if g.dtype.kind == "c" else np.float64)
    w64 = w.astype(g64.dtype)
    rtol, atol = max(_tolerance(d) for d in (got_dtype, *input_dtypes))
    # Near a discontinuity (floor, round, sign, comparisons of rounded values) one-ulp input
    # differences legitimately flip results; a mismatch must show in most elements to count.
    ok = np.isclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return None
    return f"values differ at {np.argwhere(~ok)[:5].tolist()}:\n{g}\n{w}"


def _call(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001
        return None, e


@contextlib.contextmanager
def _x64(enabled: bool):
    """64-bit types on or off for both fluxion and JAX, restored afterwards."""
    import jax

    import fluxion
    before = (jax.config.jax_enable_x64, fluxion.config.enable_x64)
    jax.config.update("jax_enable_x64", enabled)
    fluxion.config.update("enable_x64", enabled)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before[0])
        fluxion.config.update("enable_x64", before[1])


def _array_dtypes(inputs) -> list:
    return [x.dtype for x in inputs if isinstance(x, np.ndarray)]


def check(program: Program, transforms=("eager", "jit", "vmap", "grad")) -> tuple[list, int]:
    """(mismatches, number of evaluations compared) for one program."""
    with _x64(program.x64):
        return _check(program, transforms)


def _check(program: Program, transforms) -> tuple[list, int]:
    import jax
    import jax.numpy as jjnp

    import fluxion
    import fluxion.numpy as fjnp

    def ours(*xs):
        return program.run(fjnp, fluxion.lax, xs)

    def theirs(*xs):
        return program.run(jjnp, jax.lax, xs)

    def as_arrays(m):
        return [m.asarray(x) if isinstance(x, np.ndarray) else x for x in program.inputs]

    # Even seeds: vmap and grad applied eagerly; odd seeds: under jit.
    staged = (lambda f: fluxion.jit(f)) if program.seed % 2 else (lambda f: f)
    # JAX's gradient is taken the same way: XLA may simplify a compiled gradient where the
    # eager one makes NaNs (0 * inf from a max over NaNs gives 0 under jit, for JAX too).
    jax_staged = jax.jit if program.seed % 2 else (lambda f: f)
    input_dtypes = _array_dtypes(program.inputs)
    mismatches, compared = [], 0
    want, jax_error = _call(lambda: theirs(*as_arrays(jjnp)))
    if jax_error is not None:
        got, our_error = _call(lambda: ours(*as_arrays(fjnp)))
        if our_error is None:
            mismatches.append(f"JAX raised {type(jax_error).__name__} ({jax_error}), fluxion "
                              "did not")
        return mismatches, 1
    for name in transforms:
        if name == "eager":
            got, err = _call(lambda: ours(*as_arrays(fjnp)))
        elif name == "jit":
            got, err = _call(lambda: fluxion.jit(ours)(*program.inputs))
        elif name == "vmap":
            batched = [isinstance(x, np.ndarray) for x in program.inputs]
            batch = [np.stack([x, x[::-1] if x.ndim else x, x]) if b else x
                     for x, b in zip(program.inputs, batched)]
            in_axes = [0 if b else None for b in batched]
            got, err = _call(lambda: staged(fluxion.vmap(ours, in_axes=in_axes))(*batch))
            if err is None:
                looped = [fluxion.jit(ours)(*[x[i] if b else x for x, b in zip(batch, batched)])
                          for i in range(3)]
                want_b = fjnp.stack(looped)
                problem = _same(got, want_b, input_dtypes) if np.ndim(got) else None
                if problem and "weak_type" not in problem:
                    mismatches.append(f"vmap vs loop: {problem}")
                compared += 1
                continue
        else:  # grad
            differentiable = all(op.differentiable for op in program.ops)
            x0 = program.inputs[0]
            if (not differentiable or x0.dtype not in (np.float32, np.float64)
                    or x0.size == 0):
                continue
            loss = lambda f, m: (lambda *xs: m.sum(m.real(f(*xs)).astype(x0.dtype)))  # noqa
            got, err = _call(lambda: staged(fluxion.grad(loss(ours, fjnp)))(*program.inputs))
            want_g, jerr = _call(lambda: jax_staged(jax.grad(loss(theirs, jjnp)))(*program.inputs))
            if jerr is not None:
                continue
            if err is not None:
                mismatches.append(f"grad: fluxion raised {type(err).__name__}: {err}")
            else:
                problem = _same(got, want_g)
                if problem and "weak_type" not in problem:
                    mismatches.append(f"grad: {problem}")
            compared += 1
            continue
        compared += 1
        if err is not None:
            mismatches.append(f"{name}: fluxion raised {type(err).__name__}: {err}")
            continue
        problem = _same(got, want, input_dtypes)
        if problem:
            mismatches.append(f"{name}: {problem}")
    return mismatches, compared
