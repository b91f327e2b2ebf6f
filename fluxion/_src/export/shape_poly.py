"""Symbolic dimensions for shape-polymorphic export (`jax.export.symbolic_shape`).

A `DimExpr` is a polynomial with integer coefficients over atoms: dimension variables and the
non-linear operations `floordiv`, `mod`, `max` and `min` of other expressions. Expressions are
kept in a canonical form (sorted monomials, merged coefficients), so equal polynomials are
equal objects structurally, and one that is constant becomes a plain `int`.

Comparisons are decided with interval bounds: every variable is >= 1, narrowed by the
constraints of its `SymbolicScope` ("b >= 16"). A comparison the bounds cannot decide raises
`InconclusiveDimensionOperation`. Equality is syntactic after normalization, as in JAX: `b == 4`
is False.
"""
from __future__ import annotations

import math
import operator
import re
from typing import Any, Sequence

import numpy as np

_INF = math.inf


class InconclusiveDimensionOperation(Exception):
    """A comparison or operation on symbolic dimensions that cannot be decided."""


class UnexpectedDimVar(Exception):
    """A symbolic constraint names a dimension variable that no argument's shape has."""


_HELP = ("\nThis error arises for comparison operations with shapes that\n"
         "are non-constant, and the result of the operation cannot be represented as\n"
         "a boolean value for all values of the symbolic dimensions involved.\n\n"
         "Please see https://docs.jax.dev/en/latest/export/shape_poly.html"
         "#comparison-of-symbolic-dimensions-is-partially-supported\nfor more details.\n")


def is_symbolic_dim(d) -> bool:
    return isinstance(d, DimExpr)


def is_constant_dim(d) -> bool:
    return not isinstance(d, DimExpr)


def is_symbolic_shape(shape) -> bool:
    return any(type(d) is DimExpr for d in shape)


# ---------------------------------------------------------------------------------------------
# Scopes

class SymbolicScope:
    """Where symbolic dimensions live, with the constraints that hold between them.

    Parameters
    ----------
    constraints_str : sequence of str
        Each `"e1 >= e2"`, `"e1 <= e2"` or `"e1 == e2"` over the scope's dimension variables.
    """

    def __init__(self, constraints_str: Sequence[str] = ()):
        if isinstance(constraints_str, str):
            raise ValueError("The symbolic constraints should be a sequence of strings. "
                             f"Got {constraints_str!r}")
        self.constraints_str = tuple(constraints_str)
        self._constraints: list[tuple[Any, int]] = []  # (expr, c): expr >= c
        # An equality whose left side is one atom ("a == b + 1", "b == 4") also rewrites that
        # atom wherever it is made later, as JAX's normalization rules do: atom key -> expr.
        self._rules: dict[str, Any] = {}
        for c in self.constraints_str:
            self._add_constraint(c)

    def _add_constraint(self, text: str) -> None:
        m = re.fullmatch(r"(.+?)(>=|<=|==)(.+)", text.strip())
        if m is None:
            raise ValueError(f"Constraint parsing error: must contain one of '==' or '>=' or "
                             f"'<=' in {text!r}")
        lhs = _parse_dim(m.group(1), self, text)
        rhs = _parse_dim(m.group(3), self, text)
        diff = lhs - rhs
        atom = lhs._single_atom() if isinstance(lhs, DimExpr) else None
        if m.group(2) == "==" and atom is not None and atom._key not in self._rules:
            self._rules[atom._key] = rhs
        if not isinstance(diff, DimExpr):
            ok = {">=": diff >= 0, "<=": diff <= 0, "==": diff == 0}[m.group(2)]
            if not ok:
                raise ValueError(f"Unsatisfiable explicit constraint: {text}")
            return
        if m.group(2) in (">=", "=="):
            self._constraints.append(_split_const(diff))
        if m.group(2) in ("<=", "=="):
            self._constraints.append(_split_const(-diff))

    def __str__(self):
        lines = "".join(f"\n  {c}" for c in self.constraints_str)
        return f"symbolic scope with constraints:{lines}" if lines else "symbolic scope"

    __repr__ = __str__


def _split_const(e: "DimExpr") -> tuple[Any, int]:
    """e >= 0 as (e without its constant term) >= -(constant term)."""
    const = e._coeffs.get((), 0)
    return e - const, -const


# ---------------------------------------------------------------------------------------------
# Atoms and expressions

