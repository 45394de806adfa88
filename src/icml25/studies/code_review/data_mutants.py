"""Key bugs by AST mutation (tree-sitter-cpp) inside function bodies, and benign edits elsewhere.

Operators (each a one-line change, so the mutated line is one added line of the MR):
* ror: relational operator swap (< <-> <=, > <-> >=, == <-> !=)              category logic
* lcr: logical connector swap (&& <-> ||)                                      category logic
* off_by_one: an integer literal in a comparison, subscript or bound +1        category security (bounds)
* negate: an if/while condition c -> !(c)                                      category logic
* return_const: return true <-> false, return 0 <-> 1, return nullptr -> 0 ... category logic
* wrong_var: a use of a variable replaced by another variable of the same declared type that is in
  scope there (a parameter, or a local declared earlier at the function's top level)  category logic
Benign edits (behaviour-preserving): a comment line inserted above a statement; a local renamed
throughout its function.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from . import cxx

ROR = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
LCR = {"&&": "||", "||": "&&"}
CATEGORY = {"ror": "logic", "lcr": "logic", "off_by_one": "security", "negate": "logic", "return_const": "logic",
            "wrong_var": "logic"}
RETURN_SWAP = {"true": "false", "false": "true", "0": "1", "1": "0", "nullptr": "0", "-1": "0"}
COMMENTS = ["// keep the previous behaviour here", "// note: checked by the callers", "// TODO: tidy this block",
            "// see the documentation of this function", "// reviewed: no functional change"]


@dataclass
class Mutant:
    function: str
    op: str
    line: int            # 1-based line of the change
    start: int           # byte offsets of the replaced text
    end: int
    before: str
    after: str

    @property
    def category(self) -> str:
        return CATEGORY[self.op]

    def apply(self, src: bytes) -> bytes:
        return src[:self.start] + self.after.encode() + src[self.end:]


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
    fdecl = fn.child_by_field_name("declarator")
    while fdecl is not None and fdecl.type != "function_declarator":
        fdecl = fdecl.child_by_field_name("declarator")
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


def synthesize(src: bytes, mutant: Mutant, funcs: list[Function], rng: random.Random,
               n_benign: tuple[int, int]) -> tuple[str, int, list[dict]]:
    """One MR: the mutant plus 2-6 benign edits (in other functions, sometimes one comment in the same
    function). Returns (new text, the mutated line in the new text, the benign edits)."""
    mutated = mutant.apply(src)
    others = [f for f in funcs if f.name != mutant.function and f.statements]
    own = next((f for f in funcs if f.first <= mutant.line <= f.last), None)
    k = rng.randint(*n_benign)
    edits, byte_edits, inserts = [], [], []
    picks = rng.sample(others, min(k, len(others)))
    if own is not None and rng.random() < 0.5:
        cands = [s for s in own.statements if s[0] != mutant.line]
        if cands:
            inserts.append(rng.choice(cands))
            edits.append({"kind": "comment", "function": own.name})
    for f in picks:
        renameable = [v for v in f.locals if len(v) > 1]
        if renameable and rng.random() < 0.5:
            v = rng.choice(renameable)
            new = v + "Value" if not v.endswith("Value") else v + "2"
            rs = rename_edits(mutated, f.first, v, new)
            if rs and not any(mutant.start <= b < mutant.end + 1 for b, _, _ in rs):
                byte_edits += rs
                edits.append({"kind": "rename", "function": f.name, "old": v, "new": new})
                continue
        inserts.append(rng.choice(f.statements))
        edits.append({"kind": "comment", "function": f.name})
    # renames are in-line (line count unchanged); apply back to front
    shift = 0
    for b, e, new in sorted(byte_edits, reverse=True):
        if b < mutant.start:
            shift += len(new) - (e - b)
        mutated = mutated[:b] + new.encode() + mutated[e:]
    lines = mutated.decode(errors="replace").split("\n")
    key = mutant.line
    for ln, indent in sorted(set(inserts), reverse=True):
        lines.insert(ln - 1, indent + rng.choice(COMMENTS))
        if ln <= key:
            key += 1
    return "\n".join(lines), key, edits
