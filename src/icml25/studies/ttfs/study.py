"""ttfs: "TTFSFormer: A TTFS-based Lossless Conversion of Spiking Transformer" (Zhao, Huang, Ding, Yu).

fit_base trains the ANNs (small ViT with GELU, EVA-like with SwiGLU; one per dataset and seed). Methods are
conversions of the same ANN of a seed, each (method, seed) one job; settings are dataset|model|timing:
* ttfs (the paper): every operator as generalised TTFS neurons (snn.py), p in {8 .. 256, exact};
* naive_ttfs: classic non-negative TTFS, GELU/SiLU as ReLU, LayerNorm/softmax/products in float (naive.py);
* rate_sta: spikingjelly's STA rate-coded Transformer conversion at T steps (rate.py);
* rate_spikezip: spikingjelly's SpikeZIP-TF recipe on a quantisation-aware fine-tuned QANN of the ANN
  (GELU -> ReLU, `level` levels), run at T steps (spikezip.py);
* ann: the ANN itself (accuracy and MACs, the energy reference).
"""
from __future__ import annotations

import json
from pathlib import Path

from icml25.core import evidence
from icml25.core.errors import UserError
from icml25.core.io import read_json, write_json
from icml25.core.registry import Claim, ClaimResult, Method, Paper, Study, lazy_hook

PAPER = Paper(
    title="TTFSFormer: A TTFS-based Lossless Conversion of Spiking Transformer",
    authors="Lusen Zhao, Zihan Huang, Jianhao Ding, Zhaofei Yu",
    arxiv="none (PMLR 267:77558-77571; OpenReview mJAa823xKu)",
    code="https://github.com/ForestOnTheLand/TTFSFormer",
)

METHODS = {
    "ttfs": Method("ttfs", "TTFSFormer (generalised TTFS neurons)", True,
                   "all operators as TTFS neurons: signed intervals, GELU/SiLU pieces, softmax, LayerNorm, products"),
    "naive_ttfs": Method("naive_ttfs", "naive TTFS (non-negative, ReLU)", False,
                         "classic single-kernel non-negative TTFS; GELU/SiLU as ReLU; LN/softmax/products in float"),
    "rate_sta": Method("rate_sta", "rate coding (spikingjelly STA)", False,
                       "spikingjelly STATransformerRecipe, spiking_encoder mode, T steps"),
    "rate_spikezip": Method("rate_spikezip", "rate coding (spikingjelly SpikeZIP-TF)", False,
                            "QANN (ReLU, quantisers, short QAT) converted by SpikeZIPTFQANNRecipe, T steps"),
    "ann": Method("ann", "ANN", False, "the trained ANN (upper bound, energy reference)"),
}

METRICS = {
    "acc": ("test top-1 accuracy, percent", "higher"),
    "agree": ("percent of test images whose argmax equals the ANN's", "higher"),
    "logit_mae": ("mean absolute logit error vs the ANN", "lower"),
    "spikes": ("spikes per image", "lower"),
    "spikes_per_neuron": ("spikes per neuron per inference (TTFS: <= 1)", "lower"),
    "max_spikes_per_neuron": ("most spikes any neuron emitted in one inference", "lower"),
    "neurons": ("spiking neurons per image", ""),
    "sops": ("synaptic operations per image", "lower"),
    "nonspiking_macs": ("MACs left in float (naive TTFS's LN/softmax/products), per image", "lower"),
    "energy_ratio": ("E_SNN / E_ANN = (0.9 pJ SOPs + 4.6 pJ float MACs) / (4.6 pJ ANN MACs)", "lower"),
    "macs": ("ANN multiply-accumulates per image", ""),
    "qann_logit_err": ("largest |SNN - QANN| logit difference (SpikeZIP-TF)", "lower"),
    "train_loss": ("final ANN training loss (fit_base)", "lower"),
}

# Table 1 / Table 2 of the paper (ImageNet-1k, precise timing)
PAPER_NUMBERS = {"drop": "< 0.1 points for every ViT/EVA size (Table 1)",
                 "energy": {"ViT-S/16": 0.223, "ViT-B/16": 0.210, "ViT-L/16": 0.207}}


