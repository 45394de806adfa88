"""Key bugs by AST mutation (tree-sitter-cpp) inside function bodies, and benign edits elsewhere.

In-line operators (each a one-line change, so the mutated line is one added line of the MR):
* ror: relational operator swap (< <-> <=, > <-> >=, == <-> !=)              category logic
* lcr: logical connector swap (&& <-> ||)                                      category logic
* off_by_one: an integer literal in a comparison, subscript or bound +1        category security (bounds)
* negate: an if/while condition c -> !(c)                                      category logic
* return_const: return true <-> false, return 0 <-> 1, return nullptr -> 0 ... category logic
* wrong_var: a use of a variable replaced by another variable of the same declared type that is in
  scope there (a parameter, or a local declared earlier at the function's top level)  category logic
Deletion operators (whole lines removed, so the MR has no added line for the key bug):
* null_guard: an `if` without else that tests one pointer against null (`!p`, `p == 0`, `p == nullptr`;
  p a pointer declared in the function, or compared with nullptr / NULL) deleted    category security
* missing_break: a `break;` (of a loop or a switch case) deleted                     category logic
The *deletion anchor* is the line that now stands where the deleted lines were (the first surviving
new-file line after them: `FileDiff.deleted`'s key); a deletion is generated only where that line is a
non-blank line, and the anchor is the key line for the slicers, the reviewer's targets and KBI alike.
Benign edits (behaviour-preserving): a comment line inserted above a statement; a local renamed
throughout its function; an `if` condition extracted into a `const bool` temporary on the line above;
`const` added to a local (built-in type, or a pointer: `T* const p`) never written after its initialisation.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from . import cxx

ROR = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
LCR = {"&&": "||", "||": "&&"}
CATEGORY = {"ror": "logic", "lcr": "logic", "off_by_one": "security", "negate": "logic", "return_const": "logic",
            "wrong_var": "logic", "null_guard": "security", "missing_break": "logic"}
DELETIONS = ("null_guard", "missing_break")
RETURN_SWAP = {"true": "false", "false": "true", "0": "1", "1": "0", "nullptr": "0", "-1": "0"}
NULLS = {"nullptr", "NULL", "0"}
COMMENTS = ["// keep the previous behaviour here", "// note: checked by the callers", "// TODO: tidy this block",
            "// see the documentation of this function", "// reviewed: no functional change"]
TEMP_NAMES = ["cond", "check", "holds", "isTrue"]
MAX_GUARD_LINES = 6


@dataclass
class Mutant:
    function: str
    op: str
    line: int            # 1-based line of the change
    start: int           # byte offsets of the replaced text
    end: int
    before: str
    after: str
    last: int = 0        # deletions: the last deleted line (`line` is the first)

    @property
    def category(self) -> str:
        return CATEGORY[self.op]

    @property
    def deletion(self) -> bool:
        return self.op in DELETIONS

    def apply(self, src: bytes) -> bytes:
        return src[:self.start] + self.after.encode() + src[self.end:]

    def new_line(self, ln: int) -> int | None:
        """A pristine line's number in the mutated text (None for a deleted line)."""
        if not self.deletion or ln < self.line:
            return ln
        return None if ln <= self.last else ln - (self.last - self.line + 1)


def _single_line(node) -> bool:
    return node.start_point[0] == node.end_point[0]


def _int_literal(node) -> bool:
    t = cxx.text(node)
    return node.type == "number_literal" and t.isdigit() and len(t) < 6


