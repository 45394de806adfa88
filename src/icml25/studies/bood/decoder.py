"""Decoders behind one interface, `decode(features, seed) -> images`.

Mini: a diffusion autoencoder trained in the pipeline on (image, encoder feature) pairs. The noise
schedules and samplers are diffusers' (DDPMScheduler for training, DDIMScheduler for sampling); the
denoiser is a small residual MLP with FiLM conditioning on (timestep, feature), because diffusers'
UNet2DModel at 16x16 measured ~0.7 s per training step of 64 images on one core, far over the budget.
The condition is dropped (replaced by a learned null vector) for a fraction of the training pairs, so
sampling can use classifier-free guidance.

Full: Stable Diffusion v1.4 with the OOD feature written in place of the class-name token embedding
of the prompt (`StableDiffusionDecoder`), as Dream-OOD's dream_ood.py does.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import placement as P


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    a = t.float()[:, None] * freqs[None]
    return torch.cat([torch.sin(a), torch.cos(a)], dim=1)


class FiLMBlock(nn.Module):
    def __init__(self, width: int, emb: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.film = nn.Linear(emb, 2 * width)
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.SiLU(), nn.Linear(width, width))

    def forward(self, h, e):
        scale, shift = self.film(e).chunk(2, dim=1)
        return h + self.mlp(self.norm(h) * (1 + scale) + shift)


class Denoiser(nn.Module):
    """eps_theta(x_t, t, z): x flattened, FiLM-conditioned residual MLP."""

    def __init__(self, pixels: int, cond_dim: int, width: int = 512, depth: int = 3, emb: int = 128):
        super().__init__()
        self.pixels, self.emb_dim = pixels, emb
        self.inp = nn.Linear(pixels, width)
        self.t_mlp = nn.Sequential(nn.Linear(emb, emb), nn.SiLU(), nn.Linear(emb, emb))
        self.c_mlp = nn.Sequential(nn.Linear(cond_dim, emb), nn.SiLU(), nn.Linear(emb, emb))
        self.null = nn.Parameter(torch.zeros(cond_dim))
        self.e_in = nn.Linear(emb, width)  # the condition also enters additively at the input
        self.blocks = nn.ModuleList([FiLMBlock(width, emb) for _ in range(depth)])
        self.out = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, pixels))

    def forward(self, x, t, cond, drop: torch.Tensor | None = None):
        if drop is not None:
            cond = torch.where(drop[:, None], self.null.expand_as(cond), cond)
        e = F.silu(self.t_mlp(timestep_embedding(t, self.emb_dim)) + self.c_mlp(cond))
        h = self.inp(x.flatten(1)) + self.e_in(e)
        for b in self.blocks:
            h = b(h, e)
        return self.out(h).view_as(x)


def schedulers(cfg: dict):
    from diffusers import DDIMScheduler, DDPMScheduler

    train = DDPMScheduler(num_train_timesteps=int(cfg["train_timesteps"]), beta_schedule=cfg["beta_schedule"],
                          prediction_type=cfg.get("prediction", "epsilon"), clip_sample=True)
    sample = DDIMScheduler.from_config(train.config)
    return train, sample


def prep_cond(z: torch.Tensor) -> torch.Tensor:
    """The decoder sees the feature's direction: the cosine classifier is blind to its norm."""
    return F.normalize(z, dim=-1)