def clean(cfg: dict) -> dict:
    """The config with datasets / models switched off at this scale (null in the yaml) dropped."""
    out = dict(cfg)
    for key in ("datasets", "models"):
        out[key] = {k: v for k, v in (cfg.get(key) or {}).items() if v is not None}
    return out


def _p_label(p) -> str:
    return "exact" if p in (None, "exact") else f"p{int(p)}"


def setting(ds: str, model: str, timing: str | None = None) -> str:
    return f"{ds}|{model}" + (f"|{timing}" if timing else "")


def _p_values(cfg) -> list:
    return [None if p == "exact" else int(p) for p in cfg["convert"]["p"]]


def validate(cfg: dict) -> None:
    cfg = clean(cfg)
    from . import data as D  # noqa: F401  (import errors surface here)

    for ds in cfg["datasets"]:
        if ds not in ("digits", "fmnist", "imagenet"):
            raise UserError(f"ttfs: unknown dataset '{ds}' in config; known: digits, fmnist, imagenet")
    for name, spec in cfg["models"].items():
        if spec.get("mlp", "gelu") not in ("gelu", "silu"):
            raise UserError(f"ttfs: model '{name}' needs mlp: gelu or silu, got {spec.get('mlp')!r}")
        arch = spec.get("arch", "vit")
        if arch not in ("vit", "eva02"):
            raise UserError(f"ttfs: model '{name}' needs arch: vit or eva02, got {arch!r}")
        if arch == "eva02" and not all(k in spec for k in ("rope_ref_grid", "mean", "std")):
            raise UserError(f"ttfs: EVA-02 model '{name}' needs rope_ref_grid, mean and std (the checkpoint's)")
        if int(spec["dim"]) % int(spec["heads"]):
            raise UserError(f"ttfs: model '{name}': dim {spec['dim']} is not divisible by heads {spec['heads']}")
    for p in cfg["convert"]["p"]:
        if p != "exact" and (not isinstance(p, int) or p < 1):
            raise UserError(f"ttfs: convert.p entries must be positive integers or 'exact', got {p!r}")
    if any(int(t) < 1 for t in cfg["rate"]["T"]) or any(int(t) < 1 for t in cfg["spikezip"]["T"]):
        raise UserError("ttfs: rate.T and spikezip.T entries must be positive integers")
    if int(cfg["spikezip"]["level"]) < 2:
        raise UserError(f"ttfs: spikezip.level must be >= 2, got {cfg['spikezip']['level']!r}")


# ---- data ---------------------------------------------------------------------------------------------

def download(cfg: dict, raw_dir: Path) -> None:
    """digits and Fashion-MNIST are read from installed packages in preprocess; full scale fetches the
    ImageNet validation archive and the timm checkpoints (full.py)."""
    cfg = clean(cfg)
    if "imagenet" in cfg["datasets"] or any("timm" in m for m in cfg["models"].values()):
        from . import full

        full.download(cfg, raw_dir)
    write_json(raw_dir / "sources.json", {"datasets": list(cfg["datasets"]), "data_seed": cfg["data_seed"]})


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    cfg = clean(cfg)
    from . import data as D

    for ds, spec in cfg["datasets"].items():
        tx, ty, vx, vy = D.build(ds, spec, int(cfg["data_seed"]), raw_dir)
        D.save(out_dir / f"{ds}_train.npz", tx, ty)
        D.save(out_dir / f"{ds}_test.npz", vx, vy)


# ---- fit_base: the ANNs -----------------------------------------------------------------------------

def _train_one(cfg: dict, ds: str, model: str, seed: int, data_dir: str, out_dir: str) -> dict:
    """One ANN (module level: run in a worker process)."""
    import torch

    from icml25.core import runtime

    from . import data as D
    from . import vit

    runtime.set_threads(1)
    tx, ty = D.load(Path(data_dir) / f"{ds}_train.npz")
    spec = {**cfg["models"][model], "patch": cfg["datasets"][ds]["patch"]}
    tr = {**cfg["train"], "epochs": cfg["train"]["epochs"][ds]}
    net, curve = vit.train_ann(spec, tr, D.to_float(tx), torch.as_tensor(ty), seed, 10)
    torch.save(net.state_dict(), Path(out_dir) / f"{ds}_{model}_seed{seed}.pt")
    return {"dataset": ds, "model": model, "seed": seed, "curve": curve}


