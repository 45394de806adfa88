"""Reviewer engines behind one interface, `generate(prompt, n, temperature, seed) -> [completion]`.

* `lm` (smoke, mini): the GPT-2 reviewer trained in fit_base (reviewer_lm.Engine).
* `openai` (full, the config's default): a chat LLM behind an OpenAI-compatible endpoint, e.g.
  `vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4` from its own venv (make install-vllm:
  no vLLM release accepts the project's transformers, so vLLM cannot run in the pipeline's process).
* `vllm` (full, in-process): the same LLM through vllm.LLM, for an env that holds both vLLM and the project.
Both wrap the pipeline's prompts (`<|review|>` / `<|validate|>` + the line-aware snippet) in role instructions
after the paper's App. H (Reviewer: JSON-like comments with Q1-Q3 1-7 scores; Validator: re-score one comment
against the snippet) and ask for the reply in the same `+<line>|<category>|q1 q2 q3` lines the pipeline parses.
Not run here (no GPU at mini); vllm is imported only when used.
"""
from __future__ import annotations

import json
from pathlib import Path

REVIEWER = ("You are a senior C++ reviewer. Find real defects (logic, security, performance) in the changed "
            "lines ('+N|') of the code below. For each issue give one line `+<line>|<category>|q1 q2 q3` (the line marker as shown) where "
            "q1 answers 'is it NOT a nitpick?', q2 'is it NOT a fake problem?', q3 'how severe?', each 1-7. "
            "Think step by step, then answer only with those lines, or `none`.")
VALIDATOR = ("You are a validator. Re-check the candidate comment against the original code. Answer with "
             "three scores `q1 q2 q3` (1-7): not a nitpick, not a fake problem, severity.")


def chat_messages(prompt: str) -> list[dict]:
    """The pipeline's prompt as a system (role) + user message pair."""
    role = VALIDATOR if prompt.startswith("<|validate|>") else REVIEWER
    body = prompt.replace("<|review|>", "").replace("<|validate|>", "").replace("<|cand|>", "Candidate: ")
    body = body.replace("<|out|>", "Answer:")
    return [{"role": "system", "content": role}, {"role": "user", "content": body}]


class VLLMEngine:
    def __init__(self, spec: dict):
        from vllm import LLM as _LLM  # full scale only

        self.llm = _LLM(model=spec["model"], tensor_parallel_size=int(spec.get("tensor_parallel", 1)))
        self.tok = self.llm.get_tokenizer()

    def n_tokens(self, text: str) -> int:
        return len(self.tok.encode(text))

    def _chat(self, prompt: str) -> str:
        return self.tok.apply_chat_template(chat_messages(prompt), tokenize=False, add_generation_prompt=True)

    def generate(self, prompt: str, n: int = 1, temperature: float = 0.0, seed: int = 0) -> list[str]:
        return self.generate_batch([prompt], n, temperature, seed)[0]

    def generate_batch(self, prompts: list[str], n: int = 1, temperature: float = 0.0, seed: int = 0) -> list[list[str]]:
        from vllm import SamplingParams

        sp = SamplingParams(n=n, temperature=temperature, seed=seed, max_tokens=1024)
        return [[o.text for o in r.outputs] for r in self.llm.generate([self._chat(p) for p in prompts], sp)]


class ServedEngine:
    """The reviewer LLM behind an OpenAI-compatible /chat/completions endpoint (vLLM's server).

    N reviewers are the request's `n` samples at the run's temperature and seed, as with VLLMEngine; the
    snippet budget counts tokens with the model's own tokenizer (`tokenizer`, default the model id)."""

    def __init__(self, spec: dict, tokenizer=None):
        self.url = spec["base_url"].rstrip("/") + "/chat/completions"
        self.model, self.api_key_env = spec["model"], spec.get("api_key_env")
        self.timeout, self.workers = float(spec.get("timeout", 600)), int(spec.get("workers", 8))
        self.max_tokens = int(spec.get("max_tokens", 1024))
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(spec.get("tokenizer", spec["model"]))
        self.tok = tokenizer

    def n_tokens(self, text: str) -> int:
        return len(self.tok.encode(text))

    def _one(self, prompt: str, n: int, temperature: float, seed: int) -> list[str]:
        import os
        import urllib.request

        body = {"model": self.model, "messages": chat_messages(prompt), "n": int(n), "temperature": float(temperature),
                "seed": int(seed), "max_tokens": self.max_tokens}
        headers = {"Content-Type": "application/json"}
        if self.api_key_env and os.environ.get(self.api_key_env):
            headers["Authorization"] = "Bearer " + os.environ[self.api_key_env]
        req = urllib.request.Request(self.url, json.dumps(body).encode(), headers)
        with urllib.request.urlopen(req, timeout=self.timeout) as f:
            choices = sorted(json.loads(f.read())["choices"], key=lambda c: c.get("index", 0))
        return [c["message"]["content"] or "" for c in choices]

    def generate(self, prompt: str, n: int = 1, temperature: float = 0.0, seed: int = 0) -> list[str]:
        return self._one(prompt, n, temperature, seed)

    def generate_batch(self, prompts: list[str], n: int = 1, temperature: float = 0.0, seed: int = 0) -> list[list[str]]:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(lambda p: self._one(p, n, temperature, seed), prompts))


SERVED = ("vllm", "openai")   # engine kinds whose LLM is not trained in fit_base


def make(cfg: dict, base_dir: Path, max_new: int):
    spec = cfg.get("engine") or {"kind": "lm"}
    if spec["kind"] == "vllm":
        return VLLMEngine(spec)
    if spec["kind"] == "openai":
        return ServedEngine(spec)
    from .reviewer_lm import Engine

    return Engine(Path(base_dir), max_new)
