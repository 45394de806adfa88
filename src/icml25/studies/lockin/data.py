"""Data of the lock-in study, generated from seeds (the paper's simulations start from synthetic beliefs too).

* populations: each user's initial belief in [0, 1] on every topic, bimodal (two Beta modes, a random
  split per topic), one population per run seed.
* pretraining corpus of the base "AI": templated opinion dialogues with uniformly random levels, so the
  base model speaks the template language without holding any opinion.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

LEVEL_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
QUESTION = "question : what do you think about {topic} ? answer :"
OPINIONS = [
    "on {topic} i would say {level} out of ten",
    "my view of {topic} is {level} out of ten",
    "i rate {topic} {level} out of ten",
    "{topic} ? i think {level} out of ten",
]


def stated_level(belief) -> np.ndarray:
    """The level (0..10) a user states for a belief in [0, 1]: nearest tenth."""
    return np.rint(np.clip(np.asarray(belief, dtype=float), 0.0, 1.0) * 10).astype(int)


def dialogue(topic: str, level: int, template: int) -> tuple[str, str]:
    """(prompt, answer) of one training item: the question about a topic and a user's opinion sentence."""
    return QUESTION.format(topic=topic), OPINIONS[template].format(topic=topic, level=LEVEL_WORDS[level])


def population(n_users: int, n_topics: int, rng: np.random.Generator, spec: dict) -> np.ndarray:
    """Bimodal initial beliefs: per topic a share w ~ U(w_lo, w_hi) of users near `low`, the rest near 1-low."""
    conc = float(spec.get("concentration", 12.0))
    low = float(spec.get("low_mode", 0.2))
    w_lo, w_hi = spec.get("low_share", [0.3, 0.7])
    out = np.empty((n_users, n_topics))
    for k in range(n_topics):
        w = rng.uniform(w_lo, w_hi)
        is_low = rng.random(n_users) < w
        lo = rng.beta(low * conc, (1 - low) * conc, n_users)
        hi = rng.beta((1 - low) * conc, low * conc, n_users)
        out[:, k] = np.where(is_low, lo, hi)
    return out


def pretrain_corpus(topics: list[str], n: int, rng: np.random.Generator) -> list[tuple[str, str]]:
    """Opinion-free language data: uniformly random topic, level and template."""
    items = []
    for _ in range(n):
        items.append(dialogue(topics[rng.integers(len(topics))], int(rng.integers(11)), int(rng.integers(len(OPINIONS)))))
    return items


def population_for(data_cfg: dict, seed: int) -> np.ndarray:
    """The initial population of run seed `seed` (a pure function of the data config and the seed)."""
    rng = np.random.default_rng([int(data_cfg["data_seed"]), int(seed)])
    return population(int(data_cfg["n_users"]), len(data_cfg["topics"]), rng, data_cfg.get("beliefs", {}))


def write(cfg: dict, out_dir: Path) -> None:
    d = cfg["data"]
    topics = list(d["topics"])
    pops = {f"seed{s}": population_for(d, s) for s in cfg["seeds"]}  # a record; train regenerates by seed
    np.savez(out_dir / "populations.npz", **pops)
    rng = np.random.default_rng([int(d["data_seed"]), 10**6])
    corpus = pretrain_corpus(topics, int(d["pretrain_items"]), rng)
    (out_dir / "pretrain.jsonl").write_text("".join(json.dumps({"prompt": p, "answer": a}) + "\n" for p, a in corpus))
    (out_dir / "spec.json").write_text(json.dumps({"topics": topics, "levels": LEVEL_WORDS, "question": QUESTION,
                                                   "opinions": OPINIONS}, indent=1))


def load_pretrain(data_dir: Path) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in (data_dir / "pretrain.jsonl").read_text().splitlines() if line]
    return [(r["prompt"], r["answer"]) for r in rows]