def fit_base(cfg: dict, data_dir: Path, out_dir: Path) -> None:
    cfg = clean(cfg)
    from icml25.core import runtime

    pretrained = [m for m, spec in cfg["models"].items() if "timm" in spec]
    if pretrained:  # full scale: timm checkpoints (fetched in download) mapped onto our ViT, no training
        from . import full

        full.prepare_base(cfg, pretrained, out_dir)
    jobs = [(_train_one, (cfg, ds, m, int(s), str(data_dir), str(out_dir)))
            for ds in cfg["datasets"] for m in cfg["models"] for s in cfg["seeds"] if m not in pretrained]
    jobs.sort(key=lambda j: -int(cfg["train"]["epochs"][j[1][1]]) * int(cfg["datasets"][j[1][1]].get("n_train", 1400)))
    res = runtime.run_tasks(jobs, runtime.threads())
    write_json(out_dir / "anns.json", {"runs": res})


def load_model(cfg: dict, ds: str, model: str, seed: int, base_dir: Path):
    import torch

    from . import vit

    path = Path(base_dir) / f"{ds}_{model}_seed{seed}.pt"
    if not path.exists():
        raise UserError(f"missing ANN {path}: run the fit-base stage for this seed first")
    spec = {**cfg["models"][model], "patch": cfg["datasets"][ds]["patch"]}
    tx = cfg["datasets"][ds]
    net = vit.build(spec, int(tx["image"]), int(tx.get("channels", 1)), int(tx.get("classes", 10)))
    net.load_state_dict(torch.load(path, weights_only=True))
    return net.eval()


# ---- train (calibrate / convert) and evaluate (simulate) -----------------------------------------------

def train(cfg, method, seed, data_dir, base_dir, run_dir) -> dict:
    """Conversion is training-free: this stage calibrates the intervals [a, b] of every neuron group on
    training images and saves them (ttfs, naive_ttfs); rate_spikezip builds and fine-tunes its QANN here and saves
    it. rate_sta calibrates inside spikingjelly at evaluate."""
    cfg = clean(cfg)
    from . import data as D

    import torch

    rows, out, summary = [], {}, {}
    if method in ("ttfs", "naive_ttfs"):
        from .naive import NaiveTTFSViT
        from .snn import TTFSViT

        cls = TTFSViT if method == "ttfs" else NaiveTTFSViT
        for ds in cfg["datasets"]:
            tx, _ = D.load(data_dir / f"{ds}_train.npz")
            calib = D.to_float(tx[: int(cfg["convert"]["calib_images"])])
            for model in cfg["models"]:
                net = cls(load_model(cfg, ds, model, seed, base_dir), margin=float(cfg["convert"]["margin"]))
                net.calibrate(calib, batch=int(cfg["convert"]["batch"]))
                out[setting(ds, model)] = {"ranges": net.ranges, "consts": net.consts}
                summary[setting(ds, model)] = {"groups": len(net.ranges)}
    if method == "rate_spikezip":
        from . import spikezip

        zc = cfg["spikezip"]
        for ds in cfg["datasets"]:
            tx, ty = D.load(data_dir / f"{ds}_train.npz")
            for model in cfg["models"]:
                ann = load_model(cfg, ds, model, seed, base_dir)
                if not spikezip.supported(ann):
                    continue  # the SiLU gate has no SpikeZIP module: n.a. for the EVA-like model
                q, curve = spikezip.build_qann(ann, D.to_float(tx), torch.as_tensor(ty), int(zc["level"]),
                                               int(zc["steps"]), float(zc["lr"]), int(zc["batch"]),
                                               int(zc["calib_images"]), int(seed))
                out[setting(ds, model)] = q.state_dict()
                summary[setting(ds, model)] = {"qat_loss_first": curve[0] if curve else None,
                                               "qat_loss_last": curve[-1] if curve else None}
    if method == "ann" and (base_dir / "anns.json").exists():
        for r in read_json(base_dir / "anns.json")["runs"]:
            if int(r["seed"]) == int(seed):
                rows.append({"setting": setting(r["dataset"], r["model"]), "metric": "train_loss",
                             "value": r["curve"][-1][1]})
    torch.save(out, run_dir / "conversion.pt")  # per-neuron intervals [a, b] and softmax constants
    write_json(run_dir / "conversion.json", summary)
    return {"metrics": rows}


