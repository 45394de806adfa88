"""Code slicing over tree-sitter-cpp ASTs (the paper's Alg. 1-9, on tree-sitter instead of Cppcheck).

A *unit* is one statement: a simple statement (expression, declaration, return, break, ...) spans its
lines; a control statement (if / for / while / do / switch / else) contributes its *header* (from its
first line to the line its body starts on); the function signature is a unit that declares the
parameters; comments are units with no reads or writes. Def-use is name-based and intra-procedural
(member fields by name).

* OriginalDiff(d): d plus its direct dependencies: the declarations of the names d reads or writes.
* ParentFunction(d): every line of the smallest function containing d.
* LeftFlow(d): OriginalDiff(d), the headers of the control structures enclosing d, and the backward trace of each
  L-value of d (every earlier unit that declares or assigns it, with its enclosing headers); a unit with
  no L-value (a condition, a return, a call) traces the names it reads.
* FullFlow(d): LeftFlow(d) plus the forward trace (later units reading the L- or R-values of d) and the
  signatures of the callees (of d and of those later units) defined in the file.
The changed lines are the added lines and the deletion anchors (the line now standing where deleted lines
were, `FileDiff.changed`), so a deleted statement is sliced from the statement that took its place.
The MR driver (`slice_mr`) seeds a slice with the first diff unit not yet covered, expands it with the
algorithm and absorbs every other diff unit that falls inside, expanding those too (GenerateNewSlice).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import cxx

SLICERS = ("original_diff", "parent_function", "left_flow", "full_flow")
SIMPLE = {"expression_statement", "declaration", "return_statement", "break_statement", "continue_statement",
          "goto_statement", "throw_statement", "comment"}
CONTROL = {"if_statement", "for_statement", "while_statement", "do_statement", "switch_statement",
           "for_range_loop", "else_clause", "case_statement"}
BODY_FIELDS = ("consequence", "body")


@dataclass
class Unit:
    first: int
    last: int
    kind: str
    writes: set = field(default_factory=set)
    reads: set = field(default_factory=set)
    calls: set = field(default_factory=set)
    declares: set = field(default_factory=set)
    headers: list = field(default_factory=list)   # indices of enclosing control-header units
    func: int = -1
    stmt_last: int = 0                            # control units: the last line of the whole statement

    @property
    def lines(self) -> set[int]:
        return set(range(self.first, self.last + 1))


def _name(node) -> str | None:
    if node is None:
        return None
    if node.type in ("identifier", "field_identifier"):
        return cxx.text(node)
    if node.type == "field_expression":
        return _name(node.child_by_field_name("field"))
    if node.type in ("pointer_expression", "parenthesized_expression", "subscript_expression"):
        inner = node.child_by_field_name("argument") or (node.named_children[0] if node.named_children else None)
        return _name(inner)
    if node.type in ("init_declarator", "pointer_declarator", "reference_declarator", "array_declarator"):
        return _name(node.child_by_field_name("declarator") or (node.named_children[0] if node.named_children else None))
    if node.type == "qualified_identifier":
        return _name(node.child_by_field_name("name"))
    return None


def _header_span(node) -> tuple[int, int]:
    first = node.start_point[0] + 1
    for f in BODY_FIELDS:
        b = node.child_by_field_name(f)
        if b is not None:
            return first, b.start_point[0] + 1
    if node.type in ("else_clause", "case_statement"):
        return first, first
    return first, node.end_point[0] + 1


def _scan(region, unit: Unit) -> None:
    """Reads, writes, declarations and calls of a region of code (a statement or a header)."""
    for n in cxx.walk(region):
        if n.type == "assignment_expression":
            nm = _name(n.child_by_field_name("left"))
            if nm:
                unit.writes.add(nm)
        elif n.type == "update_expression":
            nm = _name(n.child_by_field_name("argument"))
            if nm:
                unit.writes.add(nm)
        elif n.type in ("init_declarator",) or (n.type == "declaration"):
            decls = [n] if n.type == "init_declarator" else n.children_by_field_name("declarator")
            for d in decls:
                nm = _name(d)
                if nm:
                    unit.writes.add(nm)
                    unit.declares.add(nm)
        elif n.type == "call_expression":
            nm = _name(n.child_by_field_name("function"))
            if nm:
                unit.calls.add(nm)
        if n.type in ("identifier", "field_identifier"):
            unit.reads.add(cxx.text(n))
    # a plain `x = ...` / declaration does not read x; compound assignments and ++ do
    pure = set()
    for n in cxx.walk(region):
        if n.type == "assignment_expression" and cxx.text(n.child_by_field_name("operator")) == "=":
            nm = _name(n.child_by_field_name("left"))
            if nm:
                pure.add(nm)
    unit.reads -= (pure | unit.declares) - _rhs_names(region)
    unit.reads -= unit.calls


def _rhs_names(region) -> set:
    out = set()
    for n in cxx.walk(region):
        if n.type == "assignment_expression":
            r = n.child_by_field_name("right")
            out |= {cxx.text(i) for i in cxx.walk(r) if i.type in ("identifier", "field_identifier")}
        elif n.type == "init_declarator":
            v = n.child_by_field_name("value")
            if v is not None:
                out |= {cxx.text(i) for i in cxx.walk(v) if i.type in ("identifier", "field_identifier")}
    return out


class FileIndex:
    """Units of every function of one source file."""

    def __init__(self, src: str | bytes):
        self.tree = cxx.parse(src)
        self.units: list[Unit] = []
        self.funcs: list[tuple[int, int, str, int]] = []   # (first, last, name, signature unit)
        self.signatures: dict[str, list[tuple[int, int]]] = {}
        for fn in cxx.functions(self.tree):
            self._index(fn)

    def _index(self, fn) -> None:
        fi = len(self.funcs)
        first, last = cxx.line_span(fn)
        name = cxx.function_name(fn)
        s0, s1 = cxx.signature_lines(fn)
        sig = Unit(s0, s1, "signature", func=fi)
        decl = fn.child_by_field_name("declarator")
        for p in cxx.walk(decl):
            if p.type in ("parameter_declaration", "optional_parameter_declaration"):
                nm = _name(p.child_by_field_name("declarator"))
                if nm:
                    sig.writes.add(nm)
                    sig.declares.add(nm)
        self.units.append(sig)
        self.funcs.append((first, last, name, len(self.units) - 1))
        self.signatures.setdefault(name.split("::")[-1], []).append((s0, s1))
        self._body(fn.child_by_field_name("body"), fi, [])

    def _body(self, node, fi, headers) -> None:
        for c in node.named_children:
            if c.type in SIMPLE:
                u = Unit(*cxx.line_span(c), c.type, func=fi, headers=list(headers))
                if c.type != "comment":
                    _scan(c, u)
                self.units.append(u)
            elif c.type in CONTROL:
                h0, h1 = _header_span(c)
                u = Unit(h0, h1, c.type, func=fi, headers=list(headers), stmt_last=c.end_point[0] + 1)
                for f in ("initializer", "condition", "update", "declarator", "right", "value"):
                    part = c.child_by_field_name(f)
                    if part is not None:
                        _scan(part, u)
                self.units.append(u)
                inner = headers + [len(self.units) - 1]
                for f in BODY_FIELDS:
                    b = c.child_by_field_name(f)
                    if b is not None:
                        if b.type == "compound_statement":
                            self._body(b, fi, inner)
                        else:
                            self._body_single(b, fi, inner)
                alt = c.child_by_field_name("alternative")
                if alt is not None:
                    self._body_single(alt, fi, inner if c.type == "if_statement" else headers)
                if c.type in ("case_statement",):
                    self._body(c, fi, inner)
            elif c.type == "compound_statement":
                self._body(c, fi, headers)
            elif c.type not in ("{", "}"):
                self._body(c, fi, headers)

    def _body_single(self, node, fi, headers) -> None:
        wrapper = type("W", (), {"named_children": [node]})
        self._body(wrapper, fi, headers)

    # ---- queries ----------------------------------------------------------------------------

    def function_of(self, line: int) -> int | None:
        best = None
        for i, (a, b, _, _) in enumerate(self.funcs):
            if a <= line <= b and (best is None or a >= self.funcs[best][0]):
                best = i
        return best

    def unit_at(self, line: int) -> int | None:
        """The innermost unit containing `line` (the shortest span); a line in no unit (a closing brace, where
        a deletion anchor can fall when a block's last statement was deleted) belongs to the innermost control
        statement whose whole span contains it."""
        best = None
        for i, u in enumerate(self.units):
            if u.first <= line <= u.last and (best is None or u.last - u.first < self.units[best].last - self.units[best].first):
                best = i
        if best is None:
            for i, u in enumerate(self.units):
                if u.stmt_last and u.first <= line <= u.stmt_last and (
                        best is None or u.first >= self.units[best].first):
                    best = i
        return best

    def _with_headers(self, idx: set) -> set:
        out = set(idx)
        for i in idx:
            out |= set(self.units[i].headers)
        return out

    def expand(self, i: int, algo: str) -> set[int]:
        """Lines of the slice of unit i."""
        u = self.units[i]
        f = u.func
        same = [j for j, v in enumerate(self.units) if v.func == f]
        if algo == "parent_function":
            a, b, _, _ = self.funcs[f]
            return set(range(a, b + 1))
        names = u.reads | u.writes
        deps = {j for j in same if j != i and self.units[j].declares & names and self.units[j].first <= u.first}
        if algo == "original_diff":
            return self._lines({i} | deps)
        # left_flow: OriginalDiff(d) plus the backward trace of d's L-values and the enclosing headers
        lvals = u.writes or u.reads
        back = {j for j in same if j != i and self.units[j].writes & lvals and self.units[j].first < u.first}
        keep = self._with_headers({i} | deps | back)
        if algo == "left_flow":
            return self._lines(keep)
        if algo != "full_flow":
            raise ValueError(f"unknown slicer {algo}")
        touched = u.writes | u.reads
        fwd = {j for j in same if self.units[j].first > u.last and self.units[j].reads & touched}
        lines = self._lines(self._with_headers(keep | fwd))
        for c in set().union(*(self.units[j].calls for j in {i} | fwd)):
            for s0, s1 in self.signatures.get(c.split("::")[-1], []):
                lines |= set(range(s0, s1 + 1))
        return lines

    def _lines(self, idx: set) -> set[int]:
        out = set()
        for j in idx:
            out |= self.units[j].lines
        return out


def slice_mr(index: FileIndex, added: list[int], algo: str) -> list[list[int]]:
    """The MR's slices (sorted line lists of the new file) for the changed lines `added`."""
    diff_units, orphan = [], []
    for ln in sorted(set(added)):
        i = index.unit_at(ln)
        if i is None:
            orphan.append(ln)
        elif i not in diff_units:
            diff_units.append(i)
    pending = list(diff_units)
    groups = []   # [lines, diff units absorbed]
    while pending:
        seed = pending.pop(0)
        lines = index.expand(seed, algo)
        own = {seed}
        changed = True
        while changed:
            changed = False
            for j in list(pending):
                if index.units[j].lines & lines:
                    pending.remove(j)
                    own.add(j)
                    lines |= index.expand(j, algo)
                    changed = True
        # a later slice that reaches an earlier slice's diff statement absorbs that slice
        for g in list(groups):
            if any(index.units[j].lines & lines for j in g[1]):
                groups.remove(g)
                lines |= g[0]
                own |= g[1]
        groups.append([lines, own])
    slices = [sorted(g[0] | {ln for ln in added if index.unit_at(ln) in g[1]}) for g in groups]
    slices.sort()
    for ln in orphan:  # changed lines outside every function (includes, globals): the line itself
        if not any(ln in s for s in slices):
            slices.append([ln])
    return slices
