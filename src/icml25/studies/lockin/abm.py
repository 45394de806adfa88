"""Section 4 stand-in: the human-AI feedback loop with an in-pipeline causal LM.

Each round: every user writes a templated opinion sentence from its belief on each topic; the "AI"
(a Hugging Face causal LM, loaded with from_pretrained) is fine-tuned a few steps on that corpus
(preference learning, strength lambda1 = fine-tuning steps per round); then every user asks the AI
about every topic, samples its answer, parses the stated level and updates b <- (1 - lambda2) b + lambda2 a
(trust lambda2). Conditions: full loop; AI frozen after round 0; lambda2 = 0.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from icml25.core import hf

from . import data as D
from .diversity import belief_concepts, belief_tree, label_entropy, level_histogram_entropy, lineage_diversity

CONDITIONS = {
    "full_loop": {"retrain": True, "trust": True},
    "frozen_ai": {"retrain": False, "trust": True},
    "no_trust": {"retrain": True, "trust": False},
}


# ---- the base AI -----------------------------------------------------------------------------------

def build_tokenizer(topics: list[str]):
    """Word-level tokenizer over the template vocabulary, wrapped as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]
    text = " ".join([D.QUESTION, *D.OPINIONS, *D.LEVEL_WORDS]).replace("{topic}", " ").replace("{level}", " ")
    vocab_words = sorted((set(text.split()) | set(topics)) - set(specials))
    vocab = {w: i for i, w in enumerate(specials + vocab_words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="[BOS]", eos_token="[EOS]",
                                   pad_token="[PAD]", unk_token="[UNK]")


def create_base(ai_cfg: dict, topics: list[str], corpus, out_dir: Path, seed: int) -> dict:
    """Train the tiny base LM on opinion-free template data and save it (save_pretrained), or, when the
    config names a pretrained model (full scale), record its path. Returns the base record."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if ai_cfg.get("pretrained"):
        rec = {"model_path": ai_cfg["pretrained"], "chat": bool(ai_cfg.get("chat", True)), "dtype": ai_cfg.get("dtype")}
        (out_dir / "base.json").write_text(json.dumps(rec))
        return rec
    hf.quiet()
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    tok = build_tokenizer(topics)
    cfg = GPT2Config(vocab_size=len(tok), n_positions=int(ai_cfg.get("n_positions", 32)),
                     n_embd=int(ai_cfg["n_embd"]), n_layer=int(ai_cfg["n_layer"]), n_head=int(ai_cfg["n_head"]),
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model = GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=float(ai_cfg["pretrain_lr"]))
    rng = np.random.default_rng(seed)
    losses = finetune(model, tok, corpus, int(ai_cfg["pretrain_steps"]), int(ai_cfg["batch_size"]), opt, rng)
    path = out_dir / "model"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    rec = {"model_path": "model", "chat": False, "pretrain_loss_first": losses[0],
           "pretrain_loss_last": float(np.mean(losses[-10:])), "n_params": sum(p.numel() for p in model.parameters())}
    (out_dir / "base.json").write_text(json.dumps(rec))
    return rec


def load_ai(base_dir: Path):
    """(model, tokenizer, record) from the base stage through AutoModelForCausalLM/AutoTokenizer.from_pretrained."""
    hf.quiet()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rec = json.loads((base_dir / "base.json").read_text())
    local = Path(base_dir) / rec["model_path"]
    path = str(local) if local.exists() else rec["model_path"]  # a model saved by the base stage, or a path/hub id
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    dtype = rec.get("dtype")  # e.g. bfloat16 for an 8B model at full scale, as the paper's GPU runs
    kwargs = {"dtype": getattr(__import__("torch"), dtype)} if dtype else {}
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs).to(hf.device())
    return model, tok, rec


def with_lora(model, lora: dict | None):
    """Wrap the AI in LoRA adapters (peft) when the config asks for them: full fine-tuning of an 8B model
    each round does not fit one GPU, so the full scale's preference learning updates low-rank adapters
    only. B starts at zero, so the wrapped model starts exactly as the base model."""
    if not lora:
        return model
    from peft import LoraConfig, get_peft_model

    r = int(lora["r"])
    cfg = LoraConfig(r=r, lora_alpha=int(lora.get("alpha", 2 * r)), lora_dropout=float(lora.get("dropout", 0.0)),
                     target_modules=list(lora["target_modules"]), task_type="CAUSAL_LM")
    return get_peft_model(model, cfg)


# ---- fine-tuning and sampling ----------------------------------------------------------------------

def _prompt_text(tok, prompt: str, chat: bool) -> str:
    if chat and getattr(tok, "chat_template", None):
        msg = [{"role": "user", "content": prompt.replace("question :", "").replace("answer :", "").strip()
                + " Reply with one sentence that rates it from zero to ten."}]
        return tok.apply_chat_template(msg, tokenize=False, add_generation_prompt=True)
    return f"{tok.bos_token} {prompt}" if tok.bos_token else prompt


def _encode(tok, items, chat: bool):
    """Token ids and labels (prompt tokens masked with -100) of (prompt, answer) items, right-padded."""
    import torch

    seqs, labs = [], []
    for prompt, answer in items:
        p = tok(_prompt_text(tok, prompt, chat), add_special_tokens=False)["input_ids"]
        a = tok(" " + answer + (f" {tok.eos_token}" if tok.eos_token else ""), add_special_tokens=False)["input_ids"]
        seqs.append(p + a)
        labs.append([-100] * len(p) + a)
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), tok.pad_token_id, dtype=torch.long)
    labels = torch.full((len(seqs), n), -100, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, (s, l) in enumerate(zip(seqs, labs)):
        ids[i, : len(s)] = torch.tensor(s)
        labels[i, : len(l)] = torch.tensor(l)
        mask[i, : len(s)] = 1
    return ids, labels, mask


def finetune(model, tok, items, steps: int, batch_size: int, opt, rng: np.random.Generator, chat: bool = False) -> list[float]:
    """`steps` AdamW steps of next-token loss on the answers, minibatches drawn from `items`."""
    if steps <= 0 or not items:
        return []
    dev = next(model.parameters()).device
    ids, labels, mask = _encode(tok, items, chat)
    model.train()
    losses = []
    for _ in range(steps):
        idx = rng.choice(len(items), size=min(batch_size, len(items)), replace=False)
        out = model(input_ids=ids[idx].to(dev), attention_mask=mask[idx].to(dev), labels=labels[idx].to(dev))
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        losses.append(out.loss.item())
    return losses


def parse_level(text: str) -> float:
    """The belief in [0, 1] stated in an answer: first level word (zero..ten) or number, ignoring the scale
    phrase ("out of ten", "/10"); nan if none."""
    text = re.sub(r"(\bout\s+of|/)\s*(ten|10)\b", " ", text.lower())
    words = re.findall(r"[a-z]+|\d+(?:\.\d+)?", text)
    for w in words:
        if w in D.LEVEL_WORDS:
            return D.LEVEL_WORDS.index(w) / 10.0
        try:
            v = float(w)
        except ValueError:
            continue
        if "." in w and 0.0 <= v <= 1.0:
            return v
        if v.is_integer() and 0 <= v <= 10:
            return v / 10.0
    return float("nan")


def sample_answers(model, tok, topics: list[str], n_users: int, max_new_tokens: int, chat: bool = False) -> list[list[str]]:
    """Every user asks the AI about every topic (one left-padded batch); returns answers[topic][user],
    sampled at temperature 1 from the model's full distribution."""
    import torch

    dev = next(model.parameters()).device
    model.eval()
    prompts = [tok(_prompt_text(tok, D.QUESTION.format(topic=t), chat), add_special_tokens=False)["input_ids"] for t in topics]
    n = max(len(p) for p in prompts)
    ids = torch.full((len(topics) * n_users, n), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for k, p in enumerate(prompts):
        ids[k * n_users:(k + 1) * n_users, n - len(p):] = torch.tensor(p)
        mask[k * n_users:(k + 1) * n_users, n - len(p):] = 1
    with torch.no_grad():
        gen = model.generate(ids.to(dev), attention_mask=mask.to(dev), do_sample=True, temperature=1.0, top_k=0,
                             top_p=1.0, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id,
                             eos_token_id=tok.eos_token_id)
    text = tok.batch_decode(gen[:, n:], skip_special_tokens=True)
    return [text[k * n_users:(k + 1) * n_users] for k in range(len(topics))]


# ---- the loop --------------------------------------------------------------------------------------

def diversity_row(b: np.ndarray) -> dict:
    """Diversity of one topic's beliefs: entropy of the stated-level histogram, std, lineage diversity."""
    return {"entropy": level_histogram_entropy(b), "std": float(np.std(b)),
            "lineage": lineage_diversity(belief_concepts(b), belief_tree())}


def run_loop(condition: str, beliefs0: np.ndarray, topics: list[str], base_dir: Path, cfg: dict, seed: int,
             progress: bool = True) -> dict:
    """Run one condition; returns the belief trajectory summary, per-round diversity and AI stats."""
    import torch

    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition}")
    cond = CONDITIONS[condition]
    loop = cfg["loop"]
    ai_cfg = cfg["ai"]
    rng = np.random.default_rng([int(seed), 7])
    torch.manual_seed(seed)
    model, tok, rec = load_ai(base_dir)
    model = with_lora(model, ai_cfg.get("lora"))
    chat = bool(rec.get("chat", False))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=float(ai_cfg["lr"]))
    lam2 = float(loop["lambda2"]) if cond["trust"] else 0.0
    b = np.array(beliefs0, dtype=float)
    n_users = b.shape[0]
    hist = [[diversity_row(b[:, k]) for k in range(len(topics))]]
    parse_fail, ai_entropy, losses = [], [], []
    rounds = range(int(loop["rounds"]))
    if progress:
        from tqdm import tqdm

        rounds = tqdm(rounds, desc=f"lockin/{condition}/seed{seed}", leave=False)
    for r in rounds:
        if r == 0 or cond["retrain"]:
            levels = D.stated_level(b)
            templates = rng.integers(len(D.OPINIONS), size=b.shape)
            corpus = [D.dialogue(topics[k], int(levels[i, k]), int(templates[i, k]))
                      for i in range(n_users) for k in range(len(topics))]
            steps = int(ai_cfg["initial_steps"] if r == 0 else ai_cfg["steps_per_round"])
            losses += finetune(model, tok, corpus, steps, int(ai_cfg["batch_size"]), opt, rng, chat)
        answers = sample_answers(model, tok, topics, n_users, int(ai_cfg["max_new_tokens"]), chat)
        a = np.array([[parse_level(answers[k][i]) for k in range(len(topics))] for i in range(n_users)])
        ok = ~np.isnan(a)
        parse_fail.append(float(1 - ok.mean()))
        ai_entropy.append([label_entropy(np.rint(a[ok[:, k], k] * 10)) if ok[:, k].any() else 0.0 for k in range(len(topics))])
        b = np.where(ok, (1 - lam2) * b + lam2 * np.where(ok, a, 0.0), b)
        hist.append([diversity_row(b[:, k]) for k in range(len(topics))])
    return {"beliefs": b, "history": hist, "parse_fail": parse_fail, "ai_entropy": ai_entropy, "losses": losses}


