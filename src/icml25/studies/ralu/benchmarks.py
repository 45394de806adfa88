"""Full-scale benchmark files -> (question, answer) rows: hendrycks MATH (numeric-answer subset) and the
evalplus releases of HumanEval+ / MBPP+.

* MATH: the hendrycks release tarball (`MATH/test/<subject>/<n>.json`, each with `problem` and `solution`);
  the answer is the last `\\boxed{...}` of the solution; the numeric subset keeps problems whose answer
  parses as a number (the paper's "MATH-np" is such a subset, 700 problems; its exact selection is not
  published, so ours is every numeric test problem, or the first `limit`).
* HumanEval+ / MBPP+: `HumanEvalPlus.jsonl.gz` / `MbppPlus.jsonl.gz` (one task per line: task_id, prompt,
  entry_point, canonical_solution, base_input, plus_input, atol). The question row holds only what the
  method may read (prompt, entry point); the tests and the canonical solution go to the answer row, which
  only the scorer reads. The original HumanEval file (no base_input; a `test` with `check`) also loads:
  its test is the base test set.
"""
from __future__ import annotations

import gzip
import json
import re
import tarfile
from pathlib import Path

from icml25.core.errors import UserError


def last_boxed(solution: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`), braces balanced; None if there is none."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", solution)]
    if not starts:
        return None
    i, depth = starts[-1], 1
    for j in range(i, len(solution)):
        depth += {"{": 1, "}": -1}.get(solution[j], 0)
        if depth == 0:
            return solution[i:j]
    return None


def numeric_answer(ans: str | None) -> str | None:
    """The answer as a plain number string when it parses as one (thousands separators, `\\!`, `$` and
    spaces removed), else None."""
    if ans is None:
        return None
    s = ans.replace("\\!", "").replace("$", "").replace(" ", "")
    s = re.sub(r"(?<=\d),(?=\d{3}(\D|$))", "", s)
    try:
        float(s)
    except ValueError:
        return None
    return s


def math_rows(tar_path: Path, name: str, limit: int | None = None) -> list[dict]:
    """MATH test problems with a numeric answer, in a fixed (sorted path) order."""
    rows = []
    with tarfile.open(tar_path) as tf:
        members = sorted((m for m in tf.getmembers() if m.isfile() and m.name.endswith(".json")
                          and "/test/" in "/" + m.name), key=lambda m: m.name)
        if not members:
            raise UserError(f"ralu: no test/*/*.json in {tar_path}")
        for m in members:
            rec = json.loads(tf.extractfile(m).read())
            ans = numeric_answer(last_boxed(rec["solution"]))
            if ans is None:
                continue
            rows.append({"id": f"{name}-{len(rows)}", "question": rec["problem"], "answer": ans,
                         "source": m.name.split("/test/", 1)[-1]})
            if limit and len(rows) >= int(limit):
                break
    return rows


def read_jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def code_rows(gz_path: Path, name: str, limit: int | None = None) -> tuple[list[dict], list[dict]]:
    """(question rows, answer rows) of an evalplus (or original HumanEval) release file."""
    qs, ans = [], []
    recs = read_jsonl_gz(gz_path)
    for rec in recs[:limit] if limit else recs:
        ep, prompt = rec["entry_point"], rec["prompt"]
        canon = rec.get("canonical_solution") or rec.get("code") or ""
        if "base_input" in rec:  # evalplus runs prompt + canonical_solution (MBPP+: a docstring + the code)
            canon = prompt + canon
        elif not re.search(rf"def\s+{re.escape(ep)}\s*\(", canon):  # original HumanEval: the body only
            canon = prompt + canon
        i = f"{name}-{len(qs)}"
        qs.append({"id": i, "question": prompt, "task": "code", "entry_point": ep, "task_id": rec["task_id"]})
        # task_id: evalplus's input restoration (MBPP+) and special oracles key on it
        tests = {"entry_point": ep, "task_id": rec["task_id"], "canonical": canon, "atol": rec.get("atol", 0)}
        if "base_input" in rec:
            tests.update(base_input=rec["base_input"], plus_input=rec.get("plus_input") or [])
        else:
            tests.update(base_input=None, plus_input=[], test=rec["test"])
        ans.append({"id": i, "answer": None, "tests": tests})
    return qs, ans