def _acc(logits, y) -> float:
    return 100.0 * float((logits.argmax(1) == y).double().mean())


def evaluate(cfg, method, seed, data_dir, base_dir, run_dir) -> list:
    cfg = clean(cfg)
    import torch

    from . import data as D
    from . import vit

    rows = []

    def add(s, metric, value):
        rows.append({"setting": s, "metric": metric, "value": float(value)})

    e_ac, e_mac = float(cfg["energy"]["e_ac"]), float(cfg["energy"]["e_mac"])
    conv = torch.load(run_dir / "conversion.pt", weights_only=True) if (run_dir / "conversion.pt").exists() else {}
    for ds in cfg["datasets"]:
        vx, vy = D.load(data_dir / f"{ds}_test.npz")
        x, y = D.to_float(vx), torch.as_tensor(vy)
        for model in cfg["models"]:
            ann = load_model(cfg, ds, model, seed, base_dir)
            with torch.no_grad():
                ref = ann(x).double()
            macs = vit.macs(ann)
            if method == "ann":
                add(setting(ds, model), "acc", _acc(ref, y))
                add(setting(ds, model), "macs", macs)
                continue
            if method == "rate_sta":
                from . import rate

                if not rate.supported(ann):
                    continue  # spikingjelly's STA has no SiLU module: n.a. for the EVA-like model
                tx, _ = D.load(data_dir / f"{ds}_train.npz")
                calib = D.to_float(tx[: int(cfg["rate"]["calib_images"])])
                for T in cfg["rate"]["T"]:
                    logits, st = rate.run(ann, calib, x, int(T))
                    s = setting(ds, model, f"T{int(T)}")
                    add(s, "acc", _acc(logits, y))
                    add(s, "agree", 100.0 * float((logits.argmax(1) == ref.argmax(1)).double().mean()))
                    add(s, "logit_mae", float((logits.double() - ref).abs().mean()))
                    for k in ("spikes", "sops", "neurons", "spikes_per_neuron"):
                        add(s, k, st[k])
                continue
            if method == "rate_spikezip":
                from . import spikezip

                if setting(ds, model) not in conv:
                    continue  # not supported (EVA-like): n.a.
                q = spikezip.QViT(ann, int(cfg["spikezip"]["level"]))
                q.load_state_dict(conv[setting(ds, model)])
                q.eval()
                with torch.no_grad():
                    ql = q(x).double()
                s = setting(ds, model, "qann")  # the quantised ANN the SNN converges to
                add(s, "acc", _acc(ql, y))
                add(s, "agree", 100.0 * float((ql.argmax(1) == ref.argmax(1)).double().mean()))
                add(s, "logit_mae", float((ql - ref).abs().mean()))
                for T in cfg["spikezip"]["T"]:
                    logits, st = spikezip.run(q, x, int(T))
                    s = setting(ds, model, f"T{int(T)}")
                    add(s, "acc", _acc(logits, y))
                    add(s, "agree", 100.0 * float((logits.argmax(1) == ref.argmax(1)).double().mean()))
                    add(s, "logit_mae", float((logits.double() - ref).abs().mean()))
                    add(s, "qann_logit_err", float((logits.double() - ql).abs().max()))
                    for k in ("spikes", "sops", "neurons", "spikes_per_neuron"):
                        add(s, k, st[k])
                continue
            from .naive import NaiveTTFSViT
            from .snn import TTFSViT

            net = (TTFSViT if method == "ttfs" else NaiveTTFSViT)(ann, margin=float(cfg["convert"]["margin"]))
            c = conv[setting(ds, model)]
            net.ranges = {k: tuple(v) for k, v in c["ranges"].items()}  # from the train (calibration) stage
            net.consts = c["consts"]
            for p in _p_values(cfg):
                net.reset_stats()
                logits = net.run(x, p, batch=int(cfg["convert"]["batch"]))
                st = net.summary(len(x))
                s = setting(ds, model, _p_label(p))
                add(s, "acc", _acc(logits, y))
                add(s, "agree", 100.0 * float((logits.argmax(1) == ref.argmax(1)).double().mean()))
                add(s, "logit_mae", float((logits - ref).abs().mean()))
                add(s, "spikes", st["spikes"])
                add(s, "neurons", st["neurons"])
                add(s, "spikes_per_neuron", st["spikes_per_neuron"])
                # one spike time per neuron by construction; counted, not assumed: spikes <= neurons per group
                worst = max((v["spikes"] / max(v["neurons"], 1) for v in net.stats.values()), default=0.0)
                add(s, "max_spikes_per_neuron", 1.0 if worst > 0 else 0.0)
                add(s, "sops", st["sops"])
                float_macs = st.get("nonspiking_macs", 0.0)
                add(s, "nonspiking_macs", float_macs)
                add(s, "energy_ratio", (e_ac * st["sops"] + e_mac * float_macs) / (e_mac * macs))
    return rows