def mutants(src: bytes) -> list[Mutant]:
    """Every candidate mutant inside a function body (deterministic order)."""
    tree = cxx.parse(src)
    out: list[Mutant] = []
    for fn in cxx.functions(tree):
        name = cxx.function_name(fn)
        body = fn.child_by_field_name("body")
        for n in cxx.walk(body):
            line = n.start_point[0] + 1
            if n.type == "binary_expression":
                op = n.child_by_field_name("operator")
                o = cxx.text(op) if op is not None else ""
                if o in ROR and _single_line(n):
                    out.append(Mutant(name, "ror", line, op.start_byte, op.end_byte, o, ROR[o]))
                elif o in LCR and _single_line(n):
                    out.append(Mutant(name, "lcr", line, op.start_byte, op.end_byte, o, LCR[o]))
                if o in ROR or o in ("+", "-"):
                    for side in ("right",):
                        c = n.child_by_field_name(side)
                        if c is not None and _int_literal(c):
                            out.append(Mutant(name, "off_by_one", c.start_point[0] + 1, c.start_byte, c.end_byte,
                                              cxx.text(c), str(int(cxx.text(c)) + 1)))
            elif n.type == "subscript_expression":
                idx = n.child_by_field_name("indices") or n.child_by_field_name("index")
                lits = [c for c in (idx.named_children if idx is not None else []) if _int_literal(c)]
                for c in lits:
                    out.append(Mutant(name, "off_by_one", c.start_point[0] + 1, c.start_byte, c.end_byte,
                                      cxx.text(c), str(int(cxx.text(c)) + 1)))
            elif n.type in ("if_statement", "while_statement"):
                cond = n.child_by_field_name("condition")
                if cond is not None and _single_line(cond) and cond.type == "condition_clause":
                    inner = cond.child_by_field_name("value")
                    if inner is not None and inner.type != "declaration":
                        t = cxx.text(inner)
                        out.append(Mutant(name, "negate", inner.start_point[0] + 1, inner.start_byte, inner.end_byte,
                                          t, f"!({t})"))
            elif n.type == "return_statement" and _single_line(n):
                vals = [c for c in n.named_children]
                if len(vals) == 1:
                    t = cxx.text(vals[0])
                    if t in RETURN_SWAP:
                        out.append(Mutant(name, "return_const", line, vals[0].start_byte, vals[0].end_byte, t,
                                          RETURN_SWAP[t]))
        out += _wrong_var(fn, name)
        out += _deletions(src, fn, name)
    seen, uniq = set(), []
    for m in out:
        if (m.start, m.end, m.after) not in seen:
            seen.add((m.start, m.end, m.after))
            uniq.append(m)
    return uniq


def _declared(decl) -> tuple[str, str] | None:
    """(name, type) of a parameter or a one-name declaration: `T x`, `T* x`, `T& x`, `const T x`
    (the type keeps qualifiers and the pointer/reference mark), or None."""
    ds = decl.children_by_field_name("declarator")
    ty = decl.child_by_field_name("type")
    if len(ds) != 1 or ty is None:
        return None
    d, marks = ds[0], ""
    if d.type == "init_declarator":
        d = d.child_by_field_name("declarator")
    while d is not None and d.type in ("pointer_declarator", "reference_declarator"):
        marks += "*" if d.type == "pointer_declarator" else "&"
        d = d.child_by_field_name("declarator") or (d.named_children[-1] if d.named_children else None)
    if d is None or d.type != "identifier":
        return None
    quals = " ".join(cxx.text(c) for c in decl.children if c.type == "type_qualifier")
    return cxx.text(d), f"{quals} {cxx.text(ty)}{marks}".strip()


def _wrong_var(fn, name: str) -> list[Mutant]:
    """Uses of a variable swapped for another of the same type in scope at the use (parameters, and
    locals declared before the use as direct statements of the body: visible to the end of it)."""
    body = fn.child_by_field_name("body")
    fdecl = cxx.function_declarator(fn)
    scope = []   # (name, type, visible from byte)
    params = fdecl.child_by_field_name("parameters") if fdecl is not None else None
    for pd in (params.named_children if params is not None else []):
        if pd.type == "parameter_declaration" and (nt := _declared(pd)):
            scope.append((*nt, body.start_byte))
    for st in body.named_children:
        if st.type == "declaration" and (nt := _declared(st)):
            scope.append((*nt, st.end_byte))
    types = {n: ty for n, ty, _ in scope}
    out = []
    for n in cxx.identifiers(body):
        v = cxx.text(n)
        par = n.parent
        if v not in types or par is None or par.type in ("init_declarator", "pointer_declarator",
                                                         "reference_declarator", "declaration", "call_expression"):
            continue
        if par.type == "assignment_expression" and par.child_by_field_name("left") == n:
            continue   # a wrong variable read, not a wrong target: the write would be a second change
        alts = sorted(o for o, ty, vis in scope if o != v and ty == types[v] and vis <= n.start_byte)
        for o in alts[:1]:
            out.append(Mutant(name, "wrong_var", n.start_point[0] + 1, n.start_byte, n.end_byte, v, o))
    return out


def _whole_lines(src: bytes, node) -> tuple[int, int] | None:
    """Byte range of the full lines a statement occupies when nothing else is on them, else None."""
    a = src.rfind(b"\n", 0, node.start_byte) + 1
    e = src.find(b"\n", node.end_byte)
    if e < 0 or src[a:node.start_byte].strip() or src[node.end_byte:e].strip():
        return None
    return a, e + 1


