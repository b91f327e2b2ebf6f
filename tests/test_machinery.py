"""Machinery invariants: it never imports the library above it; shared batching rules serve every primitive."""
import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "fluxion" / "_src"
MACHINERY = ["core.py", "staging.py", "ad.py", "batching.py", "machinery_ops.py"]
ABOVE = ("fluxion._src.lax", "fluxion._src.numpy", "fluxion.lax", "fluxion.numpy")


def imported_modules(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


@pytest.mark.parametrize("name", MACHINERY)
def test_machinery_does_not_import_lax_or_numpy(name):
    bad = sorted({m for m in imported_modules(SRC / name) if m.startswith(ABOVE)})
    assert not bad, f"{name} imports {bad}"


def test_defbroadcasting_serves_multi_output_primitives():
    import numpy as np
    import fluxion
    from fluxion._src import batching, core
    from fluxion._src.lax.base import standard_primitive
    from fluxion.core import ShapedArray

    def abstract_eval(x, y):
        shape = np.broadcast_shapes(x.shape, y.shape)
        return [ShapedArray(shape, x.dtype), ShapedArray(shape, x.dtype)]

    def lowering(ctx, x, y):
        from fluxion._src.lax.base import broadcast_operands
        x, y = broadcast_operands(ctx, [x, y])
        return [ctx.add(x, y), ctx.mul(x, y)]

    sum_and_product_p = standard_primitive("sum_and_product", abstract_eval, lowering,
                                           multiple_results=True)
    batching.defbroadcasting(sum_and_product_p)
    xs = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    y = np.float32(3.0)
    s, p = fluxion.vmap(lambda x: sum_and_product_p.bind(x, y))(xs)
    np.testing.assert_allclose(s, xs + 3)
    np.testing.assert_allclose(p, xs * 3)
    s, p = fluxion.vmap(lambda x: sum_and_product_p.bind(x, x), in_axes=1, out_axes=1)(xs)
    np.testing.assert_allclose(s, xs + xs)
    np.testing.assert_allclose(p, xs * xs)


def _redefinitions(path):
    """Functions and classes a module or class body defines twice (the later one silently
    replaces the earlier: what two merged branches that each add a method leave behind)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef)):
            continue
        seen = {}
        for stmt in node.body:
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            decorators = [ast.unparse(d) for d in stmt.decorator_list]
            if any(word in d for d in decorators
                   for word in (".setter", ".deleter", "overload", "register")):
                continue
            if stmt.name in seen:
                yield f"{path.relative_to(SRC.parent)}:{stmt.lineno}: {stmt.name} (first at {seen[stmt.name]})"
            seen[stmt.name] = stmt.lineno


def test_no_function_or_method_is_defined_twice():
    found = [r for path in sorted(SRC.parent.rglob("*.py")) for r in _redefinitions(path)]
    assert not found, "defined twice:\n" + "\n".join(found)
