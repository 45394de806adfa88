"""GaussMarker study glue: contract hooks over data.py / diffusion.py / experiment.py, the table and the claims."""
from __future__ import annotations

import json
from pathlib import Path

from icml25.core import evidence
from icml25.core.errors import UserError
from icml25.core.registry import Claim, ClaimResult, Method, Paper, Study, lazy_hook

PAPER = Paper(
    title="GaussMarker: Robust Dual-Domain Watermark for Diffusion Models",
    authors="Li, Huang, Hou, Hong",
    arxiv="2506.11444",
    code="github.com/SunnierLee/GaussMarker",
)

METHODS = {
    "gaussmarker": Method("gaussmarker", "GaussMarker (GS+TR, GNR, fused)", True,
                          "pipelined GS + Tree-Ring injection; fuser(GNR-restored bit accuracy, -TR distance)"),
    "gs": Method("gs", "Gaussian Shading", False, "GS with ChaCha20 alone; score: bit accuracy"),
    "tr": Method("tr", "Tree-Ring", False, "Tree-Ring ring pattern alone; score: -distance"),
    "gs_gnr": Method("gs_gnr", "GS + GNR", False, "GS images, score: bit accuracy after the GNR"),
}

METRICS = {
    "tpr1": ("TPR at the threshold with FPR < 1% on the paired clean images", "higher"),
    "auc": ("ROC AUC, watermarked vs clean", "higher"),
    "bit_acc": ("mean message bit accuracy on watermarked images (restored by the GNR where the method has one)", "higher"),
    "bit_acc_clean": ("mean message bit accuracy on clean images (should be 0.5)", ""),
    "tpr1_w1": ("GaussMarker images: TPR@1%FPR of the GNR-restored bit accuracy alone", "higher"),
    "tpr1_w2": ("GaussMarker images: TPR@1%FPR of the TR distance alone", "higher"),
    "tpr1_gs_raw": ("GaussMarker images: TPR@1%FPR of the raw GS bit accuracy alone", "higher"),
    "lossless_pass": ("share of watermarked z_T passing both KS tests (vs N(0,1); vs the paired clean z_T) at 1%", "higher"),
    "ks_pass": ("share of watermarked z_T whose coordinates pass a KS test against N(0,1) at 1%", "higher"),
    "ks2_pass": ("share of watermarked z_T passing a two-sample KS test against the paired clean z_T at 1%", "higher"),
    "ks_p_median": ("median KS p-value of watermarked z_T against N(0,1)", ""),
    "coord_reject": ("share of coordinates whose values across the images of one key reject N(0,1) at 1%", ""),
    "sign_equals_m": ("share of sign(z_T) == m before the TR edit (must be 1)", ""),
    "sign_kept_after_tr": ("share of GS signs the TR edit leaves unchanged", ""),
    "analytic_tau": ("bit-accuracy threshold with analytic FPR <= 1% (betainc, one user)", ""),
    "gnr_bit_acc": ("GNR: message bit accuracy after restoring Flip_p(Affine(m)) (setting: flip rate p)", "higher"),
    "gnr_raw_bit_acc": ("GNR input: message bit accuracy of Flip_p(Affine(m)) before restoring", ""),
    "gnr_rot75_flip35": ("GNR: bit accuracy after restoring Flip_0.35(Rot_75(m))", "higher"),
    "gnr_random_bits": ("GNR negative control: bit accuracy after restoring uniform random bits (0.5 wanted)", ""),
    "fuser_iterations": ("MLP fuser iterations", ""),
    "cpu_seconds": ("process CPU seconds of the train stage", "lower"),
}

GEOMETRIC = ("rot15", "rot75", "crop75")
PHOTOMETRIC = ("clean", "noise", "brightness")
# The paper's headline (a secondary source: its per-distortion tables were not available here)
PAPER_AVG_TPR = 0.997
PAPER_NOTE = ("avg TPR@1%FPR 0.997 over the paper's 8 distortions x 3 SD versions (secondary source; SD scale, "
              "different distortions: beside ours, not compared)")


