"""Power per claim (issue 57): how many paired seeds an inconclusive claim's t interval would need to exclude 0
at the observed mean and spread, and the "n.a. (floor)" verdict counted apart in the tables' header lines."""
import math

import pytest
from scipy import stats

from icml25 import tables
from icml25.core import evidence
from icml25.core.registry import ClaimResult


def _record(mean, sd, n, verdict=None, **kw):
    """A claim record whose paired t interval over n seeds has this mean and per-seed sd."""
    half = evidence.t_quantile(n - 1) * sd / math.sqrt(n)
    interval = [mean - half, mean + half]
    verdict = verdict or evidence.verdict_for(mean, tuple(interval))
    return {"id": "c", "claim": "a beats b", "paper": "p", "ours": "o", "verdict": verdict, "margin": mean,
            "unit": "acc", "interval": interval, "n_seeds": n, **kw}


def _direct(mean, sd):
    m = 2
    while stats.t.ppf(0.975, m - 1) * sd / math.sqrt(m) >= abs(mean):
        m += 1
    return m


@pytest.mark.parametrize("mean,sd,n", [(0.2, 1.0, 3), (-0.05, 0.3, 5), (0.01, 0.02, 4)])
def test_seeds_to_decide_matches_a_direct_computation(mean, sd, n):
    c = _record(mean, sd, n)
    assert c["verdict"] == "inconclusive"
    want = _direct(mean, sd)
    assert tables.seeds_to_decide(c["margin"], c["interval"], n) == want
    assert tables.seeds_to_decide_text(c) == f"{want:,}"
    # the interval at the figure excludes 0, one seed fewer does not
    t = lambda m: stats.t.ppf(0.975, m - 1) * sd / math.sqrt(m)
    assert t(want) < abs(mean) <= t(want - 1) or want == 2


def test_a_wider_spread_needs_more_seeds():
    figures = [tables.seeds_to_decide(0.1, _record(0.1, sd, 3)["interval"], 3) for sd in (0.2, 0.5, 1.0, 2.0)]
    assert figures == sorted(figures) and len(set(figures)) == 4


def test_mean_zero_never_and_beyond_the_cap():
    assert tables.seeds_to_decide_text(_record(0.0, 1.0, 3)) == "never (mean 0)"
    c = _record(1e-4, 10.0, 3)
    assert tables.seeds_to_decide(c["margin"], c["interval"], 3) is None
    assert tables.seeds_to_decide_text(c) == "> 10,000"


def test_decided_and_pooled_claims_get_no_figure():
    assert tables.seeds_to_decide_text(_record(1.0, 0.1, 3)) == "–"  # holds
    assert tables.seeds_to_decide_text(_record(-1.0, 0.1, 3)) == "–"  # fails
    pooled = {"verdict": "holds", "margin": 0.2, "interval": None, "n_seeds": 3}
    assert tables.seeds_to_decide_text(pooled) == "–"
    assert tables.seeds_to_decide_text({"verdict": "n.a.", "margin": None}) == "–"
    assert tables.seeds_to_decide_text(_record(0.0, 1.0, 3, verdict=tables.FLOOR)) == "–"


def test_summary_and_study_claims_show_the_column():
    rec = {"study": "toy", "title": "T", "claims": [
        _record(0.2, 1.0, 3), _record(1.0, 0.1, 3, id="c2"), _record(0.0, 0.0, 3, verdict=tables.FLOOR, id="c3"),
        {"id": "c4", "claim": "x", "paper": "p", "ours": "missing", "verdict": "n.a."}]}
    md = tables.summary_markdown([rec], "smoke")
    header = next(ln for ln in md.splitlines() if ln.startswith("Verdicts: "))
    assert header.startswith("Verdicts: 1 holds, 0 fails, 1 inconclusive, 1 n.a. (floor), 1 n.a. margin:")
    assert "n.a.." not in md and "t_{0.975, m-1} · sd / sqrt(m) < |margin|" in header
    assert "| verdict | seeds to decide |" in md
    assert f"| 3 paired | inconclusive | {_direct(0.2, 1.0):,} |" in md and "| 3 paired | holds | – |" in md
    frame = tables._claims_frame(rec["claims"])
    assert list(frame["seeds to decide"]) == [f"{_direct(0.2, 1.0):,}", "–", "–", "–"]


def test_floor_verdict_is_counted_apart():
    claims = [{"verdict": v} for v in ("holds", tables.FLOOR, tables.FLOOR, "n.a.", "inconclusive")]
    counts = tables.verdict_counts(claims)
    assert counts == {"holds": 1, "fails": 0, "inconclusive": 1, "n.a. (floor)": 2, "n.a.": 1}
    assert tables.counts_text(counts) == "1 holds, 0 fails, 1 inconclusive, 2 n.a. (floor), 1 n.a."
    assert tables.FLOOR in tables._VERDICT_COLOR


def _floor_aware_check(a: dict, b: dict) -> ClaimResult:
    """'a beats b' in accuracy, n.a. (floor) when both sit at chance (0.5 within 0.01)."""
    res = ClaimResult.of("a vs b", unit="acc", per_seed=evidence.paired(a, b))
    return tables.floor_verdict(res, a, b, floor=0.5, tol=0.01)


def test_floor_aware_check_and_a_broken_arm():
    at_chance_a, at_chance_b = {0: 0.50, 1: 0.505, 2: 0.497}, {0: 0.502, 1: 0.499, 2: 0.50}
    assert tables.at_floor(at_chance_a, list(at_chance_b.values()), 0.5, 0.01)
    res = _floor_aware_check(at_chance_a, at_chance_b)
    assert res.verdict == tables.FLOOR and res.margin is not None and res.interval is not None  # evidence kept
    # one arm off the floor: the comparison is a real one again, and swapping the arms flips it
    learned = {0: 0.81, 1: 0.80, 2: 0.83}
    assert not tables.at_floor(learned, at_chance_b, 0.5, 0.01)
    assert _floor_aware_check(learned, at_chance_b).verdict == "holds"
    assert _floor_aware_check(at_chance_b, learned).verdict == "fails"
    assert not tables.at_floor([], at_chance_b, 0.5, 0.01)  # an empty arm is not "at the floor"
