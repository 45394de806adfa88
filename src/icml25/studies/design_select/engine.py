"""One method over every trial of one seed: p-values / forecasts -> selected configurations.

The selection never sees the oracle's true theta; evaluate() scores the saved selections."""
from __future__ import annotations

import numpy as np

from . import data_landscape as L
from . import inference as I
from .data_build import PREDICTORS, RNA_TASKS, load, load_trials
from .data_models import exceed_forecast

TASKS = ("known", "known_overlap", "estimated", "gb1_known", "gb1_official")


def overlap_idx(data, n: int, min_ess: float) -> np.ndarray:
    """Known-ratio configurations whose exact expected effective sample size n / E_p[w^2] (product
    distributions: E_p[w^2] = prod_l sum_a q_la^2 / p_la) is at least min_ess. Uses Q and P only,
    never labels or theta."""
    ew2 = np.array([np.prod((Q ** 2 / data["P"]).sum(1)) for Q in data["known"]["Q"]])
    return np.flatnonzero(n / ew2 >= min_ess)
GS = ("mean", "exceed")


def _predict_all(models, X1):
    return {p: m.predict_mu_sigma(X1) for p, m in models.items()}


def _f(g, mu, sigma, gamma):
    return mu if g == "mean" else exceed_forecast(mu, sigma, gamma)


def _g(g, y, gamma):
    return y if g == "mean" else (y >= gamma).astype(float)


def task_inputs(data, trials, task, seed, cfg):
    """Everything a method may use for one task: predictions and density ratios on each trial's
    labelled data, and predictions on each configuration's designs."""
    T, n, Ls = trials["X"].shape
    X1 = L.onehot(trials["X"].reshape(T * n, Ls))
    lab = {p: (mu.reshape(T, n), s.reshape(T, n)) for p, (mu, s) in _predict_all(data["models"], X1).items()}
    m = data[task]
    K = len(m["predictor"])
    pred_name = [PREDICTORS[i] for i in m["predictor"]]
    design = []
    if task == "known":
        rng = np.random.default_rng([seed, 7])
        logP = L.log_prob(trials["X"].reshape(T * n, Ls), data["P"])
        logw = np.stack([(L.log_prob(trials["X"].reshape(T * n, Ls), Q) - logP).reshape(T, n) for Q in m["Q"]], -1)
        for k in range(K):  # one design sample per configuration and seed (official PP code: once per temperature)
            Xd = L.sample_product(m["Q"][k], cfg["n_design"], rng)
            design.append(data["models"][pred_name[k]].predict_mu_sigma(L.onehot(Xd)))
    else:
        logw = data["mdre"].log_ratios(X1).reshape(T, n, K)
        for k in range(K):
            design.append(data["models"][pred_name[k]].predict_mu_sigma(L.onehot(m["X"][k].astype(np.int64))))
    return {"K": K, "pred": pred_name, "lab": lab, "logw": logw, "design": design, "Y": trials["Y"]}


def gb1_task_inputs(gdata, trials, seed, cfg):
    """The GB1 task (official select_for_mean_with_labeled_data): predictions and exact density ratios
    q_T(x) / p_NNK(x) (both stop-rejected site-wise products) on each trial's NNK labelled data, and
    predictions on n_design sequences sampled once per temperature and seed."""
    from . import data_gb1 as G

    T, n, Ls = trials["X"].shape
    Xf = trials["X"].reshape(T * n, Ls)
    X1 = G.onehot21(Xf)
    lab = {p: tuple(a.reshape(T, n) for a in m.predict_mu_sigma(X1)) for p, m in gdata["models"].items()}
    m = gdata["known"]
    preds = gdata["meta"]["predictors"]
    pred_name = [preds[i] for i in m["predictor"]]
    logP = L.log_prob(Xf, gdata["P"])
    logw = np.stack([(L.log_prob(Xf, Q) - logP).reshape(T, n) for Q in m["Q"]], -1)
    rng = np.random.default_rng([seed, 7])
    design = []
    n_design = int(cfg["data"]["gb1"].get("n_design", cfg["n_design"]))
    for k in range(len(pred_name)):
        Xd = L.sample_product(m["Q"][k], n_design, rng)
        design.append(gdata["models"][pred_name[k]].predict_mu_sigma(G.onehot21(Xd)))
    return {"K": len(pred_name), "pred": pred_name, "lab": lab, "logw": logw, "design": design, "Y": trials["Y"]}


