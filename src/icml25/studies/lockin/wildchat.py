"""Section 5: does the lineage diversity of users' concepts drop when a GPT version is replaced?

Per model family, conversations are binned in `bin_days`-day windows from `start`; each bin's
diversity is the lineage diversity of the multiset of concepts in its users' messages (bins with fewer
than `min_conversations` are skipped). A version switch is a bin where the majority version of the
family changes (the authors place their kinks there). Around each switch, within `bandwidth` bins:

    D_b = a + beta (b - k) + jump 1[b >= k] + kink (b - k) 1[b >= k] + e_b

fit by OLS with Newey-West (HAC) errors: `jump` is the regression-discontinuity drop, `kink` the change
of slope of the regression-kink design. (The authors fit the two designs separately with CausalPy's
Bayesian models; this frequentist version estimates the same coefficients.) Seed 0 analyses the data as
they are; seed s > 0 is a user-level (cluster) bootstrap replicate, so the spread over seeds is a
bootstrap standard error.
"""
from __future__ import annotations

import json

import numpy as np

from .data_wildchat import FAMILIES
from .diversity import tree_lineage_diversity


def bootstrap_users(conv, seed: int):
    """Seed 0: the data; otherwise resample users with replacement, keeping all their conversations."""
    if int(seed) == 0:
        return conv
    import pandas as pd

    rng = np.random.default_rng([int(seed), 5])
    users = conv["user"].unique()
    pick = rng.choice(users, size=len(users), replace=True)
    groups = dict(tuple(conv.groupby("user", sort=False)))
    return pd.concat([groups[u] for u in pick], ignore_index=True).sort_values("time", kind="stable")


def series(conv, paths, sizes, family: str, start, bin_days: float, min_conversations: int,
           max_pairs: int, seed: int):
    """Per-bin diversity of one family: a frame with bin, n, diversity, majority version."""
    import pandas as pd

    sub = conv if family == "all" else conv[conv["family"] == family]
    t0 = pd.Timestamp(start, tz="UTC")
    bins = ((pd.to_datetime(sub["time"], utc=True) - t0).dt.total_seconds() // (bin_days * 86400)).astype(int)
    rng = np.random.default_rng([int(seed), 9])
    rows = []
    for b, g in sub.groupby(bins.values):
        if b < 0 or len(g) < min_conversations:
            continue
        ids = [c for cs in g["concepts"] for c in json.loads(cs)]
        rows.append({"bin": int(b), "n": len(g), "diversity": tree_lineage_diversity(ids, paths, sizes, rng, max_pairs),
                     "majority": g["model"].mode().iloc[0]})
    return pd.DataFrame(rows, columns=["bin", "n", "diversity", "majority"])


def switches(s) -> list[tuple[int, str]]:
    """Bins where a version first becomes the family's majority: (bin, new version). Later flips back and
    forth between versions already seen are not new releases."""
    out, seen = [], set()
    for b, v in zip(s["bin"], s["majority"]):
        if seen and v not in seen:
            out.append((int(b), v))
        seen.add(v)
    return out


def discontinuity_fit(x, y, k: float, bandwidth: float, maxlags: int = 2) -> dict:
    """OLS of y on [1, x-k, 1[x>=k], (x-k)1[x>=k]] within |x-k| <= bandwidth, HAC errors."""
    import statsmodels.api as sm

    x, y = np.asarray(x, float), np.asarray(y, float)
    w = np.abs(x - k) <= bandwidth
    x, y = x[w], y[w]
    after = (x >= k).astype(float)
    X = np.column_stack([np.ones_like(x), x - k, after, (x - k) * after])
    if len(y) < 6 or after.sum() < 2 or (1 - after).sum() < 2:
        return {"n": int(len(y))}
    fit = sm.OLS(y, X).fit(cov_type="HAC", cov_kwds={"maxlags": int(maxlags)})
    return {"n": int(len(y)), "jump": float(fit.params[2]), "jump_p": float(fit.pvalues[2]),
            "kink": float(fit.params[3]), "kink_p": float(fit.pvalues[3]),
            "before": float(y[after == 0].mean()), "after": float(y[after == 1].mean())}


def trend(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    return float(np.polyfit(x, y, 1)[0]) if len(x) >= 2 else float("nan")


def analyse(conv, paths, sizes, wc: dict, seed: int) -> tuple[list, list, dict]:
    """Metric rows, curves and the per-bin series of one replicate."""
    conv = bootstrap_users(conv, seed)
    a = wc["analysis"]
    rows, curves, out = [], [], {}
    for fam in list(FAMILIES) + (["all"] if a.get("pooled", True) else []):
        s = series(conv, paths, sizes, fam, a["start"], float(a["bin_days"]), int(a["min_conversations"]),
                   int(a.get("max_pairs", 200_000)), seed)
        out[fam] = s.to_dict(orient="list")
        if s.empty:
            continue
        rows += [{"setting": fam, "metric": "wc_trend", "value": trend(s["bin"], s["diversity"])},
                 {"setting": fam, "metric": "wc_bins", "value": float(len(s))}]
        curves += [{"setting": fam, "metric": "lineage", "step": int(b), "value": float(d)}
                   for b, d in zip(s["bin"], s["diversity"])]
        if fam == "all":
            continue
        for k, version in switches(s):
            fit = discontinuity_fit(s["bin"], s["diversity"], k, float(a["bandwidth"]), int(a.get("hac_lags", 2)))
            rows += [{"setting": f"{fam}@{version}", "metric": f"wc_{m}", "value": v}
                     for m, v in fit.items() if m != "n"]
    return rows, curves, out
