"""The generator behind one interface: `sample(z_T) -> images in [-1, 1]` and `invert(images) -> z_T_hat`.

* `PixelDDIM` (smoke, mini): a pixel-space diffusers `UNet2DModel` trained in the pipeline (`fit_ddpm`),
  saved with save_pretrained and loaded with from_pretrained; DDIM sampling (`DDIMScheduler`, eta 0) and
  DDIM inversion (`DDIMInverseScheduler`). The "latent" is the pixel tensor (3 x 16 x 16).
* `StableDiffusion` (full): `StableDiffusionPipeline.from_pretrained(<hub id or local dir>)`, generation with
  DPM-Solver (50 steps, CFG 7.5, the prompt), detection with the VAE posterior mode and 50-step DDIM
  inversion under the empty prompt, guidance 1 (the official `InversableStableDiffusionPipeline`).
Both run batched; the DDIM inversion loop is shared.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch


def _device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@torch.no_grad()
def ddim_invert(eps, x: torch.Tensor, inverse_scheduler, steps: int) -> torch.Tensor:
    """x_0 -> x_T with the deterministic DDIM update run backwards; eps(x, t) is the noise prediction."""
    inverse_scheduler.set_timesteps(int(steps))
    for t in inverse_scheduler.timesteps:
        x = inverse_scheduler.step(eps(x, t), t, x).prev_sample
    return x


class PixelDDIM:
    """A tiny pixel DDPM served through DDIM sampling and inversion."""

    def __init__(self, path, steps: int, batch_size: int = 256):
        from diffusers import DDIMInverseScheduler, DDIMScheduler, UNet2DModel

        self.device = _device()
        self.unet = UNet2DModel.from_pretrained(str(Path(path) / "unet")).to(self.device).eval()
        self.scheduler = DDIMScheduler.from_pretrained(str(path), subfolder="scheduler")
        self.inverse = DDIMInverseScheduler.from_config(self.scheduler.config)
        self.steps, self.batch_size = int(steps), int(batch_size)
        self.latent_shape = (self.unet.config.in_channels, self.unet.config.sample_size, self.unet.config.sample_size)

    def _eps(self, x, t):
        return self.unet(x, t).sample

    def _batched(self, fn, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([fn(x[i:i + self.batch_size].to(self.device)).cpu() for i in range(0, len(x), self.batch_size)])

    @torch.no_grad()
    def sample(self, z_t: torch.Tensor, prompts=None) -> torch.Tensor:
        def run(x):
            self.scheduler.set_timesteps(self.steps)
            for t in self.scheduler.timesteps:
                x = self.scheduler.step(self._eps(x, t), t, x, eta=0.0).prev_sample
            return x.clamp(-1, 1)

        return self._batched(run, z_t.float())

    @torch.no_grad()
    def invert(self, images: torch.Tensor) -> torch.Tensor:
        return self._batched(lambda x: ddim_invert(self._eps, x, self.inverse, self.steps), images.float())


class StableDiffusion:
    """Stable Diffusion behind the same interface (the paper's setting); `latent_shape` is (4, H/8, W/8)."""

    def __init__(self, model_id: str, steps: int = 50, inversion_steps: int = 50, guidance: float = 7.5,
                 resolution: int = 512, dtype: str = "float16", batch_size: int = 4):
        from diffusers import DDIMInverseScheduler, DPMSolverMultistepScheduler, StableDiffusionPipeline

        self.device = _device()
        dt = getattr(torch, dtype) if self.device.type == "cuda" else torch.float32
        sched = DPMSolverMultistepScheduler.from_pretrained(model_id, subfolder="scheduler")
        self.pipe = StableDiffusionPipeline.from_pretrained(model_id, scheduler=sched, torch_dtype=dt,
                                                            safety_checker=None, requires_safety_checker=False)
        self.pipe = self.pipe.to(self.device)
        self.pipe.set_progress_bar_config(disable=True)
        # DDIMInverseScheduler has no 'linspace' spacing (DPM-Solver's default): invert on 'leading' steps then
        spacing = self.pipe.scheduler.config.get("timestep_spacing", "leading")
        self.inverse = DDIMInverseScheduler.from_config(
            self.pipe.scheduler.config, timestep_spacing=spacing if spacing in ("leading", "trailing") else "leading")
        self.steps, self.inversion_steps, self.guidance = int(steps), int(inversion_steps), float(guidance)
        self.resolution, self.dtype, self.batch_size = int(resolution), dt, int(batch_size)
        f = 2 ** (len(self.pipe.vae.config.block_out_channels) - 1)
        self.latent_shape = (self.pipe.unet.config.in_channels, self.resolution // f, self.resolution // f)

    @torch.no_grad()
    def sample(self, z_t: torch.Tensor, prompts) -> torch.Tensor:
        out = []
        for i in range(0, len(z_t), self.batch_size):
            z = z_t[i:i + self.batch_size].to(self.device, self.dtype)
            img = self.pipe(list(prompts[i:i + len(z)]), latents=z, num_inference_steps=self.steps,
                            guidance_scale=self.guidance, height=self.resolution, width=self.resolution,
                            output_type="pt").images
            out.append(img.float().cpu() * 2 - 1)
        return torch.cat(out)

    @torch.no_grad()
    def invert(self, images: torch.Tensor) -> torch.Tensor:
        emb = self.pipe.encode_prompt("", self.device, 1, False)[0]
        vae, unet = self.pipe.vae, self.pipe.unet
        out = []
        for i in range(0, len(images), self.batch_size):
            x = images[i:i + self.batch_size].to(self.device, self.dtype)
            lat = vae.encode(x).latent_dist.mode() * vae.config.scaling_factor
            e = emb.expand(len(lat), *emb.shape[1:])
            out.append(ddim_invert(lambda z, t: unet(z, t, encoder_hidden_states=e).sample, lat, self.inverse,
                                   self.inversion_steps).float().cpu())
        return torch.cat(out)


def load(base_dir: Path, cfg: dict):
    """The generator named by the base stage (a local pixel DDPM, or an SD id/path at full scale)."""
    rec = json.loads((Path(base_dir) / "base.json").read_text())
    d = cfg["diffusion"]
    if rec["kind"] == "pixel_ddim":
        return PixelDDIM(Path(base_dir) / rec["path"], d["steps"], d.get("batch_size", 256))
    return StableDiffusion(rec["model_id"], d["steps"], d["inversion_steps"], d["guidance"], d["resolution"],
                           d.get("dtype", "float16"), d.get("batch_size", 4))


def fit_ddpm(crops: np.ndarray, cfg: dict, seed: int, out: Path) -> dict:
    """Train the pixel DDPM on uint8 crops (N, H, W, 3): epsilon prediction, cosine schedule, AdamW; save
    the UNet and the scheduler config with save_pretrained (what `PixelDDIM` loads)."""
    from diffusers import DDIMScheduler, DDPMScheduler, UNet2DModel

    torch.manual_seed(int(seed))
    rng = np.random.default_rng(int(seed))
    m = cfg["model"]
    size = int(crops.shape[1])
    unet = UNet2DModel(sample_size=size, in_channels=3, out_channels=3,
                       block_out_channels=tuple(m["channels"]), layers_per_block=int(m["layers_per_block"]),
                       norm_num_groups=int(m["norm_groups"]),
                       down_block_types=("DownBlock2D",) * len(m["channels"]),
                       up_block_types=("UpBlock2D",) * len(m["channels"]))
    sched = DDPMScheduler(num_train_timesteps=1000, beta_schedule="squaredcos_cap_v2", prediction_type="epsilon")
    opt = torch.optim.AdamW(unet.parameters(), lr=float(m["lr"]))
    data = torch.from_numpy(crops).permute(0, 3, 1, 2).float() / 127.5 - 1
    bs, log = int(m["batch_size"]), []
    unet.train()
    for step in range(int(m["steps"])):
        x0 = data[rng.integers(0, len(data), bs)]
        noise = torch.randn_like(x0)
        t = torch.randint(0, 1000, (bs,))
        loss = torch.nn.functional.mse_loss(unet(sched.add_noise(x0, noise, t), t).sample, noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.append((step, float(loss.detach())))
    unet.eval()
    out = Path(out)
    unet.save_pretrained(str(out / "unet"))
    # DDIM over the same training schedule; DDIMInverseScheduler is built from this config at load time
    DDIMScheduler.from_config(sched.config, clip_sample=False, set_alpha_to_one=False).save_pretrained(str(out / "scheduler"))
    return {"n_params": int(sum(p.numel() for p in unet.parameters())), "loss": log}