def validate(cfg: dict) -> None:
    from .distortion_kinds import check

    check(cfg.get("distortions") or {})
    w = cfg["watermark"]
    shape = tuple(cfg["latent_shape"])
    if len(shape) != 3 or any(int(x) <= 0 for x in shape):
        raise UserError(f"gaussmarker: latent_shape must be (C, H, W) positive, got {cfg['latent_shape']}")
    if len(w["gs_factors"]) != 3 or any(s % int(f) for s, f in zip(shape, w["gs_factors"])):
        raise UserError(f"gaussmarker: watermark.gs_factors {w['gs_factors']} must divide latent_shape {list(shape)}")
    if not 0 < int(w["tr_radius"]) < shape[1] // 2:
        raise UserError(f"gaussmarker: watermark.tr_radius must be in 1..{shape[1] // 2 - 1}, got {w['tr_radius']}")
    det = cfg["detect"]
    if int(det["n_test"]) < 2 or int(det["n_calib"]) < 2:
        raise UserError("gaussmarker: detect.n_test and detect.n_calib must be >= 2")
    if not 0 < float(det["fpr"]) < 1:
        raise UserError(f"gaussmarker: detect.fpr must be in (0, 1), got {det['fpr']}")
    g = cfg["gnr"]
    if not 0 <= float(g["flip"]) <= 0.5 or not 0 <= float(g["neg_p"]) <= 1:
        raise UserError("gaussmarker: gnr.flip must be in [0, 0.5] and gnr.neg_p in [0, 1]")
    if cfg["diffusion"]["kind"] not in ("pixel_ddim", "stable_diffusion"):
        raise UserError(f"gaussmarker: diffusion.kind must be pixel_ddim or stable_diffusion, got {cfg['diffusion']['kind']!r}")
    for group in ("geometric", "photometric"):
        for d in cfg.get("claims", {}).get(group, []):
            if d not in cfg["distortions"]:
                raise UserError(f"gaussmarker: claims.{group} names '{d}', which is not in `distortions` "
                                f"({', '.join(cfg['distortions'])})")


def download(cfg: dict, raw_dir: Path) -> None:
    from .data import download as dl

    dl(cfg, raw_dir)


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    from .data import preprocess as pp

    pp(cfg, raw_dir, out_dir)


def fit_base(cfg: dict, data_dir: Path, out_dir: Path) -> None:
    from .experiment import fit_base as fb

    fb(cfg, data_dir, out_dir)


def train(cfg, method, seed, data_dir, base_dir, run_dir) -> dict:
    from .experiment import run

    run(cfg, method, seed, data_dir, base_dir, run_dir)
    return {}


def evaluate(cfg, method, seed, data_dir, base_dir, run_dir) -> list:
    """Metric rows from the train stage's results.json (detection runs inside the train job, next to the
    generator it needs, so each job loads it once)."""
    res = json.loads((Path(run_dir) / "results.json").read_text())
    rows = [{"setting": d, "metric": k, "value": v} for d, r in res["results"].items() for k, v in r.items()]
    for name, setting in (("lossless", "z_T"), ("lossless_gs_stage", "z_T_gs_stage")):
        if name in res:
            L = res[name]
            rows += [{"setting": setting, "metric": "lossless_pass", "value": L["pass_share"]},
                     {"setting": setting, "metric": "ks_pass", "value": L["ks_pass"]},
                     {"setting": setting, "metric": "ks2_pass", "value": L["ks2_pass"]},
                     {"setting": setting, "metric": "ks_p_median", "value": L["ks_p_median"]},
                     {"setting": setting, "metric": "coord_reject", "value": L["coord_reject"]}]
    for key in ("sign_equals_m", "sign_kept_after_tr", "analytic_tau", "fuser_iterations"):
        if key in res:
            rows.append({"setting": "z_T" if key.startswith("sign") else "all", "metric": key, "value": res[key]})
    if "gnr" in res:
        g = res["gnr"]
        rows += [{"setting": f"flip{p}", "metric": "gnr_bit_acc", "value": v} for p, v in g["flip"].items()]
        rows += [{"setting": f"flip{p}", "metric": "gnr_raw_bit_acc", "value": v} for p, v in g["flip_raw"].items()]
        rows += [{"setting": "gnr", "metric": "gnr_rot75_flip35", "value": g["rot75_flip35"]},
                 {"setting": "gnr", "metric": "gnr_random_bits", "value": g["random_bits"]}]
    rows.append({"setting": "all", "metric": "cpu_seconds", "value": res["cpu_seconds"]})
    return rows


