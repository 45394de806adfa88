"""missing_sm study glue: data hooks, one job per (method, seed), the table and the claims."""
from __future__ import annotations

import json
import time
from pathlib import Path

from icml25.core.errors import UserError
from icml25.core.registry import Claim, ClaimResult, Method, Paper, Study, lazy_hook
from icml25.tables import need

PAPER = Paper(
    title="Score Matching with Missing Data",
    authors="Givens, Liu, Reeve",
    arxiv="2506.00557",
    code="github.com/joshgivens/ScoreMatchingwithMissingData (not readable here; written from the paper's text, "
         "App. E)",
)

METHODS = {
    "marg_var": Method("marg_var", "Marg-Var (Alg. 2)", True,
                       "Cor. 4.9 gradient via the Prop. A.20 pseudo-loss; p'_phi = N(MLP(x^0), sigma^2 I), 10 phi-steps per theta-step"),
    "marg_var_diag": Method("marg_var_diag", "Marg-Var, σ per coordinate (ours, not App. E.2)", False,
                            "ablation, not the paper's method: Marg-Var with p'_phi = N(MLP(x^0), diag(sigma)^2), one "
                            "sigma per coordinate instead of App. E.2's single sigma; all else as marg_var"),
    "marg_iw": Method("marg_iw", "Marg-IW (Alg. 1)", False,
                      "marginal score by self-normalised IW, p' = N(0,16I), r = 10, gradients through the weights"),
    "em": Method("em", "EM (Uehara et al. 2020)", False, "detached IW weights at the current theta + full-data SM on imputed rows"),
    "zeroed": Method("zeroed", "Zeroed SM", False, "zero-fill, score only observed outputs (MissDiff-style, inconsistent)"),
    "full": Method("full", "full-data SM (oracle)", False, "Hyvarinen SM on the complete rows: upper bound"),
}
MISSING_METHODS = ("marg_var", "marg_iw", "em", "zeroed")  # the paper's four (the claims read these only)

METRICS = {
    "auc": ("area under the ROC over the L1 path (edge detection)", "higher"),
    "empty_at_gamma_max": ("1 if the first snapshot of the path (gamma_max) has no edge", ""),
    "full_at_gamma_min": ("1 if the last snapshot has every edge", ""),
    "fisher_div": ("Fisher divergence to the truth on fresh complete rows", "lower"),
    "prec_err_fro": ("||P_hat - P||_F", "lower"),
    "mean_err": ("||mu_hat - mu||_2", "lower"),
    "cpu_seconds": ("process CPU seconds of the whole job", "lower"),
    "phi_steps": ("variational phi-steps taken (Marg-Var)", ""),
}


def _ggm_settings(cfg):
    return [(g, float(p)) for g in cfg["data"]["graphs"] for p in cfg["data"]["p_miss"]]


def _sname(graph, p):
    return f"{graph}_p{p:g}"


def _dsweep(cfg):
    return [int(dd) for dd in (cfg["data"].get("d_sweep") or [])]


def _xsq(cfg):
    """The non-Gaussian x_i^2 x_j^2 d-sweep (xsq.py): dimensions (empty at smoke/mini)."""
    return [int(dd) for dd in (cfg["data"].get("xsq_sweep") or [])]


def _xsq_ps(cfg):
    return [float(p) for p in (cfg["data"].get("xsq_p_miss") or [0.5])]


def _real(cfg, seed):
    """The real data sets this seed runs (corruption draws: the first data.real_seeds seeds)."""
    if int(seed) >= int(cfg["data"].get("real_seeds", 25)):
        return []
    return list(cfg["data"].get("real", []) or [])


def _real_hp(cfg):
    hp = dict(cfg["hp"])
    path = dict(hp["path"])
    path.update((cfg["data"].get("real_cfg", {}) or {}).get("path", {}))
    hp["path"] = path
    return hp


