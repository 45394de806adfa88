"""The LLM behind RaLU: one interface (requests -> text + token logprobs), two implementations.

* `LocalLM`: a HF causal LM loaded with `from_pretrained(dir)` (mini: the tiny model trained in fit_base;
  any local checkpoint works). Sampling is our own loop over the model's KV cache so that (a) every request
  has its own random stream (a key -> the same sample whatever the batch), (b) the OpenAI-style frequency
  penalty applies, and (c) the returned logprobs are the model's *raw* log-softmax at the sampled tokens
  (what an OpenAI-compatible server returns), not the temperature-warped ones.
* `OpenAIChat`: an OpenAI-compatible `/chat/completions` endpoint (vLLM at full scale) with
  `logprobs: true`, called over HTTP with the standard library.

The tiny local model cannot read a long dialogue, so it sees a *rendering* of each request built from its
structured `fields` (question, current unit, reasoning path) instead of the whole message list; the
endpoint sees the full `messages` (the official dialogue state). This window is named on the study page.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

# the tiny model's role tags (special tokens of its vocabulary)
TAGS = {"program": "[P]", "judge": "[J]", "synth": "[S]"}
UNIT, ANSWER, EOS, PAD, UNK = "[U]", "[A]", "<eos>", "<pad>", "<unk>"


@dataclass
class Request:
    kind: str  # program | judge | synth
    messages: list
    fields: dict
    key: str  # the sampling stream: the same key gives the same sample
    max_new_tokens: int = 96


@dataclass
class Reply:
    text: str
    logprobs: list | None = None  # one raw log-probability per generated token (None: not available)
    n_prompt: int = 0
    n_out: int = 0
    meta: dict = field(default_factory=dict)


def confidence(reply: Reply) -> float:
    """Official: mean over the response tokens of exp(logprob), x 100; -1 when there are no logprobs."""
    if not reply.logprobs:
        return -1.0
    return 100.0 * sum(math.exp(lp) for lp in reply.logprobs) / len(reply.logprobs)


def render_prompt(kind: str, fields: dict) -> str:
    """What the tiny model reads for a request (training uses the same function)."""
    q = fields["question"]
    if kind == "program":
        return f"{TAGS['program']} {q} {ANSWER}\n"
    if kind == "judge":
        return f"{TAGS['judge']} {q} {UNIT} {fields['unit']} {ANSWER}\n"
    if kind == "synth":
        path = f" {UNIT} ".join(fields["path"])
        return f"{TAGS['synth']} {q} {UNIT} {path} {ANSWER}\n"
    raise ValueError(f"unknown request kind {kind!r}")


def _uniforms(key: str, n: int):
    import numpy as np

    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).random(n)


class LocalLM:
    def __init__(self, path, temperature=0.7, frequency_penalty=0.3, batch_size=64, device=None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from icml25.core import hf

        hf.quiet()
        self.tok = AutoTokenizer.from_pretrained(str(path))
        self.model = AutoModelForCausalLM.from_pretrained(str(path))
        self.model.eval()
        self.device = device or hf.device()
        self.model.to(self.device)
        self.temperature = float(temperature)
        self.penalty = float(frequency_penalty)
        self.batch_size = int(batch_size)
        self.eos = self.tok.convert_tokens_to_ids(EOS)
        self.pad = self.tok.convert_tokens_to_ids(PAD)
        self.n_ctx = int(getattr(self.model.config, "n_positions", 1024))
        self.torch = torch

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False)

    def generate(self, requests: list[Request]) -> list[Reply]:
        out: list[Reply] = []
        for i in range(0, len(requests), self.batch_size):
            out += self._batch(requests[i:i + self.batch_size])
        return out

    def _batch(self, reqs: list[Request]) -> list[Reply]:
        torch = self.torch
        max_new = max(r.max_new_tokens for r in reqs)
        prompts = []
        for r in reqs:
            ids = self.encode(render_prompt(r.kind, r.fields))
            prompts.append(ids[-(self.n_ctx - max_new):])  # keep the end when too long
        n = len(reqs)
        L = max(len(p) for p in prompts)
        ids = torch.full((n, L), self.pad, dtype=torch.long)
        mask = torch.zeros((n, L), dtype=torch.long)
        for j, p in enumerate(prompts):
            ids[j, L - len(p):] = torch.tensor(p)
            mask[j, L - len(p):] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        import numpy as np

        u = torch.from_numpy(np.stack([_uniforms(r.key, max_new) for r in reqs]))
        counts = torch.zeros((n, self.model.config.vocab_size))
        toks = [[] for _ in range(n)]
        lps = [[] for _ in range(n)]
        done_l = [False] * n
        done = torch.zeros(n, dtype=torch.bool)
        limit = [r.max_new_tokens for r in reqs]
        with torch.no_grad():
            res = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                             position_ids=pos.to(self.device), use_cache=True)
            past, last_pos = res.past_key_values, pos[:, -1]
            logits = res.logits[:, -1].float().cpu()
            for step in range(max_new):
                logp = torch.log_softmax(logits, -1)
                if self.temperature <= 0:
                    nxt = logits.argmax(-1)
                else:
                    s = logits / self.temperature - self.penalty * counts
                    cdf = torch.softmax(s, -1).double().cumsum(-1)
                    nxt = torch.searchsorted(cdf, (u[:, step] * cdf[:, -1]).unsqueeze(-1)).squeeze(-1)
                    nxt = nxt.clamp(max=logits.shape[-1] - 1)
                nl = nxt.tolist()
                lpl = logp.gather(1, nxt.unsqueeze(-1)).squeeze(-1).tolist()
                live = []
                for j in range(n):
                    if done_l[j]:
                        continue
                    t = nl[j]
                    if t == self.eos:
                        done_l[j] = True
                        continue
                    toks[j].append(t)
                    lps[j].append(lpl[j])
                    live.append(j)
                    if len(toks[j]) >= limit[j]:
                        done_l[j] = True
                if live:
                    counts[live, nxt[live]] += 1
                done = torch.tensor(done_l)
                if bool(done.all()):
                    break
                nxt = torch.where(done, torch.full_like(nxt, self.pad), nxt)
                mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long)], 1)
                last_pos = last_pos + 1
                res = self.model(input_ids=nxt.unsqueeze(-1).to(self.device), attention_mask=mask.to(self.device),
                                 position_ids=last_pos.unsqueeze(-1).to(self.device), past_key_values=past,
                                 use_cache=True)
                past = res.past_key_values
                logits = res.logits[:, -1].float().cpu()
        return [Reply(self.decode(t), lp, len(p), len(t)) for t, lp, p in zip(toks, lps, prompts)]

    def sequence_logprobs(self, prompt: str, response_ids: list[int]) -> list[float]:
        """Raw log-probabilities of `response_ids` after `prompt` by one full forward pass (tests)."""
        torch = self.torch
        p = self.encode(prompt)
        x = torch.tensor([p + list(response_ids)])
        with torch.no_grad():
            logits = self.model(input_ids=x.to(self.device)).logits[0].float().cpu()
        logp = torch.log_softmax(logits, -1)
        return [float(logp[len(p) - 1 + k, t]) for k, t in enumerate(response_ids)]


class OpenAIChat:
    """An OpenAI-compatible chat endpoint (vLLM `--served-model-name`, or an API) with token logprobs."""

    def __init__(self, base_url: str, model: str, temperature=0.7, frequency_penalty=0.3, api_key_env=None,
                 workers=8, timeout=600):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.temperature, self.penalty = model, float(temperature), float(frequency_penalty)
        self.api_key_env, self.workers, self.timeout = api_key_env, int(workers), timeout

    def _one(self, r: Request) -> Reply:
        import os
        import urllib.request

        seed = int.from_bytes(hashlib.sha256(r.key.encode()).digest()[:4], "little")
        body = {"model": self.model, "messages": r.messages, "temperature": self.temperature,
                "frequency_penalty": self.penalty, "logprobs": True, "max_tokens": max(256, r.max_new_tokens),
                "seed": seed}
        headers = {"Content-Type": "application/json"}
        if self.api_key_env and os.environ.get(self.api_key_env):
            headers["Authorization"] = "Bearer " + os.environ[self.api_key_env]
        req = urllib.request.Request(self.url, json.dumps(body).encode(), headers)
        with urllib.request.urlopen(req, timeout=self.timeout) as f:
            data = json.loads(f.read())
        ch = data["choices"][0]
        lp = ch.get("logprobs") or {}
        lps = [float(t["logprob"]) for t in (lp.get("content") or [])] or None
        usage = data.get("usage") or {}
        return Reply(ch["message"]["content"] or "", lps, int(usage.get("prompt_tokens", 0)),
                     int(usage.get("completion_tokens", len(lps or []))))

    def generate(self, requests: list[Request]) -> list[Reply]:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(self._one, requests))


def load_llm(cfg: dict, base_dir: Path | None, seed: int):
    """The LLM of a run: the tiny model of this seed (mini), a local checkpoint, or an endpoint (full)."""
    spec = cfg["llm"]
    gen = cfg["generation"]
    if spec["kind"] == "local":
        # base_per_seed: base_dir is this seed's own base/seed<N>/; else the shared LM in base/seed0/
        path = Path(spec["path"]) if spec.get("path") else (
            Path(base_dir) if cfg.get("base_per_seed") else Path(base_dir) / "seed0")
        return LocalLM(path, gen["temperature"], gen["frequency_penalty"], gen.get("batch_size", 64))
    if spec["kind"] == "openai":
        return OpenAIChat(spec["base_url"], spec["model"], gen["temperature"], gen["frequency_penalty"],
                          spec.get("api_key_env"), spec.get("workers", 8))
    raise ValueError(f"unknown llm kind {spec['kind']!r}")
