"""One (method, seed) run: make the method's watermarked latents, generate, distort, invert, score, and the
shared base stage (generator, the clean images' inverted noise, one GNR per key seed).

Methods (what is injected -> what is scored):
  gs           Gaussian Shading            -> bit accuracy of vote(decrypt(sign z_T_hat))
  tr           Tree-Ring ring on N(0, I)   -> -d, the ring distance
  gs_gnr       Gaussian Shading            -> bit accuracy after the GNR restores the bit map
  gaussmarker  GS, then the TR ring on top -> fuser(restored bit accuracy, -d), fitted on a calibration
                                              split of other generation seeds (never the test pairs)
Detection always inverts the distorted image; the injected noise is only used to generate.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from . import distortions as D
from . import metrics as M
from .shading import GaussianShading
from .treering import TreeRing

GS_METHODS = ("gs", "gs_gnr", "gaussmarker")
TR_METHODS = ("tr", "gaussmarker")
GNR_METHODS = ("gs_gnr", "gaussmarker")
CLEAN_STREAM = 10_000_019  # generation seeds of the clean images: disjoint from every key seed's streams
SPLITS = {"test": 0, "calib": 1}


def watermarks(cfg: dict, shape, seed: int):
    w = cfg["watermark"]
    gs = GaussianShading.from_seed(shape, tuple(w["gs_factors"]), seed)
    tr = TreeRing.build(shape, int(w["tr_radius"]), int(w["tr_channel"]), int(w.get("tr_seed", 999999)))
    return gs, tr


def _rng(seed: int, split: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), SPLITS[split], 0x5EED])


def clean_latents(n: int, split: str, shape) -> torch.Tensor:
    """Un-watermarked z_T ~ N(0, I): one set for every key seed and method (the official pairs image i with
    a clean image from get_random_latents() under generation seed i, whatever the key)."""
    return torch.from_numpy(_rng(CLEAN_STREAM, split).standard_normal((n, *shape)).astype(np.float32))


def watermarked_latents(method: str, n: int, seed: int, split: str, gs: GaussianShading, tr: TreeRing):
    """(z_T after every injection, z_T before the TR edit or None)."""
    rng = _rng(seed, split)
    if method == "tr":
        return tr.inject(torch.from_numpy(rng.standard_normal((n, *gs.shape)).astype(np.float32))), None
    z = torch.from_numpy(gs.sample(n, rng))
    if method == "gaussmarker":  # the pipelined injector: TR on top of the GS sample
        return tr.inject(z), z
    return z, z


def prompts_for(cfg: dict, data_dir: Path, n: int, split: str):
    if cfg["scale"] != "full":
        return None
    p = json.loads((Path(data_dir) / "prompts.json").read_text())
    off = 0 if split == "test" else int(cfg["detect"]["n_test"])
    return [p[(off + i) % len(p)] for i in range(n)]


def distort_and_invert(pipe, images: np.ndarray, cfg: dict, split: str) -> dict:
    """{distortion: z_T_hat} for uint8 images; distortion randomness is seeded by (distortion, split) only,
    so the watermarked and the clean image of a pair get the same draw."""
    out = {}
    for j, (name, spec) in enumerate(cfg["distortions"].items()):
        att = D.apply(spec, images, seed=1000 * j + SPLITS[split])
        out[name] = pipe.invert(D.to_tensor(att))
    return out


def generate(pipe, z: torch.Tensor, prompts) -> np.ndarray:
    return D.to_uint8(pipe.sample(z, prompts))


def features(method: str, z_hat: torch.Tensor, gs, tr, gnr_model) -> dict:
    """The detector's scores of inverted latents (one per latent)."""
    out = {}
    bits = (z_hat > 0).to(torch.uint8)
    if method in GS_METHODS:
        out["gs"] = gs.bit_accuracy(bits.numpy())
    if method in GNR_METHODS:
        out["gnr"] = gs.bit_accuracy(gnr_model.restore(bits).numpy())
    if method in TR_METHODS:
        out["tr"] = -tr.distance(z_hat)
    return out


SCORE = {"gs": "gs", "gs_gnr": "gnr", "tr": "tr"}


# ---- the base stage ---------------------------------------------------------------------------------------

def _clean_task(base_dir: str, cfg: dict, data_dir: str):
    from . import diffusion

    from icml25.core import runtime

    runtime.set_threads(1)
    torch.manual_seed(0)
    pipe = diffusion.load(Path(base_dir), cfg)
    shape = pipe.latent_shape
    det = cfg["detect"]
    out = {}
    for split, n in (("test", int(det["n_test"])), ("calib", int(det["n_calib"]))):
        z = clean_latents(n, split, shape)
        imgs = generate(pipe, z, prompts_for(cfg, Path(data_dir), n, split))
        np.save(Path(base_dir) / f"clean_{split}_images.npy", imgs)
        np.save(Path(base_dir) / f"clean_{split}_z.npy", z.numpy())
        inv = distort_and_invert(pipe, imgs, cfg, split)
        np.savez(Path(base_dir) / f"clean_{split}_zhat.npz", **{k: v.numpy() for k, v in inv.items()})
        out[split] = n
    return out