def validate(cfg: dict) -> None:
    d = cfg["data"]
    for g in d["graphs"]:
        if g not in ("star", "dense"):
            raise UserError(f"missing_sm: unknown graph '{g}' (star | dense) in config/studies/missing_sm.yaml")
    for p in list(d["p_miss"]) + [d["gauss_p_miss"]]:
        if not 0 <= float(p) < 1:
            raise UserError(f"missing_sm: p_miss must be in [0, 1), got {p}")
    if cfg["hp"]["var_objective"] not in ("kl", "fisher"):
        raise UserError(f"missing_sm: hp.var_objective must be kl or fisher, got {cfg['hp']['var_objective']!r}")
    if d.get("gauss") and int(d["gauss_d"]) != int(d["d"]) or d.get("gauss") and int(d["gauss_n"]) != int(d["n"]):
        raise UserError("missing_sm: gauss_d/gauss_n must equal d/n (all problems of a job are stacked)")
    if sorted(cfg["gauss_checkpoints"]) != list(cfg["gauss_checkpoints"]):
        raise UserError("missing_sm: gauss_checkpoints must be increasing")
    if d.get("truncate") and not 0 < float(d.get("trunc_outside", 0.2)) < 1:
        raise UserError("missing_sm: data.trunc_outside must be in (0, 1)")
    from .data_real import DATASETS

    for name in d.get("real", []) or []:
        if name not in DATASETS:
            raise UserError(f"missing_sm: unknown real dataset '{name}' ({' | '.join(DATASETS)}) in data.real")
    for p in d.get("real_p_miss", []) or []:
        if not 0 <= float(p) < 1:
            raise UserError(f"missing_sm: real_p_miss must be in [0, 1), got {p}")


def download(cfg: dict, raw_dir: Path) -> None:
    """Procedural data: one npz per seed (graphs, samples, mask uniforms); the real data sets named in
    data.real (full scale: S&P 100, yeast GSE1990) through icml25.core.download.fetch."""
    import numpy as np

    from icml25.core.config import all_seeds

    from . import data as D
    from . import data_real as R

    for s in all_seeds(cfg):  # every seed some method runs (scales.<scale>.method_seeds)
        arrays = D.generate(int(s), cfg["data"])
        np.savez_compressed(raw_dir / f"seed{s}.npz", **arrays)
    for name in cfg["data"].get("real", []) or []:
        R.download(name, raw_dir)


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    """MCAR masks per missingness level; complete rows kept for the oracle and the metrics. Real data: the
    standardised matrix and its ground-truth graphs (full-data SM path, App. E.3.3) in real_{name}.npz, one
    MCAR corruption per seed (the first data.real_seeds seeds)."""
    import numpy as np

    from icml25.core.config import all_seeds

    from . import data as D
    from . import data_real as R

    real = {}
    rc = cfg["data"].get("real_cfg", {}) or {}
    for name in cfg["data"].get("real", []) or []:
        files = {k: raw_dir / name / src["file"] for k, src in R.SOURCES[name].items()}
        X, cols = R.load_matrix(name, files, rc)
        gts, dens = R.ground_truths(X, _real_hp(cfg), rc.get("gt_densities", [0.05, 0.1, 0.15, 0.2, 0.25]),
                                    float(rc.get("edge_threshold", cfg["hp"]["path"]["edge_threshold"])))
        real[name] = {"X": X, "gt": gts, "gt_density": dens}
        np.savez_compressed(out_dir / f"real_{name}.npz", X=X, gt=gts, gt_density=dens, columns=np.asarray(cols))
    for s in all_seeds(cfg):
        raw = dict(np.load(raw_dir / f"seed{s}.npz"))
        out = {}
        for g in cfg["data"]["graphs"]:
            out[f"{g}_X"], out[f"{g}_P"], out[f"{g}_mu"] = raw[f"{g}_X"], raw[f"{g}_P"], raw[f"{g}_mu"]
            for p in cfg["data"]["p_miss"]:
                out[f"{g}_M_p{float(p):g}"] = D.mask(raw[f"{g}_U"], p)
            for k in (f"{g}_a", f"{g}_b"):
                if k in raw:
                    out[k] = raw[k]
        if cfg["data"].get("gauss"):
            for k in ("gauss_X", "gauss_P", "gauss_mu", "gauss_Xtest", "gauss_lo"):
                out[k] = raw[k]
            out["gauss_M"] = D.mask(raw["gauss_U"], cfg["data"]["gauss_p_miss"])
        for dd in _dsweep(cfg):
            for k in ("X", "P", "mu", "a", "b"):
                if f"dsw{dd}_{k}" in raw:
                    out[f"dsw{dd}_{k}"] = raw[f"dsw{dd}_{k}"]
            for p in cfg["data"]["d_sweep_p_miss"]:
                out[f"dsw{dd}_M_p{float(p):g}"] = D.mask(raw[f"dsw{dd}_U"], p)
        if _xsq(cfg):
            from . import data_xsq as DX

            dc = cfg["data"]
            for dd in _xsq(cfg):
                X, K, mu, p, U = DX.make(dd, int(dc.get("xsq_n", dc["n"])),
                                         np.random.SeedSequence([int(dc["data_seed"]), int(s), 7, dd]),
                                         dc["hub_prob"], dc["w_low"], dc["w_high"], dc["mean"],
                                         int(dc.get("xsq_burn", 200)))
                out[f"xsq{dd}_X"], out[f"xsq{dd}_K"] = X, K
                for p_ in _xsq_ps(cfg):
                    out[f"xsq{dd}_M_p{p_:g}"] = D.mask(U, p_)
        for i, name in enumerate(_real(cfg, s)):
            n, dd = real[name]["X"].shape
            U = D._rng(cfg["data"]["data_seed"], s, 6, i).random((n, dd))
            for p in cfg["data"]["real_p_miss"]:
                out[f"{name}_M_p{float(p):g}"] = D.mask(U, p)
        np.savez_compressed(out_dir / f"seed{s}.npz", **out)


