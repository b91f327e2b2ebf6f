"""Rewrite one of JAX's test files so that its public `jax` names mean fluxion.

    python rewrite.py orig_lax_test.py test_lax_test.py

`import jax`, `from jax import lax`, `import jax.numpy as jnp`, ... become the fluxion modules;
imports of `jax._src.*` (JAX's test_util, dtypes, config, internals) are kept: they are the
oracle the tests compare against, except for the few private imports of objects the tests use
as the library's own (`shard_map`, `AxisType`). Nothing of JAX's test code is stored in this
repository.
"""
import pathlib
import re
import sys

PUBLIC = [
    (r"^(\s*)import jax$", r"\1import fluxion as jax"),
    (r"^(\s*)import jax\.(\w+(?:\.\w+)*) as (\w+)", r"\1import fluxion.\2 as \3"),
    (r"^(\s*)import jax\.(\w+(?:\.\w+)*)$", r"\1import fluxion.\2"),
    (r"^(\s*)from jax import", r"\1from fluxion import"),
    (r"^(\s*)from jax\.(\w+(?:\.\w+)*) import", r"\1from fluxion.\2 import"),
]

# Private module -> (names the tests mean as the library's, the fluxion module holding them).
LIBRARY_OBJECTS = {
    "jax._src.shard_map": ({"shard_map"}, "fluxion"),
    "jax._src.mesh": ({"AxisType", "get_abstract_mesh"}, "fluxion.sharding"),
}
# Public modules fluxion does not have: JAX's is kept (api_util), or the name is None.
KEEP_JAX = {"from jax import api_util"}
ABSENT = {"from jax.experimental.custom_partitioning import custom_partitioning":
          "custom_partitioning = None  # not in fluxion"}

_FROM_IMPORT = re.compile(r"^(\s*)from ([\w.]+) import ([\w, ]+)$")


def _rewrite_line(line: str) -> list:
    stripped = line.strip()
    indent = line[:len(line) - len(line.lstrip())]
    if stripped in KEEP_JAX:
        return [line]
    if stripped in ABSENT:
        return [indent + ABSENT[stripped]]
    match = _FROM_IMPORT.match(line)
    if match and match.group(2) in LIBRARY_OBJECTS:
        ours, module = LIBRARY_OBJECTS[match.group(2)]
        names = [n.strip() for n in match.group(3).split(",") if n.strip()]
        moved = [n for n in names if n in ours]
        kept = [n for n in names if n not in ours]
        out = [f"{indent}from {module} import {', '.join(moved)}"] if moved else []
        if kept:
            out.append(f"{indent}from {match.group(2)} import {', '.join(kept)}")
        return out
    if not (stripped.startswith(("import", "from")) and "jax._src" in line):
        for pattern, replacement in PUBLIC:
            line = re.sub(pattern, replacement, line)
    return [line]


def rewrite(text: str) -> str:
    return "\n".join(out for line in text.splitlines() for out in _rewrite_line(line)) + "\n"


if __name__ == "__main__":
    source, target = map(pathlib.Path, sys.argv[1:3])
    target.write_text(rewrite(source.read_text()))
