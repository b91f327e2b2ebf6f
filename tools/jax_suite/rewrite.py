"""Rewrite one of JAX's test files so that its public `jax` names mean fluxion.

    python rewrite.py orig_lax_test.py test_lax_test.py

`import jax`, `from jax import lax`, `import jax.numpy as jnp`, ... become the fluxion modules;
imports of `jax._src.*` (JAX's test_util, dtypes, config, internals) are kept: they are the
oracle the tests compare against. Nothing of JAX's test code is stored in this repository.
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


def rewrite(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not (line.lstrip().startswith(("import", "from")) and "jax._src" in line):
            for pattern, replacement in PUBLIC:
                line = re.sub(pattern, replacement, line)
        lines.append(line)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    source, target = map(pathlib.Path, sys.argv[1:3])
    target.write_text(rewrite(source.read_text()))
