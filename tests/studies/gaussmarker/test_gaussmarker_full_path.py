"""The full-scale code path on tiny local stand-ins: the prompts parquet fetched over a real HTTP server at the
Hub's relative path, a tiny StableDiffusionPipeline (UNet2DConditionModel, AutoencoderKL, CLIP text encoder and
tokenizer) saved with save_pretrained and loaded by path exactly as a Hub id is, DPM-Solver generation, VAE
encoding + DDIM inversion under the empty prompt, and a GaussMarker run with the table."""
import json

import pytest
import yaml

from icml25 import cli

PARQUET_PATH = "datasets/Gustavosta/Stable-Diffusion-Prompts/resolve/refs%2Fconvert%2Fparquet/default/test/0000.parquet"


def _tiny_sd(path):
    import torch
    from diffusers import AutoencoderKL, DPMSolverMultistepScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    torch.manual_seed(0)
    unet = UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
                                block_out_channels=(8, 16), norm_num_groups=4, cross_attention_dim=16,
                                attention_head_dim=2, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))
    vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 16),
                        norm_num_groups=4, layers_per_block=1,
                        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2)
    tok_dir = path / "tok_src"
    tok_dir.mkdir(parents=True)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1, "!": 2}
    for ch in letters:
        vocab[ch] = len(vocab)
        vocab[ch + "</w>"] = len(vocab)
    (tok_dir / "vocab.json").write_text(json.dumps(vocab))
    (tok_dir / "merges.txt").write_text("#version: 0.2\n")
    tok = CLIPTokenizer(str(tok_dir / "vocab.json"), str(tok_dir / "merges.txt"), model_max_length=16)
    enc = CLIPTextModel(CLIPTextConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32,
                                       num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=16,
                                       bos_token_id=0, eos_token_id=1, pad_token_id=1, projection_dim=16))
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=enc, tokenizer=tok, unet=unet,
                                   scheduler=DPMSolverMultistepScheduler(), safety_checker=None,
                                   feature_extractor=None, requires_safety_checker=False)
    pipe.save_pretrained(str(path / "sd"))
    return path / "sd"


def _configure(root, url, model_dir):
    path = root / "config/studies/gaussmarker.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["methods"] = ["gaussmarker", "tr"]
    full = raw["scales"]["full"]
    full["seeds"] = [0]
    full["latent_shape"] = [4, 8, 8]
    full["data"].update(prompts_url=f"{url}/{PARQUET_PATH}", n_prompts=8)
    full["diffusion"].update(model_id=str(model_dir), steps=2, inversion_steps=2, resolution=16, batch_size=4)
    full["watermark"] = {"gs_factors": [1, 2, 2], "tr_radius": 2, "tr_channel": 3}
    full["gnr"] = {"nf": 4, "steps": 3, "batch_size": 4}
    full["detect"] = {"n_test": 4, "n_calib": 4, "fuser_max_iter": 50}
    full["distortions"] = {"clean": {"kind": "clean"}, "rot75": {"kind": "rotate", "degrees": 75},
                           "random_crop60": {"kind": "random_crop", "ratio": 0.6}}
    full["claims"] = {"geometric": ["rot75", "random_crop60"], "photometric": ["clean"]}
    path.write_text(yaml.safe_dump(raw))


@pytest.fixture
def served(tmp_path, file_server):
    import pandas as pd

    www = tmp_path / "www"
    target = www / PARQUET_PATH.replace("%2F", "/")  # the server unquotes the request path
    target.parent.mkdir(parents=True)
    pd.DataFrame({"Prompt": [f"a painting of a fox number {i}" for i in range(10)]}).to_parquet(target)
    return file_server(www)


def test_full_scale_path_on_tiny_stand_ins(served, workflow_copy, tmp_path):
    model_dir = _tiny_sd(tmp_path)
    _configure(workflow_copy, served, model_dir)
    base = ["--root", str(workflow_copy), "--scale", "full", "--study", "gaussmarker"]
    for stage in ("download", "preprocess", "fit-base"):
        assert cli.main([stage, *base]) == 0, stage
    prompts = json.loads((workflow_copy / "data/processed/full/gaussmarker/prompts.json").read_text())
    assert prompts[0] == "a painting of a fox number 0" and len(prompts) == 8
    rec = json.loads((workflow_copy / "results/full/gaussmarker/base/base.json").read_text())
    assert rec["kind"] == "stable_diffusion" and rec["model_id"] == str(model_dir)
    for m in ("gaussmarker", "tr"):
        assert cli.main(["train", *base, "--method", m, "--seed", "0"]) == 0
        assert cli.main(["evaluate", *base, "--method", m, "--seed", "0"]) == 0
    res = json.loads((workflow_copy / "results/full/gaussmarker/gaussmarker/seed0/results.json").read_text())
    assert set(res["results"]) == {"clean", "rot75", "random_crop60"} and res["sign_equals_m"] == 1.0
    assert cli.main(["table", *base]) == 0
    assert "random_crop60" in (workflow_copy / "results/full/tables/gaussmarker.md").read_text()


def test_sd_wrapper_round_trip_shapes(tmp_path):
    import torch

    from icml25.studies.gaussmarker.diffusion import StableDiffusion

    sd = StableDiffusion(str(_tiny_sd(tmp_path)), steps=2, inversion_steps=2, resolution=16, batch_size=2)
    assert sd.latent_shape == (4, 8, 8)
    z = torch.randn(3, 4, 8, 8)
    img = sd.sample(z, ["a fox", "a cat", "a dog"])
    assert img.shape == (3, 3, 16, 16) and img.min() >= -1 and img.max() <= 1
    assert sd.invert(img).shape == (3, 4, 8, 8)