def train(cfg, method, seed, data_dir, base_dir, run_dir) -> dict:
    import numpy as np
    import torch
    from tqdm import tqdm

    from . import fit as F

    torch.set_num_threads(1)
    t0 = time.process_time()
    z = dict(np.load(data_dir / f"seed{seed}.npz"))
    settings = _ggm_settings(cfg)
    ggm = {"X": np.stack([z[f"{g}_X"] for g, _ in settings]),
           "M": np.stack([z[f"{g}_M_p{p:g}"] for g, p in settings]), "kind": "path"}
    if cfg["data"].get("truncate"):
        ggm["a"] = np.stack([z[f"{g}_a"] for g, _ in settings])
        ggm["b"] = np.stack([z[f"{g}_b"] for g, _ in settings])
    groups = {"ggm": ggm}
    if cfg["data"].get("gauss"):
        groups["gauss"] = {"X": z["gauss_X"], "M": z["gauss_M"], "kind": "adam", "checkpoints": cfg["gauss_checkpoints"]}
        if cfg["data"].get("truncate"):
            groups["gauss"]["lo"] = z["gauss_lo"]
    hp = dict(cfg["hp"])
    # one fit per block of equally shaped problems: the paper's main set-ups (the same single block as
    # before the truncated/d-sweep/real additions), then each d of the d-sweep, then each real data set
    blocks = [("main", groups, hp)]
    for dd in _dsweep(cfg):
        ps = cfg["data"]["d_sweep_p_miss"]
        g = {"X": np.stack([z[f"dsw{dd}_X"]] * len(ps)), "M": np.stack([z[f"dsw{dd}_M_p{float(p):g}"] for p in ps]),
             "kind": "path"}
        if cfg["data"].get("truncate"):
            g["a"], g["b"] = np.stack([z[f"dsw{dd}_a"]] * len(ps)), np.stack([z[f"dsw{dd}_b"]] * len(ps))
        blocks.append((f"dsw{dd}", {"ggm": g}, hp))
    for name in _real(cfg, seed):
        X = np.load(data_dir / f"real_{name}.npz")["X"]
        ps = cfg["data"]["real_p_miss"]
        g = {"X": np.stack([X] * len(ps)), "M": np.stack([z[f"{name}_M_p{float(p):g}"] for p in ps]), "kind": "path"}
        blocks.append((name, {"ggm": g}, _real_hp(cfg)))
    total = sum(len(F.gamma_schedule(hp["path"])[1]) for _ in _xsq(cfg))
    for _, gr, h in blocks:
        _, schedule, _ = F.gamma_schedule(h["path"])
        total += max(len(schedule), max(cfg["gauss_checkpoints"]) if "gauss" in gr else 0)
    save, phi_steps = {}, 0
    with tqdm(total=total, desc=f"missing_sm/{method}/seed{seed}", mininterval=5) as bar:
        for bname, gr, h in blocks:
            res = F.fit(method, gr, h, seed, progress=bar)
            phi_steps += res["phi_steps"]
            prefix = "ggm" if bname == "main" else bname
            save[f"{prefix}_path"], save[f"{prefix}_gammas"] = res["ggm"]["path"], res["ggm"]["gammas"]
            if "gauss" in res:
                its = sorted(res["gauss"]["estimates"])
                save["gauss_its"] = np.asarray(its)
                save["gauss_mu_hat"] = np.stack([res["gauss"]["estimates"][t][0] for t in its], 1)  # (R, T, d)
                save["gauss_P_hat"] = np.stack([res["gauss"]["estimates"][t][1] for t in its], 1)
        for dd in _xsq(cfg):
            from . import xsq as XQ

            ps = _xsq_ps(cfg)
            res = XQ.fit_path(method, np.stack([z[f"xsq{dd}_X"]] * len(ps)),
                              np.stack([z[f"xsq{dd}_M_p{p:g}"] for p in ps]), hp, seed, progress=bar)
            phi_steps += res["phi_steps"]
            save[f"xsq{dd}_path"], save[f"xsq{dd}_gammas"] = res["path"], res["gammas"]
    np.savez_compressed(run_dir / "estimates.npz", **save)
    (run_dir / "settings.json").write_text(json.dumps([_sname(g, p) for g, p in settings]))
    rows = [{"setting": "all", "metric": "cpu_seconds", "value": time.process_time() - t0},
            {"setting": "all", "metric": "phi_steps", "value": phi_steps}]
    return {"metrics": rows, "curves": []}