def _pointers(fn) -> set[str]:
    """Names declared in the function (parameters, locals) with a pointer type."""
    out = set()
    fdecl = cxx.function_declarator(fn)
    params = fdecl.child_by_field_name("parameters") if fdecl is not None else None
    decls = [pd for pd in (params.named_children if params is not None else []) if pd.type == "parameter_declaration"]
    decls += [n for n in cxx.walk(fn.child_by_field_name("body")) if n.type == "declaration"]
    for d in decls:
        nt = _declared(d)
        if nt and nt[1].endswith("*"):
            out.add(nt[0])
    return out


def _null_tested(cond, pointers: set[str]) -> str | None:
    """The name a condition tests for null (`!p`, `p == 0`, `0 == p`, `p == nullptr`), or None."""
    while cond is not None and cond.type == "parenthesized_expression" and cond.named_child_count == 1:
        cond = cond.named_children[0]
    if cond is None:
        return None
    if cond.type == "unary_expression" and cxx.text(cond.child_by_field_name("operator")) == "!":
        arg = cond.child_by_field_name("argument")
        return cxx.text(arg) if arg is not None and arg.type == "identifier" and cxx.text(arg) in pointers else None
    if cond.type == "binary_expression" and cxx.text(cond.child_by_field_name("operator")) == "==":
        a, b = cond.child_by_field_name("left"), cond.child_by_field_name("right")
        for x, lit in ((a, b), (b, a)):
            if x is not None and lit is not None and x.type == "identifier" and cxx.text(lit) in NULLS:
                if cxx.text(lit) != "0" or cxx.text(x) in pointers:
                    return cxx.text(x)
    return None


def _deletion(src: bytes, fn, name: str, node, op: str) -> Mutant | None:
    """`node`'s whole lines deleted, if they hold nothing else and the line after them is not blank (that
    line becomes the deletion anchor)."""
    span = _whole_lines(src, node)
    if span is None:
        return None
    rest = src[span[1]:].split(b"\n", 1)[0]
    if not rest.strip():
        return None
    first, last = cxx.line_span(node)
    return Mutant(name, op, first, span[0], span[1], src[span[0]:span[1]].decode(errors="replace"), "", last)


def _deletions(src: bytes, fn, name: str) -> list[Mutant]:
    out = []
    pointers = _pointers(fn)
    for n in cxx.walk(fn.child_by_field_name("body")):
        if n.type == "break_statement":
            m = _deletion(src, fn, name, n, "missing_break")
        elif (n.type == "if_statement" and n.child_by_field_name("alternative") is None
              and n.parent is not None and n.parent.type == "compound_statement"
              and n.next_named_sibling is not None           # a guard protects the statements after it
              and n.end_point[0] - n.start_point[0] < MAX_GUARD_LINES):
            cond = n.child_by_field_name("condition")
            val = cond.child_by_field_name("value") if cond is not None else None
            m = _deletion(src, fn, name, n, "null_guard") if _null_tested(val, pointers) else None
        else:
            continue
        if m is not None:
            out.append(m)
    return out


@dataclass
class Function:
    name: str
    first: int
    last: int
    body_first: int
    statements: list = field(default_factory=list)   # (first line, indent) of single statements
    locals: list = field(default_factory=list)       # local variable names declared in the body


STMT = {"expression_statement", "return_statement", "declaration", "if_statement", "for_statement",
        "while_statement", "break_statement", "continue_statement"}


def function_table(src: bytes) -> list[Function]:
    tree = cxx.parse(src)
    lines = src.decode(errors="replace").split("\n")
    out = []
    for fn in cxx.functions(tree):
        first, last = cxx.line_span(fn)
        body = fn.child_by_field_name("body")
        f = Function(cxx.function_name(fn), first, last, body.start_point[0] + 1)
        for n in cxx.walk(body):
            if n.type in STMT and n.start_point[0] + 1 > f.body_first:
                ln = n.start_point[0] + 1
                code = lines[ln - 1]
                if code.strip() and not code.strip().startswith(("#", "//", "}", "else", "case", "default")):
                    f.statements.append((ln, code[: len(code) - len(code.lstrip())]))
            if n.type == "declaration":
                for d in n.children_by_field_name("declarator"):
                    nm = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
                    if nm is not None and nm.type == "identifier":
                        f.locals.append(cxx.text(nm))
        f.statements = sorted(set(f.statements))
        out.append(f)
    return out


def rename_edits(src: bytes, fn_first: int, old: str, new: str) -> list[tuple[int, int, str]]:
    """Byte ranges of every identifier `old` inside the function starting at line fn_first."""
    tree = cxx.parse(src)
    for fn in cxx.functions(tree):
        if fn.start_point[0] + 1 == fn_first:
            return [(n.start_byte, n.end_byte, new) for n in cxx.identifiers(fn) if cxx.text(n) == old]
    return []


