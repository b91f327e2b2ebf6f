"""A small Wadler-Lindig pretty printer ("Strictly Pretty", Lindig 2000), used for jaxprs.

A document is built from text, line breaks, nesting and groups. When formatted, each group
is laid out on one line if all of it fits in the remaining width; otherwise its own breaks
become newlines (indented by the enclosing nesting) and its subgroups are tried in turn.
"""
from __future__ import annotations

from typing import Sequence


class Doc:
    __slots__ = ()

    def __add__(self, other: "Doc") -> "Doc":
        return Concat((self, other))

    def format(self, width: int = 80) -> str:
        return format_doc(self, width)

    def __str__(self):
        return format_doc(self)


class Text(Doc):
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


class Break(Doc):
    """A space (or `text`) when its group is flat; a newline plus indentation otherwise."""
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


class Concat(Doc):
    __slots__ = ("children",)

    def __init__(self, children: Sequence[Doc]):
        self.children = tuple(children)


class Nest(Doc):
    __slots__ = ("indent", "child")

    def __init__(self, indent: int, child: Doc):
        self.indent = indent
        self.child = child


class Group(Doc):
    __slots__ = ("child",)

    def __init__(self, child: Doc):
        self.child = child


def text(s: str) -> Doc:
    return Text(s)


def brk(s: str = " ") -> Doc:
    return Break(s)


def concat(docs: Sequence[Doc]) -> Doc:
    return Concat(docs)


def nest(indent: int, doc: Doc) -> Doc:
    return Nest(indent, doc)


def group(doc: Doc) -> Doc:
    return Group(doc)


def join(separator: Doc, docs: Sequence[Doc]) -> Doc:
    parts: list[Doc] = []
    for i, d in enumerate(docs):
        if i:
            parts.append(separator)
        parts.append(d)
    return Concat(parts)


nil = Concat(())


def _fits(doc: Doc, width: int) -> bool:
    """Whether `doc` laid out flat takes at most `width` columns."""
    stack = [doc]
    while stack:
        d = stack.pop()
        if type(d) is Text or type(d) is Break:
            width -= len(d.text)
            if width < 0:
                return False
        elif type(d) is Concat:
            stack.extend(reversed(d.children))
        else:  # Nest or Group: flat layout ignores both
            stack.append(d.child)
    return True


def format_doc(doc: Doc, width: int = 80) -> str:
    out: list[str] = []
    column = 0
    stack: list[tuple[int, bool, Doc]] = [(0, False, doc)]  # (indent, flat, doc)
    while stack:
        indent, flat, d = stack.pop()
        kind = type(d)
        if kind is Text:
            out.append(d.text)
            column += len(d.text)
        elif kind is Break:
            if flat:
                out.append(d.text)
                column += len(d.text)
            else:
                out.append("\n" + " " * indent)
                column = indent
        elif kind is Concat:
            stack.extend((indent, flat, c) for c in reversed(d.children))
        elif kind is Nest:
            stack.append((indent + d.indent, flat, d.child))
        else:
            stack.append((indent, flat or _fits(d.child, width - column), d.child))
    return "".join(out)
