"""The full-scale variants' architectures through our engine: YaRN-Llama-2 (MHA, yarn RoPE) and Qwen2.5
(GQA, q/k/v biases, tied embeddings on the small ones), each a tiny random checkpoint written with
`save_pretrained` and read by the same `Engine.from_pretrained` the released checkpoints go through.
The logits must equal transformers' own forward at positions beyond the original context (where yarn
differs from plain RoPE), and the variant configs must name these checkpoints."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from icml25.core import config as icfg
from icml25.studies.tokenswift.engine import Engine, KVCache

ROOT = Path(__file__).resolve().parents[3]
V = 64


def _yarn_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    conf = LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                       intermediate_size=64, vocab_size=V, max_position_embeddings=1024,
                       initializer_range=0.2,
                       rope_scaling={"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 128})
    return LlamaForCausalLM(conf)


def _qwen2(tied: bool):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    conf = Qwen2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       intermediate_size=64, vocab_size=V, max_position_embeddings=1024,
                       initializer_range=0.2, tie_word_embeddings=tied)
    return Qwen2ForCausalLM(conf)


@pytest.mark.parametrize("build", [_yarn_llama, lambda: _qwen2(True), lambda: _qwen2(False)],
                         ids=["yarn_llama", "qwen2_tied", "qwen2"])
def test_engine_matches_transformers_beyond_the_original_context(build, tmp_path):
    torch.manual_seed(0)
    model = build().eval()
    with torch.no_grad():  # biases are zero at init: make them matter
        for name, p in model.named_parameters():
            if name.endswith("_proj.bias"):
                p.normal_(0, 0.5)
    model.save_pretrained(str(tmp_path / "m"))
    engine = Engine.from_pretrained(tmp_path / "m")
    if "qwen2" in type(model).__name__.lower():
        assert engine.layers[0]["qb"] is not None and engine.layers[0]["qb"].abs().sum() > 0
    else:
        assert engine.attn_scale != 1.0  # yarn's attention scaling is applied
    x = torch.randint(0, V, (300,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(x[None]).logits[0]
    h, ks, vs = engine.forward(x, torch.arange(300))
    tol = 1e-5 * float(ref.abs().max())
    assert (engine.logits(h) - ref).abs().max() < tol
    # one step through the explicit KV cache at position 299 (past the 128-token original context)
    cache = KVCache(engine, 320)
    _, ks, vs = engine.forward(x[:299], torch.arange(299))
    cache.append(ks, vs)
    h1, _, _ = engine.forward(x[299:], torch.tensor([299]), *cache.view())
    assert (engine.logits(h1)[0] - ref[-1]).abs().max() < tol


def test_plain_rope_differs_from_yarn(tmp_path):
    """The yarn test above can fail: a Llama without rope scaling gives other logits far out."""
    torch.manual_seed(0)
    yarn = _yarn_llama().eval()
    yarn.save_pretrained(str(tmp_path / "y"))
    engine = Engine.from_pretrained(tmp_path / "y")
    engine.inv_freq = 1.0 / (yarn.config.rope_parameters["rope_theta"]
                             ** (torch.arange(0, engine.hd, 2, dtype=torch.float32) / engine.hd))
    engine.attn_scale = 1.0
    x = torch.randint(0, V, (300,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = yarn(x[None]).logits[0]
    h, _, _ = engine.forward(x, torch.arange(300))
    assert (engine.logits(h) - ref).abs().max() > 1e-2 * float(ref.abs().max())  # 1000x the match tolerance


def test_full_scale_variants_name_the_papers_models():
    raw = icfg.load_study(ROOT, "tokenswift")
    names = {v: icfg.effective(raw, f"full-{v}")["model"]["pretrained"] for v in raw["scales"]["full"]["variants"]}
    assert names == {
        "yarn_llama2_7b": "TokenSwift/TokenSwift-Yarn-Llama-2-7b-128k",
        "qwen2_5_1_5b": "TokenSwift/TokenSwift-Qwen2.5-1.5B",
        "qwen2_5_7b": "TokenSwift/TokenSwift-Qwen2.5-7B",
        "qwen2_5_14b": "TokenSwift/TokenSwift-Qwen2.5-14B",
    }
    for v in names:
        cfg = icfg.effective(raw, f"full-{v}")
        assert cfg["decode"]["prompt_len"] == 4096 and cfg["decode"]["gen_len"]["sampled"] == 102400
        assert cfg["resources"]["train"]["gpu"] == 1 and cfg["stand_in"]
