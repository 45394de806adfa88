"""gsm-lite: a procedural corpus of short word problems whose gold programs hold loops and branches.

A problem is a chain of clauses over one quantity (an item a person has); each clause maps to a program
fragment, so the gold program is the concatenation of the fragments (a `for` loop, an `if` branch, a loop
with a branch inside ...). A *template* is the tuple of clause kinds; some templates are held out of
training (new combinations of known clauses) and the evaluation items use new numbers.

This is a stand-in for GSM8K at mini scale (no real LLM is available offline); it is *generated*, never
solved by rules at inference time: the gold program and answer are used only to build training text and to
score outputs.
"""
from __future__ import annotations

import itertools
import random
import re

NAMES = ["Tom", "Ann", "Bob", "Eva", "Sam", "Mia", "Leo", "Zoe"]
ITEMS = ["apples", "coins", "books", "cards", "pens", "eggs", "shells", "stamps"]

# clause kind -> (question text, program fragment); {v} is the item variable, {p} the pronoun-free name
START = ("{n} has {a} {v} .", "{v} = {a}")
CLAUSES = {
    "buy": ("Then {n} buys {b} {v} .", "{v} = {v} + {b}"),
    "lose": ("Then {n} loses {b} {v} .", "{v} = {v} - {b}"),
    "times": ("Then the {v} grow {k} times .", "{v} = {v} * {k}"),
    "loop_add": ("For {t} days , {n} gets {b} {v} each day .", "for i in range({t}):\n    {v} = {v} + {b}"),
    "loop_sub": ("For {t} days , {n} gives {b} {v} each day .", "for i in range({t}):\n    {v} = {v} - {b}"),
    "if_more": ("If {n} has more than {c} {v} , {n} gives away {d} .", "if {v} > {c}:\n    {v} = {v} - {d}"),
    "if_less": ("If {n} has less than {c} {v} , {n} gets {d} more .", "if {v} < {c}:\n    {v} = {v} + {d}"),
    "loop_even": ("For {t} days , {n} gets {b} {v} , and on even days {n} also gets {e} .",
                  "for i in range({t}):\n    {v} = {v} + {b}\n    if i % 2 == 0:\n        {v} = {v} + {e}"),
}
END = ("How many {v} does {n} have ?", "ans = {v}")
KINDS = sorted(CLAUSES)


def templates(n_clauses=(2, 3)) -> list[tuple[str, ...]]:
    """Every tuple of distinct clause kinds of the given lengths, in a fixed order."""
    out = []
    for k in n_clauses:
        out += list(itertools.permutations(KINDS, k))
    return out


def split_templates(held_out_frac: float, seed: int, n_clauses=(2, 3)):
    """(train templates, held-out templates): a fixed random share of the clause combinations is never
    seen in training."""
    ts = templates(n_clauses)
    rng = random.Random(seed)
    rng.shuffle(ts)
    k = max(1, int(round(held_out_frac * len(ts))))
    return sorted(ts[k:]), sorted(ts[:k])


def _numbers(rng: random.Random, kind: str) -> dict:
    return {"b": rng.randint(2, 9), "k": rng.randint(2, 3), "t": rng.randint(2, 5), "c": rng.randint(10, 40),
            "d": rng.randint(2, 9), "e": rng.randint(1, 5)}


def make_item(template: tuple[str, ...], rng: random.Random, uid: str) -> dict:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a = rng.randint(5, 30)
    q = [START[0].format(n=name, a=a, v=item)]
    prog = [START[1].format(a=a, v=item)]
    for kind in template:
        nums = _numbers(rng, kind)
        qt, pt = CLAUSES[kind]
        q.append(qt.format(n=name, v=item, **nums))
        prog.append(pt.format(v=item, **nums))
    q.append(END[0].format(n=name, v=item))
    prog.append(END[1].format(v=item))
    program = "\n".join(prog)
    scope: dict = {}
    exec(compile(program, "<gold>", "exec"), {}, scope)  # our own generated gold program, never model output
    return {"id": uid, "template": "+".join(template), "question": " ".join(q), "program": program,
            "answer": scope["ans"]}


def make_items(templates_: list, n: int, seed: int, prefix: str, exclude: set | None = None) -> list[dict]:
    """n items; an item whose question is in `exclude` (the evaluation questions) is drawn again."""
    rng = random.Random(seed)
    out: list[dict] = []
    while len(out) < n:
        it = make_item(rng.choice(templates_), rng, f"{prefix}{len(out)}")
        if not exclude or it["question"] not in exclude:
            out.append(it)
    return out


# ---- corruptions (judge training) ------------------------------------------------------------------------

_NUM = re.compile(r"(?<![A-Za-z_\d])\d+")
_OPS = {" + ": " - ", " - ": " + ", " * ": " + "}
_CMP = {" > ": " <= ", " < ": " >= ", " == ": " != ", " <= ": " > ", " >= ": " < ", " != ": " == "}


def corrupt(text: str, rng: random.Random) -> tuple[str, str] | None:
    """(corrupted text, kind) by one of the issue's four corruptions, or None when none applies:
    operator swap, wrong constant, off-by-one loop bound, negated condition."""
    options = []
    if any(op in text for op in _OPS):
        options.append("operator")
    nums = list(_NUM.finditer(text))
    if nums:
        options.append("constant")
    if "range(" in text:
        options.append("bound")
    if any(c in text for c in _CMP) and ("if " in text or "Condition" in text):
        options.append("condition")
    if not options:
        return None
    kind = rng.choice(options)
    if kind == "operator":
        ops = [(m.start(), op) for op in _OPS for m in re.finditer(re.escape(op), text)]
        pos, op = rng.choice(ops)
        out = text[:pos] + _OPS[op] + text[pos + len(op):]
    elif kind == "constant":
        m = rng.choice(nums)
        v = int(m.group())
        new = v + rng.choice([-3, -2, -1, 1, 2, 3, 5, 10])
        if new < 0 or new == v:
            new = v + 4
        out = text[:m.start()] + str(new) + text[m.end():]
    elif kind == "bound":
        m = re.search(r"range\((\d+)\)", text)
        if m is None:
            return None
        v = int(m.group(1))
        out = text[:m.start(1)] + str(v + rng.choice([-1, 1]) if v > 1 else v + 1) + text[m.end(1):]
    else:
        cmps = [(m.start(), c) for c in _CMP for m in re.finditer(re.escape(c), text)]
        pos, c = rng.choice(cmps)
        out = text[:pos] + _CMP[c] + text[pos + len(c):]
    if out == text:
        return None
    return out, kind