class _Atom:
    """A dimension variable (`op` None) or an operation on expressions."""

    __slots__ = ("op", "name", "args", "_key")

    def __init__(self, op, name=None, args=()):
        self.op, self.name, self.args = op, name, tuple(args)
        self._key = name if op is None else f"{op}({', '.join(str(a) for a in args)})"

    def __eq__(self, other):
        return isinstance(other, _Atom) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __lt__(self, other):
        return self._key < other._key

    def __str__(self):
        return self._key


class DimExpr:
    """A symbolic dimension: a polynomial over dimension variables and floordiv/mod/max/min.

    Build them with `symbolic_shape`; arithmetic with ints and other expressions of the same
    scope gives expressions (or ints when the result is constant).
    """

    __slots__ = ("_coeffs", "scope", "_hash")
    __array_priority__ = 1000  # so that `np.int64(2) * b` calls our __rmul__

    def __init__(self, coeffs: dict, scope: SymbolicScope):
        # coeffs: monomial (sorted tuple of (atom, power)) -> nonzero int; () is the constant
        self._coeffs = coeffs
        self.scope = scope
        self._hash = None

    @staticmethod
    def _make(coeffs: dict, scope):
        coeffs = {m: c for m, c in coeffs.items() if c != 0}
        if not coeffs or list(coeffs) == [()]:
            return int(coeffs.get((), 0))
        return DimExpr(dict(sorted(coeffs.items(), key=lambda kv: _mono_key(kv[0]))), scope)

    @staticmethod
    def _from_atom(atom: _Atom, scope):
        rule = scope._rules.get(atom._key)
        return rule if rule is not None else DimExpr({((atom, 1),): 1}, scope)

    def _single_atom(self):
        """The atom if this expression is one atom with coefficient 1, else None."""
        if len(self._coeffs) == 1:
            (m, c), = self._coeffs.items()
            if c == 1 and len(m) == 1 and m[0][1] == 1:
                return m[0][0]
        return None

    # ---- conversions
    def _lift(self, other):
        if isinstance(other, DimExpr):
            if other.scope is not self.scope:
                raise ValueError(f"Invalid mixing of symbolic scopes: '{self}' and '{other}' "
                                 "come from different scopes (create them with one "
                                 "symbolic_shape call or pass scope=).")
            return other
        try:
            return DimExpr({(): operator.index(other)}, self.scope) if operator.index(other) \
                else DimExpr({}, self.scope)
        except TypeError:
            return None

    def __index__(self):
        # Like JAX, a symbolic dimension has no integer value.
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension '{self}' used in a context that requires a constant" + _HELP)

    __int__ = __index__

    def __bool__(self):
        return True  # a dimension expression is never the empty/zero object

    def _as_value_op(self, other, op, reflected: bool = False):
        """`self op other` for a non-integer number or array (`2.5 * b`, `b + np.arange(4)`):
        through the dimension's value, as JAX does; NotImplemented for anything else."""
        if not isinstance(other, (float, complex, np.ndarray, np.generic)):
            return NotImplemented
        value = dimension_as_value(self)
        return op(other, value) if reflected else op(value, other)

    # ---- arithmetic
    def __add__(self, other):
        o = self._lift(other)
        if o is None:
            return self._as_value_op(other, operator.add)
        out = dict(self._coeffs)
        for m, c in o._coeffs.items():
            out[m] = out.get(m, 0) + c
        return DimExpr._make(out, self.scope)

    def __radd__(self, other):
        o = self._lift(other)
        return self._as_value_op(other, operator.add, True) if o is None else self + o

    def __neg__(self):
        return DimExpr._make({m: -c for m, c in self._coeffs.items()}, self.scope)

    def __sub__(self, other):
        o = self._lift(other)
        return self._as_value_op(other, operator.sub) if o is None else self + (-o)

    def __rsub__(self, other):
        o = self._lift(other)
        return self._as_value_op(other, operator.sub, True) if o is None else o + (-self)

    def __mul__(self, other):
        o = self._lift(other)
        if o is None:
            return self._as_value_op(other, operator.mul)
        out: dict = {}
        for m1, c1 in self._coeffs.items():
            for m2, c2 in o._coeffs.items():
                m = _mono_mul(m1, m2)
                out[m] = out.get(m, 0) + c1 * c2
        return DimExpr._make(out, self.scope)

    def __rmul__(self, other):
        o = self._lift(other)
        return self._as_value_op(other, operator.mul, True) if o is None else self * o

    def __pow__(self, power):
        if isinstance(power, DimExpr):  # `b ** b` is no polynomial: a value, as in JAX
            return operator.pow(dimension_as_value(self), dimension_as_value(power))
        try:
            power = operator.index(power)
        except TypeError:
            raise ValueError(f"Symbolic dimension cannot be raised to non-integer powers: "
                             f"'{self}' ** '{power}'") from None
        if power < 0:
            raise ValueError(f"Symbolic dimension cannot be raised to negative powers: "
                             f"'{self}' ** '{power}'")
        out = 1
        for _ in range(power):
            out = out * self
        return out

    def __rpow__(self, other):
        # `2 ** b` is no polynomial: a value, as in JAX
        return operator.pow(other, dimension_as_value(self))

    def __floordiv__(self, divisor):
        if self._lift(divisor) is None:
            return self._as_value_op(divisor, operator.floordiv)
        return floordiv(self, divisor)

    def __rfloordiv__(self, other):
        o = self._lift(other)
        return self._as_value_op(other, operator.floordiv, True) if o is None \
            else floordiv(o, self)

    def __mod__(self, divisor):
        if self._lift(divisor) is None:
            return self._as_value_op(divisor, operator.mod)
        return mod(self, divisor)

    def __rmod__(self, other):
        o = self._lift(other)
        return self._as_value_op(other, operator.mod, True) if o is None else mod(o, self)

    def __divmod__(self, divisor):
        return self // divisor, self % divisor

    def __rdivmod__(self, other):
        return other // self, other % self

    def __truediv__(self, divisor):
        # "/" gives a float value, never a dimension (as in JAX)
        return operator.truediv(dimension_as_value(self), divisor)

    def __rtruediv__(self, other):
        return operator.truediv(other, dimension_as_value(self))

    # ---- comparisons
    def __eq__(self, other):
        if isinstance(other, DimExpr) and other.scope is not self.scope:
            return False  # (avals are interned by shape: dims of two scopes never match)
        o = self._lift(other)
        if o is None:
            return False
        diff = self - o
        if not isinstance(diff, DimExpr):
            return diff == 0
        lo, hi = _bounds(diff)
        return lo == hi == 0

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        if self._hash is None:
            self._hash = hash((tuple(self._coeffs.items()), id(self.scope)))
        return self._hash

    def _cmp(self, other, op: str) -> bool:
        o = self._lift(other)
        if o is None:
            return NotImplemented
        diff = self - o  # decide diff (op) 0
        if not isinstance(diff, DimExpr):
            return {">=": diff >= 0, ">": diff > 0, "<=": diff <= 0, "<": diff < 0}[op]
        lo, hi = _bounds(diff)
        if op == ">=" and lo >= 0 or op == ">" and lo > 0:
            return True
        if op == "<=" and hi <= 0 or op == "<" and hi < 0:
            return True
        if op == ">=" and hi < 0 or op == ">" and hi <= 0:
            return False
        if op == "<=" and lo > 0 or op == "<" and lo >= 0:
            return False
        scope_text = (f"\nUsing {self.scope}" if self.scope.constraints_str else "")
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension comparison '{self}' {op} '{other}' is inconclusive."
            + scope_text + _HELP)

    def __ge__(self, other): return self._cmp(other, ">=")
    def __gt__(self, other): return self._cmp(other, ">")
    def __le__(self, other): return self._cmp(other, "<=")
    def __lt__(self, other): return self._cmp(other, "<")

    # ---- inspection
    def __str__(self):
        parts = []
        for m, c in sorted(self._coeffs.items(), key=lambda kv: _mono_key(kv[0]), reverse=True):
            mono = "*".join(str(a) if p == 1 else f"{a}^{p}" for a, p in m)
            if not mono:
                text = str(abs(c))
            elif abs(c) == 1:
                text = mono
            else:
                text = f"{abs(c)}*{mono}"
            sign = "-" if c < 0 else "+"
            parts.append((sign, text))
        if not parts:  # the zero polynomial (`0 % b` lifts its 0 to one)
            return "0"
        first_sign, first = parts[0]
        out = ("- " if first_sign == "-" else "") + first
        for sign, text in parts[1:]:
            out += f" {sign} {text}"
        return out

    def __repr__(self):
        return str(self)

    def _is_var(self) -> str | None:
        """The variable's name if this expression is a single dimension variable."""
        if len(self._coeffs) == 1:
            (m, c), = self._coeffs.items()
            if c == 1 and len(m) == 1 and m[0][1] == 1 and m[0][0].op is None:
                return m[0][0].name
        return None

    def variables(self) -> set:
        out = set()
        for m in self._coeffs:
            for atom, _ in m:
                out |= _atom_vars(atom)
        return out

    def evaluate(self, env: dict, ops=None):
        """The value for `env` (variable name -> value). `ops` provides add/mul/floordiv/mod/
        max/min/const for non-integer values (e.g. IR values); default: Python ints."""
        ops = ops or _INT_OPS
        total = None
        for m, c in self._coeffs.items():
            term = ops["const"](c) if (not m or c != 1) else None
            for atom, p in m:
                v = _eval_atom(atom, env, ops)
                for _ in range(p):
                    term = v if term is None else ops["mul"](term, v)
            total = term if total is None else ops["add"](total, term)
        return total

    def __jax_array__(self):
        return dimension_as_value(self)

    def dimension_as_value(self):
        """The dimension as a traced scalar (JAX's `core.dimension_as_value`)."""
        return dimension_as_value(self)


