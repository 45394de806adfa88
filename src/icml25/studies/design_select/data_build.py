"""Data stage: oracle-labelled training data, predictors, both configuration menus with their true
theta (oracle Monte Carlo), the MDRE for the estimated-ratio menu, and per-seed trial sets of fresh
labelled data (oracle labels cached here so every method job reuses them)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from icml25.core.io import write_json

from . import data_designers as D
from . import data_landscape as L
from . import data_models as M
from .data_dre import MDRE

PREDICTORS = ("ridge", "mlp", "cnn")   # index = the saved `predictor` code; cnn only when configured
KNOWN_PREDICTORS = ("ridge", "mlp")    # the known-ratio menu
DEFAULT_EST_PREDICTORS = ("ridge", "mlp")
RNA_TASKS = ("known", "known_overlap", "estimated")


def _log(msg):
    print(f"[design_select] {msg}", flush=True)


def landscape(dcfg) -> L.RNABinding:
    return L.RNABinding(seq_len=dcfg["seq_len"], target_len=dcfg["target_len"], target_idx=dcfg["target_idx"],
                        noise_sd=dcfg["noise_sd"])


def seed_seq(dcfg) -> str:
    return L.SEEDS[dcfg["seed_idx"]][:dcfg["seq_len"]]


def lambdas(dcfg) -> np.ndarray:
    lo, hi, k = dcfg["known"]["lambda_grid"]
    return np.geomspace(hi, lo, int(k))  # from near-uniform (large lambda) to greedy (small)


def download(cfg: dict, raw_dir: Path) -> None:
    """The RNA landscape is computed (ViennaRNA ships in its wheel): record its definition."""
    d = cfg["data"]
    land = landscape(d)
    write_json(raw_dir / "landscape.json", {"target": land.target, "seed": seed_seq(d), "min_energy": land.min_energy,
                                            "noise_sd": land.noise_sd, "viennarna": land.RNA.__version__})


def _theta(land, X, gamma):
    fit = land.fitness(L.to_str(X))
    return land.expected_label(fit), land.exceed_prob(fit, gamma)


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    d = cfg["data"]
    t0 = time.time()
    rng = np.random.default_rng(d["data_seed"])
    land = landscape(d)
    a, Ls = len(L.ALPHABET), d["seq_len"]
    P = L.mutant_probs(seed_seq(d), d["p_mut"])
    gamma = float(d["gamma"])

    # ---- training data + predictors ----
    Xtr = L.sample_product(P, d["n_train"], rng)
    ytr = land.noisy(land.fitness(L.to_str(Xtr)), rng)
    X1 = L.onehot(Xtr)
    ridge = M.Ridge.fit(X1, ytr, rng)
    mc = d["mlp"]
    mlp = M.MLPEnsemble.fit(X1, ytr.astype(np.float32), seed=d["data_seed"], n_models=mc["n_models"],
                            n_hidden=mc["n_hidden"], n_epoch=mc["n_epoch"])
    models = {"ridge": ridge, "mlp": mlp}
    ec = d["estimated"]
    est_predictors = tuple(ec.get("predictors", DEFAULT_EST_PREDICTORS))
    if "cnn" in est_predictors:  # the paper's third predictor (official models.CNN ensemble)
        cc = d.get("cnn") or {}
        models["cnn"] = M.CNNEnsemble.fit(X1, ytr.astype(np.float32), seq_len=Ls, seed=d["data_seed"], n_alpha=a,
                                          **{k: cc[k] for k in ("n_models", "n_filters", "n_hidden", "kernel", "n_epoch",
                                                                "batch_size", "lr") if k in cc})
    np.savez(out_dir / "models.npz", **{f"{p}__{k}": v for p, mdl in models.items() for k, v in mdl.state().items()})
    _log(f"predictors fitted ({time.time() - t0:.0f}s)")

    # ---- known-ratio menu: max-entropy site-wise categoricals ----
    kc = d["known"]
    lams = lambdas(d)
    Qs, kpred, klam, names = [], [], [], []
    for p in KNOWN_PREDICTORS:
        init = None
        for lam in lams:
            if p == "ridge":
                Q = D.maxent_closed_form(ridge.site_weights(Ls, a), lam)
            else:  # REINFORCE, warm-started from the previous (larger) lambda's solution
                Q = D.reinforce_maxent(mlp.predict, Ls, a, lam, rng, n_iter=kc["reinforce_iters"],
                                       n_sample=kc["reinforce_samples"], lr=kc["reinforce_lr"], init_logits=init)
                init = np.log(Q)
            Qs.append(Q); kpred.append(PREDICTORS.index(p)); klam.append(lam); names.append(f"maxent-{p}-{lam:.4g}")
    Qs = np.stack(Qs)
    th_mean, th_exc, th_se = [], [], []
    for Q in Qs:  # true theta by Monte Carlo with oracle labels (noise integrated in closed form)
        m, e = _theta(land, L.sample_product(Q, kc["n_theta_mc"], rng), gamma)
        th_mean.append(m.mean()); th_exc.append(e.mean()); th_se.append(m.std() / np.sqrt(len(m)))
    np.savez(out_dir / "known.npz", Q=Qs, predictor=np.array(kpred), lam=np.array(klam),
             theta_mean=np.array(th_mean), theta_exceed=np.array(th_exc), theta_mean_mc_se=np.array(th_se))
    _log(f"known menu: {len(Qs)} configurations ({time.time() - t0:.0f}s)")

    # ---- estimated-ratio menu (AdaLead, Biswas; with the full config also PEX, CbAS, DbAS, VAE) ----
    sidx = L.to_idx([seed_seq(d)])[0]
    designs, epred, enames = estimated_menu(ec, models, Xtr, ytr, sidx, rng, seed=d["data_seed"], log=_log)
    designs = np.stack(designs).astype(np.int8)
    e_mean, e_exc = [], []
    for X in designs:  # theta of a design set = mean true label over its designs (oracle)
        m, e = _theta(land, X, gamma)
        e_mean.append(m.mean()); e_exc.append(e.mean())
    # MDRE on the predictors' training sequences (class 0) vs every configuration's designs
    mdre = MDRE.fit([X1] + [L.onehot(X) for X in designs], seed=d["data_seed"], n_hidden=ec["mdre_hidden"],
                    n_epoch=ec["mdre_epochs"])
    np.savez(out_dir / "estimated.npz", X=designs, predictor=np.array(epred), theta_mean=np.array(e_mean),
             theta_exceed=np.array(e_exc), **{f"mdre__{k}": v for k, v in mdre.state().items()})
    _log(f"estimated menu: {len(designs)} configurations, MDRE val loss {float(mdre.s['val_loss']):.3f} "
         f"({time.time() - t0:.0f}s)")

    # ---- trial sets: fresh labelled data per trial (never reused across trials) ----
    for s in range(d["n_trial_sets"]):
        r = np.random.default_rng([d["data_seed"], 1000 + s])
        X = L.sample_product(P, d["n_trials"] * d["n_labelled"], r)
        Y = land.noisy(land.fitness(L.to_str(X)), r)
        np.savez(out_dir / f"trials_{s}.npz", X=X.reshape(d["n_trials"], d["n_labelled"], Ls).astype(np.int8),
                 Y=Y.reshape(d["n_trials"], d["n_labelled"]).astype(np.float64))
        _log(f"trial set {s}: {d['n_trials']} x {d['n_labelled']} labelled ({time.time() - t0:.0f}s)")

    # ---- tau grids: placed over the menu's range of true theta (as the paper picks 0.25-0.5) ----
    lo_f, hi_f = d["tau_span"]
    taus = {}
    for task, (tm, te) in {"known": (th_mean, th_exc), "estimated": (e_mean, e_exc)}.items():
        for g, th in (("mean", tm), ("exceed", te)):
            lo, hi = float(np.min(th)), float(np.max(th))
            grid = lo + (hi - lo) * np.linspace(lo_f, hi_f, d["n_tau"])
            if g == "mean" and d.get("tau_grid"):  # full scale: the paper's fixed grid
                a, b, step = d["tau_grid"]
                grid = np.arange(a, b + step / 10, step)
            taus[f"{task}/{g}"] = list(np.minimum(grid, 1.0) if g == "exceed" else grid)  # a probability
    write_json(out_dir / "meta.json", {
        "P": P.tolist(), "gamma": gamma, "known_names": names, "estimated_names": enames, "taus": taus,
        "train_label_mean": float(ytr.mean()), "ridge_sigma": ridge.sigma, "seconds": time.time() - t0,
    })
    _log(f"done ({time.time() - t0:.0f}s)")


def _dbas_quantiles(ec, p):
    q = ec.get("dbas_quantiles") or []
    return list(q.get(p, q.get("default", [])) if isinstance(q, dict) else q)


def estimated_menu_names(ec) -> list[tuple[str, str, str, object]]:
    """(name, designer, predictor, hyperparameter) of every estimated-ratio configuration, in the
    official rna-demo.ipynb order: 'vae-<vae_predictor>' first (when configured), then per predictor
    AdaLead (kappas), Biswas (temperatures), PEX (when configured), CbAS (quantiles), DbAS (quantiles,
    per predictor when `dbas_quantiles` is a mapping). Without the paper keys: AdaLead + Biswas only."""
    out = []
    if ec.get("vae_predictor"):
        out.append((f"vae-{ec['vae_predictor']}", "vae", ec["vae_predictor"], None))
    for p in ec.get("predictors", DEFAULT_EST_PREDICTORS):
        out += [(f"adalead-{p}-{k:g}", "adalead", p, k) for k in ec["adalead_kappas"]]
        out += [(f"biswas-{p}-{T:g}", "biswas", p, T) for T in ec["biswas_temps"]]
        if ec.get("pex"):
            out.append((f"pex-{p}", "pex", p, None))
        out += [(f"cbas-{p}-{round(q, 2):g}", "cbas", p, q) for q in ec.get("cbas_quantiles") or []]
        out += [(f"dbas-{p}-{round(q, 2):g}", "dbas", p, q) for q in _dbas_quantiles(ec, p)]
    return out


def estimated_menu(ec, models, Xtr, ytr, sidx, rng, seed: int = 0, log=None):
    """Design sets of every configuration of estimated_menu_names(ec), in that order. The AdaLead /
    Biswas calls and their use of rng are those of the original two-designer menu, so a config without
    the paper keys (smoke, mini) yields the same designs."""
    from . import data_paper_designers as PD

    a = len(L.ALPHABET)
    spec = estimated_menu_names(ec)
    train_vae = None
    bc = ec.get("bas") or {}
    if any(kind in ("vae", "cbas", "dbas") for _, kind, _, _ in spec):
        # one VAE fitted to the training sequences: the prior of every CbAS/DbAS run and the 'vae' designer
        train_vae = PD.fit_train_vae(Xtr, seed=seed, latent_dim=bc.get("latent_dim", 10), n_hidden=bc.get("n_hidden", 20),
                                     n_init_epoch=bc.get("n_init_epoch", 5), batch_size=bc.get("batch_size", 10),
                                     lr=bc.get("lr", 1e-3), n_alpha=a)
    designs, epred, enames = [], [], []
    n = ec["n_design"]
    for name, kind, p, h in spec:
        mdl = models[p]
        if kind == "adalead":
            X = D.adalead(mdl.predict, Xtr, ytr, n, h, rng)
        elif kind == "biswas":
            X = D.biswas(mdl.predict, sidx, n, h, rng, max_mu=ec["max_mu"], trust_radius=ec["trust_radius"],
                         n_step=ec["n_step"])
        elif kind == "pex":
            pc = ec["pex"]
            X = PD.pex(mdl.predict, Xtr, ytr, sidx, n, pc["p_mutation"], rng,
                       frontier_neighborhood_size=pc.get("frontier_neighborhood_size", 5), n_alpha=a)
        elif kind == "vae":
            X = train_vae.generate(n, rng)[0]
        else:
            X = PD.bas(mdl.predict_mu_sigma, train_vae, n, float(h), kind, rng, n_iter=bc.get("n_iter", 20),
                       n_sample=bc.get("n_sample", 1000), n_epoch=bc.get("n_epoch", 5),
                       batch_size=bc.get("batch_size", 10), lr=bc.get("lr", 1e-3), n_alpha=a)
        designs.append(X)
        epred.append(PREDICTORS.index(p))
        enames.append(name)
        if log is not None and kind not in ("adalead", "biswas"):
            log(f"estimated menu: {name} designed")
    return designs, epred, enames


def build(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    """The data stage of every configured task: the RNA tasks (when any is configured) and GB1 (when
    data.gb1 is configured: parse the table; with the gb1_known task also predictors, menu, trials)."""
    from . import data_gb1

    if any(t in RNA_TASKS for t in cfg["tasks"]):
        preprocess(cfg, raw_dir, out_dir)
    if cfg["data"].get("gb1"):
        data_gb1.preprocess(cfg["data"]["gb1"], raw_dir / "gb1", out_dir / data_gb1.TASK_DIR)
        for task in data_gb1.GB1_TASKS:
            if task in cfg["tasks"]:
                data_gb1.build_task(cfg, out_dir, task, raw_dir / "gb1")


def load(data_dir: Path) -> dict:
    data_dir = Path(data_dir)
    meta = json.loads((data_dir / "meta.json").read_text())
    mz = np.load(data_dir / "models.npz")
    ridge = M.Ridge.from_state({k.split("__", 1)[1]: mz[k] for k in mz.files if k.startswith("ridge__")})
    mlp = M.MLPEnsemble.from_state({k.split("__", 1)[1]: mz[k] for k in mz.files if k.startswith("mlp__")})
    models = {"ridge": ridge, "mlp": mlp}
    if any(k.startswith("cnn__") for k in mz.files):
        models["cnn"] = M.CNNEnsemble.from_state({k.split("__", 1)[1]: mz[k] for k in mz.files if k.startswith("cnn__")})
    known = dict(np.load(data_dir / "known.npz"))
    est = dict(np.load(data_dir / "estimated.npz"))
    mdre = MDRE({k.split("__", 1)[1]: v for k, v in est.items() if k.startswith("mdre__")})
    return {"meta": meta, "models": models, "known": known, "estimated": est, "mdre": mdre,
            "P": np.array(meta["P"])}


def load_trials(data_dir: Path, seed: int) -> dict:
    z = np.load(Path(data_dir) / f"trials_{seed}.npz")
    return {"X": z["X"].astype(np.int64), "Y": z["Y"]}