def _path_rows(name, path, P, thr):
    import numpy as np

    from . import metrics as F

    auc, _, _ = F.roc_auc(path, P, thr)
    iu = np.triu_indices(P.shape[0], 1)
    return [{"setting": name, "metric": "auc", "value": auc},
            {"setting": name, "metric": "empty_at_gamma_max", "value": float((np.abs(path[0][iu]) <= thr).all())},
            {"setting": name, "metric": "full_at_gamma_min", "value": float((np.abs(path[-1][iu]) > thr).all())}]


def evaluate(cfg, method, seed, data_dir, base_dir, run_dir) -> list:
    """Numpy only (no torch import: a third of a cheap method's job was torch's start-up)."""
    import numpy as np

    from . import metrics as F

    z = dict(np.load(data_dir / f"seed{seed}.npz"))
    est = dict(np.load(run_dir / "estimates.npz"))
    thr = float(cfg["hp"]["path"]["edge_threshold"])
    rows = []
    for i, (g, p) in enumerate(_ggm_settings(cfg)):
        rows += _path_rows(_sname(g, p), est["ggm_path"][i], z[f"{g}_P"], thr)
    for dd in _dsweep(cfg):
        for i, p in enumerate(cfg["data"]["d_sweep_p_miss"]):
            rows += _path_rows(f"star_d{dd}_p{float(p):g}", est[f"dsw{dd}_path"][i], z[f"dsw{dd}_P"], thr)
    for dd in _xsq(cfg):  # edges = support of the interaction matrix K
        for i, p in enumerate(_xsq_ps(cfg)):
            rows += _path_rows(f"xsq_d{dd}_p{p:g}", est[f"xsq{dd}_path"][i], z[f"xsq{dd}_K"], thr)
    rc = cfg["data"].get("real_cfg", {}) or {}
    for name in _real(cfg, seed):
        gts = np.load(data_dir / f"real_{name}.npz")["gt"]
        rthr = float(rc.get("edge_threshold", thr))
        for i, p in enumerate(cfg["data"]["real_p_miss"]):
            # App. E.3.3: the AUC against each ground-truth graph, averaged over the graphs
            aucs = [F.roc_auc(est[f"{name}_path"][i], gt.astype(float), rthr)[0] for gt in gts]
            rows.append({"setting": f"{name}_p{float(p):g}", "metric": "auc", "value": float(np.mean(aucs))})
    if "gauss_its" in est:
        R = est["gauss_mu_hat"].shape[0]
        for k, t in enumerate(est["gauss_its"]):
            vals = {"fisher_div": [], "prec_err_fro": [], "mean_err": []}
            for r in range(R):  # gauss_reps independent problems per seed: their mean is the job's value
                mu, P, Xt = z["gauss_mu"][r], z["gauss_P"][r], z["gauss_Xtest"][r]
                mh = est["gauss_mu_hat"][r, k].astype(np.float64)
                Ph = est["gauss_P_hat"][r, k].astype(np.float64)
                vals["fisher_div"].append(F.fisher_divergence(mh, Ph, mu, P, Xt))
                vals["prec_err_fro"].append(float(np.linalg.norm(Ph - P)))
                vals["mean_err"].append(float(np.linalg.norm(mh - mu)))
            rows += [{"setting": f"gauss_it{int(t)}", "metric": m, "value": float(np.mean(v))} for m, v in vals.items()]
    return rows


