"""Downstream protocol: frozen features, linear probing with 1% / 10% / 100% of the labels (the same
labelled subsets for every method at a seed), zero-shot by cosine between ECG features and label-prompt
text features; macro AUC over the labels."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def macro_auc(y: np.ndarray, score: np.ndarray) -> float:
    """Mean ROC AUC over the labels that have both classes in y."""
    from sklearn.metrics import roc_auc_score

    aucs = [roc_auc_score(y[:, j], score[:, j]) for j in range(y.shape[1]) if 0 < y[:, j].sum() < len(y)]
    return float(np.mean(aucs))


def label_subset(y: np.ndarray, frac: float, seed: int) -> np.ndarray:
    """Indices of a `frac` subset of the training records in which every label has a positive and a
    negative (labels first, in random order, then uniform filling). Depends on (y, frac, seed) only."""
    n = len(y)
    k = max(int(round(frac * n)), 2 * y.shape[1] if frac < 1 else n)
    if k >= n:
        return np.arange(n)
    rng = np.random.default_rng([seed, int(round(frac * 1e4))])
    chosen: list[int] = []
    for j in rng.permutation(y.shape[1]):
        for want in (1, 0):
            if not any(y[i, j] == want for i in chosen):
                pool = np.flatnonzero(y[:, j] == want)
                pool = pool[~np.isin(pool, chosen)]
                if len(pool):
                    chosen.append(int(rng.choice(pool)))
    rest = np.setdiff1d(np.arange(n), chosen)
    chosen += list(rng.choice(rest, size=k - len(chosen), replace=False))
    return np.array(sorted(chosen))


def linear_probe(f_tr, y_tr, f_te, C: float) -> np.ndarray:
    """One logistic regression per label on standardised frozen features; returns test scores."""
    from sklearn.linear_model import LogisticRegression

    mu, sd = f_tr.mean(0), f_tr.std(0) + 1e-6
    a, b = (f_tr - mu) / sd, (f_te - mu) / sd
    out = np.zeros((len(f_te), y_tr.shape[1]))
    for j in range(y_tr.shape[1]):
        if y_tr[:, j].min() == y_tr[:, j].max():
            continue  # no contrast in this subset: constant score
        clf = LogisticRegression(C=C, max_iter=2000)
        clf.fit(a, y_tr[:, j])
        out[:, j] = clf.decision_function(b)
    return out


def features(model, method: str, x: np.ndarray) -> np.ndarray:
    import torch

    fn = model.ecg_features if method in ("clip", "dbeta_non3s", "dbeta") else model.ecg_mean_features
    with torch.no_grad():
        return np.concatenate([fn(torch.from_numpy(x[i:i + 256])).numpy() for i in range(0, len(x), 256)])


def prompt_features(model, tok, prompts: list[str]) -> np.ndarray:
    import torch

    enc = tok(prompts, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        return model.text_features(enc["input_ids"], enc["attention_mask"]).numpy()


def zero_shot_scores(f_ecg: np.ndarray, f_text: np.ndarray) -> np.ndarray:
    """Cosine similarity of every record with every label prompt: (n, n_labels)."""
    a = f_ecg / (np.linalg.norm(f_ecg, axis=1, keepdims=True) + 1e-12)
    b = f_text / (np.linalg.norm(f_text, axis=1, keepdims=True) + 1e-12)
    return a @ b.T


def load_split(data_dir: Path, name: str):
    z = np.load(data_dir / f"{name}.npz")
    return z["x"], z["y"], z["ids"]


def evaluate(cfg: dict, method: str, seed: int, data_dir: Path, model=None, tok=None) -> list[dict]:
    """One downstream set (mini, smoke), or at full scale every task of tasks.json: rows `<setting>.<task>` per
    task and `<setting>` = the mean over the tasks that count in it (the paper's mean over its six sets)."""
    from .data_downstream import task_dirs

    tasks = task_dirs(data_dir)
    if not tasks:
        return _evaluate_set(cfg, method, seed, data_dir, model, tok)
    rows, per = [], {}
    for name, d, in_mean in tasks:
        for r in _evaluate_set(cfg, method, seed, d, model, tok):
            if r["metric"] == "auc":
                if in_mean:
                    per.setdefault(r["setting"], []).append(r["value"])
                r = {**r, "setting": f"{r['setting']}.{name}"}
            rows.append(r)
    rows += [_row(s, float(np.mean(v))) for s, v in per.items()]
    return rows


def _evaluate_set(cfg: dict, method: str, seed: int, data_dir: Path, model=None, tok=None) -> list[dict]:
    ev = cfg["eval"]
    x_tr, y_tr, _ = load_split(data_dir, "down_train")
    x_te, y_te, _ = load_split(data_dir, "down_test")
    # full scale has no shifted set: zero-shot on the test set only
    x_sh, y_sh = load_split(data_dir, "shift_test")[:2] if (data_dir / "shift_test.npz").exists() else (None, None)
    rows = []
    fracs = [float(f) for f in ev["fractions"]]
    if method == "supervised":
        from .training import train_supervised

        frac = min(fracs)
        sub = label_subset(y_tr, frac, seed)
        predict = train_supervised(cfg, seed, x_tr[sub], y_tr[sub])
        rows.append(_row(f"lp{_pct(frac)}", macro_auc(y_te, predict(x_te))))
        rows.append({"setting": "train", "metric": "n_labelled", "value": float(len(sub))})
        return rows
    f_tr, f_te = features(model, method, x_tr), features(model, method, x_te)
    f_sh = features(model, method, x_sh) if x_sh is not None else None
    for frac in fracs:
        sub = label_subset(y_tr, frac, seed)
        rows.append(_row(f"lp{_pct(frac)}", macro_auc(y_te, linear_probe(f_tr[sub], y_tr[sub], f_te, float(ev["C"])))))
    if method in ("clip", "dbeta_non3s", "dbeta", "random"):
        labels = json.loads((data_dir / "labels.json").read_text())
        p = prompt_features(model, tok, labels["prompts"])
        if method == "random":  # zero-shot through the same (untrained) poolers as the text-trained arms
            f_te_z = features_pooled(model, x_te)
            f_sh_z = features_pooled(model, x_sh) if x_sh is not None else None
        else:
            f_te_z, f_sh_z = f_te, f_sh
        rows.append(_row("zs", macro_auc(y_te, zero_shot_scores(f_te_z, p))))
        if f_sh_z is not None:
            rows.append(_row("zs_shift", macro_auc(y_sh, zero_shot_scores(f_sh_z, p))))
    return rows


def features_pooled(model, x):
    import torch

    with torch.no_grad():
        return np.concatenate([model.ecg_features(torch.from_numpy(x[i:i + 256])).numpy() for i in range(0, len(x), 256)])


def _pct(frac: float) -> str:
    return f"{frac * 100:g}"


def _row(setting, value):
    return {"setting": setting, "metric": "auc", "value": float(value)}
