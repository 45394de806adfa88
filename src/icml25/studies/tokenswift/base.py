"""fit_base: the target LM and its TokenSwift heads, shared by every method.

mini/smoke: a tiny GQA `LlamaForCausalLM` (RoPE, long max positions) trained from scratch on the corpus,
saved with `save_pretrained`; the heads are then trained on it with the backbone frozen (through our own
engine, loaded from the saved safetensors) and saved as `heads.safetensors`.
full: nothing is trained: `base.json` names the checkpoint (a released TokenSwift model carries its heads
as `model.medusa_layers.*`), loaded by the same engine loader.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np


def fit_base(cfg: dict, data_dir: Path, out_dir: Path) -> None:
    m = cfg["model"]
    if m.get("pretrained"):
        (out_dir / "base.json").write_text(json.dumps({"model": m["pretrained"], "heads": m.get("heads")}))
        return
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from .engine import Engine
    from .heads import train_heads

    seed = int(cfg.get("base_seed", 0))
    torch.manual_seed(seed)
    toks = torch.from_numpy(np.load(Path(data_dir) / "train_tokens.npy").astype(np.int64))
    vocab = json.loads((Path(data_dir) / "data.json").read_text())["vocab"]
    conf = LlamaConfig(vocab_size=vocab, hidden_size=m["hidden"], num_hidden_layers=m["layers"],
                       num_attention_heads=m["heads"], num_key_value_heads=m["kv_heads"],
                       intermediate_size=m["ffn"], max_position_embeddings=m["max_positions"],
                       rope_theta=float(m["rope_theta"]), tie_word_embeddings=False)
    model = LlamaForCausalLM(conf)
    t = m["train"]
    opt = torch.optim.AdamW(model.parameters(), lr=float(t["lr"]), weight_decay=0.1, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(seed)
    steps, warm, B, S = int(t["steps"]), int(t["warmup"]), int(t["batch"]), int(t["seq_len"])
    curve = []
    model.train()
    for step in range(steps):
        lr = float(t["lr"]) * ((step + 1) / warm if step < warm else
                               0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm))))
        for pg in opt.param_groups:
            pg["lr"] = lr
        starts = torch.randint(0, len(toks) - S - 1, (B,), generator=g)
        x = torch.stack([toks[s:s + S] for s in starts.tolist()])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 10 == 0 or step == steps - 1:
            curve.append({"step": step, "loss": float(loss.detach())})
    model.eval()
    model.save_pretrained(str(out_dir / "model"))
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(str(Path(data_dir) / "tokenizer")).save_pretrained(str(out_dir / "model"))

    engine = Engine.from_pretrained(out_dir / "model")
    h = cfg["heads"]
    heads, hcurve = train_heads(engine, toks, int(h["n_heads"]), int(h["steps"]), int(h["batch"]),
                                int(h["seq_len"]), float(h["lr"]), int(h["warmup"]), float(h["weight_decay"]),
                                seed)
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in heads.state_dict().items()}, str(out_dir / "heads.safetensors"))
    (out_dir / "base.json").write_text(json.dumps({"model": str((out_dir / "model").name), "heads": "heads.safetensors",
                                                   "lm_curve": curve, "heads_curve": hcurve,
                                                   "n_params": sum(p.numel() for p in model.parameters())}))


def load(cfg: dict, base_dir: Path):
    """(engine, heads) from the base directory (mini) or the named checkpoint (full)."""
    import torch

    from .engine import Engine, load_heads

    info = json.loads((Path(base_dir) / "base.json").read_text())
    m = cfg["model"]
    if m.get("pretrained"):
        path = Path(info["model"])
        if not path.exists():
            from huggingface_hub import snapshot_download

            path = Path(snapshot_download(info["model"], allow_patterns=["*.json", "*.safetensors"]))
        from icml25.core.hf import device

        dtype = getattr(torch, m.get("dtype", "float32"))
        engine = Engine.from_pretrained(path, dtype=dtype, device=device())
        heads_path = (path / info["heads"]) if info.get("heads") else None
    else:
        engine = Engine.from_pretrained(Path(base_dir) / info["model"])
        heads_path = Path(base_dir) / info["heads"]
    return engine, load_heads(engine, heads_path, int(cfg["heads"]["n_heads"]))
