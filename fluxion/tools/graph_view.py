"""`fluxion.tools.graph(f)(*args)`: a self-contained HTML (or SVG) picture of a jaxpr.

Equations are boxes (primitive, output shapes and dtypes, the user's line, and XLA's cost
analysis of that equation compiled alone: flops and bytes accessed); arrows follow the values.
Boxes sit in layers by their distance from the inputs. Nested jaxprs (jit, cond branches, loop
bodies) are drawn below, each in a collapsible section.
"""
from __future__ import annotations

import html
import itertools
from typing import Callable

from fluxion._src import core

_BOX_W, _BOX_H, _GAP_X, _GAP_Y = 190, 58, 24, 46


def graph(fun: Callable, *, path: str | None = None, fmt: str = "html",
          cost_analysis: bool = True) -> Callable:
    """Returns a function of `fun`'s arguments that draws `fun`'s jaxpr for them.

    It returns the HTML (or SVG, `fmt="svg"`) text and writes it to `path` when given."""
    if fmt not in ("html", "svg"):
        raise ValueError(f"fmt must be 'html' or 'svg', got {fmt!r}")

    def draw(*args, **kwargs):
        import fluxion
        closed = fluxion.make_jaxpr(fun)(*args, **kwargs)
        costs = _Costs(cost_analysis)
        ids = itertools.count()
        svg, nested = _draw_jaxpr(closed.jaxpr, costs, ids)
        if fmt == "svg":
            text = svg
        else:
            name = html.escape(getattr(fun, "__name__", "function"))
            text = (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{name}</title>"
                    f"<style>{_CSS}</style></head><body><h1>jaxpr of {name}</h1>"
                    f"<p>{len(closed.jaxpr.eqns)} equations; inputs "
                    f"{html.escape(', '.join(v.aval.str_short() for v in closed.jaxpr.invars))}"
                    f"; outputs {html.escape(', '.join(v.aval.str_short() for v in closed.jaxpr.outvars))}"
                    f"{costs.total_text()}</p>{svg}{nested}"
                    f"<details><summary>jaxpr text</summary><pre>{html.escape(str(closed))}"
                    "</pre></details></body></html>\n")
        if path is not None:
            with open(path, "w") as f:
                f.write(text)
        return text
    return draw


_CSS = ("body{font-family:sans-serif;margin:16px} svg{border:1px solid #ddd;background:#fcfcfc}"
        " details{margin:8px 0 8px 16px} summary{cursor:pointer;font-weight:bold}"
        " .eq rect{fill:#e8f0fe;stroke:#4a6fa5} .io rect{fill:#e6f4ea;stroke:#3c8d5a}"
        " .nest rect{fill:#fef7e0;stroke:#b08800} text{font-size:11px}"
        " pre{font-size:11px;background:#f6f6f6;padding:8px}")


