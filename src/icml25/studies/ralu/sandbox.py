"""Execute generated programs in a separate, isolated Python process with time and memory limits.

One worker process per batch (`python -I -S`, no site packages, empty environment, its own temp dir):
each program runs in a fresh namespace under a per-program CPU-time alarm; its `ans` (numbers as floats,
anything else as repr) or the error is returned as JSON. The parent kills the worker after an overall
timeout. Generated code never runs in the pipeline's own process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

_WORKER = r"""
import io, json, math, resource, signal, sys
resource.setrlimit(resource.RLIMIT_AS, (MEM, MEM))
progs, per = json.loads(sys.stdin.read()), PER
def _alarm(*a):
    raise TimeoutError("time limit")
signal.signal(signal.SIGALRM, _alarm)
out, real = [], sys.stdout
for p in progs:
    sys.stdout = io.StringIO()
    ns = {"__name__": "__sandbox__"}
    try:
        signal.setitimer(signal.ITIMER_REAL, per)
        exec(compile(p, "<program>", "exec"), ns)
        signal.setitimer(signal.ITIMER_REAL, 0)
        a = ns.get("ans", None)
        if isinstance(a, bool) or a is None:
            out.append([None if a is None else repr(a), None if a is not None else "no ans"])
        elif isinstance(a, (int, float)) and math.isfinite(float(a)):
            out.append([float(a), None])
        else:
            out.append([repr(a)[:200], None])
    except BaseException as e:
        signal.setitimer(signal.ITIMER_REAL, 0)
        out.append([None, type(e).__name__])
sys.stdout = real
print(json.dumps(out))
"""


def run_programs(programs: list[str], per_program_s: float = 2.0, mem_mb: int = 512,
                 chunk: int = 200) -> list[tuple[object, str | None]]:
    """[(ans, error)] per program, in order."""
    out: list = []
    for i in range(0, len(programs), chunk):
        out += _run_chunk(programs[i:i + chunk], per_program_s, mem_mb)
    return out


def _run_chunk(progs, per, mem_mb):
    code = _WORKER.replace("MEM", str(int(mem_mb) * 2**20)).replace("PER", repr(float(per)))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            res = subprocess.run([sys.executable, "-I", "-S", "-c", code], input=json.dumps(progs),
                                 capture_output=True, text=True, cwd=tmp, env={"PATH": os.defpath},
                                 timeout=per * len(progs) + 10)
        except subprocess.TimeoutExpired:
            return [(None, "worker timeout")] * len(progs)
    try:
        return [tuple(x) for x in json.loads(res.stdout.strip().splitlines()[-1])]
    except (ValueError, IndexError):
        if len(progs) == 1:
            return [(None, "worker crashed")]
        mid = len(progs) // 2  # one program killed the worker (e.g. memory): isolate it
        return _run_chunk(progs[:mid], per, mem_mb) + _run_chunk(progs[mid:], per, mem_mb)


def same_answer(pred, gold, tol: float = 1e-4) -> bool:
    if pred is None or gold is None:
        return False
    try:
        p, g = float(pred), float(gold)
    except (TypeError, ValueError):
        return str(pred).strip() == str(gold).strip()
    return abs(p - g) <= tol * max(1.0, abs(g))
