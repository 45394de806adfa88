"""Preprocess: the pristine library must pass its own tests; mutants become fault-introducing MRs.

Each MR = one key-bug mutant + 2-6 benign edits elsewhere, as one multi-hunk diff of the library file.
An MR is kept only if its file compiles and the library's test driver then fails (a check fails, it
crashes or times out) on every one of `data.kill_runs` runs with ASLR off: the key bug is a user-visible,
reproducible failure (a mutant with undefined behaviour that fails on some runs only is dropped).
Outcomes are cached by the sha256 of the compiled text, the driver and the kill criterion (so the cache
can never be stale). Train and test MRs have disjoint key-bug functions (a function is a test function
by a hash of its name).
"""
from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from icml25.core.errors import UserError

from . import data_corpus as C
from . import data_mutants as M
from .diffing import diff


def test_functions(names, percent: int, salt: int) -> set[str]:
    """The key-bug functions whose MRs are test MRs: the first `percent` % of the functions (at least one)
    in the order of a salted hash of their names (a split fixed before any model sees an MR)."""
    order = sorted(set(names), key=lambda n: hashlib.sha1(f"{salt}:{n}".encode()).hexdigest())
    return set(order[:max(1, round(len(order) * percent / 100))])


def _cache_path(raw_dir: Path) -> Path:
    return Path(raw_dir).resolve().parents[2] / "cache" / "code_review" / "outcomes.json"


def build(cfg: dict, raw_dir: Path, out_dir: Path) -> dict:
    s = C.spec(cfg)
    if s["kind"] == "bugscpp":
        from . import data_bugscpp

        return data_bugscpp.build(cfg, raw_dir, out_dir)
    src_dir = C.extract(cfg, raw_dir, out_dir / "corpus")
    lib_text = (src_dir / s["lib"]).read_text()
    src = lib_text.encode()
    d = cfg["data"]
    kill_runs = int(d.get("kill_runs", 3))
    harness = C.Harness(src_dir, s, float(d.get("test_timeout", 20)), kill_runs)
    try:
        pristine = harness.run(lib_text)
        if (not pristine.compiled or pristine.failed or pristine.unstable
                or pristine.passed != s["pristine_pass"]):
            raise UserError(f"code_review: the pristine {s['lib']} does not pass its tests ({pristine})")
        cache_file = _cache_path(raw_dir)
        cache = json.loads(cache_file.read_text()) if cache_file.exists() else {}
        driver_sha = C.sha256(src_dir / s["driver"])
        rng = random.Random(int(cfg["data_seed"]))
        cands = M.mutants(src)
        rng.shuffle(cands)
        funcs = M.function_table(src)
        per_fn: dict[str, int] = {}
        mrs, tried = [], 0
        for mut in cands:
            if len(mrs) >= int(d["n_mrs"]) or tried >= int(d["max_candidates"]):
                break
            if per_fn.get(mut.function, 0) >= int(d["max_per_function"]):
                continue
            text, key, edits = M.synthesize(src, mut, funcs, rng, tuple(d["benign_edits"]))
            # the kill criterion is part of the key: an outcome of one run (ASLR on) is never reused
            h = hashlib.sha256(f"{driver_sha}|runs={kill_runs}|aslr_off={bool(harness.prefix)}|{text}".encode()).hexdigest()
            tried += 1
            if h not in cache:
                o = harness.run(text)
                cache[h] = {"compiled": o.compiled, "killed": o.killed(s["pristine_pass"]), "passed": o.passed,
                            "failed": o.failed, "crashed": o.crashed, "timed_out": o.timed_out,
                            "unstable": o.unstable, "runs": kill_runs, "aslr_off": bool(harness.prefix)}
            res = cache[h]
            if not res["killed"]:
                continue
            per_fn[mut.function] = per_fn.get(mut.function, 0) + 1
            new_lines = text.split("\n")
            fd = diff(lib_text.split("\n"), new_lines)
            mid = f"mr{len(mrs):03d}"
            (out_dir / "mrs").mkdir(parents=True, exist_ok=True)
            (out_dir / "mrs" / f"{mid}.cpp").write_text(text)
            mrs.append({"id": mid, "file": s["lib"], "function": mut.function, "op": mut.op,
                        "category": mut.category, "key_line": key, "before": mut.before, "after": mut.after,
                        "edits": edits, "diff": fd.to_json(), "outcome": res})
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        cache_file.write_text(json.dumps(cache))
    finally:
        harness.close()
    test_fns = test_functions([m["function"] for m in mrs], int(d["test_percent"]), int(cfg["data_seed"]))
    for m in mrs:
        m["split"] = "test" if m["function"] in test_fns else "train"
    splits = {k: sum(m["split"] == k for m in mrs) for k in ("train", "test")}
    if not splits["train"] or not splits["test"]:
        raise UserError(f"code_review: need train and test MRs, got {splits}; raise data.n_mrs or max_candidates")
    meta = {"n_candidates_tried": tried, "n_mrs": len(mrs), "splits": splits,
            "pristine": {"passed": pristine.passed, "failed": pristine.failed}, "library": s["lib"],
            "test_functions": sorted({m["function"] for m in mrs if m["split"] == "test"})}
    (out_dir / "mrs.json").write_text(json.dumps(mrs, indent=1))
    (out_dir / "corpus_meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def load(data_dir: Path, split: str | None = None) -> list[dict]:
    from .diffing import FileDiff

    out = []
    for m in json.loads((Path(data_dir) / "mrs.json").read_text()):
        if split is None or m["split"] == split:
            m = dict(m)
            m["text"] = (Path(data_dir) / "mrs" / f"{m['id']}.cpp").read_text()
            m["fd"] = FileDiff.from_json(m["diff"])
            out.append(m)
    return out
