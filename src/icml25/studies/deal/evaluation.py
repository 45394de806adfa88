"""Fitting on training / validation data (train stage) and testing (evaluate stage) of every method.

Denoising: AWGN at each `eval.sigmas` (0-255 units) on the test crops, the noise drawn from (seed,
sigma, image) so every method sees the same noisy images at a seed. Deblurring: a 9x9 Gaussian blur
(circular) plus noise `deblur.noise`, the denoising-trained models reused without retraining; one
hyperparameter per method (lambda, TV weight, PnP penalty; WCRR-NN's (lambda, sigma) pair) picked on the
validation image. CT and MRI
(inverse.py) likewise, on square crops of the deblurring images. PSNR and SSIM
on outputs clipped to [0, 1] (scikit-image's SSIM, data range 1).
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import torch

from . import baselines as B
from . import drunet as DR
from . import inverse as INV
from . import operators as O
from .data import centre_crop, load_images, noisy
from .training import model_device

TRAINED = {"deal": True, "deal_noattn": False}  # DEAL variants -> attention


def blur_of(cfg, shape) -> O.Blur:
    d = cfg["deblur"]
    return O.Blur(O.gaussian_kernel(int(d["kernel"]), float(d["blur_sigma"])), shape)


def blurred(cfg, im, seed: int, index: int) -> np.ndarray:
    """y = k * x + n; the noise from (seed, 'blur', image)."""
    d = cfg["deblur"]
    b = blur_of(cfg, im.shape[-2:])
    hx = O.from_batch(b.A(O.to_batch(im)))
    rng = np.random.default_rng([int(seed), 999_999, int(index)])
    return (hx + float(d["noise"]) / 255.0 * rng.standard_normal(im.shape)).astype(np.float32)


# ---- one method as a function of the data --------------------------------------------------------------

def denoiser(method: str, model, params: dict, cfg: dict | None = None):
    """f(list of noisy images, sigma) -> list of outputs (numpy), for the non-DEAL methods."""
    if method == "noisy":
        return lambda ys, s: ys
    if method == "tikhonov":
        return lambda ys, s: [O.from_batch(O.tikhonov(O.to_batch(y), params[f"s{s:g}"])) for y in ys]
    if method == "tv":
        return lambda ys, s: [B.tv_denoise(y, params[f"s{s:g}"]) for y in ys]
    if method == "dncnn":
        dev = model_device(model)

        def f(ys, s):
            with torch.no_grad():
                return [O.from_batch(model(O.to_batch(y, dev))) for y in ys]
        return f
    if method == "drunet":  # non-blind: told the test noise level, as DEAL is
        return lambda ys, s: [O.from_batch(DR.denoiser_at(model, s)(O.to_batch(y, model_device(model)))) for y in ys]
    if method == "wcrr":  # the official denoising test: λ = 1, σ = the noise level, FISTA with restart
        from . import wcrr

        d = cfg["wcrr"]["denoise"]
        return lambda ys, s: [O.from_batch(wcrr.denoise(model, O.to_batch(y, model_device(model)), s,
                                                        max_iter=int(d["max_iter"]), tol=float(d["tol"])))
                              for y in ys]
    raise KeyError(method)


def deblurrer(method: str, model, cfg: dict):
    """f(y, blur, hyperparameter) -> x (numpy)."""
    d = cfg["deblur"]
    if method == "noisy":
        return lambda y, b, p: y
    if method == "tikhonov":
        return lambda y, b, p: O.from_batch(O.tikhonov(O.to_batch(y), p, b))
    if method == "tv":
        return lambda y, b, p: B.tv_deblur(y, b, p, int(d["tv_iters"]))
    dev = model_device(model)
    if method == "dncnn":
        return lambda y, b, p: B.pnp_hqs(y, b.to(dev), model, p, int(d["pnp_iters"]))
    if method == "drunet":  # the same HQS; the hyperparameter is DRUNet's noise level, mu follows from it
        return lambda y, b, p: B.pnp_hqs(y, b.to(dev), DR.denoiser_at(model, p),
                                         DR.pnp_strength(float(d["noise"]), p), int(d["pnp_iters"]))
    if method == "wcrr":  # SAGD on ½||k * x - y||² + λ R(x, σ) from 0 (the official default), (λ, σ) tuned
        from . import wcrr

        w = cfg["wcrr"]
        return lambda y, b, p: O.from_batch(wcrr.reconstruct(model, O.to_batch(y, dev), b.to(dev).A, b.to(dev).At,
                                                             p[0], p[1], max_iter=int(w["max_iter"]),
                                                             tol=float(w["tol"])))
    if method in TRAINED:
        def f(y, b, p):
            b = b.to(dev)
            yt = O.to_batch(y, dev)
            x = model.solve_inverse_problem(yt, b.A, b.At, float(d["sigma_denoiser"]), p, n_out=int(d["n_out"]),
                                            n_in=int(d["n_in"]), eps_in=float(d["eps_in"]), eps_out=float(d["eps_out"]))
            return O.from_batch(x)
        return f
    raise KeyError(method)


DEBLUR_GRID = {"tikhonov": "tikhonov_lambdas", "tv": "tv_weights", "dncnn": "pnp_mus", "deal": "deal_lambdas",
               "deal_noattn": "deal_lambdas", "drunet": "drunet_sigmas", "wcrr": ("wcrr_lambdas", "wcrr_sigmas")}
DENOISE_GRID = {"tikhonov": "tikhonov_lambdas", "tv": "tv_weights"}


def tune(cfg: dict, method: str, model, data_dir: Path) -> dict:
    """Each method's free hyperparameters, picked by PSNR on the validation image (never on test)."""
    (name, val), = load_images(data_dir / "val.npz")[:1]
    out = {}
    if method in DENOISE_GRID:
        f = denoiser(method, model, {})
        for s in cfg["eval"]["sigmas"]:
            y = noisy(val, s, 10_000, 0)
            grid = cfg["tune"][DENOISE_GRID[method]]
            scores = [O.psnr(denoiser(method, model, {f"s{s:g}": p})([y], s)[0], val) for p in grid]
            out[f"s{s:g}"] = float(grid[int(np.argmax(scores))])
    if method in DEBLUR_GRID and cfg["deblur"].get("enabled", True):
        y = blurred(cfg, val, 10_000, 0)
        b = blur_of(cfg, val.shape[-2:])
        grid = INV.grid_values(cfg["deblur"], DEBLUR_GRID[method])
        f = deblurrer(method, model, cfg)
        scores = [O.psnr(f(y, b, p), val) for p in grid]
        out["deblur"] = INV.pick(grid, scores)
        out["deblur_val_psnr"] = [float(s) for s in scores]
    if INV.enabled(cfg):  # CT and MRI: the same validation image, cropped to the tasks' size
        out.update(INV.tune(cfg, method, model, centre_crop(val, int(cfg["inverse"]["size"])), data_dir))
    return out