# ---- table --------------------------------------------------------------------------------------------

def _cell(agg, m, d, metric, digits=3):
    from icml25.tables import fmt, lookup

    c = lookup(agg, m, d, metric)
    return fmt(c[0], c[1], digits) if c else "–"


def make_table(agg, cfg):
    import numpy as np
    import pandas as pd

    rows = []
    for d in cfg["distortions"]:
        for m in cfg["methods"]:
            rows.append({"distortion": d, "method": METHODS[m].label, "TPR@1%FPR": _cell(agg, m, d, "tpr1"),
                         "AUC": _cell(agg, m, d, "auc"), "bit acc (wm)": _cell(agg, m, d, "bit_acc"),
                         "bit acc (clean)": _cell(agg, m, d, "bit_acc_clean")})
    for m in cfg["methods"]:
        per_seed = evidence.combine([_seeds(agg, m, d, "tpr1") for d in cfg["distortions"]
                                     if _has(agg, m, d, "tpr1")], np.mean) if cfg["distortions"] else {}
        v = list(per_seed.values())
        rows.append({"distortion": "average", "method": METHODS[m].label,
                     "TPR@1%FPR": f"{np.mean(v):.3f} ± {np.std(v, ddof=1) if len(v) > 1 else 0.0:.3f}" if v else "–",
                     "AUC": "", "bit acc (wm)": "", "bit acc (clean)": ""})
    rows.append({"distortion": "paper (SD, 8 distortions)", "method": METHODS["gaussmarker"].label,
                 "TPR@1%FPR": f"{PAPER_AVG_TPR:.3f} (secondary source)", "AUC": "", "bit acc (wm)": "",
                 "bit acc (clean)": ""})
    return pd.DataFrame(rows)


def _has(agg, m, d, metric) -> bool:
    return not agg[(agg.method == m) & (agg.setting == d) & (agg.metric == metric)].empty


def _seeds(agg, m, d, metric):
    return evidence.seed_values(agg, m, d, metric)


# ---- claims -------------------------------------------------------------------------------------------

def _gap(agg, cfg, group):
    """Per seed: min over the claim's distortions of TPR(GaussMarker) - max(TPR(GS), TPR(TR)); the words; and
    whether every distortion had all three arms at the chance floor. A distortion on which all three sit at
    chance (TPR@1%FPR within `claims.tpr_floor_tol` of the 1 % FPR, every seed) cannot rank them, so it is left out
    of the minimum and named (a rule added after the mini's rot75 read 0.00 for every arm: issue 57)."""
    settings = cfg.get("claims", {}).get(group) or (GEOMETRIC if group == "geometric" else PHOTOMETRIC)
    present = [d for d in settings if d in cfg["distortions"]]
    if not present:
        raise KeyError("distortions " + ", ".join(settings))
    from icml25.tables import at_floor

    chance = float(cfg["detect"].get("fpr", 0.01))
    tol = float(cfg.get("claims", {}).get("tpr_floor_tol", 0.01))
    per_d, floored, words = {}, [], []
    for d in present:
        gm, g, t = (_seeds(agg, m, d, "tpr1") for m in ("gaussmarker", "gs", "tr"))
        best = evidence.combine([g, t], max)
        per_d[d] = evidence.combine([gm, best], lambda v: v[0] - v[1])
        if at_floor(gm, g, chance, tol) and at_floor(t, t, chance, tol):
            floored.append(d)
        mean = lambda x: sum(x.values()) / len(x)  # noqa: E731
        words.append(f"{d}: GM {mean(gm):.2f} vs GS {mean(g):.2f}, TR {mean(t):.2f}")
    kept = [d for d in present if d not in floored] or present
    text = "; ".join(words)
    if len(kept) < len(present):
        text += f" ({', '.join(floored)}: every arm at chance, left out of the worst case)"
    return evidence.combine([per_d[d] for d in kept], min), text, len(floored) == len(present)


def claim_geometric(agg, cfg):
    from icml25.tables import mark_floor

    per_seed, words, floored = _gap(agg, cfg, "geometric")
    return mark_floor(ClaimResult.of(f"TPR@1%FPR {words}; margin = worst distortion's GM - max(GS, TR)", unit="TPR",
                                      per_seed=per_seed), floored)


