"""Run the code of one of JAX's documentation pages under JAX and under fluxion, and compare.

    python tools/docs_check/run.py docs/notebooks/thinking_in_jax.md [more pages ...]

A QA tool, not part of `make test`. Each page is read from a JAX git checkout (JAX_REPO, default
../jax) at the tag of the installed oracle (jax-v0.10.2). Its code cells (MyST `{code-cell}`
blocks, or ```python fences on pages without cells; for a .py page, its blank-line-separated
runs of top-level statements) run in order in one namespace, as a notebook would; each cell's
printed text and the repr of its last expression are recorded. The page runs twice in fresh
processes: once as written (JAX), once with its public `jax` imports rewritten to fluxion
(tools/jax_suite/rewrite.py). The report lists every cell whose outcome differs: an
exception on one side only, another exception class, or output that differs beyond numeric
tolerance. Work files go to WORK (default /tmp/docs_check).
"""
import json
import os
import pathlib
import re
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tools" / "jax_suite"))
from rewrite import rewrite  # noqa: E402

TAG = "jax-v0.10.2"
CELL_START = re.compile(r"^```\{code-cell\}")
FENCE_START = re.compile(r"^\s*```(python|py|ipython3?)\s*$")  # (also indented in a list)

# Executes the cells of one page and writes each cell's outcome as JSON.
DRIVER = r'''
import ast, contextlib, io, json, sys, traceback
cells = json.load(open(sys.argv[1]))
namespace = {"__name__": "__main__"}
results = []
for source in cells:
    out = io.StringIO()
    record = {"error": None}
    try:
        tree = ast.parse(source)
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        body = ast.Module(tree.body[:-1] if last else tree.body, type_ignores=[])
        with contextlib.redirect_stdout(out):
            exec(compile(body, "<cell>", "exec"), namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
                if value is not None:
                    print(repr(value))
    except BaseException as e:  # a cell's failure is a result, SystemExit included
        record["error"] = type(e).__name__
        record["message"] = str(e).splitlines()[0][:300] if str(e) else ""
        record["traceback"] = traceback.format_exc()[-3000:]
    record["output"] = out.getvalue()[-5000:]
    results.append(record)
    print(f"cell {len(results)}/{len(cells)} {record['error'] or 'ok'}", file=sys.stderr, flush=True)
    json.dump(results, open(sys.argv[2], "w"))  # after each cell: a timeout keeps the rest
'''

# Plotting is not what is compared: a stand-in matplotlib accepts every call.
MATPLOTLIB_STUB = '''
class _Anything:
    def __call__(self, *a, **k): return _Anything()
    def __getattr__(self, name): return _Anything()
    def __iter__(self): return iter((_Anything(), _Anything()))
    def __getitem__(self, i): return _Anything()
def __getattr__(name): return _Anything()
'''


def _strip_magics(source: str) -> str:
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("%%", "!")):
            continue
        match = re.match(r"^(\s*)%(?:timeit|time)\s+(?:-\S+\s+)*(.*)$", line)
        if match:
            line = match.group(1) + match.group(2)
        elif stripped.startswith("%"):
            continue
        lines.append(line)
    return "\n".join(lines)


def _without_prompts(lines: list) -> list:
    """A doctest-style example (`>>> ` and `... ` prompts, then the expected output) as the
    code alone; other code as it is."""
    if not any(line.startswith(">>>") for line in lines):
        return lines
    return [line[4:] for line in lines if line.startswith((">>> ", "... "))]


def extract_cells(text: str) -> list:
    """The page's code cells in order (MyST code cells, else python fences)."""
    lines = text.splitlines()
    has_cells = any(CELL_START.match(line) for line in lines)
    start = CELL_START if has_cells else FENCE_START
    cells, current, inside, indent = [], [], False, 0
    for line in lines:
        if not inside and start.match(line):
            inside, current = True, []
            indent = len(line) - len(line.lstrip())  # a fence in a list item is indented
        elif inside and line.strip().startswith("```"):
            inside = False
            body = [x[min(indent, len(x) - len(x.lstrip())):] for x in current]
            if body and body[0].startswith(":"):  # MyST option lines (`:tags: ...`)
                body = [x for x in body if not x.startswith(":")]
            elif body and body[0].strip() == "---":  # a YAML options block
                end = body.index("---", 1) if "---" in body[1:] else 0
                body = body[end + 1:]
            source = _strip_magics("\n".join(_without_prompts(body))).strip()
            if source:
                cells.append(source)
        elif inside:
            current.append(line)
    if cells and not has_cells:  # fragments of prose pages assume the usual imports
        cells.insert(0, "import jax\nimport jax.numpy as jnp\nimport numpy as np")
    return cells