def summary_rows(res: dict, topics: list[str]) -> tuple[list[dict], list[dict]]:
    """Metric rows (per topic and their mean) and per-round curves."""
    hist = res["history"]
    rows, curves = [], []
    per = {}
    for k, topic in enumerate(topics):
        s, e = hist[0][k], hist[-1][k]
        m = {
            "entropy_start": s["entropy"], "entropy_end": e["entropy"],
            "entropy_ratio": e["entropy"] / s["entropy"] if s["entropy"] > 0 else float("nan"),
            "std_start": s["std"], "std_end": e["std"],
            "lineage_start": s["lineage"], "lineage_end": e["lineage"],
            "ai_answer_entropy_end": res["ai_entropy"][-1][k] if res["ai_entropy"] else float("nan"),
            "belief_mean_end": float(res["beliefs"][:, k].mean()),
        }
        per[topic] = m
        rows += [{"setting": topic, "metric": name, "value": v} for name, v in m.items()]
        for r, h in enumerate(hist):
            curves += [{"setting": topic, "metric": f"{x}_round", "step": r, "value": h[k][x]} for x in ("entropy", "std", "lineage")]
    for name in next(iter(per.values())):
        rows.append({"setting": "mean", "metric": name, "value": float(np.mean([per[t][name] for t in topics]))})
    rows.append({"setting": "mean", "metric": "parse_fail", "value": float(np.mean(res["parse_fail"])) if res["parse_fail"] else 0.0})
    if res["losses"]:
        rows.append({"setting": "mean", "metric": "ai_loss_last", "value": float(np.mean(res["losses"][-5:]))})
    return rows, curves
