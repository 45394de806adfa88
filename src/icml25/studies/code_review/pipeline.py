"""The review pipeline over MRs: slices -> line-aware snippets -> N reviewers -> coarse -> Top-k ->
Meta-Reviewer -> Validator; plus the training examples the reviewer LM is fine-tuned on."""
from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass

from . import filters as F
from . import lineformat
from . import reviewer_lm as R
from .slicing import FileIndex, slice_mr


@dataclass
class Snippet:
    text: str
    shown: list[int]      # new-file lines shown
    added: list[int]      # added lines among them (marked `+`)
    changed: list[int]    # added lines and deletion anchors among them (where a key bug can be)


def slices(mr: dict, algo: str, index: FileIndex | None = None) -> list[list[int]]:
    fd = mr["fd"]
    if algo == "hunk":   # the raw diff: each hunk with difflib's 3 lines of context
        return [list(range(a, b + 1)) for a, b in fd.hunks]
    index = index or FileIndex(mr["text"])
    return slice_mr(index, fd.changed, algo)   # deletion anchors seed slices like added lines


def fit_lines(lines: list[int], added: set[int], cost, budget: int) -> list[int]:
    """The slice's lines, cut to the token budget by dropping the lines farthest from a changed line
    (slices longer than the context only; the changed lines are kept first)."""
    ch = sorted(added & set(lines)) or lines[:1]
    order = sorted(lines, key=lambda ln: (min(abs(ln - c) for c in ch), ln))
    keep, used = [], 0
    for ln in order:
        c = cost(ln)
        if used + c > budget and keep:
            break
        keep.append(ln)
        used += c
    return sorted(keep)


def snippets(mr: dict, algo: str, mode: str, n_tokens, budget: int, index=None) -> list[Snippet]:
    new_lines = mr["text"].split("\n")
    fd = mr["fd"]
    added, changed = set(fd.added), set(fd.changed)

    def cost(ln):
        row = lineformat.render(new_lines, [ln], fd, mode)
        return n_tokens(row) + 1

    out = []
    for s in slices(mr, algo, index):
        shown = fit_lines(s, changed, cost, budget)
        out.append(Snippet(lineformat.render(new_lines, shown, fd, mode), shown, sorted(added & set(shown)),
                           sorted(changed & set(shown))))
    return out


# ---- training examples (train MRs only) -------------------------------------------------------

def _scores(rng, good: bool) -> tuple[int, int, int]:
    if good:
        return rng.randint(5, 7), rng.randint(5, 7), rng.randint(5, 7)
    return rng.randint(1, 4), rng.randint(2, 5), rng.randint(1, 3)


def _mark(snip: Snippet, line: int) -> str:
    return "+" if line in snip.added else " "   # a deletion anchor is an unchanged line under `-` rows


def review_target(snip: Snippet, mr: dict, rng: random.Random) -> str:
    rows = []
    if mr["key_line"] in snip.changed:
        rows.append(R.comment(mr["key_line"], _mark(snip, mr["key_line"]), mr["category"], _scores(rng, True)))
    benign = [ln for ln in snip.added if ln != mr["key_line"]]
    if benign and rng.random() < 0.5:
        rows.append(R.comment(rng.choice(benign), "+", "style", _scores(rng, False)))
    rng.shuffle(rows)
    return ("\n".join(rows) if rows else "none") + "\n<|end|>"


def training_examples(mrs: list[dict], algos, modes, n_tokens, budget, seed) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for mr in mrs:
        assert mr["split"] == "train", "the reviewer is fine-tuned on training MRs only"
        index = FileIndex(mr["text"])
        for algo in algos:
            for mode in modes:
                for snip in snippets(mr, algo, mode, n_tokens, budget, index if algo != "hunk" else None):
                    out.append((R.review_prompt(snip.text), review_target(snip, mr, rng)))
                    if mode != "inline":
                        continue
                    # validator examples: the key bug (real), a benign changed line, an unchanged line (fake)
                    cands = []
                    if mr["key_line"] in snip.changed:
                        cands.append((mr["key_line"], mr["category"], True))
                    benign = [ln for ln in snip.added if ln != mr["key_line"]]
                    if benign:
                        cands.append((rng.choice(benign), "style", False))
                    rest = [ln for ln in snip.shown if ln not in snip.changed]
                    if rest:
                        cands.append((rng.choice(rest), rng.choice(["logic", "security"]), False))
                    for ln, cat, good in cands:
                        q = _scores(rng, good)
                        mark = _mark(snip, ln)
                        out.append((R.validate_prompt(snip.text, ln, cat, mark), f"{q[0]} {q[1]} {q[2]}\n<|end|>"))
    return out


