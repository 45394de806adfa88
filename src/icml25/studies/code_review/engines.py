"""Reviewer engines behind one interface, `generate(prompt, n, temperature, seed) -> [completion]`.

* `lm` (smoke, mini): the GPT-2 reviewer trained in fit_base (reviewer_lm.Engine).
* `vllm` (full): a chat LLM served by vLLM (Llama-3.1-70B-Instruct in the config). The pipeline's prompts
  (`<|review|>` / `<|validate|>` + the line-aware snippet) are wrapped in role instructions after the
  paper's App. H (Reviewer: JSON-like comments with Q1-Q3 1-7 scores; Validator: re-score one comment
  against the snippet) and the reply is asked in the same `+<line>|<category>|q1 q2 q3` lines the
  pipeline parses. Not run here (no GPU at mini); vllm is imported only when used.
"""
from __future__ import annotations

from pathlib import Path

REVIEWER = ("You are a senior C++ reviewer. Find real defects (logic, security, performance) in the changed "
            "lines ('+N|') of the code below. For each issue give one line `+<line>|<category>|q1 q2 q3` (the line marker as shown) where "
            "q1 answers 'is it NOT a nitpick?', q2 'is it NOT a fake problem?', q3 'how severe?', each 1-7. "
            "Think step by step, then answer only with those lines, or `none`.")
VALIDATOR = ("You are a validator. Re-check the candidate comment against the original code. Answer with "
             "three scores `q1 q2 q3` (1-7): not a nitpick, not a fake problem, severity.")


class VLLMEngine:
    def __init__(self, spec: dict):
        from vllm import LLM as _LLM  # full scale only

        self.llm = _LLM(model=spec["model"], tensor_parallel_size=int(spec.get("tensor_parallel", 1)))
        self.tok = self.llm.get_tokenizer()

    def n_tokens(self, text: str) -> int:
        return len(self.tok.encode(text))

    def _chat(self, prompt: str) -> str:
        role = VALIDATOR if prompt.startswith("<|validate|>") else REVIEWER
        body = prompt.replace("<|review|>", "").replace("<|validate|>", "").replace("<|cand|>", "Candidate: ")
        body = body.replace("<|out|>", "Answer:")
        return self.tok.apply_chat_template([{"role": "system", "content": role}, {"role": "user", "content": body}],
                                            tokenize=False, add_generation_prompt=True)

    def generate(self, prompt: str, n: int = 1, temperature: float = 0.0, seed: int = 0) -> list[str]:
        return self.generate_batch([prompt], n, temperature, seed)[0]

    def generate_batch(self, prompts: list[str], n: int = 1, temperature: float = 0.0, seed: int = 0) -> list[list[str]]:
        from vllm import SamplingParams

        sp = SamplingParams(n=n, temperature=temperature, seed=seed, max_tokens=1024)
        return [[o.text for o in r.outputs] for r in self.llm.generate([self._chat(p) for p in prompts], sp)]


def make(cfg: dict, base_dir: Path, max_new: int):
    spec = cfg.get("engine") or {"kind": "lm"}
    if spec["kind"] == "vllm":
        return VLLMEngine(spec)
    from .reviewer_lm import Engine

    return Engine(Path(base_dir), max_new)
