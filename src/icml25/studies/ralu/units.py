"""Logic units by static analysis (RaLU step 2), plus the line-by-line and whole-program unit sources of the
ablation and the self-refine baseline.

Our CFG: the program's statements are cut into basic blocks (maximal runs of simple statements, ending
at a control transfer such as return / break / continue / raise); `if`, `for`, `while`, `try` and `with`
end a block and open their own blocks. A depth-first walk over this graph (the order of the official
`CFG.traverse_print`) emits one unit per piece, in the official unit language:

* basic block:  ``RUN `stmt` `` or ``RUN [\\n stmts \\n]``
* branch pair:  ``#BRANCH# If Condition `c` is satisfied, then <first block of the arm>`` and
                ``#BRANCH# Otherwise, when Condition `c` is not satisfied, then <first block | skip.>``
* loop:         ``#LOOP BEGIN# If looping Condition `for ...` is satisfied, then enter the loop:`` ...
                ``#LOOP END# If not satisfying the looping Condition `for ...`, then jump out of the loop.``
* nested function: a ``[DEFINE FUNCTION] f`` line in its block; the body's units are emitted after the
                enclosing code, the first prefixed ``#ENTER FUNCTION# f{`` and the last suffixed
                ``} #EXIT FUNCTION#``.
* try:          ``#TRY#`` body, ``#EXCEPT# If exception `E` is raised, then ...``, ``#FINALLY# ...``.

Splitting rules (official `cfg_to_natural_language`): a program that is a single RUN block of more than 9
lines is split into three units; for code tasks the leading ``[DEFINE FUNCTION] entry_point`` unit is
dropped; for math, if the program does not parse, its lines are split into thirds.

Each unit records the ids (pre-order index in `ast.walk` order of statements) of the statements it covers,
so tests can check that every statement lands in exactly one unit. Departure: comprehensions, lambdas
and generators stay inside their statement (the official builder expands them into loops / functions).
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field

SIMPLE_END = (ast.Return, ast.Break, ast.Continue, ast.Raise)
COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, ast.FunctionDef,
            ast.AsyncFunctionDef, ast.ClassDef)
if hasattr(ast, "TryStar"):
    COMPOUND = COMPOUND + (ast.TryStar,)
if hasattr(ast, "Match"):
    COMPOUND = COMPOUND + (ast.Match,)


@dataclass
class Unit:
    text: str
    kind: str  # run | branch | loop_begin | loop_end | try | except | finally | with | match
    stmts: list[int] = field(default_factory=list)  # ids of the statements this unit holds


def _header(node) -> str:
    """The first line of a compound statement, without the colon: `for i in range(3)`, `if x > 2`."""
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}"
    if isinstance(node, ast.While):
        return f"while {ast.unparse(node.test)}"
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return "with " + ", ".join(ast.unparse(i) for i in node.items)
    raise TypeError(type(node))


def _run_text(lines: list[str]) -> str:
    return f"RUN `{lines[0]}`" if len(lines) == 1 else "RUN [\n" + "\n".join(lines) + "\n]"


class _Builder:
    def __init__(self):
        self.ids: dict[int, int] = {}  # id(node) -> statement id
        self.functions: list[tuple[str, list[Unit]]] = []

    def sid(self, node) -> int:
        return self.ids.setdefault(id(node), len(self.ids))

    def number(self, tree) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt):
                self.sid(node)

    # a simple statement as text in a RUN block; defs become `[DEFINE FUNCTION] f` and are walked later
    def simple_line(self, s) -> str:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions.append((s.name, self.block(s.body)))
            return f"[DEFINE FUNCTION] {s.name}"
        if isinstance(s, ast.ClassDef):
            self.functions.append((s.name, self.block(s.body)))
            return f"[DEFINE CLASS] {s.name}"
        return ast.unparse(s)

    def block(self, body: list) -> list[Unit]:
        """Units of a statement list, in DFS order."""
        units: list[Unit] = []
        run_lines, run_ids = [], []

        def flush():
            if run_lines:
                units.append(Unit(_run_text(run_lines), "run", list(run_ids)))
                run_lines.clear()
                run_ids.clear()

        for s in body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not isinstance(s, COMPOUND):
                run_lines.append(self.simple_line(s))
                run_ids.append(self.sid(s))
                if isinstance(s, SIMPLE_END):
                    flush()
                continue
            flush()
            units += self.compound(s)
        flush()
        return units

    def arm(self, marker: str, body: list, kind: str, own_ids: list[int]) -> list[Unit]:
        """A marker unit merged with the first basic block of its arm (as the official DFS prints them)."""
        inner = self.block(body) if body else []
        if inner and inner[0].kind == "run":
            first = inner.pop(0)
            return [Unit(marker + first.text, kind, own_ids + first.stmts)] + inner
        return [Unit(marker + ("skip." if not inner else "continue:"), kind, own_ids)] + inner

    def compound(self, s) -> list[Unit]:
        i = self.sid(s)
        if isinstance(s, ast.If):
            c = ast.unparse(s.test)
            out = self.arm(f"#BRANCH# If Condition `{c}` is satisfied, then ", s.body, "branch", [i])
            out += self.arm(f"#BRANCH# Otherwise, when Condition `{c}` is not satisfied, then ", s.orelse,
                            "branch", [])
            return out
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            h = _header(s)
            out = [Unit(f"#LOOP BEGIN# If looping Condition `{h}` is satisfied, then enter the loop:", "loop_begin", [i])]
            out += self.block(s.body)
            out.append(Unit(f"#LOOP END# If not satisfying the looping Condition `{h}`, then jump out of the loop.",
                            "loop_end", []))
            out += self.block(s.orelse)
            return out
        if isinstance(s, (ast.With, ast.AsyncWith)):
            return self.arm(f"#WITH# Entering `{_header(s)}`, then ", s.body, "with", [i])
        if isinstance(s, ast.Try) or (hasattr(ast, "TryStar") and isinstance(s, ast.TryStar)):
            out = self.arm("#TRY# ", s.body, "try", [i])
            for h in s.handlers:
                e = ast.unparse(h.type) if h.type is not None else "any exception"
                out += self.arm(f"#EXCEPT# If exception `{e}` is raised, then ", h.body, "except", [])
            if s.orelse:
                out += self.arm("#TRY ELSE# If no exception is raised, then ", s.orelse, "except", [])
            if s.finalbody:
                out += self.arm("#FINALLY# ", s.finalbody, "finally", [])
            return out
        if hasattr(ast, "Match") and isinstance(s, ast.Match):
            out = []
            subj = ast.unparse(s.subject)
            for k, case in enumerate(s.cases):
                out += self.arm(f"#BRANCH# If `{subj}` matches `{ast.unparse(case.pattern)}`, then ", case.body,
                                "branch", [i] if k == 0 else [])
            return out
        raise TypeError(type(s))


def cfg_units_detailed(program: str, entry_point: str | None = None) -> list[Unit]:
    """The CFG units of `program` with their statement ids; raises SyntaxError when it does not parse."""
    tree = ast.parse(program)
    b = _Builder()
    b.number(tree)
    units = b.block(tree.body)
    for name, fn_units in b.functions:  # nested functions after the enclosing code (official order)
        if not fn_units:
            continue
        fn_units = [Unit(u.text, u.kind, list(u.stmts)) for u in fn_units]
        fn_units[0].text = f"#ENTER FUNCTION# {name}{{\n" + fn_units[0].text
        fn_units[-1].text = fn_units[-1].text + "} #EXIT FUNCTION#"
        units += fn_units
    if entry_point is not None and units and units[0].text.startswith(f"RUN `[DEFINE FUNCTION] {entry_point}"):
        units = units[1:]
    elif entry_point is None and len(units) == 1 and units[0].kind == "run":
        lines = units[0].text.splitlines()[1:-1]
        if len(lines) > 9:
            ids = units[0].stmts
            div = math.ceil(len(lines) / 3)
            units = [Unit("RUN [\n" + "\n".join(lines[j:j + div]) + "\n]", "run", ids[j:j + div])
                     for j in range(0, len(lines), div)]
    return units


def thirds(program: str) -> list[str]:
    lines = [ln for ln in program.splitlines() if ln.strip()]
    if not lines:
        return []
    div = math.ceil(len(lines) / 3)
    return ["RUN [\n" + "\n".join(lines[j:j + div]) + "\n]" for j in range(0, len(lines), div)]


def cfg_units(program: str, entry_point: str | None = None) -> list[str]:
    """Unit texts; for math, a program that does not parse falls back to thirds of its lines (official)."""
    try:
        return [u.text for u in cfg_units_detailed(program, entry_point)]
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return thirds(program)


def line_units(program: str) -> list[str]:
    """The ablation: one unit per non-empty program line, as written (indentation kept)."""
    return [f"RUN `{ln}`" for ln in program.splitlines() if ln.strip()]


def whole_unit(program: str) -> list[str]:
    """Self-refine: the whole program as one unit."""
    lines = [ln for ln in program.splitlines() if ln.strip()]
    return ["RUN [\n" + "\n".join(lines) + "\n]"] if lines else []


SOURCES = {"cfg": cfg_units, "line": line_units, "whole": whole_unit}


def normalise(text: str) -> str:
    """`extract_core_chars` in spirit: compare units on letters, digits and operators only."""
    return "".join(ch for ch in text if not ch.isspace() and ch != "`")