def extract_py_cells(text: str) -> list:
    """The code cells of a jupytext light-format .py page (or a plain script): runs of
    top-level statements, a new cell where a blank line separates two statements. Comment
    blocks (the page's markdown) are not code."""
    import ast
    lines = text.splitlines()
    cells, current, last_end = [], [], 0
    for stmt in ast.parse(text).body:
        start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        gap = lines[last_end:start - 1]
        if current and any(not line.strip() for line in gap):
            cells.append("\n".join(current))
            current = []
        current.extend(lines[start - 1:stmt.end_lineno])
        last_end = stmt.end_lineno
    if current:
        cells.append("\n".join(current))
    return [_strip_magics(c).strip() for c in cells if c.strip()]


MULTI_IMPORT = re.compile(r"^(\s*)import (\S.*,.*)$")


def _split_imports(source: str) -> str:
    """`import jax, jax.numpy as jnp` as one import a line, which the rewrite understands."""
    def split(line):
        match = MULTI_IMPORT.match(line)
        if not match or "#" in line:
            return line
        return "\n".join(f"{match.group(1)}import {name.strip()}"
                         for name in match.group(2).split(","))
    return "\n".join(split(line) for line in source.splitlines())


def _run(cells: list, mode: str, work: pathlib.Path, env: dict) -> list:
    cells_file = work / f"cells_{mode}.json"
    out_file = work / f"out_{mode}.json"
    out_file.unlink(missing_ok=True)
    cells_file.write_text(json.dumps(cells))
    (work / "driver.py").write_text(DRIVER)
    try:
        subprocess.run([sys.executable, str(work / "driver.py"), str(cells_file), str(out_file)],
                       cwd=work, env=env, timeout=int(os.environ.get("TIMEOUT", 600)),
                       stderr=open(work / f"stderr_{mode}.txt", "w"), stdout=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pass
    if not out_file.exists():
        return []
    return json.loads(out_file.read_text())


NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")


ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _normalize(text: str) -> str:
    return " ".join(ADDRESS.sub(" at 0x", text).split())


def _same_output(a: str, b: str) -> bool:
    a, b = _normalize(a), _normalize(b)
    if a == b:
        return True
    if "".join(NUMBER.sub("#", a).split()) != "".join(NUMBER.sub("#", b).split()):
        return False
    for x, y in zip(NUMBER.findall(a), NUMBER.findall(b)):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return False
        if abs(fx - fy) > 1e-5 + 1e-4 * max(abs(fx), abs(fy)):
            return False
    return True


def compare(cells: list, jax_results: list, flx_results: list) -> list:
    """One line per cell whose outcome differs."""
    problems = []
    for i, source in enumerate(cells):
        if i >= len(jax_results) or i >= len(flx_results):
            problems.append(f"cell {i + 1}: not reached (jax {len(jax_results)} cells, "
                            f"fluxion {len(flx_results)} cells ran; timeout or crash)")
            break
        j, f = jax_results[i], flx_results[i]
        head = source.splitlines()[0][:70]
        if j["error"] and f["error"]:
            if j["error"] != f["error"]:
                problems.append(f"cell {i + 1} [{head}]: jax raised {j['error']}, "
                                f"fluxion {f['error']}: {f['message']}")
        elif f["error"]:
            problems.append(f"cell {i + 1} [{head}]: fluxion raised {f['error']}: {f['message']}")
        elif j["error"]:
            problems.append(f"cell {i + 1} [{head}]: jax raised {j['error']}: {j['message']}; "
                            "fluxion did not")
        elif not _same_output(j["output"], f["output"]):
            problems.append(f"cell {i + 1} [{head}]: output differs\n--- jax\n{j['output'][:800]}"
                            f"\n--- fluxion\n{f['output'][:800]}")
    return problems


def check_page(page: str, jax_repo: pathlib.Path, work_root: pathlib.Path) -> list:
    text = subprocess.run(["git", "-C", str(jax_repo), "show", f"{TAG}:{page}"],
                          capture_output=True, text=True, check=True).stdout
    cells = extract_py_cells(text) if page.endswith(".py") else extract_cells(text)
    work = work_root / page.replace("/", "_").removesuffix(".md")
    work.mkdir(parents=True, exist_ok=True)
    stub = work_root / "stubs" / "matplotlib"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text(MATPLOTLIB_STUB)
    (stub / "pyplot.py").write_text(MATPLOTLIB_STUB)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(work_root / "stubs"), str(ROOT)])
    env.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    jax_results = _run(cells, "jax", work, env)
    flx_results = _run([rewrite(_split_imports(c)) for c in cells], "fluxion", work, env)
    return compare(cells, jax_results, flx_results), len(cells)


def main(argv: list) -> int:
    jax_repo = pathlib.Path(os.environ.get("JAX_REPO", ROOT.parent / "jax"))
    work_root = pathlib.Path(os.environ.get("WORK", "/tmp/docs_check"))
    failed = 0
    for page in argv:
        problems, n = check_page(page, jax_repo, work_root)
        print(f"== {page}: {n} cells, {len(problems)} differ")
        for problem in problems:
            print("  " + problem.replace("\n", "\n    "))
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
