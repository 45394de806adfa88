"""tree-sitter-cpp helpers shared by the mutator, the benign-edit generator and the slicers.

Rows are 0-based inside tree-sitter; every public function here speaks 1-based file line numbers.
"""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _parser():
    import tree_sitter as ts
    import tree_sitter_cpp as tscpp

    return ts.Parser(ts.Language(tscpp.language()))


def parse(src: str | bytes):
    data = src.encode() if isinstance(src, str) else src
    return _parser().parse(data)


def text(node) -> str:
    return node.text.decode(errors="replace")


def walk(node):
    """Every node under `node` (pre-order), iteratively."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def line_span(node) -> tuple[int, int]:
    """(first, last) 1-based lines of a node."""
    return node.start_point[0] + 1, node.end_point[0] + 1


def functions(tree) -> list:
    """Every function_definition with a body, outermost first (methods inside class bodies included)."""
    out = []
    for n in walk(tree.root_node):
        if n.type == "function_definition" and n.child_by_field_name("body") is not None:
            out.append(n)
    return out


def function_declarator(fn):
    """The `function_declarator` of a function definition (under its pointer / reference declarators), or None."""
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    return d


def function_name(fn) -> str:
    """The declarator's name, qualified as written (`XMLElement::Attribute`), operators included."""
    d = function_declarator(fn)
    if d is None:
        return "?"
    name = d.child_by_field_name("declarator")
    return text(name) if name is not None else "?"


def signature_lines(fn) -> tuple[int, int]:
    """Lines of a function's signature: from its first line to the line its body opens on."""
    body = fn.child_by_field_name("body")
    return fn.start_point[0] + 1, body.start_point[0] + 1


def identifiers(node) -> list:
    return [n for n in walk(node) if n.type == "identifier"]