def _gnr_task(base_dir: str, cfg: dict, seed: int, shape):
    from . import gnr

    from icml25.core import runtime

    runtime.set_threads(1)
    gs, _ = watermarks(cfg, shape, seed)
    model, log = gnr.train(gs.bitmap(), cfg["gnr"], seed)
    torch.save(model.state_dict(), Path(base_dir) / f"gnr_seed{seed}.pt")
    ctl = gnr.controls(model, gs, cfg["gnr"], seed)
    rec = {"seed": seed, "log": log, "controls": ctl, "n_params": int(sum(p.numel() for p in model.parameters()))}
    (Path(base_dir) / f"gnr_seed{seed}.json").write_text(json.dumps(rec))
    return rec


def _ddpm_then_clean(base_dir: str, cfg: dict, data_dir: str):
    from . import diffusion

    from icml25.core import runtime

    runtime.set_threads(1)
    base = Path(base_dir)
    if cfg["diffusion"]["kind"] == "pixel_ddim":
        with np.load(Path(data_dir) / "crops.npz") as z:
            crops = z["crops"]
        fit = diffusion.fit_ddpm(crops, cfg["diffusion"], int(cfg.get("base_seed", 0)), base / "ddpm")
        rec = {"kind": "pixel_ddim", "path": "ddpm", "n_params": fit["n_params"], "loss": fit["loss"]}
    else:
        rec = {"kind": "stable_diffusion", "model_id": cfg["diffusion"]["model_id"]}
    (base / "base.json").write_text(json.dumps(rec))
    _clean_task(base_dir, cfg, data_dir)
    return rec


def fit_base(cfg: dict, data_dir: Path, out_dir: Path) -> None:
    """The generator, then (in parallel where --threads allows) the clean images' inverted noise and one GNR
    per key seed: the GNR is model-independent and key-specific, trained once per key before detection as the
    official train_GNR.py, so gs_gnr and gaussmarker of a seed share it."""
    from icml25.core import runtime

    shape = tuple(cfg["latent_shape"])
    methods = set(cfg["methods"])
    calls = [(_ddpm_then_clean, (str(out_dir), cfg, str(data_dir)))]
    if methods & set(GNR_METHODS):
        # with one base per seed (base_per_seed) this base serves one key seed only, so it trains that key's GNR
        keys = [int(cfg["base_seed"])] if cfg.get("base_per_seed") else [int(s) for s in cfg["seeds"]]
        calls += [(_gnr_task, (str(out_dir), cfg, s, shape)) for s in keys]
    results = runtime.run_tasks(calls, runtime.threads())
    rec = json.loads((Path(out_dir) / "base.json").read_text())
    rec["gnr"] = {str(r["seed"]): r["controls"] for r in results[1:]}
    (Path(out_dir) / "base.json").write_text(json.dumps(rec))


# ---- one (method, seed) run ---------------------------------------------------------------------------

def _load_gnr(base_dir: Path, cfg: dict, seed: int, channels: int):
    from . import gnr

    path = Path(base_dir) / f"gnr_seed{seed}.pt"
    if not path.exists():
        from icml25.core.errors import UserError

        raise UserError(f"gaussmarker: no GNR for seed {seed} in {base_dir}: the base stage trains one per "
                        "configured seed; rerun fit-base with this seed in `seeds`")
    model = gnr.GNR(channels, int(cfg["gnr"]["nf"]))
    model.load_state_dict(torch.load(path, weights_only=True))
    return model.eval()


def lossless(z: torch.Tensor, clean: torch.Tensor, alpha: float = 0.01) -> dict:
    """Per latent: KS test of its L coordinates against N(0, 1) and a two-sample KS test against the paired
    clean latent; plus, across latents, the share of coordinates whose values reject N(0, 1) (one fixed key
    fixes each coordinate's sign, so this is expected to be high: see README)."""
    from scipy import stats

    zf, cf = z.reshape(len(z), -1).numpy().astype(np.float64), clean.reshape(len(clean), -1).numpy().astype(np.float64)
    p1 = np.array([stats.kstest(v, "norm").pvalue for v in zf])
    p2 = np.array([stats.ks_2samp(v, c).pvalue for v, c in zip(zf, cf)])
    pc = np.array([stats.kstest(zf[:, j], "norm").pvalue for j in range(zf.shape[1])])
    return {"pass_share": float(np.mean((p1 > alpha) & (p2 > alpha))), "ks_pass": float(np.mean(p1 > alpha)),
            "ks2_pass": float(np.mean(p2 > alpha)), "ks_p_median": float(np.median(p1)),
            "coord_reject": float(np.mean(pc <= alpha))}