def claim_no_loss(agg, cfg):
    from icml25.tables import mark_floor

    tol = float(cfg.get("claims", {}).get("no_loss_tol", 0.02))
    per_seed, words, floored = _gap(agg, cfg, "photometric")
    return mark_floor(ClaimResult.of(f"TPR@1%FPR {words}; margin = worst GM - max(GS, TR) + {tol:g} (tolerance: "
                                      f"{round(tol * int(cfg['detect']['n_test']))} of {cfg['detect']['n_test']} pairs)",
                                      unit="TPR", per_seed={s: v + tol for s, v in per_seed.items()}), floored)


def claim_lossless(agg, cfg):
    floor = float(cfg.get("claims", {}).get("lossless_floor", 0.95))
    p = _seeds(agg, "gaussmarker", "z_T", "lossless_pass")
    ks = _seeds(agg, "gaussmarker", "z_T", "ks_pass")
    ks2 = _seeds(agg, "gaussmarker", "z_T", "ks2_pass")
    mean = lambda x: sum(x.values()) / len(x)  # noqa: E731
    words = (f"share of GaussMarker z_T (after the TR edit) passing the KS test vs N(0,1) {mean(ks):.3f} and the "
             f"two-sample KS test vs the paired clean z_T {mean(ks2):.3f}, both {mean(p):.3f}")
    try:
        words += f"; GS stage alone {mean(_seeds(agg, 'gaussmarker', 'z_T_gs_stage', 'lossless_pass')):.3f}"
        words += (f"; across the images of one key {mean(_seeds(agg, 'gaussmarker', 'z_T', 'coord_reject')):.2f} "
                  "of coordinates reject N(0,1) (each sign is fixed by the key)")
    except KeyError:
        pass
    return ClaimResult.of(words + f"; margin = both-pass share - {floor:g}", unit="share of z_T",
                          per_seed={s: v - floor for s, v in p.items()})


STUDY = Study(
    name="gaussmarker",
    paper=PAPER,
    methods=METHODS,
    metrics=METRICS,
    download=download,
    preprocess=preprocess,
    fit_base=fit_base,
    train=train,
    evaluate=evaluate,
    make_table=make_table,
    validate=validate,
    figures=lazy_hook("icml25.studies.gaussmarker.figures", "figures"),
    claims=[
        Claim("fused_beats_single_geometric",
              "Under rotation and crop, fused GaussMarker has a higher TPR@1%FPR than both single-domain "
              "watermarks (Gaussian Shading, Tree-Ring)",
              "the paper's motivation; " + PAPER_NOTE, claim_geometric),
        Claim("no_loss_photometric",
              "On clean, Gaussian-noise and brightness images GaussMarker loses no TPR@1%FPR relative to the best "
              "single domain", "GaussMarker >= GS and TR on every distortion (per-distortion rows not available "
              "here)", claim_no_loss),
        Claim("lossless_latent", "Watermarked z_T is distributed as N(0, I) (KS test per latent; two-sample test "
              "vs clean latents)", "performance-lossless: z_T ~ N(0, I) by construction (Gaussian Shading)",
              claim_lossless),
    ],
    stand_ins={
        "smoke": "a 16x16 pixel DDPM fitted for a few steps, 4-step DDIM, 8 test pairs, a few-step GNR; numbers "
                 "meaningless.",
        "mini": "a 0.16M-parameter pixel-space diffusers UNet2DModel (block channels 16, 32) (3x16x16, the 'latent' is the pixel tensor) "
                "trained in the pipeline on random 16x16 crops of the images bundled in scikit-image and "
                "scikit-learn, 20-step DDIM sampling and DDIMInverseScheduler inversion, instead of Stable Diffusion "
                "with DPM-Solver; GS 2x2 tiling (192 bits, 4 copies), TR radius 2 on the last channel, GNR nf=8; "
                "7 distortions + clean scaled to 16x16 images; 100 test pairs, fuser on 40 calibration pairs per "
                "distortion from other generation seeds; 3 key seeds.",
        "full": "Stable Diffusion 2.1-base (v1.4, v2.0 by config), 512^2, DPM-Solver 50 steps, CFG 7.5, "
                "Stable-Diffusion-Prompts, DDIM inversion 50 steps with the empty prompt; GS (1,8,8) 256 bits, TR "
                "radius 4 on channel 3, GNR nf=128 50k steps; 1000 test pairs.",
    },
)
