"""The transfer experiment (paper: data generated with phi-1.5 fine-tunes Llama-3.2-1B and OPT-1.3B): the
same training texts, re-tokenised by a second LM's own tokenizer, fine-tune that LM as a classifier with the
same protocol, and its test accuracy is recorded under the setting `transfer_<name>`.

The second LM is loaded by Hub id (full) or local directory (tests) through the same `lm.load`. At mini the
list is empty: one tiny in-pipeline LM family only, and no CPU is spent on a second one.
"""
from __future__ import annotations

import numpy as np

from . import lm


def setting(name: str) -> str:
    return f"transfer_{name}"


def models(cfg) -> dict:
    return dict((cfg.get("transfer") or {}).get("models") or {})


def applies(cfg, method: str) -> bool:
    return bool(models(cfg)) and method in (cfg.get("transfer") or {}).get("methods", [])


def transfer_rows(cfg, examples: list[dict], test: list[dict], seed: int) -> list[dict]:
    """Per transfer LM: fine-tune it on `examples` (none: zero-shot), then test accuracy (%) on `test`."""
    mt = int(cfg["max_text_tokens"])
    f = dict(cfg["finetune"], **((cfg.get("transfer") or {}).get("finetune") or {}))
    y = np.asarray([int(t["label"]) for t in test])
    rows = []
    for name, model_id in models(cfg).items():
        model, tok = lm.load(model_id, lm.device_of(cfg))
        task = lm.Task(tok, cfg["task"]["prompt"], cfg["task"]["labels"])
        if examples:
            lm.finetune_classifier(model, task, examples, int(f["steps"]), int(f["batch"]), float(f["lr"]),
                                   int(seed), mt)
        score = lm.classify(model, task, [t["text"] for t in test], mt)
        rows.append({"setting": setting(name), "metric": "test_acc",
                     "value": float(100 * np.mean((score > 0) == (y == 1)))})
        del model
    return rows
