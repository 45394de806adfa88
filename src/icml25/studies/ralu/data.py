"""Evaluation and training data.

Evaluation sets (`cfg['data']['eval_sets']`, each a `source`):
* `gsm_lite`: generated here (gsm_lite.py), new numbers; `held_out: true` draws only templates never seen
  in training.
* `gsm_symbolic`: `reasoning_gym.create_dataset('gsm_symbolic', size, seed)` (GSM8K-test-derived templates,
  shipped in the reasoning-gym wheel; offline).
* `gsm8k`: the GSM8K test split (openai/grade-school-math JSONL, full scale; `#### n` answers).
* `math_tar` / `evalplus` (full scale): hendrycks MATH, numeric subset; HumanEval+ / MBPP+ (benchmarks.py).
Training text (mini/smoke): gsm-lite items from the training templates.

preprocess writes `questions.jsonl` (what the methods see: id, set, question; code tasks also `task` and
`entry_point`) apart from `answers.jsonl` (what only the scorer sees: the answer, or a code task's tests and
canonical solution), so no method can read a gold answer or a test.
"""
from __future__ import annotations

import json
from pathlib import Path

from icml25.core.errors import UserError

from . import benchmarks, gsm_lite


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    from icml25.core.io import write_text

    write_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in Path(path).read_text().splitlines() if ln.strip()]


def _splits(cfg):
    d = cfg["data"]
    # n_clauses: the chain lengths of the templates (mini: 1-2 clauses, issue 57; the generator's default 2-3)
    return gsm_lite.split_templates(float(d["held_out_frac"]), int(d["template_seed"]),
                                    tuple(int(k) for k in d.get("n_clauses", (2, 3))))


def download(cfg: dict, raw_dir: Path) -> None:
    from icml25.core.download import fetch

    raw_dir.mkdir(parents=True, exist_ok=True)
    d = cfg["data"]
    train_t, held_t = _splits(cfg)
    eval_q: set = set()  # every gsm-lite evaluation question: the training items are drawn disjoint from them
    for name in d["sets"]:
        spec = d["eval_sets"][name]
        src = spec["source"]
        if src == "gsm_lite":
            ts = held_t if spec.get("held_out") else train_t
            rows = gsm_lite.make_items(ts, int(spec["n"]), int(spec["seed"]), f"{name}-")
            eval_q |= {r["question"] for r in rows}
        elif src == "gsm_symbolic":
            try:
                import reasoning_gym
            except ImportError as e:
                raise UserError("ralu: the gsm_symbolic set needs reasoning-gym (pip install reasoning-gym==0.1.25)") from e
            ds = reasoning_gym.create_dataset("gsm_symbolic", size=int(spec["n"]), seed=int(spec["seed"]))
            rows = [{"id": f"{name}-{i}", "question": x["question"], "answer": x["answer"]} for i, x in enumerate(ds)]
        elif src == "url_jsonl":
            fetch(spec["url"], raw_dir / f"{name}.src.jsonl", spec.get("sha256"))
            continue
        elif src == "math_tar":  # hendrycks MATH release tarball
            fetch(spec["url"], raw_dir / f"{name}.src.tar", spec.get("sha256"))
            continue
        elif src == "evalplus":  # HumanEvalPlus / MbppPlus release (.jsonl.gz)
            fetch(spec["url"], raw_dir / f"{name}.src.jsonl.gz", spec.get("sha256"))
            continue
        else:
            raise UserError(f"ralu: unknown eval-set source {src!r} "
                            "(gsm_lite | gsm_symbolic | url_jsonl | math_tar | evalplus)")
        _write_jsonl(raw_dir / f"{name}.jsonl", rows)
    if int(d.get("n_train", 0)) > 0:
        # short clause chains over small numbers repeat: a training item whose question is an evaluation
        # question is dropped (and replaced), so no test question is ever trained on
        _write_jsonl(raw_dir / "train_gsm_lite.jsonl",
                     gsm_lite.make_items(train_t, int(d["n_train"]), int(d["seed"]), "train", exclude=eval_q))


def gsm8k_answer(text: str) -> str:
    """The number after GSM8K's `####` marker, without thousands separators."""
    if "####" not in text:
        raise UserError(f"ralu: GSM8K answer without '####': {text[-80:]!r}")
    return text.split("####")[-1].strip().replace(",", "")


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    qs, ans = [], []
    for name in cfg["data"]["sets"]:
        spec = cfg["data"]["eval_sets"][name]
        if spec["source"] == "url_jsonl":
            src = read_jsonl(raw_dir / f"{name}.src.jsonl")
            limit = spec.get("limit")
            rows = [{"id": f"{name}-{i}", "question": r["question"], "answer": gsm8k_answer(r["answer"])}
                    for i, r in enumerate(src[:limit] if limit else src)]
        elif spec["source"] == "math_tar":
            rows = benchmarks.math_rows(raw_dir / f"{name}.src.tar", name, spec.get("limit"))
        elif spec["source"] == "evalplus":
            # code tasks: the question row carries the prompt and entry point, the answer row the tests
            cq, ca = benchmarks.code_rows(raw_dir / f"{name}.src.jsonl.gz", name, spec.get("limit"))
            qs += [{**q, "set": name} for q in cq]
            ans += [{**a, "set": name} for a in ca]
            continue
        else:
            rows = read_jsonl(raw_dir / f"{name}.jsonl")
        for r in rows:
            qs.append({"id": r["id"], "set": name, "question": r["question"]})
            ans.append({"id": r["id"], "set": name, "answer": r["answer"]})
    _write_jsonl(out_dir / "questions.jsonl", qs)
    _write_jsonl(out_dir / "answers.jsonl", ans)
    train = raw_dir / "train_gsm_lite.jsonl"
    if train.exists():
        _write_jsonl(out_dir / "train.jsonl", read_jsonl(train))