# ---- table ----------------------------------------------------------------------------------------------

def make_table(agg, cfg):
    cfg = clean(cfg)
    import pandas as pd

    from icml25.tables import fmt, lookup

    def cell(m, s, metric, digits=2):
        c = lookup(agg, m, s, metric)
        return "–" if c is None else fmt(c[0], c[1], digits)

    def sci(m, s, metric):
        c = lookup(agg, m, s, metric)
        return "–" if c is None else f"{c[0]:.3g}"

    rows = []
    for ds in cfg["datasets"]:
        for model in cfg["models"]:
            base = setting(ds, model)
            ann = lookup(agg, "ann", base, "acc")
            rows.append({"dataset": ds, "model": model, "method": "ANN", "timing": "–",
                         "acc %": cell("ann", base, "acc"), "Δ vs ANN": "–", "logit MAE": "–",
                         "spikes/neuron": "–", "SOPs/img": "–", "MACs/img": sci("ann", base, "macs"),
                         "energy ratio": "1", "paper": "ImageNet ViT/EVA: drop < 0.1 pt"})
            timings = [("ttfs", _p_label(p)) for p in _p_values(cfg)] + \
                      [("naive_ttfs", _p_label(p)) for p in _p_values(cfg)] + \
                      [("rate_sta", f"T{int(t)}") for t in cfg["rate"]["T"]] + [("rate_spikezip", "qann")] + \
                      [("rate_spikezip", f"T{int(t)}") for t in cfg["spikezip"]["T"]]
            for m, tl in timings:
                if m not in cfg["methods"]:
                    continue
                s = setting(ds, model, tl)
                acc = lookup(agg, m, s, "acc")
                if acc is None:
                    continue
                drop = "–" if ann is None else f"{acc[0] - ann[0]:+.2f}"
                paper = ""
                if m == "ttfs" and tl == "exact":
                    paper = "drop < 0.1 pt; energy 20.7-22.3% (ViT-L..S)"
                if tl == "qann":
                    tl = f"QANN (level {int(cfg['spikezip']['level'])}, not spiking)"
                rows.append({"dataset": ds, "model": model, "method": METHODS[m].label, "timing": tl,
                             "acc %": cell(m, s, "acc"), "Δ vs ANN": drop, "logit MAE": cell(m, s, "logit_mae", 3),
                             "spikes/neuron": cell(m, s, "spikes_per_neuron", 3), "SOPs/img": sci(m, s, "sops"),
                             "MACs/img": sci(m, s, "nonspiking_macs") if m == "naive_ttfs" else "–",
                             "energy ratio": cell(m, s, "energy_ratio", 3) if m in ("ttfs", "naive_ttfs") else "–",
                             "paper": paper})
    return pd.DataFrame(rows)


# ---- claims ----------------------------------------------------------------------------------------------

def _pairs(cfg, methods=("ann",)):
    cfg = clean(cfg)
    return [(ds, m) for ds in cfg["datasets"] for m in cfg["models"]]


