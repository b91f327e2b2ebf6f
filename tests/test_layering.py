"""The transformation machinery never imports the library above it (lax, numpy)."""
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
