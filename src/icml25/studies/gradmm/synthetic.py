"""Candidate sets: the LM-prompted baseline, the label-consistency filter and top-n selection (official
filtering.py), and the privacy sanity check (longest run of tokens shared with a real example)."""
from __future__ import annotations

import numpy as np


def prompted_candidates(model, task, examples: list[dict], label: int, n: int, k_shot: int, max_tokens: int,
                        temperature: float, top_k: int, generator, banned=None) -> list[list[int]]:
    """LM-prompted synthetic text (few-shot generation): the prompt is k_shot real examples of the class in
    the task format ("<text> It was great" + eos), then the LM samples a new text until eos / max_tokens
    (HF `generate`, all n candidates in one left-padded batch). The label word is in the prompt
    (label-prompted sampling: this is the baseline, not GRADMM)."""
    import torch

    pool = [e for e in examples if int(e["label"]) == label]
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
    rng = np.random.default_rng(seed)
    word = task.label_ids[label]
    ctx = getattr(model.config, "n_positions", None) or getattr(model.config, "max_position_embeddings")
    prompts = []
    for _ in range(n):
        shots = rng.choice(len(pool), size=min(k_shot, len(pool)), replace=False)
        prefix = []
        for j in shots:
            prefix += task.encode(pool[j]["text"], max_tokens) + [word, task.eos]
        prompts.append([task.eos] + prefix[-(int(ctx) - max_tokens - 1):])  # keep the newest shots in context
    from .lm import pad_left

    ids, mask = pad_left(prompts, task.eos, next(model.parameters()).device)
    torch.manual_seed(seed)
    model.eval()
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=float(temperature),
                             top_k=int(top_k) or None, max_new_tokens=int(max_tokens), eos_token_id=task.eos,
                             pad_token_id=task.eos)
    res = []
    for row in out[:, ids.shape[1]:].tolist():
        row = row[: row.index(task.eos)] if task.eos in row else row
        if row:
            res.append(row)
    return res


def select(cands: list[dict], score, top_n: int, calibrate: bool) -> list[dict]:
    """Per class: drop duplicates, mark candidates the prompted LM labels consistently (score = logit
    great - logit bad of the task template; calibrated: threshold = the median score of all candidates of
    both classes, else 0), keep consistent ones first, then by `metric` (lower first; official:
    rec_loss_ids + alpha * LM loss), top_n per class. Returns the kept candidates (with 'consistent')."""
    score = np.asarray(score, dtype=float)
    thr = float(np.median(score)) if calibrate and len(score) else 0.0
    kept = []
    for label in (0, 1):
        seen, rows = set(), []
        for c, s in zip(cands, score):
            if int(c["label"]) != label or c["text"] in seen or not c["text"].strip():
                continue
            seen.add(c["text"])
            rows.append({**c, "consistent": bool((s > thr) == (label == 1)), "filter_score": float(s)})
        rows.sort(key=lambda r: (not r["consistent"], r.get("metric", 0.0)))
        kept += rows[:top_n]
    return kept


def longest_common_run(a: list[int], b: list[int]) -> int:
    """Length of the longest run of consecutive tokens that a and b share (dynamic programming)."""
    best, prev = 0, [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                if cur[j] > best:
                    best = cur[j]
        prev = cur
    return best


def max_overlap(synthetic: list[list[int]], real: list[list[int]]) -> int:
    """Max over synthetic and real sequences of the longest shared token run (= the max of
    `longest_common_run` over all pairs): the largest k such that some k-gram of a synthetic sequence is a
    k-gram of a real one, found by growing k (a shared (k+1)-gram contains a shared k-gram), with hashed
    k-gram sets instead of the pairwise dynamic programme."""
    best, k = 0, 1
    while True:
        grams = {tuple(r[i:i + k]) for r in real for i in range(len(r) - k + 1)}
        if not grams or not any(tuple(s[i:i + k]) in grams for s in synthetic for i in range(len(s) - k + 1)):
            return best
        best, k = k, k + 1
