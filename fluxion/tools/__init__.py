"""Developer tools: `python -m fluxion.tools.to_ir`, `fluxion.tools.graph`."""


def graph(fun, *, path=None, fmt: str = "html", cost_analysis: bool = True):
    """See `fluxion.tools.graph_view.graph`."""
    from fluxion.tools.graph_view import graph as _graph
    return _graph(fun, path=path, fmt=fmt, cost_analysis=cost_analysis)
