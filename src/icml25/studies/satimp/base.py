"""fit_base: the model to unlearn. Mini/smoke: a tiny LlamaForCausalLM trained from scratch on every QA and
world fact until it has memorised them. Full: a Hub model (Phi-1.5, Llama-2-7b-chat) fine-tuned on TOFU
`full` as the paper does. Either way it is saved with save_pretrained and every job loads it with
AutoModelForCausalLM.from_pretrained."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import lm


def fit_base(cfg: dict, data_dir: Path, out_dir: Path) -> None:
    lm.quiet_hf()
    import torch

    mcfg, prompt = cfg["model"], cfg["prompt"]
    splits = json.loads((Path(data_dir) / "splits.json").read_text())
    seed = int(cfg.get("base_seed", 0))
    torch.manual_seed(seed)
    if mcfg.get("pretrained"):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(mcfg["pretrained"])
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        dtype = getattr(torch, mcfg.get("dtype", "bfloat16"))
        model = AutoModelForCausalLM.from_pretrained(mcfg["pretrained"], dtype=dtype).to(lm.device())
    else:
        tok = lm.build_word_tokenizer(lm.all_texts(splits, prompt))
        model = lm.new_llama(tok, mcfg).to(lm.device())
    enc = lm.encode(tok, splits["base_train"], prompt)
    log = lm.fit(model, enc, int(mcfg["steps"]), int(mcfg["batch_size"]), float(mcfg["lr"]), seed,
                 warmup=int(mcfg.get("warmup", 0)), weight_decay=float(mcfg.get("weight_decay", 0.0)))
    path = Path(out_dir) / "model"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    # the original model's ES on every split (the calibration targets) and p of fact vs template tokens
    es = {}
    for name in list(cfg["data"]["forget_splits"]) + ["val_forget", "retain_val", "retain_eval", "world"]:
        es[name] = float(lm.es_scores(model, lm.encode(tok, splits[name], prompt)).mean())
        if name not in ("retain_val", "retain_eval", "world"):
            es[name + ":para"] = float(lm.es_scores(model, lm.encode(tok, splits[name], prompt, "para_question")).mean())
    es["base_train"] = float(lm.es_scores(model, enc).mean())
    p, imp = lm.token_probs(model, lm.encode(tok, splits[cfg["data"]["forget_splits"][0]], prompt))
    rec = {"model_path": "model", "dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
           "n_params": int(sum(x.numel() for x in model.parameters())), "vocab": len(tok),
           "fit_log": log, "es_original": es,
           "p_fact": float(p[imp > 0].mean()) if (imp > 0).any() else None,
           "p_template": float(p[imp == 0].mean()),
           "p_fact_median": float(np.median(p[imp > 0])) if (imp > 0).any() else None,
           "p_template_median": float(np.median(p[imp == 0]))}
    if str(cfg["unlearn"].get("lr_select", "per_method")) == "shared":
        # the one unlearning lr of every method (official protocol), chosen by GA on the validation authors
        from .unlearn import shared_lr_for_base

        rec["unlearn_lr"] = shared_lr_for_base(model, tok, splits, cfg, es)
    (Path(out_dir) / "base.json").write_text(json.dumps(rec, indent=1))