@dataclass
class Edit:
    """A benign edit of the pristine text: byte replacements and whole new lines (inserted above a line)."""
    kind: str
    function: str
    spans: list = field(default_factory=list)     # (start byte, end byte, new text)
    inserts: list = field(default_factory=list)   # (pristine line, text of the new line)
    info: dict = field(default_factory=dict)

    def record(self) -> dict:
        return {"kind": self.kind, "function": self.function, **self.info}


def _names_in(node) -> set[str]:
    return {cxx.text(n) for n in cxx.walk(node) if n.type in ("identifier", "field_identifier", "type_identifier")}


def _indent(src: bytes, node) -> str:
    a = src.rfind(b"\n", 0, node.start_byte) + 1
    return src[a:node.start_byte].decode(errors="replace")


def _line_start(src: bytes, node) -> bool:
    return not src[src.rfind(b"\n", 0, node.start_byte) + 1:node.start_byte].strip()


def extract_temp_edit(src: bytes, fn) -> Edit | None:
    """The function's first `if (c)` that stands alone at the start of its line, in a block (not an
    else-if, not a case label's statement), with a one-line expression condition: `const bool t(c);`
    inserted on the line above and the condition replaced by t. c is evaluated once, at the same point,
    and direct-initialisation converts it to bool as the `if` does (explicit operator bool included)."""
    used = _names_in(fn)
    tmp = next((t for t in TEMP_NAMES if t not in used), None)
    if tmp is None:
        return None
    for n in cxx.walk(fn.child_by_field_name("body")):
        if n.type != "if_statement" or n.parent is None or n.parent.type != "compound_statement":
            continue
        cond = n.child_by_field_name("condition")
        val = cond.child_by_field_name("value") if cond is not None else None
        if (val is None or val.type in ("declaration", "comma_expression") or not _single_line(cond)
                or not _line_start(src, n) or cxx.text(n).startswith("if constexpr")):
            continue
        line = n.start_point[0] + 1
        return Edit("extract_temp", cxx.function_name(fn), [(val.start_byte, val.end_byte, tmp)],
                    [(line, f"{_indent(src, n)}const bool {tmp}({cxx.text(val)});")], {"name": tmp})
    return None


def _written(fn, name: str, by_ref: bool = True) -> bool:
    """Whether `name` is ever assigned, incremented or has its address taken anywhere in the function, or
    (by_ref) is passed to a call, where a non-const reference parameter could write it."""
    for n in cxx.walk(fn):
        if n.type == "identifier" and cxx.text(n) == name:
            p = n.parent
            if p is None:
                continue
            if p.type == "assignment_expression" and p.child_by_field_name("left") == n:
                return True
            if p.type == "update_expression" or (by_ref and p.type == "argument_list"):
                return True
            if p.type == "pointer_expression" and cxx.text(p.child_by_field_name("operator")) == "&":
                return True
    return False


SCALARS = {"primitive_type", "sized_type_specifier"}


def add_const_edit(src: bytes, fn) -> Edit | None:
    """The function's first block-level `T x = v;` or `T* p = v;` (T a built-in type for x, any type for p;
    one declarator, no storage class or qualifier) whose name is declared once and never written afterwards:
    `const` inserted before the name (`int const x`, `T* const p`: the pointer, not the pointee, is const).
    A pointer passed by value to a call is still unwritten; a built-in value passed to a call is not taken
    (it may bind a non-const reference)."""
    body = fn.child_by_field_name("body")
    decls = [n for n in cxx.walk(body) if n.type == "declaration"]
    counts: dict[str, int] = {}
    for d in cxx.walk(fn):   # every declared name (nested blocks, for-loops, parameters)
        if d.type in ("declaration", "parameter_declaration"):
            for dd in d.children_by_field_name("declarator"):
                while dd is not None and dd.type not in ("identifier", "field_identifier"):
                    dd = dd.child_by_field_name("declarator")
                if dd is not None:
                    counts[cxx.text(dd)] = counts.get(cxx.text(dd), 0) + 1
    for d in decls:
        ds, ty = d.children_by_field_name("declarator"), d.child_by_field_name("type")
        if (len(ds) != 1 or ds[0].type != "init_declarator" or ty is None
                or d.parent is None or d.parent.type != "compound_statement" or not _line_start(src, d)
                or any(c.type in ("type_qualifier", "storage_class_specifier") for c in d.children)):
            continue
        nm = ds[0].child_by_field_name("declarator")
        pointer = nm is not None and nm.type == "pointer_declarator"
        if pointer:
            if any(c.type == "type_qualifier" for c in nm.children):
                continue   # already `T* const p`
            nm = nm.child_by_field_name("declarator")
        elif ty.type not in SCALARS:
            continue
        if (nm is None or nm.type != "identifier" or counts.get(cxx.text(nm)) != 1
                or _written(fn, cxx.text(nm), by_ref=not pointer)):
            continue
        return Edit("add_const", cxx.function_name(fn), [(nm.start_byte, nm.start_byte, "const ")], [],
                    {"name": cxx.text(nm)})
    return None