def train_decoder(cfg: dict, images: np.ndarray, feats: np.ndarray, seed: int, device="cpu"):
    """Fit eps_theta on (image in [-1, 1], normalised feature) pairs on `device`; returns (model, loss curve).
    Pairs, noise, timesteps and condition dropout are drawn on the host (the same on every device), then moved."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    x = torch.from_numpy(images).float() * 2 - 1
    c = prep_cond(torch.from_numpy(feats).float())
    model = P.place(Denoiser(int(np.prod(x.shape[1:])), c.shape[1], int(cfg["width"]), int(cfg["depth"])), device)
    sched, _ = schedulers(cfg)
    steps, bs = int(cfg["steps"]), int(cfg["batch"])
    opt = torch.optim.AdamW(model.parameters(), lr=float(cfg["lr"]), weight_decay=0.0)
    lr_sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=float(cfg["lr"]), total_steps=max(steps, 2),
                                                   pct_start=0.05)
    T = sched.config.num_train_timesteps
    curve = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, len(x), (bs,), generator=g)
        x0, cz = x[idx], c[idx]
        noise = torch.randn(x0.shape, generator=g)
        t = torch.randint(0, T, (bs,), generator=g)
        drop = torch.rand(bs, generator=g) < float(cfg["p_uncond"])
        x0, cz, noise, t, drop = (P.place(v, device) for v in (x0, cz, noise, t, drop))
        xt = sched.add_noise(x0, noise, t)
        target = x0 if sched.config.prediction_type == "sample" else noise
        loss = F.mse_loss(model(xt, t, cz, drop), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        lr_sched.step()
        if step % max(1, steps // 50) == 0 or step == steps - 1:
            curve.append((step, float(loss.detach())))
    model.eval()
    return model, curve


def ddim_schedule(cfg: dict) -> dict:
    """The numbers DDIM sampling needs, taken from diffusers' DDIMScheduler (set up from the training
    DDPMScheduler's config): saved beside the decoder so that decoding jobs need not import diffusers
    (its import alone cost ~8 CPU-s per job, more than the decoding)."""
    _, sched = schedulers(cfg)
    sched.set_timesteps(int(cfg["sample_steps"]))
    c = sched.config
    return {"alphas_cumprod": [float(a) for a in sched.alphas_cumprod], "timesteps": [int(t) for t in sched.timesteps],
            "step_ratio": int(c.num_train_timesteps // sched.num_inference_steps),
            "final_alpha_cumprod": float(sched.final_alpha_cumprod), "prediction": c.prediction_type,
            "clip": bool(c.clip_sample), "clip_range": float(c.clip_sample_range)}


def ddim_step(schedule: dict, model_output: torch.Tensor, t: int, x: torch.Tensor) -> torch.Tensor:
    """One deterministic DDIM step (eta = 0), the update of diffusers' DDIMScheduler.step (a test checks it)."""
    ac = schedule["alphas_cumprod"]
    prev = t - schedule["step_ratio"]
    a_t = ac[t]
    a_prev = ac[prev] if prev >= 0 else schedule["final_alpha_cumprod"]
    if schedule["prediction"] == "sample":
        x0 = model_output
        eps = (x - a_t**0.5 * x0) / (1 - a_t) ** 0.5
    else:
        eps = model_output
        x0 = (x - (1 - a_t) ** 0.5 * eps) / a_t**0.5
    if schedule["clip"]:
        x0 = x0.clamp(-schedule["clip_range"], schedule["clip_range"])
    return a_prev**0.5 * x0 + (1 - a_prev) ** 0.5 * eps