# ---- table ------------------------------------------------------------------------------------

def _cell(agg, m, s, metric, digits=3):
    from icml25.tables import fmt, lookup

    c = lookup(agg, m, s, metric)
    return fmt(c[0], c[1], digits) if c else "–"


def _nseeds(agg, m):
    from icml25.tables import lookup

    c = lookup(agg, m, "all", "cpu_seconds")
    return str(c[2]) if c else "–"


def _over(agg, methods, s, metric="auc") -> str:
    """'means over 5 (marg_var) / 20 seeds; paired over the 5 shared': which seeds the numbers rest on, where
    the methods ran different seed lists (scales.<scale>.method_seeds)."""
    from icml25.core.evidence import seed_values

    sets = {m: set(seed_values(agg, m, s, metric)) for m in methods}
    if len({frozenset(v) for v in sets.values()}) <= 1:
        return ""
    counts = "; ".join(f"{m} {len(v)}" for m, v in sets.items())
    return (f" (means over each method's own seeds: {counts}; the margin and its interval are paired over the "
            f"{len(set.intersection(*sets.values()))} seeds all of them share)")


def make_table(agg, cfg):
    import pandas as pd

    rows = []
    its = cfg["gauss_checkpoints"]
    mid = its[len(its) // 2]
    first = next((t for t in its if t > 0), its[-1])
    for m in cfg["methods"]:
        row = {"method": METHODS[m].label}
        for g, p in _ggm_settings(cfg):
            row[f"AUC {g} p={p:g}"] = _cell(agg, m, _sname(g, p), "auc")
        for dd in _dsweep(cfg):
            for p in cfg["data"]["d_sweep_p_miss"]:
                row[f"AUC star d={dd} p={float(p):g}"] = _cell(agg, m, f"star_d{dd}_p{float(p):g}", "auc")
        for dd in _xsq(cfg):
            for p in _xsq_ps(cfg):
                row[f"AUC x²x² d={dd} p={p:g}"] = _cell(agg, m, f"xsq_d{dd}_p{p:g}", "auc")
        for name in cfg["data"].get("real", []) or []:
            for p in cfg["data"]["real_p_miss"]:
                row[f"AUC {name} p={float(p):g}"] = _cell(agg, m, f"{name}_p{float(p):g}", "auc")
        if cfg["data"].get("gauss"):
            if first < mid:
                row[f"Fisher div. it {first}"] = _cell(agg, m, f"gauss_it{first}", "fisher_div", 2)
            row[f"Fisher div. it {mid}"] = _cell(agg, m, f"gauss_it{mid}", "fisher_div", 2)
            row[f"Fisher div. it {its[-1]}"] = _cell(agg, m, f"gauss_it{its[-1]}", "fisher_div", 2)
            row[f"‖P̂−P‖F it {its[-1]}"] = _cell(agg, m, f"gauss_it{its[-1]}", "prec_err_fro", 2)
        row["CPU s/job"] = _cell(agg, m, "all", "cpu_seconds", 1)
        row["seeds"] = _nseeds(agg, m)
        rows.append(row)
    return pd.DataFrame(rows)


# ---- claims -----------------------------------------------------------------------------------

def _present(cfg, methods):
    missing = [m for m in methods if m not in cfg["methods"]]
    if missing:
        raise KeyError(",".join(missing))


# Margins are paired over seeds: every method fits the same data draw of a seed (the setting's data and
# its missingness mask depend on the seed only), so each claim's margin is computed seed by seed and
# passed as `per_seed` (95% t interval). "The best other method" is the one with the best mean AUC, as the
# text says; its per-seed values are paired with Marg-Var's.

def _sv(agg, m, s, metric="auc"):
    from icml25.core.evidence import seed_values

    return seed_values(agg, m, s, metric)


def _minus(a: dict, b: dict) -> dict:
    return {k: a[k] - b[k] for k in sorted(set(a) & set(b))}


def _var_vs_best_other(agg, s):
    """(Var mean, best other method, its mean, {seed: Var - that method})."""
    v = need(agg, "marg_var", s, "auc")[0]
    om, ov = max(((m, need(agg, m, s, "auc")[0]) for m in MISSING_METHODS if m != "marg_var"), key=lambda t: t[1])
    return v, om, ov, _minus(_sv(agg, "marg_var", s), _sv(agg, om, s))


def claim_star_var_best(agg, cfg):
    from icml25.core import evidence

    _present(cfg, MISSING_METHODS)
    if "star" not in cfg["data"]["graphs"]:
        raise KeyError("star")
    ps = sorted(float(p) for p in cfg["data"]["p_miss"])
    margins, parts, best_all, per_p = [], [], True, []
    for p in ps:
        v, om, ov, d = _var_vs_best_other(agg, _sname("star", p))
        margins.append(v - ov)
        per_p.append(d)
        best_all &= v > ov
        parts.append(f"p={p:g}: Var {v:.3f} vs best other {om} {ov:.3f} (margin {v - ov:+.3f})")
    grows = margins[-1] > margins[0]
    # per seed: the tightest of Var's lead at each p_miss and the growth of that lead (last p - first p)
    per_seed = evidence.combine(per_p, lambda ds: min(*ds, ds[-1] - ds[0]))
    return ClaimResult.of("; ".join(parts) + f"; highest at every p: {best_all}; margin grows (last > first): {grows}"
                          + _over(agg, MISSING_METHODS, _sname("star", ps[0])),
                          unit="AUC (tightest of Var lead per p, lead growth)", per_seed=per_seed)


def _param_margin(fd: dict, fdm: dict) -> float:
    """The tightest of the claim's six conditions, each a Fisher-divergence difference that is > 0 where the
    old check held it: IW/EM best (below Var, below Zeroed), IW ~ EM (within 1.5x), Var's gap to IW/EM shrinks
    from the mid to the last checkpoint, Zeroed > 2x the best, and Zeroed drops < 10% over the second half
    (fd_zeroed - 0.9 fdm_zeroed > 0). `fd`, `fdm`: method -> Fisher divergence at the last / mid checkpoint."""
    best = min(fd["marg_iw"], fd["em"])
    gap_last = fd["marg_var"] - best
    gap_mid = fdm["marg_var"] - min(fdm["marg_iw"], fdm["em"])
    return min(fd["marg_var"] - best, fd["zeroed"] - best,            # a
               1.5 * best - max(fd["marg_iw"], fd["em"]),               # b (old check: <=)
               gap_mid - gap_last,                                      # c
               fd["zeroed"] - 2 * best,                                 # d: > 2x best
               fd["zeroed"] - 0.9 * fdm["zeroed"])                      # d: drop (fdm - fd) / fdm < 0.1


def claim_param_estimation(agg, cfg):
    from icml25.core import evidence

    _present(cfg, MISSING_METHODS)
    if not cfg["data"].get("gauss"):
        raise KeyError("gauss")
    its = cfg["gauss_checkpoints"]
    last, mid = f"gauss_it{its[-1]}", f"gauss_it{its[len(its) // 2]}"
    fd = {m: need(agg, m, last, "fisher_div")[0] for m in MISSING_METHODS}
    fdm = {m: need(agg, m, mid, "fisher_div")[0] for m in MISSING_METHODS}
    best_iw_em = min(fd["marg_iw"], fd["em"])
    a = best_iw_em < fd["marg_var"] and best_iw_em < fd["zeroed"]
    b = max(fd["marg_iw"], fd["em"]) <= 1.5 * best_iw_em
    gap_last = fd["marg_var"] - best_iw_em
    gap_mid = fdm["marg_var"] - min(fdm["marg_iw"], fdm["em"])
    c = gap_last < gap_mid
    zero_drop = (fdm["zeroed"] - fd["zeroed"]) / fdm["zeroed"]
    dd = fd["zeroed"] > 2 * best_iw_em and zero_drop < 0.1
    nums = ", ".join(f"{m} {fd[m]:.2f}" for m in MISSING_METHODS)
    # per seed: the same conditions on that seed's Fisher divergences (the methods share its data draw)
    sv = {(m, k): _sv(agg, m, s, "fisher_div") for m in MISSING_METHODS for k, s in (("last", last), ("mid", mid))}
    keys = list(sv)
    per_seed = evidence.combine([sv[k] for k in keys], lambda xs: _param_margin(
        {m: x for (m, k), x in zip(keys, xs) if k == "last"}, {m: x for (m, k), x in zip(keys, xs) if k == "mid"}))
    return ClaimResult.of(f"Fisher div. at it {its[-1]}: {nums}; IW/EM best {a}; IW~EM (within 1.5x) {b}; "
                          f"Var gap to best IW/EM {gap_mid:.2f} (it {its[len(its) // 2]}) -> {gap_last:.2f}: approaches {c}; "
                          f"Zeroed > 2x best and drop over 2nd half {100 * zero_drop:.0f}% < 10%: {dd}"
                          + _over(agg, MISSING_METHODS, last, "fisher_div"),
                          unit="Fisher div. (tightest of 6 conditions)", per_seed=per_seed)


def _spread(agg, cfg, graph):
    vals = []
    for p in cfg["data"]["p_miss"]:
        aucs = [need(agg, m, _sname(graph, float(p)), "auc")[0] for m in MISSING_METHODS]
        vals.append(max(aucs) - min(aucs))
    return sum(vals) / len(vals)


def _spread_per_seed(agg, cfg, graph) -> dict:
    """{seed: mean over p_miss of (max - min AUC over the 4 missing-data methods)} from that seed's AUCs."""
    from icml25.core import evidence

    per_p = [evidence.combine([_sv(agg, m, _sname(graph, float(p))) for m in MISSING_METHODS],
                              lambda a: max(a) - min(a)) for p in cfg["data"]["p_miss"]]
    return evidence.combine(per_p, lambda v: sum(v) / len(v))


def claim_dense_closer(agg, cfg):
    _present(cfg, MISSING_METHODS)
    if not {"star", "dense"} <= set(cfg["data"]["graphs"]):
        raise KeyError("star/dense")
    s, d = _spread(agg, cfg, "star"), _spread(agg, cfg, "dense")
    vs = [need(agg, "marg_var", _sname("star", float(p)), "auc")[0] - max(need(agg, m, _sname("star", float(p)), "auc")[0] for m in MISSING_METHODS if m != "marg_var") for p in cfg["data"]["p_miss"]]
    vd = [need(agg, "marg_var", _sname("dense", float(p)), "auc")[0] - max(need(agg, m, _sname("dense", float(p)), "auc")[0] for m in MISSING_METHODS if m != "marg_var") for p in cfg["data"]["p_miss"]]
    ms, md = sum(vs) / len(vs), sum(vd) / len(vd)
    # per seed: star spread minus dense spread (> 0 iff the methods are closer on the dense graph)
    return ClaimResult.of(f"mean AUC spread (max-min over the 4 missing-data methods) dense {d:.3f} vs star {s:.3f}; "
                          f"mean Var margin dense {md:+.3f} vs star {ms:+.3f}"
                          + _over(agg, MISSING_METHODS, _sname("star", float(cfg["data"]["p_miss"][0]))),
                          unit="AUC spread (star - dense)",
                          per_seed=_minus(_spread_per_seed(agg, cfg, "star"), _spread_per_seed(agg, cfg, "dense")))


def claim_real_var_best(agg, cfg):
    from icml25.core import evidence

    _present(cfg, MISSING_METHODS)
    names = list(cfg["data"].get("real", []) or [])
    if not names:
        raise KeyError("real data (data.real is empty at this scale)")
    parts, ok, per_setting = [], True, []
    for name in names:
        for p in cfg["data"]["real_p_miss"]:
            s = f"{name}_p{float(p):g}"
            v, om, ov, d = _var_vs_best_other(agg, s)
            ok &= v > ov
            per_setting.append(d)
            parts.append(f"{s}: Var {v:.3f} vs {om} {ov:.3f}")
    # per seed (corruption draw): Var minus the best other method on the worst data set / p_miss
    return ClaimResult.of("; ".join(parts) + f"; Var highest everywhere: {ok}", unit="AUC, worst data set/p_miss",
                          per_seed=evidence.combine(per_setting, min))


STUDY = Study(
    name="missing_sm",
    paper=PAPER,
    methods=METHODS,
    metrics=METRICS,
    download=download,
    preprocess=preprocess,
    train=train,
    evaluate=evaluate,
    make_table=make_table,
    validate=validate,
    figures=lazy_hook("icml25.studies.missing_sm.figures", "figures"),
    claims=[
        Claim("star_var_best", "Star graph: Marg-Var has the highest AUC at every p_miss, and its margin grows with p_miss",
              "Fig. 3: Marg-Var best, others comparable", claim_star_var_best),
        Claim("param_estimation", "Gaussian parameter estimation: Marg-IW ~ EM best, Marg-Var approaches them, Zeroed plateaus",
              "Fig. 1 / Fig. 9 (no table)", claim_param_estimation),
        Claim("dense_closer", "Dense graph: the methods are closer than on the star graph",
              "Fig. 4: Var best 'though not as clearly'", claim_dense_closer),
        Claim("real_var_best", "Real data (S&P 100, yeast): Marg-Var has the highest AUC against the full-data SM graphs",
              "Figs. 6-7: Marg-Var clearly best, others equivalent", claim_real_var_best),
    ],
    stand_ins={
        "smoke": "d=5, n=120, a 6-gamma path and a 16-unit variational net; numbers are meaningless (tests only).",
        "mini": "the paper's simulated set-ups, untruncated (Sec. 5.2.1/5.2.2 graphs with d=10, n=1000, p_miss 0.3/0.6/0.8; "
                "Sec. 5.1 Gaussian as in App. B.1.2, p_miss 0.2), 5 seeds (Marg-Var, the oracle), 3 (Marg-Var's "
                "per-coordinate-sigma ablation, which no claim reads) and 20 (Marg-IW, EM, Zeroed) instead of 50/200 "
                "repeats, 1200 iterations; "
                "gamma path 10^0.3..10^-4 (the paper's 10^-1.7 top does not empty the graph under the plain Hyvarinen loss).",
        "full": "the paper's truncated set-ups (Sec. 5.1.1 Gaussian above the 10% quantile of dims 1-3, 4 problems x 50 "
                "seeds = 200 repeats; Sec. 5.2.1/5.2.2 graphs on a random halfspace holding 80% of the mass, 50 seeds, "
                "p_miss 0.2..0.9), a Gaussian star-graph d-sweep (d = 20..50, p_miss 0.5) and the non-Gaussian d-sweep "
                "(settings xsq_d{d}_p0.5, d = 10..50, n = 1000: log q = -sum p_j (x_j-mu_j)^2/2 - sum_{i<j} K_ij x_i^2 x_j^2/2 "
                "on a star graph, exact Gibbs samples, edge AUC over an L1 path on K; the paper's Fig. 2 model class, but "
                "its exact parametrisation/dimensions/n were not readable here, so ours), and the S&P 100 / yeast GSE1990 real data "
                "(25 corruptions per p_miss); g = min(distance to the boundary, 1) and a fixed edge threshold on the real "
                "data are our choices.",
    },
)