def _mono_key(m) -> tuple:
    return (sum(p for _, p in m), tuple((str(a), p) for a, p in m))


def _mono_mul(m1, m2) -> tuple:
    powers: dict = {}
    for a, p in m1 + m2:
        powers[a] = powers.get(a, 0) + p
    return tuple(sorted(powers.items()))


def _atom_vars(atom: _Atom) -> set:
    if atom.op is None:
        return {atom.name}
    out = set()
    for a in atom.args:
        if isinstance(a, DimExpr):
            out |= a.variables()
    return out


def _eval_atom(atom: _Atom, env, ops):
    if atom.op is None:
        if atom.name not in env:
            raise KeyError(f"Dimension variable '{atom.name}' has no value")
        return env[atom.name]
    args = [a.evaluate(env, ops) if isinstance(a, DimExpr) else ops["const"](a)
            for a in atom.args]
    return ops[atom.op](*args)


_INT_OPS = {"const": int, "add": operator.add, "mul": operator.mul,
            "floordiv": lambda a, b: floordiv(a, b), "mod": lambda a, b: mod(a, b),
            "max": lambda a, b: max_dim(a, b), "min": lambda a, b: min_dim(a, b)}


# ---------------------------------------------------------------------------------------------
# Non-linear operations

def _scope_of(*xs):
    return next(x.scope for x in xs if isinstance(x, DimExpr))