# ---- test ---------------------------------------------------------------------------------------------

def _by_shape(images):
    groups: dict = {}
    for i, (n, im) in enumerate(images):
        groups.setdefault(im.shape, []).append(i)
    return list(groups.values())


def deal_denoise(cfg, model, ys: list, sigma: float):
    """DEAL outputs under the evaluation protocol, plus the fixed-point diagnostics: the residual
    ||x_{k+1} - x_k|| / ||x_k|| per outer iteration (one batch per image shape, as the official code
    computes it over the batch), the iterates at the training depth and the last one (`eval.n_out`,
    3x the training depth at mini), and the channel-mean attention mask at the output."""
    e = cfg["eval"]
    depth = int(cfg["train"]["n_out"][1])
    n = len(ys)
    final, at_depth, last, masks, residuals, iters = [None] * n, [None] * n, [None] * n, [None] * n, [], []
    for group in _by_shape([(str(i), y) for i, y in enumerate(ys)]):
        y = torch.as_tensor(np.stack([ys[i] for i in group]), device=model_device(model))
        y = y[:, None] if y.ndim == 3 else y  # gray (h, w) images get their channel axis
        res, its = [], []
        with torch.no_grad():
            model.denoise(y, sigma, n_out=int(e["n_out"]), n_in=int(e["n_in"]), eps_in=float(e["eps_in"]),
                          eps_out=0.0, residuals=res, iterates=its)
            # the protocol's output: the first iterate whose relative change is below eps_out (or the last)
            stop = next((k for k, r in enumerate(res) if r < float(e["eps_out"])), len(res) - 1)
            model.cal_mask(its[stop])
        iters.append(stop + 1)
        residuals.append(res)
        mask = (model.mask if torch.is_tensor(model.mask) else torch.ones_like(its[stop])).cpu()
        its = [its[stop].cpu(), its[min(depth, len(its)) - 1].cpu(), its[-1].cpu()]
        for j, i in enumerate(group):
            final[i] = O.from_batch(its[0][j:j + 1])
            at_depth[i] = O.from_batch(its[1][j:j + 1])
            last[i] = O.from_batch(its[2][j:j + 1])
            masks[i] = mask[j].mean(0).numpy()
    return final, at_depth, last, masks, residuals, iters


