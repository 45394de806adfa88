import pandas as pd
import pytest

from icml25 import tables
from icml25.core.io import write_json
from icml25.core.registry import Claim, ClaimResult, Method, Paper, Study
from runfiles import metric_files


def test_aggregate_mean_std_over_seeds(tmp_path):
    files = metric_files(tmp_path, {("a", 0): 0.5, ("a", 1): 0.7, ("b", 0): 0.2})
    agg = tables.aggregate(tables.collect(files))
    a = agg[agg.method == "a"].iloc[0]
    assert a["mean"] == pytest.approx(0.6) and a["std"] == pytest.approx(0.1414213, rel=1e-5) and a["n"] == 2
    assert sorted(a["values"]) == [0.5, 0.7]
    b = agg[agg.method == "b"].iloc[0]
    assert b["std"] == 0.0 and b["n"] == 1
    assert tables.lookup(agg, "a", "d1", "acc")[0] == pytest.approx(0.6)
    assert tables.lookup(agg, "c", "d1", "acc") is None


def _toy_study(check):
    return Study(
        name="toy", paper=Paper("T", "A", "0000.0000", "none"),
        methods={"a": Method("a", "A", True), "b": Method("b", "B")},
        metrics={"acc": ("accuracy", "higher")},
        download=None, preprocess=None, train=None, evaluate=None,
        make_table=lambda agg, cfg: agg.pivot(index="method", columns="setting", values="mean").reset_index(),
        claims=[Claim("c1", "a beats b", "1 vs 0", check)],
    )


def test_claim_verdicts_computed_from_numbers(tmp_path):
    def check(agg, cfg):
        a, b = tables.lookup(agg, "a", "d1", "acc")[0], tables.lookup(agg, "b", "d1", "acc")[0]
        return ClaimResult("holds" if a > b else "fails", f"{a:.2f} vs {b:.2f}")

    study = _toy_study(check)
    out = tmp_path / "t"
    files = metric_files(tmp_path, {("a", 0): 0.9, ("b", 0): 0.1})
    tables.write_study_table(study, {"scale": "smoke"}, files, out / "x.csv", out / "x.md", out / "x.claims.json")
    claims = pd.read_json(out / "x.claims.json").claims
    assert claims[0]["verdict"] == "holds" and claims[0]["ours"] == "0.90 vs 0.10"
    files = metric_files(tmp_path, {("a", 0): 0.1, ("b", 0): 0.9})
    tables.write_study_table(study, {"scale": "smoke"}, files, out / "x.csv", out / "x.md", out / "x.claims.json")
    md = (out / "x.md").read_text()
    assert "| a beats b | 1 vs 0 | 0.10 vs 0.90 | – | 1 pooled | fails |" in md


def test_claim_missing_rows_is_na(tmp_path):
    def check(agg, cfg):
        raise KeyError("b/d1/acc")

    study = _toy_study(check)
    res = tables.check_claims(study, tables.aggregate(tables.collect(metric_files(tmp_path, {("a", 0): 1.0}))), {})
    assert res[0]["verdict"] == "n.a." and "b/d1/acc" in res[0]["ours"]


def test_claim_result_rejects_unknown_verdict():
    with pytest.raises(ValueError):
        ClaimResult("mostly", "")


def test_aggregate_keeps_seeds_aligned_with_values(tmp_path):
    files = metric_files(tmp_path, {("a", 2): 0.3, ("a", 0): 0.5, ("a", 1): 0.7})
    agg = tables.aggregate(tables.collect(files))
    from icml25.core.evidence import seed_values
    assert seed_values(agg, "a", "d1", "acc") == {0: 0.5, 1: 0.7, 2: 0.3}


def test_paired_margin_reaches_table_and_summary(tmp_path):
    from icml25.core import evidence

    def check(agg, cfg):
        d = evidence.paired(evidence.seed_values(agg, "a", "d1", "acc"), evidence.seed_values(agg, "b", "d1", "acc"))
        return ClaimResult.of("a vs b", unit="acc", per_seed=d)

    study = _toy_study(check)
    out = tmp_path / "t"
    # a - b per seed: 0.1, 0.3, 0.2 -> mean 0.2, s = 0.1, half-width t(2) * 0.1 / sqrt(3) = 0.2484
    files = metric_files(tmp_path, {("a", 0): 0.6, ("a", 1): 0.8, ("a", 2): 0.7, ("b", 0): 0.5, ("b", 1): 0.5, ("b", 2): 0.5})
    tables.write_study_table(study, {"scale": "smoke"}, files, out / "x.csv", out / "x.md", out / "x.claims.json")
    c = pd.read_json(out / "x.claims.json").claims[0]
    assert c["verdict"] == "inconclusive" and c["n_seeds"] == 3
    assert c["margin"] == pytest.approx(0.2) and c["interval"][0] == pytest.approx(0.2 - 0.248414, abs=1e-5)
    assert "| +0.2 acc [-0.0484, +0.448] | 3 paired | inconclusive |" in (out / "x.md").read_text()
    tables.write_summary([out / "x.claims.json"], files, out / "summary.md", out / "m.parquet", "smoke")
    summary = (out / "summary.md").read_text()
    assert "1 inconclusive" in summary and "| 3 paired | inconclusive |" in summary


def test_summary_has_one_row_per_claim(tmp_path):
    files = metric_files(tmp_path, {("a", 0): 0.9})
    write_json(tmp_path / "toy.claims.json", {"study": "toy", "scale": "smoke", "title": "T", "claims": [
        {"id": "c1", "claim": "x", "paper": "p", "ours": "o", "verdict": "holds"},
        {"id": "c2", "claim": "y", "paper": "p", "ours": "o", "verdict": "fails"}]})
    tables.write_summary([tmp_path / "toy.claims.json"], files, tmp_path / "s.md", tmp_path / "m.parquet", "smoke")
    md = (tmp_path / "s.md").read_text()
    assert md.count("| toy | T |") == 2 and "1 holds, 1 fails, 0 inconclusive, 0 n.a." in md
    long = pd.read_parquet(tmp_path / "m.parquet")
    assert list(long.columns) == tables.LONG_COLUMNS and len(long) == 1