class DiffusionDecoder:
    """`decode(features, seed)`: DDIM with classifier-free guidance, images in [0, 1] on the host. The model
    runs on `device` (where it is placed); the starting noise is drawn on the host."""

    def __init__(self, model: Denoiser, cfg: dict, shape: tuple[int, ...], schedule: dict | None = None,
                 device="cpu"):
        self.model, self.cfg, self.shape, self.device = model, cfg, tuple(shape), device
        self.schedule = schedule or ddim_schedule(cfg)

    @torch.no_grad()
    def decode(self, feats, seed: int, batch: int = 512) -> np.ndarray:
        w = float(self.cfg["guidance"])
        c_all = prep_cond(torch.as_tensor(np.asarray(feats), dtype=torch.float32))
        g = torch.Generator().manual_seed(int(seed))
        out = []
        for i in range(0, len(c_all), batch):
            c = c_all[i:i + batch]
            n = len(c)
            x = P.place(torch.randn((n, *self.shape), generator=g), self.device)
            cc = P.place(torch.cat([c, c]), self.device)
            drop = P.place(torch.cat([torch.zeros(n, dtype=torch.bool), torch.ones(n, dtype=torch.bool)]), self.device)
            for t in self.schedule["timesteps"]:
                tt = torch.full((2 * n,), int(t), dtype=torch.long, device=x.device)
                eps = self.model(torch.cat([x, x]), tt, cc, drop)
                e_c, e_u = eps[:n], eps[n:]
                x = ddim_step(self.schedule, e_c + w * (e_c - e_u), int(t), x)
            out.append(((x.clamp(-1, 1) + 1) / 2).cpu().numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros((0, *self.shape), np.float32)


def save_decoder(path, model: Denoiser, cfg: dict) -> None:
    import json
    from pathlib import Path

    torch.save(P.host_state(model), path)
    Path(path).with_suffix(".ddim.json").write_text(json.dumps(ddim_schedule(cfg)))


def load_decoder(path, cfg: dict, shape, cond_dim: int, device="cpu") -> DiffusionDecoder:
    import json
    from pathlib import Path

    model = Denoiser(int(np.prod(shape)), cond_dim, int(cfg["width"]), int(cfg["depth"]))
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    model = P.place(model, device)
    model.eval()
    return DiffusionDecoder(model, cfg, shape, json.loads(Path(path).with_suffix(".ddim.json").read_text()), device)


class StableDiffusionDecoder:
    """Full scale: Stable Diffusion v1.4 (`model` = a hub id or a local `save_pretrained` directory) with
    the OOD feature in place of the class-name token embedding of "A high-quality photo of a <class>"
    (Dream-OOD's prompt), rescaled to the anchor's norm. Not exercised at mini (no weights offline).
    The pipeline runs on `device` (default: CUDA when available); its latent noise comes from a host
    generator, so a seed gives the same draws on every device."""

    def __init__(self, model: str, prompt: str = "A high-quality photo of a {}", steps: int = 50,
                 guidance: float = 7.5, size: int = 512, device: str | None = None):
        from diffusers import StableDiffusionPipeline

        self.pipe = StableDiffusionPipeline.from_pretrained(model, safety_checker=None)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.pipe.to(self.device)
        self.prompt, self.steps, self.guidance, self.size = prompt, steps, guidance, size

    def token_embeddings(self, names: list[str]) -> np.ndarray:
        """The anchors: the text encoder's input embedding of each class name's first token."""
        tok, enc = self.pipe.tokenizer, self.pipe.text_encoder
        ids = [tok(n, add_special_tokens=False).input_ids[0] for n in names]
        return enc.get_input_embeddings().weight[ids].detach().cpu().numpy()

    @torch.no_grad()
    def decode(self, feats, seed: int, placeholder: str = "object") -> np.ndarray:
        tok, enc = self.pipe.tokenizer, self.pipe.text_encoder
        text = self.prompt.format(placeholder)
        ids = tok(text, padding="max_length", max_length=tok.model_max_length, return_tensors="pt").input_ids
        pos = int((ids[0] == tok(placeholder, add_special_tokens=False).input_ids[0]).nonzero()[0, 0])
        images = []
        g = torch.Generator().manual_seed(int(seed))
        for f in np.asarray(feats):
            hidden = _encode_with_token(enc, ids.to(self.device), pos, torch.as_tensor(f, device=self.device))
            img = self.pipe(prompt_embeds=hidden, num_inference_steps=self.steps, guidance_scale=self.guidance,
                            height=self.size, width=self.size, generator=g, output_type="np").images[0]
            images.append(np.transpose(img, (2, 0, 1)))
        return np.stack(images).astype(np.float32)


def _encode_with_token(enc, ids, pos: int, vec):
    """The text encoder's last hidden states for `ids` with the input token embedding at `pos` replaced by
    `vec`. A forward hook on the token-embedding layer does the swap, so the model's own forward adds the
    positions and the causal mask (transformers 4 and 5 lay CLIPTextModel out differently)."""
    def swap(_module, _inputs, out):
        out = out.clone()
        out[0, pos] = vec.to(out.dtype)
        return out

    hook = enc.get_input_embeddings().register_forward_hook(swap)
    try:
        return enc(input_ids=ids)[0]
    finally:
        hook.remove()