def claim_exact(agg, cfg):
    """Per seed: tolerance minus the worst |ANN - SNN(exact)| accuracy gap over datasets x models."""
    tol = float(cfg["claims"]["exact_tol"])
    per, parts = [], []
    for ds, model in _pairs(cfg):
        ann = evidence.seed_values(agg, "ann", setting(ds, model), "acc")
        snn = evidence.seed_values(agg, "ttfs", setting(ds, model, "exact"), "acc")
        agree = evidence.seed_values(agg, "ttfs", setting(ds, model, "exact"), "agree")
        per.append(dict(zip(sorted(set(ann) & set(snn)), evidence.paired(ann, snn, lambda a, s: tol - abs(a - s)))))
        parts.append(f"{ds}/{model}: ANN {_mean(ann):.2f}, SNN {_mean(snn):.2f}, argmax agreement {_mean(agree):.2f}%")
    return ClaimResult.of("; ".join(parts), unit="points (0.1 minus worst |gap|)",
                          per_seed=evidence.combine(per, min))


def claim_approaches(agg, cfg):
    """Per seed: the worst reduction of |ANN - SNN| accuracy gap from the coarsest to the finest finite p."""
    ps = [p for p in _p_values(cfg) if p is not None]
    lo, hi = _p_label(min(ps)), _p_label(max(ps))
    per, parts = [], []
    for ds, model in _pairs(cfg):
        ann = evidence.seed_values(agg, "ann", setting(ds, model), "acc")
        a_lo = evidence.seed_values(agg, "ttfs", setting(ds, model, lo), "acc")
        a_hi = evidence.seed_values(agg, "ttfs", setting(ds, model, hi), "acc")
        seeds = sorted(set(ann) & set(a_lo) & set(a_hi))
        per.append({s: abs(ann[s] - a_lo[s]) - abs(ann[s] - a_hi[s]) for s in seeds})
        parts.append(f"{ds}/{model}: {lo} {_mean(a_lo):.2f}, {hi} {_mean(a_hi):.2f}, ANN {_mean(ann):.2f}")
    return ClaimResult.of("; ".join(parts), unit=f"points of gap closed ({lo} -> {hi})",
                          per_seed=evidence.combine(per, min))


def claim_naive(agg, cfg):
    """Per seed: the smallest naive-TTFS accuracy loss (exact timing) minus the 'substantial' threshold."""
    thr = float(cfg["claims"]["naive_drop"])
    per, parts = [], []
    for ds, model in _pairs(cfg):
        ann = evidence.seed_values(agg, "ann", setting(ds, model), "acc")
        nv = evidence.seed_values(agg, "naive_ttfs", setting(ds, model, "exact"), "acc")
        per.append(dict(zip(sorted(set(ann) & set(nv)), evidence.paired(ann, nv, lambda a, n: a - n - thr))))
        parts.append(f"{ds}/{model}: ANN {_mean(ann):.2f} vs naive {_mean(nv):.2f}")
    return ClaimResult.of("; ".join(parts) + f" (substantial: > {thr:g} points)",
                          unit=f"points of loss beyond {thr:g}", per_seed=evidence.combine(per, min))


RATE_BASELINES = (("rate_sta", "rate"), ("rate_spikezip", "spikezip"))  # method, config section of its T list