def worst_step(res: list[float], floor: float) -> float:
    """max_k log10(r_{k+1} / r_k) over the steps whose residual is above the numerical floor:
    negative iff the residual fell at every such step."""
    r = [x for x in res if math.isfinite(x)]
    pairs = [(a, b) for a, b in zip(r[:-1], r[1:]) if a > floor and b > floor]
    if not pairs:
        return -1.0
    return max(math.log10(b / a) for a, b in pairs)


def test(cfg: dict, method: str, model, params: dict, seed: int, data_dir: Path, run_dir: Path) -> list[dict]:
    from icml25.core.io import write_json

    images = load_images(data_dir / "test.npz")
    rows, fp = [], {}
    example_sigma = max(cfg["eval"]["sigmas"])
    example = {}
    for s in cfg["eval"]["sigmas"]:
        ys = [noisy(im, s, seed, i) for i, (_, im) in enumerate(images)]
        t0 = time.process_time()
        if method in TRAINED:
            final, at_depth, last, masks, res, iters = deal_denoise(cfg, model, ys, s)
            dt = time.process_time() - t0
            p_depth = np.mean([O.psnr(x, im) for x, (_, im) in zip(at_depth, images)])
            p_last = np.mean([O.psnr(x, im) for x, (_, im) in zip(last, images)])
            floor = float(cfg["claims"]["residual_floor"])
            rows += [_row(s, "psnr_at_depth", p_depth), _row(s, "psnr_at_3x", p_last),
                     _row(s, "fp_worst_step", max(worst_step(r, floor) for r in res)),
                     _row(s, "fp_final_residual", max(r[-1] for r in res)),
                     _row(s, "fp_iters", float(np.mean(iters)))]
            fp[f"s{s:g}"] = res
            if s == example_sigma:
                example["mask"] = masks[0]
        else:
            final = denoiser(method, model, params, cfg)(ys, s)
            dt = time.process_time() - t0
        rows += [_row(s, "psnr", np.mean([O.psnr(x, im) for x, (_, im) in zip(final, images)])),
                 _row(s, "ssim", np.mean([O.ssim(x, im) for x, (_, im) in zip(final, images)])),
                 _row(s, "cpu_s_per_image", dt / len(images))]
        if s == example_sigma:
            example.update(clean=images[0][1], noisy=ys[0], out=final[0])
    if cfg["deblur"].get("enabled", True):
        f = deblurrer(method, model, cfg)
        targets = load_images(data_dir / "deblur.npz")
        outs, t0 = [], time.process_time()
        for i, (_, im) in enumerate(targets):
            outs.append(f(blurred(cfg, im, seed, i), blur_of(cfg, im.shape[-2:]), params.get("deblur")))
        dt = time.process_time() - t0
        rows += [{"setting": "deblur", "metric": "psnr", "value": np.mean([O.psnr(x, im) for x, (_, im) in zip(outs, targets)])},
                 {"setting": "deblur", "metric": "ssim", "value": np.mean([O.ssim(x, im) for x, (_, im) in zip(outs, targets)])},
                 {"setting": "deblur", "metric": "cpu_s_per_image", "value": dt / len(targets)}]
    if INV.enabled(cfg) and method in INV.GRID:
        rows += INV.test(cfg, method, model, params, seed, data_dir)
    if fp:
        write_json(run_dir / "fixed_point.json", {"depth": int(cfg["train"]["n_out"][1]), "residuals": fp})
    np.savez(run_dir / "example.npz", sigma=example_sigma, image=images[0][0], **example)
    return rows


def _row(sigma, metric, value):
    return {"setting": f"denoise/s{sigma:g}", "metric": metric, "value": float(value)}