def run(cfg, method, seed, data_dir):
    """Returns ({'task/g': selected (T, K, n_tau) bool}, diagnostics rows)."""
    from .study import task_gs

    rna = any(t in RNA_TASKS for t in cfg["tasks"])
    data = load(data_dir) if rna else None
    trials = load_trials(data_dir, seed) if rna else None
    alpha = float(cfg["alpha"])
    out, rows = {}, []
    for task in cfg["tasks"]:
        grid = None  # calibrated forecasts: fixed grid over [0, 1] for the RNA labels, per design set for GB1
        if task.startswith("gb1"):
            from . import data_gb1 as G

            gdata = G.load_task(data_dir, task)
            inp = gb1_task_inputs(gdata, G.load_trials(data_dir, seed, task), seed, cfg)
            gamma, task_taus = gdata["meta"]["gamma"], gdata["meta"]["taus"]
        else:
            gamma = data["meta"]["gamma"]
            grid = np.linspace(0.0, 1.0, int(cfg["cf_grid"]))
        if task == "known_overlap":
            idx = overlap_idx(data, trials["Y"].shape[1], cfg["min_expected_ess"])
            full = task_inputs(data, trials, "known", seed, cfg)
            inp = {"K": len(idx), "pred": [full["pred"][i] for i in idx], "lab": full["lab"],
                   "logw": full["logw"][:, :, idx], "design": [full["design"][i] for i in idx], "Y": full["Y"]}
            task_taus = {g: data["meta"]["taus"][f"known/{g}"] for g in GS}
        elif not task.startswith("gb1"):
            inp = task_inputs(data, trials, task, seed, cfg)
            task_taus = {g: data["meta"]["taus"][f"{task}/{g}"] for g in GS}
        K, Y = inp["K"], inp["Y"]
        T = Y.shape[0]
        W = np.exp(inp["logw"] - inp["logw"].max(1, keepdims=True))  # (T, n, K); self-normalised later
        if method == "pp":
            ess = (W.sum(1) ** 2 / (W ** 2).sum(1)) / W.shape[1]
            rows.append({"setting": task, "metric": "ess_frac_median", "value": float(np.median(ess))})
        cal = None
        if method == "calibrated":
            cal = {p: [I.fit_calibrator(Y[t], *[a[t] for a in inp["lab"][p]]) for t in range(T)] for p in inp["lab"]}
            rng = np.random.default_rng([seed, 11])
        for g in task_gs(cfg, task):
            taus = np.array(task_taus[g])
            gy = _g(g, Y, gamma)
            if method == "calibrated":
                fc = np.empty((T, K))
                for k in range(K):
                    mu, s = inp["design"][k]
                    sub = rng.choice(len(mu), min(int(cfg["cf_designs"]), len(mu)), replace=False)
                    gk = grid if grid is not None else I.forecast_grid(mu[sub], s[sub], cfg["cf_grid"])
                    for t in range(T):
                        fc[t, k] = I.calibrated_forecast(cal[inp["pred"][k]][t], mu[sub], s[sub], g, gamma, gk).mean()
                out[f"{task}/{g}"] = fc[:, :, None] >= taus[None, None, :]  # forecast >= tau, no test
                continue
            est, se = np.empty((T, K)), np.empty((T, K))
            check = []
            for k in range(K):
                f_des = _f(g, *inp["design"][k], gamma)
                f_lab = _f(g, *inp["lab"][inp["pred"][k]], gamma)
                w = W[:, :, k]
                if method == "pp":
                    est[:, k], se[:, k] = I.pp_estimate(gy, f_lab, w, f_des[None, :])
                elif method == "pp_unweighted":  # negative control: w := 1
                    est[:, k], se[:, k] = I.pp_estimate(gy, f_lab, np.ones_like(w), f_des[None, :])
                elif method == "labelled_only":
                    est[:, k], se[:, k] = I.labelled_only_estimate(gy, w)
                elif method == "prediction_only":
                    est[:, k], se[:, k] = I.prediction_only_estimate(f_des)
                else:
                    raise ValueError(method)
                if method == "pp" and k in (0, K - 1):
                    check.append(_ppi_check(gy[0], f_lab[0], w[0], f_des, taus))
            if check:
                rows.append({"setting": f"{task}/{g}", "metric": "ppi_check_maxdiff", "value": max(check)})
            p = I.pvalues(est, se, taus)  # (T, K, n_tau)
            out[f"{task}/{g}"] = I.bonferroni_select(p, alpha, axis=1)
    return out, rows


def _ppi_check(gy, f_lab, w, f_des, taus) -> float:
    """max |ours - ppi_py.ppi_mean_pval(lam=1, w=w)| over the tau grid (first trial)."""
    from ppi_py import ppi_mean_pval

    ours = I.pp_pvalue(gy, f_lab, w, f_des, np.asarray(taus))
    theirs = np.array([float(np.squeeze(ppi_mean_pval(gy, f_lab, f_des, null=float(t), alternative="larger", lam=1,
                                                      w=w))) for t in taus])
    return float(np.max(np.abs(ours - theirs)))
