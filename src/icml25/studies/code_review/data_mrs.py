"""Preprocess: the pristine library must pass its own tests; mutants become fault-introducing MRs.

Each MR = one key-bug mutant + 2-6 benign edits elsewhere, as one multi-hunk diff of the library file.
The extract-temporary and add-const edits are first applied all together to the pristine library, which
must still compile and pass every check (else each is tried alone and the failing ones are dropped). The
key line is the mutated line, or for a deletion the deletion anchor (the line now standing where the
deleted lines were); a candidate whose diff does not show it there (difflib aligned the deletion
elsewhere) is skipped before it is compiled.
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


def anchor_ok(mut: M.Mutant, key: int, fd, new_lines: list[str]) -> bool:
    """The diff shows the key bug at the key line: an added line holding the mutated text, or (deletions) a
    pure deletion of exactly the mutant's lines right above the anchor line."""
    if not mut.deletion:
        return key in fd.added and mut.after in new_lines[key - 1]
    gone = mut.before.split("\n")[:-1]
    return key not in fd.added and [t for _, t in fd.deleted.get(key, [])] == gone


def _outcome(harness, cache: dict, key_prefix: str, text: str, pristine_pass: int, runs: int) -> dict:
    h = hashlib.sha256(f"{key_prefix}|{text}".encode()).hexdigest()
    if h not in cache:
        o = harness.run(text)
        cache[h] = {"compiled": o.compiled, "killed": o.killed(pristine_pass), "passed": o.passed,
                    "failed": o.failed, "crashed": o.crashed, "timed_out": o.timed_out,
                    "unstable": o.unstable, "runs": runs, "aslr_off": bool(harness.prefix)}
    return cache[h]


def _benign(res: dict) -> bool:
    return res["compiled"] and not res["killed"] and not res["unstable"]


def verified_refactors(src: bytes, outcome) -> tuple[dict, int]:
    """The extract / const edits that keep the pristine library compiling and passing (all at once first);
    returns ({function's first line: [edits]}, how many were dropped)."""
    cands = M.refactor_edits(src)
    flat = [(ln, e) for ln, es in cands.items() for e in es]
    if not flat or _benign(outcome(M.apply_edits(src, [e for _, e in flat])[0])):
        return cands, 0
    keep: dict[int, list] = {}
    for ln, e in flat:
        if _benign(outcome(M.apply_edits(src, [e])[0])):
            keep.setdefault(ln, []).append(e)
    return keep, len(flat) - sum(map(len, keep.values()))


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
        # the kill criterion is part of the key: an outcome of one run (ASLR on) is never reused
        prefix = f"{driver_sha}|runs={kill_runs}|aslr_off={bool(harness.prefix)}"
        outcome = lambda text: _outcome(harness, cache, prefix, text, s["pristine_pass"], kill_runs)
        refactors, dropped = verified_refactors(src, outcome)
        rng = random.Random(int(cfg["data_seed"]))
        cands = M.mutants(src)
        rng.shuffle(cands)
        funcs = M.function_table(src)
        per_fn: dict[str, int] = {}
        mrs, tried, misaligned = [], 0, 0
        for mut in cands:
            if len(mrs) >= int(d["n_mrs"]) or tried >= int(d["max_candidates"]):
                break
            if per_fn.get(mut.function, 0) >= int(d["max_per_function"]):
                continue
            text, key, edits = M.synthesize(src, mut, funcs, rng, tuple(d["benign_edits"]), refactors)
            new_lines = text.split("\n")
            fd = diff(lib_text.split("\n"), new_lines)
            if not anchor_ok(mut, key, fd, new_lines):
                misaligned += 1
                continue
            tried += 1
            res = outcome(text)
            if not res["killed"]:
                continue
            per_fn[mut.function] = per_fn.get(mut.function, 0) + 1
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
    meta = {"n_candidates_tried": tried, "n_misaligned": misaligned, "n_mrs": len(mrs), "splits": splits,
            "refactor_edits": {"kept": sum(map(len, refactors.values())), "dropped": dropped},
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