def claim_fewer_sops(agg, cfg):
    """Per seed, dataset (ViT) and rate baseline (STA and SpikeZIP-TF): the baseline at the smallest T whose
    accuracy is within `equal_tol` of TTFS at exact timing (the largest T if none is); margin = 1 - SOPs_TTFS /
    SOPs_rate, the worst over datasets and both baselines (TTFS must beat each of them)."""
    cfg = clean(cfg)
    tol = float(cfg["claims"]["equal_tol"])
    per, parts = [], []
    for ds in cfg["datasets"]:
        model = next((m for m, spec in cfg["models"].items() if spec.get("mlp", "gelu") == "gelu"), None)
        if model is None:
            raise KeyError("no GELU model for the rate baseline")
        t_acc = evidence.seed_values(agg, "ttfs", setting(ds, model, "exact"), "acc")
        t_sops = evidence.seed_values(agg, "ttfs", setting(ds, model, "exact"), "sops")
        parts.append(f"{ds}/{model}: TTFS {_mean(t_sops):.3g} SOPs at {_mean(t_acc):.2f}%")
        for method, section in [b for b in RATE_BASELINES if b[0] in cfg["methods"]] or \
                _no_rate_baseline():
            Ts = sorted(int(t) for t in cfg[section]["T"])
            r_acc = {T: evidence.seed_values(agg, method, setting(ds, model, f"T{T}"), "acc") for T in Ts}
            r_sops = {T: evidence.seed_values(agg, method, setting(ds, model, f"T{T}"), "sops") for T in Ts}
            d, chosen = {}, {}
            for s in sorted(set(t_acc) & set.intersection(*(set(r_acc[T]) for T in Ts))):
                T = next((T for T in Ts if r_acc[T][s] >= t_acc[s] - tol), Ts[-1])
                chosen[s] = T
                d[s] = 1.0 - t_sops[s] / r_sops[T][s]
            per.append(d)
            parts.append(f"{METHODS[method].label.split('(')[-1].rstrip(')')} at T={sorted(set(chosen.values()))} "
                         f"{_mean({s: r_sops[chosen[s]][s] for s in chosen}):.3g} SOPs at "
                         f"{_mean({s: r_acc[chosen[s]][s] for s in chosen}):.2f}%")
    return ClaimResult.of("; ".join(parts), unit="fraction of rate-coding SOPs saved (worst of STA, SpikeZIP-TF)",
                          per_seed=evidence.combine(per, min))


def _no_rate_baseline():
    raise KeyError("no rate-coding baseline among the methods")


def claim_energy(agg, cfg):
    """Per seed: the worst model's distance inside the band [lo, hi] of the energy ratio (exact timing)."""
    lo, hi = (float(v) for v in cfg["claims"]["energy_band"])
    per, parts = [], []
    for ds, model in _pairs(cfg):
        r = evidence.seed_values(agg, "ttfs", setting(ds, model, "exact"), "energy_ratio")
        per.append({s: min(v - lo, hi - v) for s, v in r.items()})
        parts.append(f"{ds}/{model}: {100 * _mean(r):.1f}%")
    return ClaimResult.of("energy ratio " + "; ".join(parts) + f" (band {100 * lo:.0f}-{100 * hi:.0f}%)",
                          unit="energy ratio inside the band", per_seed=evidence.combine(per, min))


def _mean(d: dict) -> float:
    return sum(d.values()) / len(d) if d else float("nan")


STUDY = Study(
    name="ttfs",
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
    figures=lazy_hook("icml25.studies.ttfs.figures", "figures"),
    claims=[
        Claim("ttfs_exact_lossless", "At exact spike timing the TTFS SNN matches the ANN within 0.1 accuracy points",
              "ImageNet ViT-S/B/L, EVA: drop < 0.1% (Table 1)", claim_exact),
        Claim("ttfs_approaches_ann", "SNN accuracy approaches the ANN's as the timing resolution p grows",
              "accuracy degrades as p shrinks (Fig. 4)", claim_approaches),
        Claim("naive_ttfs_loses", "Naive TTFS (non-negative, GELU as ReLU) loses substantial accuracy",
              "motivation of the generalised neuron (§3)", claim_naive),
        Claim("ttfs_fewer_sops_than_rate", "TTFS needs far fewer SOPs than rate coding at equal accuracy",
              "one spike per neuron vs T-step rate codes (Table 2)", claim_fewer_sops),
        Claim("energy_ratio_20_25", "The SNN's energy is about 20-25% of the ANN's",
              "ViT-S/16 22.3%, ViT-B/16 21.0%, ViT-L/16 20.7% (Table 2)", claim_energy),
    ],
    stand_ins={
        "smoke": "digits only, a 1-block ViT and EVA-like model trained 1 epoch, 64 test images; numbers are "
                 "meaningless (tests only).",
        "mini": "ImageNet-1k -> sklearn digits (8x8, 1400/397 split) and Fashion-MNIST (28x28, 5000 train / "
                "500 test, class-balanced); ViT-S/B/L and EVA -> a 2-block ViT (dim 32, GELU) and an EVA-like "
                "variant (SwiGLU MLP) trained in the pipeline, 3 seeds; calibration on 256 training images.",
        "full": "the paper's setting: ImageNet-1k validation (50k), timm ViT-S/B/L-16 augreg checkpoints converted "
                "without training, GPU.",
    },
)
