"""The evidence behind a verdict: a signed margin in the claim's own units and, where the claim compares
methods over the same seeds, a paired 95% interval of that margin over seeds.

A verdict is computed from these, never typed in (see `verdict_for`):
* holds: margin > 0, and the interval (when there is one) lies above 0;
* fails: margin <= 0, and the interval (when there is one) lies at or below 0;
* inconclusive: the interval covers 0, so the seeds cannot decide the claim.

The interval is Student's t over the per-seed margins (mean ± t_{n-1, 0.975} · s / sqrt(n)): exact for
normal per-seed margins and the usual choice with 3-10 seeds, where a bootstrap has too few resamples to
be trusted.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

CONFIDENCE = 0.95
INTERVAL_KIND = "paired t, 95%"


# n.a. (floor): both compared arms sit on a floor (chance, 0 %, the untrained model), so the comparison cannot
# speak to the claim; counted apart from a missing result (n.a.). See tables.floor_verdict.
FLOOR = "n.a. (floor)"


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, df))


def t_interval(samples: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """(low, high) of the mean of `samples`; None below two samples (no spread to estimate)."""
    xs = [float(x) for x in samples]
    n = len(xs)
    if n < 2 or any(math.isnan(x) for x in xs):
        return None
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(n - 1, confidence) * sd / math.sqrt(n)
    return mean - half, mean + half


def verdict_for(margin: float | None, interval: tuple[float, float] | None) -> str:
    if margin is None or math.isnan(margin):
        return "n.a."
    if interval is not None:
        low, high = interval
        if low > 0:
            return "holds"
        if high <= 0:
            return "fails"
        return "inconclusive"
    return "holds" if margin > 0 else "fails"


def check_consistent(verdict: str, margin: float | None, interval: tuple[float, float] | None) -> None:
    """Raise ValueError when a verdict disagrees with its own margin / interval."""
    if margin is None:
        if verdict == "inconclusive":
            raise ValueError("'inconclusive' needs a margin and an interval that covers 0")
        return
    if verdict in ("n.a.", FLOOR):  # the margin stays on the record; it decides nothing
        return
    want = verdict_for(margin, interval)
    if verdict != want:
        raise ValueError(f"verdict {verdict!r} contradicts margin {margin:g} / interval {interval}: "
                         f"the evidence says {want!r}")


def seed_values(agg, method: str, setting: str, metric: str) -> dict[int, float]:
    """{seed: value} of one aggregated cell; KeyError when the cell is absent (the claim is then n.a.)."""
    row = agg[(agg.method == method) & (agg.setting == setting) & (agg.metric == metric)]
    if row.empty:
        raise KeyError(f"{method}/{setting}/{metric}")
    r = row.iloc[0]
    return {int(s): float(v) for s, v in zip(r["seeds"], r["values"])}


def paired(a: dict[int, float], b: dict[int, float], op=lambda x, y: x - y) -> list[float]:
    """op(a[s], b[s]) over the seeds both cells have, in seed order."""
    return [op(a[s], b[s]) for s in sorted(set(a) & set(b))]


def combine(per_seed: Iterable[dict[int, float]], fn) -> dict[int, float]:
    """Per seed, fn(values of every dict at that seed), over the seeds all dicts share: e.g. the worst
    dataset's margin of each seed with fn=min."""
    dicts = list(per_seed)
    seeds = sorted(set.intersection(*(set(d) for d in dicts))) if dicts else []
    return {s: float(fn([d[s] for d in dicts])) for s in seeds}


def fmt_margin(margin: float | None, unit: str = "", interval=None, n: int | None = None) -> str:
    if margin is None:
        return "–"
    s = f"{margin:+.3g}" + (f" {unit}" if unit else "")
    if interval is not None:
        s += f" [{interval[0]:+.3g}, {interval[1]:+.3g}]"
    return s