def refactor_edits(src: bytes) -> dict[int, list[Edit]]:
    """{function's first line: [its extract-temporary edit, its add-const edit]} (at most one of each)."""
    out = {}
    for fn in cxx.functions(cxx.parse(src)):
        es = [e for e in (extract_temp_edit(src, fn), add_const_edit(src, fn)) if e is not None]
        if es:
            out[fn.start_point[0] + 1] = es
    return out


def apply_edits(src: bytes, edits: list[Edit], mutant: Mutant | None = None) -> tuple[str, int | None]:
    """The pristine text with the mutant (if any) and the benign edits applied; returns (text, the key line:
    the mutated line, or a deletion's anchor, in the new text)."""
    out, delta = src, 0
    if mutant is not None:
        out = mutant.apply(src)
        delta = len(mutant.after.encode()) - (mutant.end - mutant.start)
    spans = []
    for e in edits:
        for b, en, t in e.spans:
            if mutant is not None and b < mutant.end and en > mutant.start:
                raise ValueError(f"a benign edit overlaps the mutant in {mutant.function}")
            sh = delta if mutant is not None and b >= mutant.end else 0
            spans.append((b + sh, en + sh, t))
    for b, en, t in sorted(spans, reverse=True):
        out = out[:b] + t.encode() + out[en:]
    lines = out.decode(errors="replace").split("\n")
    key = mutant.line if mutant is not None else None
    ins = []
    for e in edits:
        for ln, t in e.inserts:
            new = mutant.new_line(ln) if mutant is not None else ln
            if new is None:
                raise ValueError("a benign edit inside the deleted lines")
            ins.append((new, t))
    for ln, t in sorted(ins, reverse=True):
        lines.insert(ln - 1, t)
        if key is not None and ln <= key:
            key += 1
    return "\n".join(lines), key


def synthesize(src: bytes, mutant: Mutant, funcs: list[Function], rng: random.Random,
               n_benign: tuple[int, int], refactors: dict[int, list[Edit]] | None = None
               ) -> tuple[str, int, list[dict]]:
    """One MR: the mutant plus 2-6 benign edits (one per other function: a comment, a rename, an extracted
    temporary or a const; sometimes one comment in the mutant's own function, never on the mutated line or
    inside / right after deleted lines). `refactors` are the extract / const edits verified on the pristine
    library (`refactor_edits`). Returns (new text, the key line in the new text, the benign edits)."""
    refactors = refactors or {}
    others = [f for f in funcs if f.name != mutant.function and f.statements]
    own = next((f for f in funcs if f.first <= mutant.line <= f.last), None)
    k = rng.randint(*n_benign)
    edits: list[Edit] = []
    picks = rng.sample(others, min(k, len(others)))
    if own is not None and rng.random() < 0.5:
        hi = (mutant.last + 1) if mutant.deletion else mutant.line   # the anchor stays next to the deletion
        cands = [s for s in own.statements if not mutant.line <= s[0] <= hi]
        if cands:
            ln, indent = rng.choice(cands)
            edits.append(Edit("comment", own.name, [], [(ln, indent + rng.choice(COMMENTS))]))
    for f in picks:
        kinds = ["comment"]
        renameable = [v for v in f.locals if len(v) > 1]
        if renameable:
            kinds.append("rename")
        ref = {e.kind: e for e in refactors.get(f.first, [])}
        kinds += sorted(ref)
        kind = rng.choice(kinds)
        if kind == "rename":
            v = rng.choice(renameable)
            new = v + "Value" if not v.endswith("Value") else v + "2"
            rs = rename_edits(src, f.first, v, new)
            if rs:
                edits.append(Edit("rename", f.name, rs, [], {"old": v, "new": new}))
                continue
            kind = "comment"
        if kind in ref:
            edits.append(ref[kind])
            continue
        ln, indent = rng.choice(f.statements)
        edits.append(Edit("comment", f.name, [], [(ln, indent + rng.choice(COMMENTS))]))
    text, key = apply_edits(src, edits, mutant)
    return text, key, [e.record() for e in edits]