def floordiv(e, divisor):
    """`e // divisor`, simplified where the division is exact."""
    if not isinstance(e, DimExpr) and not isinstance(divisor, DimExpr):
        return operator.index(e) // operator.index(divisor)
    scope = _scope_of(e, divisor)
    if divisor == 0:
        raise InconclusiveDimensionOperation(f"Division by zero: '{e}' // 0")
    if not isinstance(divisor, DimExpr):
        d = operator.index(divisor)
        if d == 1:
            return e
        if d < 0:
            return floordiv(-e, -d)
        if all(c % d == 0 for m, c in e._coeffs.items() if m):
            # the constant's remainder only adds a constant: (4*b + 3) // 2 is 2*b + 1
            return DimExpr._make({m: c // d for m, c in e._coeffs.items()}, scope)
    elif isinstance(e, DimExpr):
        q = _exact_quotient(e, divisor)
        if q is not None:
            return q
    return DimExpr._from_atom(_Atom("floordiv", args=(e, divisor)), scope)


def _exact_quotient(e: DimExpr, d: DimExpr):
    """e / d when the polynomial d divides e with an integer quotient; else None.

    Long division under the graded lexicographic order of the monomials: when d divides e,
    each leading term of the remainder is the product of a quotient term and d's leading term.
    """
    atoms = sorted({a for m in (*e._coeffs, *d._coeffs) for a, _ in m})

    def order(m):
        powers = dict(m)
        return sum(powers.values()), tuple(powers.get(a, 0) for a in atoms)

    lead = max(d._coeffs, key=order)
    lead_coeff = d._coeffs[lead]
    rest, out = dict(e._coeffs), {}
    while rest:
        m = max(rest, key=order)
        q = _mono_div(m, lead)
        if q is None or rest[m] % lead_coeff:
            return None
        qc = rest[m] // lead_coeff
        out[q] = qc
        for dm, dc in d._coeffs.items():
            pm = _mono_mul(q, dm)
            left = rest.get(pm, 0) - qc * dc
            if left:
                rest[pm] = left
            else:
                rest.pop(pm, None)
    return DimExpr._make(out, e.scope)


def _mono_div(m, dm):
    """The monomial m / dm, or None when dm does not divide m."""
    powers = dict(m)
    for a, p in dm:
        if powers.get(a, 0) < p:
            return None
        powers[a] -= p
    return tuple(sorted((a, p) for a, p in powers.items() if p))


def mod(e, divisor):
    """`e % divisor`."""
    if not isinstance(e, DimExpr) and not isinstance(divisor, DimExpr):
        return operator.index(e) % operator.index(divisor)
    q = floordiv(e, divisor)
    # exact unless floordiv left this very division opaque (other floordivs inside e, as in
    # 12*floordiv(b, 4) % 3, are no obstacle); floordiv writes a negative divisor's division
    # as floordiv(-e, -divisor)
    opaque = {_Atom("floordiv", args=(e, divisor))._key,
              _Atom("floordiv", args=(-e, -divisor))._key}
    if not (isinstance(q, DimExpr) and any(a._key in opaque for m in q._coeffs for a, _ in m)):
        return e - q * divisor
    return DimExpr._from_atom(_Atom("mod", args=(e, divisor)), _scope_of(e, divisor))


def _is_nonlinear(self, op):
    return any(a.op == op for m in self._coeffs for a, _ in m)


DimExpr._is_nonlinear = _is_nonlinear


def max_dim(d1, d2):
    """The larger of two dimensions; decided where the bounds allow (`core.max_dim`)."""
    if not isinstance(d1, DimExpr) and not isinstance(d2, DimExpr):
        return max(d1, d2)
    lo, hi = _bounds_any(d1 - d2)
    if lo >= 0:
        return d1
    if hi <= 0:
        return d2
    return DimExpr._from_atom(_Atom("max", args=tuple(sorted((d1, d2), key=str))),
                              _scope_of(d1, d2))


def min_dim(d1, d2):
    """The smaller of two dimensions (`core.min_dim`)."""
    if not isinstance(d1, DimExpr) and not isinstance(d2, DimExpr):
        return min(d1, d2)
    lo, hi = _bounds_any(d1 - d2)
    if lo >= 0:
        return d2
    if hi <= 0:
        return d1
    return DimExpr._from_atom(_Atom("min", args=tuple(sorted((d1, d2), key=str))),
                              _scope_of(d1, d2))


def stride_dim(d, window_size, window_stride):
    """How many windows of `window_size`, `window_stride` apart, fit in `d` (`core.stride_dim`):
    `max(0, (d - window_size) // window_stride + 1)`."""
    return max_dim(floordiv(d - window_size, window_stride) + 1, 0)


# ---------------------------------------------------------------------------------------------
# Bounds

def _bounds_any(e, use_constraints: bool = True) -> tuple:
    return _bounds(e, use_constraints) if isinstance(e, DimExpr) else (e, e)


def _bounds(e: DimExpr, use_constraints: bool = True) -> tuple:
    lo, hi = _interval(e, use_constraints)
    lo, hi = _bounds_by_cases(e, lo, hi, use_constraints)
    if use_constraints:
        implicit, scales = _implicit_constraints(e)
        constraints = list(e.scope._constraints) + implicit
        # s*e = (s*e - ce) + ce with ce >= c; e is an integer, so its bound rounds inwards
        for s in scales:
            for ce, c in constraints:
                rlo = _bounds_any(s * e - ce, False)[0] + c
                if rlo > -_INF:
                    lo = max(lo, math.ceil(rlo / s) if rlo != _INF else rlo)
                rlo = _bounds_any(-s * e - ce, False)[0] + c
                if rlo > -_INF:
                    hi = min(hi, -math.ceil(rlo / s) if rlo != _INF else -rlo)
    return lo, hi


def _bounds_by_cases(e: DimExpr, lo, hi, use_constraints: bool) -> tuple:
    """Narrow (lo, hi) by a case split on the first `c*max(a, b)` or `c*min(a, b)` term of
    `e`: the atom equals a or b, so e lies between the two substituted expressions' bounds;
    and a max is at least each argument (a min at most), which bounds one side by the larger
    of the two."""
    for m, c in e._coeffs.items():
        if len(m) != 1 or m[0][1] != 1 or m[0][0].op not in ("max", "min"):
            continue
        atom = m[0][0]
        rest = e - c * DimExpr({m: 1}, e.scope)
        cases = [_bounds_any(rest + c * a, use_constraints) for a in atom.args]
        lo = max(lo, min(b[0] for b in cases))
        hi = min(hi, max(b[1] for b in cases))
        if (atom.op == "max") == (c > 0):  # e >= each substitution
            lo = max(lo, max(b[0] for b in cases))
        else:  # e <= each substitution
            hi = min(hi, min(b[1] for b in cases))
        break
    return lo, hi


def _implicit_constraints(e: DimExpr) -> list:
    """For each `floordiv(x, k)` (k a positive int) in `e`: x - k*q >= 0 and k*q - x >= 1 - k;
    and the scales worth trying (1 and each k)."""
    out, scales = [], [1]
    for m in e._coeffs:
        for atom, _ in m:
            if atom.op == "floordiv" and not isinstance(atom.args[1], DimExpr) \
                    and atom.args[1] > 0:
                x, k = atom.args
                if k not in scales:
                    scales.append(k)
                q = DimExpr({((atom, 1),): 1}, e.scope)
                for expr, c in ((x - k * q, 0), (k * q - x, 1 - k)):
                    if isinstance(expr, DimExpr):
                        const = expr._coeffs.get((), 0)
                        out.append((expr - const, c - const))
    return out, scales


def _mul_iv(a, b) -> tuple:
    prods = []
    for x in a:
        for y in b:
            if (x == 0 and abs(y) == _INF) or (y == 0 and abs(x) == _INF):
                prods.append(0)
            else:
                prods.append(x * y)
    return min(prods), max(prods)


def _interval(e: DimExpr, use_constraints: bool = True) -> tuple:
    lo, hi = 0, 0
    for m, c in e._coeffs.items():
        iv = (1, 1)
        for atom, p in m:
            a = _atom_interval(atom, e.scope, use_constraints)
            for _ in range(p):
                iv = _mul_iv(iv, a)
        iv = _mul_iv(iv, (c, c))
        lo, hi = lo + iv[0], hi + iv[1]
    return lo, hi


def _atom_interval(atom: _Atom, scope, use_constraints: bool = True) -> tuple:
    if atom.op is None:
        lo, hi = 1, _INF
        for ce, c in scope._constraints:  # constraints on this variable alone
            name = ce._is_var() if isinstance(ce, DimExpr) else None
            if name == atom.name:
                lo = max(lo, c)
            neg = (-ce)._is_var() if isinstance(ce, DimExpr) else None
            if neg == atom.name:
                hi = min(hi, -c)
        return lo, hi
    # (without constraints when the caller bounds a constraint itself: a constraint on
    # max(a, b) would bound max(a, b) through itself)
    ivs = [_bounds_any(a, use_constraints) for a in atom.args]
    if atom.op == "max":
        return max(ivs[0][0], ivs[1][0]), max(ivs[0][1], ivs[1][1])
    if atom.op == "min":
        return min(ivs[0][0], ivs[1][0]), min(ivs[0][1], ivs[1][1])
    (alo, ahi), (dlo, dhi) = ivs
    if atom.op == "mod":
        if dlo > 0:
            return 0, dhi - 1
        return -_INF, _INF
    # floordiv
    if dlo > 0:  # x // y for y in [dlo, dhi] is monotone in x; extremes at the ends
        def fdiv(x, y):
            if x in (_INF, -_INF):
                return x
            if y == _INF:
                return 0 if x >= 0 else -1
            return x // y
        lo = fdiv(alo, dhi) if alo >= 0 else fdiv(alo, dlo)
        hi = fdiv(ahi, dlo) if ahi >= 0 else fdiv(ahi, dhi)
        return lo, hi
    return -_INF, _INF


# ---------------------------------------------------------------------------------------------
# Parsing

_TOKEN_RE = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(\.\.\.|//|[-+*%(),^]))")


def _tokens(text: str, where: str):
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"syntax error in symbolic shape {where!r} at {text[pos:]!r}")
        out.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text, scope, where):
        self.toks = _tokens(text, where)
        self.i = 0
        self.scope = scope
        self.where = where

    def error(self, what):
        raise ValueError(f"syntax error in symbolic shape {self.where!r}: {what}")

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, tok=None):
        t = self.peek()
        if tok is not None and t != tok:
            self.error(f"expected {tok!r}, found {t!r}")
        self.i += 1
        return t

    def expr(self):
        sign = 1
        if self.peek() == "-":
            self.take()
            sign = -1
        e = sign * self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            t = self.term()
            e = e + t if op == "+" else e - t
        return e

    def term(self):
        e = self.power()
        while self.peek() in ("*", "//", "%"):
            op = self.take()
            f = self.power()
            e = e * f if op == "*" else floordiv(e, f) if op == "//" else mod(e, f)
        return e

    def power(self):
        e = self.atom()
        if self.peek() == "^":
            self.take()
            tok = self.take()
            if tok is None or not tok.isdigit() or int(tok) > 64:
                self.error("expected an integer exponent (at most 64)")
            e = e ** int(tok)
        return e

    def atom(self):
        tok = self.take()
        if tok is None:
            self.error("unexpected end")
        if tok.isdigit():
            return int(tok)
        if tok == "(":
            e = self.expr()
            self.take(")")
            return e
        if tok in ("floordiv", "mod", "max", "min", "non_negative") and self.peek() == "(":
            self.take("(")
            a = self.expr()
            if tok == "non_negative":
                self.take(")")
                return max_dim(a, 0)
            self.take(",")
            b = self.expr()
            self.take(")")
            return {"floordiv": floordiv, "mod": mod, "max": max_dim, "min": min_dim}[tok](a, b)
        if tok[0].isalpha() or tok[0] == "_":
            return DimExpr._from_atom(_Atom(None, name=tok), self.scope)
        self.error(f"unexpected {tok!r}")


