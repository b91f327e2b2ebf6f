"""`fluxion.debug.visualize_array_sharding`: a text picture of which device holds which block
of a 1-D or 2-D array (the layout JAX draws with `rich`, without colour)."""
from __future__ import annotations

import sys

_BOX = {"top": "┌─┬┐", "mid": "├─┼┤", "bottom": "└─┴┘", "v": "│"}


def _chunk_index(size: int, s: slice) -> int:
    if s.start is None and s.stop is None:
        return 0
    return s.start // (s.stop - s.start)


def sharding_text(shape, sharding, *, scale: float = 1.0, min_width: int = 9,
                  max_width: int = 80) -> str:
    """The picture of `sharding` over an array of `shape`, as text."""
    shape = tuple(shape)
    if len(shape) not in (1, 2):
        raise ValueError("`visualize_sharding` only works for shapes with 1 and 2 dimensions.")
    base_height = int(10 * scale)
    base_width = int(base_height * (shape[1] if len(shape) == 2 else 1) / shape[0])
    kind = next(iter(sharding.device_set)).platform.upper()
    devices, heights, widths = {}, {}, {}
    for dev, index in sharding.devices_indices_map(shape).items():
        index = tuple(slice(None) if s == slice(None) else s for s in index)
        sizes = [(s.stop - s.start) if s.stop is not None else n for s, n in zip(index, shape)]
        chunk = tuple(_chunk_index(n, s) for n, s in zip(shape, index))
        if len(shape) == 2:
            heights[chunk] = sizes[0] / shape[0]
            widths[chunk] = sizes[1] / shape[1]
        else:
            chunk = (0, *chunk)
            heights[chunk] = None
            widths[chunk] = sizes[0] / shape[0]
        devices.setdefault(chunk, set()).add(dev.id)
    rows = max(c[0] for c in devices) + 1
    cols = max(c[1] for c in devices) + 1
    cells = {}  # (i, j) -> (lines above, text, right pad, left pad, lines below)
    for i in range(rows):
        for j in range(cols):
            entry = f"{kind} " + ",".join(str(d) for d in sorted(devices[i, j]))
            width = min(max(int(widths[i, j] * base_width * 2.5), min_width), max_width)
            h = heights[i, j]
            height = 1 if h is None else int(h * base_height)
            left, rem = divmod(width - len(entry) - 2, 2)
            top, vrem = divmod(height - 2, 2)
            cells[i, j] = (max(top, 0), entry, max(left + rem, 0), max(left, 0),
                           max(top + vrem, 0))
    col_width = [max(c[3] + len(c[1]) + c[2] for (i, j), c in cells.items() if j == col)
                 for col in range(cols)]

    def rule(kind_):
        left, fill, cross, right = _BOX[kind_]
        return left + cross.join(fill * w for w in col_width) + right

    lines = [rule("top")]
    for i in range(rows):
        blocks = []
        for j in range(cols):
            top, entry, right, left, bottom = cells[i, j]
            inner = col_width[j] - left - right
            pad = inner - len(entry)
            text = " " * left + " " * (pad // 2) + entry + " " * (pad - pad // 2) + " " * right
            blocks.append([" " * col_width[j]] * top + [text] + [" " * col_width[j]] * bottom)
        height = max(len(b) for b in blocks)
        for b, w in zip(blocks, col_width):
            b.extend([" " * w] * (height - len(b)))
        for k in range(height):
            lines.append(_BOX["v"] + _BOX["v"].join(b[k] for b in blocks) + _BOX["v"])
        lines.append(rule("mid") if i < rows - 1 else rule("bottom"))
    return "\n".join(lines) + "\n"


def visualize_sharding(shape, sharding, *, use_color: bool = True, scale: float = 1.0,
                       min_width: int = 9, max_width: int = 80, color_map=None) -> None:
    """Print which device holds which block of an array of `shape` laid out as `sharding`."""
    sys.stdout.write(sharding_text(shape, sharding, scale=scale, min_width=min_width,
                                   max_width=max_width) + "\n")


def visualize_array_sharding(arr, **kwargs) -> None:
    """Print which device holds which block of the 1-D or 2-D Array `arr`."""
    from fluxion._src import core
    if isinstance(arr, core.Tracer):
        raise NotImplementedError("visualize_array_sharding of a traced value is not supported "
                                  "by fluxion; call it on a concrete Array")
    visualize_sharding(arr.shape, arr.sharding, **kwargs)


def inspect_array_sharding(value, *, callback) -> None:
    """Call `callback` with the sharding of each Array in the pytree `value`."""
    from fluxion._src import core
    from fluxion._src.tree_util import tree_flatten
    for leaf in tree_flatten(value)[0]:
        if isinstance(leaf, core.Tracer):
            raise NotImplementedError("inspect_array_sharding inside jit is not supported by "
                                      "fluxion; call it on concrete Arrays")
        callback(leaf.sharding)