class _Costs:
    """XLA's cost analysis of one equation compiled alone (cached per primitive and types)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.cache: dict = {}
        self.flops = 0.0
        self.bytes = 0.0

    def of(self, eqn) -> dict | None:
        if not self.enabled or any(True for _ in core.subjaxprs(eqn.params)):
            return None
        try:
            key = (eqn.primitive, tuple(v.aval for v in eqn.invars),
                   tuple(sorted((k, repr(v)) for k, v in eqn.params.items())))
        except TypeError:
            return None
        if key not in self.cache:
            self.cache[key] = _xla_cost(eqn)
        cost = self.cache[key]
        if cost:
            self.flops += cost.get("flops", 0.0)
            self.bytes += cost.get("bytes accessed", 0.0)
        return cost

    def total_text(self) -> str:
        if not self.enabled:
            return ""
        return f"; XLA cost of the equations: {self.flops:,.0f} flops, {self.bytes:,.0f} bytes"


def _xla_cost(eqn) -> dict | None:
    from fluxion._src import dispatch
    try:
        compiled = dispatch._compile_primitive(eqn.primitive, [v.aval for v in eqn.invars],
                                               eqn.params)
        analysis = compiled.executable.loaded.cost_analysis()
    except Exception:  # noqa: BLE001 - a primitive XLA cannot cost alone: no numbers
        return None
    if isinstance(analysis, list):
        analysis = analysis[0] if analysis else {}
    return {k: float(v) for k, v in dict(analysis).items()
            if k in ("flops", "bytes accessed", "transcendentals")}


def _draw_jaxpr(jaxpr, costs: _Costs, ids) -> tuple[str, str]:
    """(svg of this jaxpr, html of its nested jaxprs)."""
    depth: dict[int, int] = {}
    nodes = []  # (label lines, css class, depth, input var ids, output var ids)
    for v in jaxpr.constvars + jaxpr.invars:
        depth[id(v)] = 0
        kind = "const" if v in jaxpr.constvars else "input"
        nodes.append(([kind, v.aval.str_short()], "io", 0, [], [id(v)]))
    nested_html = []
    for eqn in jaxpr.eqns:
        ins = [id(v) for v in eqn.invars if isinstance(v, core.Var)]
        d = 1 + max((depth.get(i, 0) for i in ins), default=0)
        for v in eqn.outvars:
            depth[id(v)] = d
        outs = ", ".join(v.aval.str_short() for v in eqn.outvars) or "()"
        lines = [eqn.primitive.name, outs[:32]]
        cost = costs.of(eqn)
        if cost:
            lines.append(f"{cost.get('flops', 0):,.0f} flops, {cost.get('bytes accessed', 0):,.0f} B")
        info = eqn.source_info
        if info is not None:
            lines.append(f"{info.file.rsplit('/', 1)[-1]}:{info.line}")
        subs = list(core.subjaxprs(eqn.params))
        css = "nest" if subs else "eq"
        if subs:
            inner = []
            for k, sub in enumerate(subs):
                svg, deeper = _draw_jaxpr(sub, costs, ids)
                inner.append(f"<details><summary>{html.escape(eqn.primitive.name)} jaxpr "
                             f"{k + 1} of {len(subs)} ({len(sub.eqns)} equations)</summary>"
                             f"{svg}{deeper}</details>")
            nested_html.append("".join(inner))
        nodes.append((lines, css, d, ins, [id(v) for v in eqn.outvars]))
    out_d = 1 + max((depth.get(id(v), 0) for v in jaxpr.outvars if isinstance(v, core.Var)), default=0)
    for v in jaxpr.outvars:
        ins = [id(v)] if isinstance(v, core.Var) else []
        nodes.append((["output", v.aval.str_short()], "io", out_d, ins, []))
    return _svg(nodes, next(ids)), "".join(nested_html)


def _svg(nodes, graph_id: int) -> str:
    columns: dict[int, int] = {}
    pos = []
    producer: dict[int, int] = {}
    for i, (_, _, d, _, outs) in enumerate(nodes):
        col = columns.get(d, 0)
        columns[d] = col + 1
        pos.append((_GAP_X + col * (_BOX_W + _GAP_X), _GAP_Y // 2 + d * (_BOX_H + _GAP_Y)))
        for o in outs:
            producer[o] = i
    width = _GAP_X + max(columns.values(), default=1) * (_BOX_W + _GAP_X)
    height = _GAP_Y + (max(columns, default=0) + 1) * (_BOX_H + _GAP_Y)
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'>",
             f"<defs><marker id='a{graph_id}' markerWidth='8' markerHeight='8' refX='8' refY='4' "
             "orient='auto'><path d='M0,0 L8,4 L0,8 z' fill='#888'/></marker></defs>"]
    for i, (_, _, _, ins, _) in enumerate(nodes):
        x2, y2 = pos[i][0] + _BOX_W / 2, pos[i][1]
        for src in ins:
            j = producer.get(src)
            if j is None:
                continue
            x1, y1 = pos[j][0] + _BOX_W / 2, pos[j][1] + _BOX_H
            parts.append(f"<path d='M{x1},{y1} C{x1},{(y1 + y2) / 2} {x2},{(y1 + y2) / 2} "
                         f"{x2},{y2}' stroke='#888' fill='none' marker-end='url(#a{graph_id})'/>")
    for (lines, css, _, _, _), (x, y) in zip(nodes, pos):
        title = html.escape(" | ".join(lines))
        texts = "".join(f"<text x='{x + 6}' y='{y + 14 + 12 * k}'>{html.escape(t)}</text>"
                        for k, t in enumerate(lines[:4]))
        parts.append(f"<g class='{css}'><title>{title}</title><rect x='{x}' y='{y}' "
                     f"width='{_BOX_W}' height='{_BOX_H}' rx='6'/>{texts}</g>")
    parts.append("</svg>")
    return "".join(parts)