def _parse_dim(text: str, scope, where: str):
    p = _Parser(text, scope, where)
    e = p.expr()
    if p.peek() is not None:
        p.error(f"unexpected {p.peek()!r}")
    return e


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def symbolic_shape(shape_spec: str | None, *, constraints: Sequence[str] = (),
                   scope: SymbolicScope | None = None,
                   like: Sequence[int | None] | None = None) -> tuple:
    """Parse a shape specification such as `"b, 4"` into dimensions (ints and `DimExpr`s).

    Parameters
    ----------
    shape_spec : str or None
        Comma-separated dimension expressions: integers, variables, `+ - * // %`,
        `floordiv(e, k)`, `mod(e, k)`, `max(e1, e2)`, `min(e1, e2)`; `_` takes the dimension of
        `like`, `...` all remaining ones. None means `"..."`.
    constraints : sequence of str
        Such as `"b >= 16"`; only with a new scope.
    scope : SymbolicScope, optional
        To share variables with other shapes; default a new scope.
    like : sequence of int or None, optional
        A concrete shape filling `_` and `...`.
    """
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot specify both a `scope` and `constraints`.")
    spec = "..." if shape_spec is None else shape_spec.strip()
    if spec.startswith("(") and spec.endswith(")") and _split_top(spec[1:-1]) != []:
        inner = spec[1:-1]
        if _balanced(inner):
            spec = inner
    parts = _split_top(spec)
    out: list = []
    for i, part in enumerate(parts):
        if part == "...":
            if i != len(parts) - 1:
                raise ValueError(f"syntax error in symbolic shape {shape_spec!r}: '...' must "
                                 "be last")
            if like is None:
                raise ValueError(f"syntax error in symbolic shape {shape_spec!r}: '...' needs "
                                 "`like`")
            rest = list(like[len(out):])
            if any(d is None for d in rest):
                raise ValueError(f"syntax error in symbolic shape {shape_spec!r}: '...' over an "
                                 "unknown dimension")
            out.extend(int(d) for d in rest)
            break
        if part == "_":
            if like is None or i >= len(like) or like[i] is None:
                raise ValueError(f"syntax error in symbolic shape {shape_spec!r}: '_' needs a "
                                 "known dimension in `like`")
            out.append(int(like[i]))
            continue
        if not part:
            raise ValueError(f"syntax error in symbolic shape {shape_spec!r}: empty dimension")
        d = _parse_dim(part, scope, shape_spec)
        if not isinstance(d, DimExpr) and d < 0:
            raise ValueError(f"syntax error in symbolic shape {shape_spec!r}: a dimension must "
                             f"be >= 0, got {d}")
        out.append(d)
    if like is not None and len(out) != len(like):
        raise ValueError(f"syntax error in symbolic shape {shape_spec!r}: rank mismatch with "
                         f"{tuple(like)}")
    if like is not None:
        for d, l in zip(out, like):
            if l is not None and not isinstance(d, DimExpr) and d != l:
                raise ValueError(f"syntax error in symbolic shape {shape_spec!r}: dimension {d} "
                                 f"does not match {l}")
    return tuple(out)


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def symbolic_args_specs(args, shapes_specs, constraints: Sequence[str] = (),
                        scope: SymbolicScope | None = None):
    """`ShapeDtypeStruct`s for the pytree `args` with symbolic shapes (all in one scope).

    `shapes_specs` is a pytree prefix of `args` of shape-spec strings (or one string, or None
    for the concrete shapes).
    """
    from fluxion._src import api, tree_util
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot use both `scope` and `constraints`")
    leaves, tree = tree_util.tree_flatten(args)
    if shapes_specs is None or isinstance(shapes_specs, str):
        specs = [shapes_specs] * len(leaves)
    else:
        if isinstance(args, tuple) and isinstance(shapes_specs, list):
            shapes_specs = tuple(shapes_specs)  # JAX's backward compatibility: a list of specs
        is_spec = lambda x: x is None or isinstance(x, str)  # noqa: E731
        spec_leaves, spec_tree = tree_util.tree_flatten(shapes_specs, is_leaf=is_spec)
        try:
            subtrees = spec_tree.flatten_up_to(args)
        except (ValueError, TypeError) as e:
            tree_util._raise_structure_error(shapes_specs, args, lambda _, p: is_spec(p),
                                             "export.symbolic_args_specs shapes_specs")
            raise ValueError(f"shapes_specs must be a pytree prefix of args: {e}") from None
        specs = [s for s, sub in zip(spec_leaves, subtrees)
                 for _ in tree_util.tree_leaves(sub)]
    out = []
    for x, spec in zip(leaves, specs):
        if spec is not None and not isinstance(spec, str):
            raise ValueError(f"polymorphic shape spec should be None or a string. Found {spec}.")
        shape, dtype = np.shape(x), getattr(x, "dtype", None)
        if dtype is None:
            dtype = np.asarray(x).dtype
        dims = tuple(shape) if spec is None else symbolic_shape(spec, scope=scope, like=shape)
        out.append(api.ShapeDtypeStruct(dims, dtype))
    return tree_util.tree_unflatten(tree, out)