def run(cfg: dict, method: str, seed: int, data_dir: Path, base_dir: Path, run_dir: Path) -> dict:
    import time

    from . import diffusion

    t0 = time.process_time()
    pipe = diffusion.load(Path(base_dir), cfg)
    shape = tuple(pipe.latent_shape)
    if shape != tuple(cfg["latent_shape"]):
        from icml25.core.errors import UserError

        raise UserError(f"gaussmarker: latent_shape {cfg['latent_shape']} in the config, but the generator's latent "
                        f"is {list(shape)}; set latent_shape to match (the GNR is trained at that shape)")
    gs, tr = watermarks(cfg, shape, seed)
    model = _load_gnr(base_dir, cfg, seed, shape[0]) if method in GNR_METHODS else None
    det = cfg["detect"]
    fpr = float(det["fpr"])
    splits = [("test", int(det["n_test"]))] + ([("calib", int(det["n_calib"]))] if method == "gaussmarker" else [])
    feats, extra = {}, {}
    for split, n in splits:
        z, z_gs = watermarked_latents(method, n, seed, split, gs, tr)
        imgs = generate(pipe, z, prompts_for(cfg, Path(data_dir), n, split))
        inv = distort_and_invert(pipe, imgs, cfg, split)
        with np.load(Path(base_dir) / f"clean_{split}_zhat.npz") as cz:
            clean_inv = {k: torch.from_numpy(cz[k]) for k in cz.files}
        feats[split] = {d: (features(method, inv[d], gs, tr, model), features(method, clean_inv[d], gs, tr, model))
                        for d in cfg["distortions"]}
        if split == "test":
            clean_z = torch.from_numpy(np.load(Path(base_dir) / f"clean_{split}_z.npy"))
            extra["lossless"] = lossless(z, clean_z)
            if z_gs is not None and method == "gaussmarker":
                extra["lossless_gs_stage"] = lossless(z_gs, clean_z)
                extra["sign_kept_after_tr"] = float(((z > 0) == (z_gs > 0)).float().mean())
            if z_gs is not None:
                extra["sign_equals_m"] = float(((z_gs > 0).numpy() == gs.bitmap()[None].astype(bool)).mean())
            if method in GS_METHODS:
                extra["analytic_tau"] = gs.tpr_threshold(fpr)
    fuser = None
    if method == "gaussmarker":
        keys = ("gnr", "tr")  # the official fuser's two features: restored bit accuracy and -d
        cal = feats["calib"]
        xp = np.concatenate([np.c_[tuple(f[0][k] for k in keys)] for f in cal.values()])
        xn = np.concatenate([np.c_[tuple(f[1][k] for k in keys)] for f in cal.values()])
        fuser = M.fit_fuser(xp, xn, seed, tuple(det.get("fuser_hidden", (100,))), int(det.get("fuser_max_iter", 2000)))
    results, scores = {}, {}
    for d, (fw, fc) in feats["test"].items():
        if fuser is not None:
            keys = ("gnr", "tr")
            sp, sn = M.fuse(fuser, np.c_[tuple(fw[k] for k in keys)]), M.fuse(fuser, np.c_[tuple(fc[k] for k in keys)])
        else:
            sp, sn = fw[SCORE[method]], fc[SCORE[method]]
        r = {"tpr1": M.tpr_at_fpr(sp, sn, fpr), "auc": M.auc(sp, sn)}
        bit_key = "gnr" if method in GNR_METHODS else "gs" if method in GS_METHODS else None
        if bit_key:
            r["bit_acc"] = float(np.mean(fw[bit_key]))
            r["bit_acc_clean"] = float(np.mean(fc[bit_key]))
        if method == "gaussmarker":  # each domain alone on the same dual-watermarked images
            r["tpr1_w1"] = M.tpr_at_fpr(fw["gnr"], fc["gnr"], fpr)
            r["tpr1_w2"] = M.tpr_at_fpr(fw["tr"], fc["tr"], fpr)
            r["tpr1_gs_raw"] = M.tpr_at_fpr(fw["gs"], fc["gs"], fpr)
        results[d] = r
        scores[f"{d}|pos"], scores[f"{d}|neg"] = np.asarray(sp, float), np.asarray(sn, float)
    np.savez(Path(run_dir) / "scores.npz", **scores)
    rec = {"method": method, "seed": seed, "results": results, **extra, "cpu_seconds": time.process_time() - t0}
    if method in GNR_METHODS:
        rec["gnr"] = json.loads((Path(base_dir) / f"gnr_seed{seed}.json").read_text())["controls"]
    if fuser is not None:
        rec["fuser_iterations"] = int(fuser[-1].n_iter_)
    (Path(run_dir) / "results.json").write_text(json.dumps(rec, indent=1))
    return rec