# ---- review ------------------------------------------------------------------------------------

def _seed(*parts) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode()) % (2**31)


def review(engine, mr: dict, snips: list[Snippet], n: int, temperature: float, seed: int) -> list[list[F.Comment]]:
    """Comments of each of the N reviewers (N samples of the same prompt) over the MR's snippets."""
    per = [[] for _ in range(n)]
    outs = engine.generate_batch([R.review_prompt(sn.text) for sn in snips], n=n, temperature=temperature,
                                 seed=_seed(seed, mr["id"]))
    for si, samples in enumerate(outs):
        for r, o in enumerate(samples):
            for line, cat, q1, q2, q3 in R.parse_review(o):
                per[r].append(F.Comment(line, cat, q1, q2, q3, reviewer=r, slice=si))
    return per


def stages(engine, per: list[list[F.Comment]], snips, k: int, ns, t1: int, t2: int, with_validator=True) -> dict:
    """{setting: comments} for the filter stages (reviewer 1 for all / coarse / top-k, as Table 7) and the
    meta / validator stages for each number of reviewers in ns. The validator re-scores each distinct
    candidate once (greedy), against the snippet the comment was raised on."""
    out = {"all": per[0], "coarse": F.coarse(per[0], t1, t2)}
    out["topk"] = F.top_k(out["coarse"], k)
    metas = {}
    for n in ns:
        tops = [F.top_k(F.coarse(cs, t1, t2), k) for cs in per[:n]]
        metas[n] = F.top_k(F.meta_merge(tops), k)
        out[f"n{n}|meta"] = metas[n]
    if with_validator:
        keys = sorted({(c.slice, c.line, c.category) for cs in metas.values() for c in cs})
        txt = engine.generate_batch([R.validate_prompt(snips[s].text, ln, cat, "+" if ln in snips[s].added else " ")
                                     for s, ln, cat in keys], n=1,
                                    temperature=0.0)
        scores = {key: R.parse_scores(t[0]) for key, t in zip(keys, txt)}
        for n in ns:
            out[f"n{n}|validator"] = F.validate(metas[n], lambda c: scores[(c.slice, c.line, c.category)], t1, t2)
    return out


def as_scored(mr: dict, comments: list[F.Comment], snips) -> dict:
    return {"key_line": mr["key_line"],
            "comments": [{"line": c.line, "valid": c.line in snips[c.slice].shown if snips else True}
                         for c in comments]}


_MARK_RE = re.compile(r"(^|<\|cand\|>)([ +-])(\d+)\|", re.M)


def shift_lines(prompt: str, target: str, rng: random.Random, max_line: int) -> tuple[str, str]:
    """The example with every line number (markers of the snippet, the target's comments, the validator's
    candidate) moved by one random offset, kept within 1..max_line (issue 57, our construction). The tiny
    LM otherwise memorised the key lines of the training MRs by number (train KBI 90, test KBI ~0); with the
    numbers moving, only the code can tell it which shown line to name. Training MRs only."""
    nums = [int(m[2]) for m in _MARK_RE.findall(prompt + "\n" + target)]
    if not nums:
        return prompt, target
    off = rng.randint(1 - min(nums), max(1 - min(nums), max_line - max(nums)))
    sub = lambda s: _MARK_RE.sub(lambda m: f"{m[1]}{m[2]}{int(m[3]) + off}|", s)
    return sub(prompt), sub(target)