# ---------------------------------------------------------------------------------------------
# Dimensions as values, sizes

def dimension_as_value(d):
    """A dimension as a scalar int value: an int as is; a `DimExpr` through `dim_as_value_p`."""
    if not isinstance(d, DimExpr):
        return operator.index(d)
    from fluxion._src.export import shape_poly_ops
    return shape_poly_ops.dim_as_value_p.bind(dim=d)


def broadcast_shapes(*shapes) -> tuple:
    """NumPy broadcasting of shapes that may hold symbolic dimensions (ValueError if not)."""
    if not any(is_symbolic_shape(s) for s in shapes):
        return tuple(np.broadcast_shapes(*shapes))
    rank = max(len(s) for s in shapes)
    out = []
    for dims in zip(*[(1,) * (rank - len(s)) + tuple(s) for s in shapes]):
        non_one = [d for d in dims if isinstance(d, DimExpr) or d != 1]
        d = non_one[0] if non_one else 1
        if any(e != d for e in non_one):
            raise ValueError(f"Incompatible shapes for broadcasting: {shapes}")
        out.append(d)
    return tuple(out)


def all_dim_vars(avals) -> list[str]:
    """The dimension variables in the shapes of `avals`, sorted by name (JAX's order for the
    dimension-variable arguments of a module lowered by `jit(f).lower`)."""
    names: set = set()
    for a in avals:
        for d in a.shape:
            if isinstance(d, DimExpr):
                names |= d.variables()
    return sorted(names)


def known_true(predicate) -> bool:
    """`predicate()` on dimensions, False where it is inconclusive (for checks that only reject
    what is certainly wrong)."""
    try:
        return bool(predicate())
    except InconclusiveDimensionOperation:
        return False


def size_value(size, dtype):
    """A dimension as a scalar of `dtype`: a NumPy scalar, or traced when symbolic."""
    if not isinstance(size, DimExpr):
        return np.asarray(size, dtype)
    from fluxion._src.lax import lax
    return lax.convert_element_type(dimension_as_value(size), dtype)


def shape_size(shape) -> Any:
    """The number of elements of `shape`: an int, or a `DimExpr` when a dimension is one."""
    size = 1
    for d in shape:
        size = size * d
    return size
