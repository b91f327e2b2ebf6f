"""Solving dimension variables from the actual argument shapes, with the checks that those shapes
satisfy the polymorphic specification (JAX's `shape_poly.solve_dim_vars` and shape assertions).

One procedure serves two places: `Exported.call` checks concrete (or caller-symbolic) shapes in
Python, and the exported module's @main computes the same values from
`stablehlo.get_dimension_size` and emits each check as a `stablehlo.custom_call
@shape_assertion`, which StableHLO's shape refinement evaluates when the module is specialized
to static shapes. The error messages are JAX's, word for word.

Equations are `specification == actual size`, one per symbolic argument dimension. Each pass
solves the equations whose terms are all known but one, a variable with coefficient k:
v = (size - rest) // k (checking the remainder is 0 and v >= 1); an equation whose variables
are all known becomes a consistency check. So `"b, b*b"` and `"b, floordiv(b, 2)"` solve `b`
from the first dimension and check the second; `"b*b"` alone cannot be solved.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable

from fluxion._src.export.shape_poly import (
    DimExpr, InconclusiveDimensionOperation, UnexpectedDimVar, _parse_dim)

_SOLVE_HELP = ("https://docs.jax.dev/en/latest/export/shape_poly.html"
               "#dimension-variables-must-be-solvable-from-the-input-shapes")
_TRAILER = (". Please see https://docs.jax.dev/en/latest/export/shape_poly.html"
            "#shape-assertion-errors for more details.")
_MISMATCH = "Input shapes do not match the polymorphic shapes specification. "


class ShapeCheck:
    """`lhs == rhs` (comp "==") or `lhs >= rhs` (">="), with the pieces of the message for
    when it fails: strings and dimension values (ints, `DimExpr`s or IR values)."""

    __slots__ = ("comp", "lhs", "rhs", "pieces")

    def __init__(self, comp: str, lhs, rhs, pieces: list):
        self.comp, self.lhs, self.rhs, self.pieces = comp, lhs, rhs, pieces

    def holds(self) -> bool:
        """For int or symbolic values: False only if it certainly fails."""
        try:
            return bool(self.lhs == self.rhs if self.comp == "==" else self.lhs >= self.rhs)
        except InconclusiveDimensionOperation:
            return True  # a symbolic caller: checked when its own shapes are known

    def message(self) -> str:
        return "".join(p if isinstance(p, str) else str(p) for p in self.pieces)

    def message_and_inputs(self) -> tuple[str, list]:
        """The message with `{i}` for the i-th distinct non-constant value, and those values
        (JAX's form for `shape_assertion`, at most 32 inputs)."""
        text, inputs, index = [], [], {}
        for p in self.pieces:
            if isinstance(p, str):
                text.append(p.replace("{", "{{").replace("}", "}}"))
            elif isinstance(p, int):
                text.append(str(p))
            elif id(p) in index:
                text.append(index[id(p)])
            elif len(inputs) >= 32:
                text.append("N/A")
            else:
                index[id(p)] = "{" + str(len(inputs)) + "}"
                text.append(index[id(p)])
                inputs.append(p)
        return "".join(text), inputs


@functools.lru_cache(maxsize=256)
def arg_names(in_tree, n: int) -> list[str]:
    """`args[0]`, `kwargs['x']`, ... for the flat arguments of the `(args, kwargs)` tree."""
    from fluxion._src import tree_util
    paths = [p for p, _ in tree_util.tree_flatten_with_path(
        tree_util.tree_unflatten(in_tree, [0] * n))[0]]
    return [("args" if p[0].idx == 0 else "kwargs") + tree_util.keystr(p[1:]) for p in paths]


def _check_solvable(expr: DimExpr, env) -> None:
    """JAX's error for a constraint on a variable that no argument's shape determines."""
    unknown = sorted(expr.variables() - env.keys())
    if unknown:
        raise UnexpectedDimVar(
            f"Encountered dimension variable '{unknown[0]}' that is not appearing in the "
            "shapes of the function arguments.\nThe following dimension variables are "
            f"appearing in the shapes of the function arguments: {sorted(env)}.\nPlease see "
            f"{_SOLVE_HELP} for more details.")


def explicit_constraints(scope) -> list[tuple[str, str, Any]]:
    """(text, comp, diff) for each of the scope's constraints: `diff comp 0` must hold."""
    out = []
    for text in scope.constraints_str:
        m = re.fullmatch(r"(.+?)(>=|<=|==)(.+)", text.strip())
        lhs = _parse_dim(m.group(1), scope, text)
        rhs = _parse_dim(m.group(3), scope, text)
        if m.group(2) == "==":
            lhs = _rewritten_operation(m.group(1), scope, text, lhs)
        if m.group(2) == "<=":
            lhs, rhs = rhs, lhs
        out.append((text, "==" if m.group(2) == "==" else ">=", lhs - rhs))
    return out


def _rewritten_operation(lhs_text: str, scope, text: str, lhs):
    """The left side of an equality as written when the scope rewrites it (`max(a, b) ==
    b`, `mod(c, 4) == 0`): the arguments' shapes never hold it, so the constraint is checked
    as such (a rewritten variable, `a == b + 1`, is checked through the shapes)."""
    # (parsed without the constraints too: they would simplify `max(a, b)` to `b` again)
    rules, constraints = scope._rules, scope._constraints
    scope._rules, scope._constraints = {}, []
    try:
        raw = _parse_dim(lhs_text, scope, text)
    finally:
        scope._rules, scope._constraints = rules, constraints
    atom = raw._single_atom() if isinstance(raw, DimExpr) else None
    return raw if atom is not None and atom.op is not None and atom._key in rules else lhs


def solve(in_avals, names: list[str], size: Callable[[int, int], Any],
          ops: dict) -> tuple[dict, list[ShapeCheck]]:
    """The dimension variables' values and the checks the argument sizes must pass.

    Parameters
    ----------
    in_avals : the exported arguments' abstract values (with symbolic dimensions)
    names : the arguments' names for messages (`arg_names`)
    size : `size(i, j)`, the actual size of dimension j of argument i
    ops : as for `DimExpr.evaluate` (Python ints, or IR values from a lowering)

    Raises ValueError (JAX's message) when some variable cannot be solved.
    """
    eqns = []  # (specification, name of the dimension, actual size)
    specs = []
    for i, a in enumerate(in_avals):
        if not any(isinstance(d, DimExpr) for d in a.shape):
            continue
        specs.append(f"{names[i]}.shape = {tuple(a.shape)}")
        for j, d in enumerate(a.shape):
            if isinstance(d, DimExpr):
                eqns.append((d, f"{names[i]}.shape[{j}]", size(i, j)))
    specs_msg = " Using the following polymorphic shapes specifications: " + ",".join(specs) + "."
    env: dict = {}
    checks: list[ShapeCheck] = []
    solution = [" Obtained dimension variables: "]

    def process(expr: DimExpr, dim_name: str, value) -> bool:
        var = var_k = None
        rest = value
        for mono, k in expr._coeffs.items():
            term = DimExpr._make({mono: 1}, expr.scope)
            if not isinstance(term, DimExpr) or term.variables() <= env.keys():
                term_value = ops["const"](term) if not isinstance(term, DimExpr) \
                    else term.evaluate(env, ops)
                rest = ops["add"](rest, ops["mul"](ops["const"](-k), term_value))
                continue
            if var is None and len(mono) == 1 and mono[0][1] == 1 and mono[0][0].op is None:
                var, var_k = mono[0][0].name, k
                continue
            return False
        if var is None:
            want = expr.evaluate(env, ops)
            checks.append(ShapeCheck("==", value, want, [
                _MISMATCH + f"Found inconsistency between dimension size {dim_name} (= ", value,
                f") and the specification '{expr}' (= ", want, ")." + specs_msg]
                + solution + [_TRAILER]))
            return True
        if var_k == 1:
            var_value = rest
        else:
            k = ops["const"](var_k)
            var_value, remainder = ops["floordiv"](rest, k), ops["mod"](rest, k)
            checks.append(ShapeCheck("==", remainder, ops["const"](0), [
                _MISMATCH + "Division had remainder ", remainder,
                f" when computing the value of '{var}'." + specs_msg] + solution + [_TRAILER]))
        env[var] = var_value
        solution.extend([f"'{var}' = ", var_value,
                         f" from specification '{expr}' for dimension {dim_name} (= ", value,
                         "), "])
        checks.append(ShapeCheck(">=", var_value, ops["const"](1), [
            _MISMATCH + f"Expected value >= 1 for dimension variable '{var}'." + specs_msg]
            + solution + [_TRAILER]))
        return True

    while eqns:
        left = [e for e in eqns if not process(*e)]
        if len(left) == len(eqns):
            unsolved = set()
            for e, _, _ in left:
                unsolved |= e.variables()
            unsolved -= env.keys()
            raise ValueError(
                f"Cannot solve for values of dimension variables {unsolved}. We can only solve "
                "linear uni-variate constraints." + specs_msg + " Unprocessed specifications: "
                + ", ".join(f"'{e}' for dimension size {n}" for e, n, _ in left)
                + f". Please see {_SOLVE_HELP} for more details.")
        eqns = left
    scope = next((d.scope for a in in_avals for d in a.shape if isinstance(d, DimExpr)), None)
    if scope is not None and env:
        for text, comp, diff in explicit_constraints(scope):
            if not isinstance(diff, DimExpr):
                continue  # holds (an equality already rewrote its left side; see SymbolicScope)
            _check_solvable(diff, env)
            found = diff.evaluate(env, ops)
            checks.append(ShapeCheck(comp, found, ops["const"](0), [
                f"Input shapes do not match the symbolic shape constraint {text}. Expected "
                f"'{diff}' to be {'greater or equal' if comp == '>=' else 'equal'} to 0, but "
                "found ", found, ". " + specs_msg] + solution + [_TRAILER]))
    return env, checks

