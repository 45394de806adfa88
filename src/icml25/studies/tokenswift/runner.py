"""One (method, seed) job: decode the seed's prompt in every mode (greedy, sampled) and measure.

Methods (all on the same engine, the same prompt and the same position-indexed random stream):
  ar                    autoregressive decoding with the KV cache
  tokenswift            heads + partial-KV draft + tree + n-gram reuse (k) + contextual penalty
  tokenswift_k0         the n-gram ablation: k = 0
  tokenswift_nopenalty  the penalty ablation: theta = 1 (its text is the AR text without a penalty)
  medusa                Medusa*: heads, full-KV draft, no n-gram reuse
  prompt_lookup         n-gram-only speculation: one chain of 4 tokens after the latest match of the
                        last 1-3 tokens, no draft forward
  tokenswift_official   the official sampling (one target sample per path) and committed-only penalty
"""
from __future__ import annotations

import json
from pathlib import Path

from .decoding import SpecConfig, autoregressive, speculative
from .sampling import SampleArgs

SPEC = {
    "tokenswift": {},
    "tokenswift_k0": {"ngram_k": 0},
    "tokenswift_nopenalty": {"penalty": 1.0},
    "medusa": {"draft_kv": "full", "ngram_k": 0},
    "prompt_lookup": {"prompt_lookup": True, "ngram_k": 0},
    "tokenswift_official": {"sampling": "per_path", "penalty_context": "committed"},
}


def fingerprint(tokens) -> float:
    """A polynomial hash mod 2^31 - 1 (exact as a float): equal outputs have equal fingerprints."""
    h = 0
    for t in tokens:
        h = (h * 1_000_003 + int(t) + 1) % 2147483647
    return float(h)


def distinct(tokens, n: int) -> float:
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return len(set(grams)) / max(1, len(grams))


def roofline(res, prompt_len: int, gen_len: int, r: dict, draft_kv: str | None, budget: int) -> float:
    """Modelled GPU speedup over AR: a forward of T tokens at context c costs (W + kv c) max(1, T/flat)
    (weights and KV read once; compute-bound beyond `flat` tokens). AR: one 1-token forward per token."""
    W, kv, flat = float(r["weight_bytes"]), float(r["kv_bytes_per_token"]), float(r["flat_tokens"])
    cost = lambda c, T: (W + kv * c) * max(1.0, T / flat)  # noqa: E731
    ar = sum(cost(prompt_len + i, 1) for i in range(gen_len))
    spec = 0.0
    for _, _, T, n in res.trace:
        if draft_kv == "partial":
            spec += cost(min(n, budget) + 1, 1)
        elif draft_kv == "full":
            spec += cost(n + 1, 1)
        spec += cost(n + T, T)
    # the speculative run may overshoot gen_len: charge per produced token
    return (ar / gen_len) / (spec / max(1, res.produced))


def kv_check(engine, prompt, res) -> float:
    """max |committed KV row - fresh full forward's row| over the whole sequence and every layer."""
    import torch

    seq = list(prompt) + res.tokens
    n = min(res.cache.n, len(seq))
    _, ks, vs = engine.forward(torch.tensor(seq[:n]), torch.arange(n))
    err = 0.0
    for i in range(engine.L):
        err = max(err, float((res.cache.k[i][:, :n] - ks[i]).abs().max()),
                  float((res.cache.v[i][:, :n] - vs[i]).abs().max()))
    return err


def run(cfg: dict, method: str, seed: int, data_dir: Path, base_dir: Path, run_dir: Path) -> dict:
    import torch

    from . import base
    from .data import prompt_for

    engine, heads = base.load(cfg, base_dir)
    d = cfg["decode"]
    prompt = prompt_for(data_dir, seed)
    rows, curves, saved = [], [], {}
    for mode in (d.get("only_modes") or {}).get(method, d["modes"]):
        G = int(d["gen_len"][mode])
        a = SampleArgs(greedy=(mode == "greedy"), temperature=float(d["temperature"]),
                       penalty=float(SPEC.get(method, {}).get("penalty", d["penalty"])),
                       window=int(d["window"]), min_p=float(d["min_p"]), seed=int(seed))
        if method == "ar":
            res = autoregressive(engine, prompt, G, a)
            draft_kv = None
        else:
            o = SPEC[method]
            sc = SpecConfig(draft_kv=o.get("draft_kv", "partial"), budget=int(d["budget"]), sink=int(d["sink"]),
                            topk=int(d["topk"]), ngram_k=int(o.get("ngram_k", d["ngram_k"])),
                            ngram_n=int(d["ngram_n"]), sampling=o.get("sampling", "per_node"),
                            penalty_context=o.get("penalty_context", "per_path"))
            res = speculative(engine, heads, prompt, G, a, sc, prompt_lookup=bool(o.get("prompt_lookup")))
            draft_kv = None if o.get("prompt_lookup") else sc.draft_kv
        steps = max(1, res.steps) if method != "ar" else max(1, res.full_forwards)
        m = {
            "gen_tokens": len(res.tokens), "accounting_gap": res.produced - (res.accepted + res.resampled),
            "full_forwards": res.full_forwards, "draft_forwards": res.draft_forwards,
            "forward_ratio": (G - 1) / max(1, res.full_forwards),
            "tokens_per_step": (res.produced - 1) / steps,
            "fingerprint": fingerprint(res.tokens),
            "wall_ms_per_token": 1000 * res.wall / max(1, res.produced),
            "kv_max_err": kv_check(engine, prompt, res),
        }
        for n in (1, 2, 3, 4):
            m[f"distinct_{n}"] = distinct(res.tokens, n)
        m["distinct_mean"] = sum(m[f"distinct_{n}"] for n in (1, 2, 3, 4)) / 4
        if method != "ar":
            m["alpha"] = res.accepted / max(1, res.draft_slots)
            m["tree_nodes"] = sum(t[2] for t in res.trace) / max(1, len(res.trace))
            m["modelled_speedup"] = roofline(res, len(prompt), G, cfg["roofline"], draft_kv, int(d["budget"]))
            slots = res.draft_slots / max(1, res.steps)
            q = [[0, 0] for _ in range(4)]
            cum_a = cum_s = 0
            every, nxt = int(d["record_every"]), int(d["record_every"])
            for gen, acc, _, _ in res.trace:
                b = min(3, int(4 * gen / G))
                q[b][0] += acc
                q[b][1] += slots
                cum_a += acc
                cum_s += slots
                if gen + acc + 1 >= nxt:
                    curves.append({"setting": mode, "metric": "alpha_cum", "step": nxt, "value": cum_a / cum_s})
                    nxt += every
            for b in range(4):
                m[f"alpha_q{b + 1}"] = q[b][0] / max(1, q[b][1])
        else:
            m["modelled_speedup"] = 1.0
        rows += [{"setting": mode, "metric": k, "value": float(v)} for k, v in m.items()]
        saved[mode] = res.tokens
    (run_dir / "tokens.json").write_text(json.dumps({"prompt": prompt, "outputs": saved}))
    return {"metrics": rows, "curves": curves}
