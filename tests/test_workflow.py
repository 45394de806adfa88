"""The whole DAG at smoke scale through the real `snakemake` CLI, in a temporary copy."""
import json
import time

import pandas as pd
import pytest

from conftest import REPO, snakemake

pytestmark = pytest.mark.slow


def test_summary_and_tables(smoke_tree):
    summary = (smoke_tree / "results" / "smoke" / "summary.md").read_text()
    assert "| sand |" in summary and "SAND beats random-k on every dataset" in summary
    for ext in ("csv", "md", "claims.json"):
        assert (smoke_tree / "results" / "smoke" / "tables" / f"sand.{ext}").exists()
    md = (smoke_tree / "results" / "smoke" / "tables" / "sand.md").read_text()
    assert "SAND (no retraining)" in md and "random-k + retrain" in md
    long = pd.read_parquet(smoke_tree / "results" / "smoke" / "metrics.parquet")
    assert set(long[long.study == "sand"].method) == {"sand", "stg", "stg_paper", "lassonet", "anova", "random", "all"}
    assert {"test_metric", "epochs_total", "cpu_seconds"} <= set(long.metric)


def test_mlflow_has_one_tagged_run_per_method_seed(smoke_tree):
    from mlflow.tracking import MlflowClient

    c = MlflowClient(tracking_uri=f"sqlite:///{smoke_tree / 'mlflow.db'}")
    exp = c.get_experiment_by_name("smoke/sand")
    runs = c.search_runs([exp.experiment_id])
    keys = sorted((r.data.tags["method"], r.data.tags["seed"]) for r in runs)
    assert keys == sorted((m, "0") for m in ["sand", "stg", "stg_paper", "lassonet", "anova", "random", "all"])
    for r in runs:
        tags = r.data.tags
        assert len(tags["git_commit"]) >= 40 and tags["scale"] == "smoke" and tags["study"] == "sand"
        for t in ("config_hash", "code_hash", "data_hash"):
            assert len(tags[t]) == 12
        assert "digits/test_metric" in r.data.metrics
        assert r.data.params["hp.sigma"] == "1.5"
        hist = c.get_metric_history(r.info.run_id, "curve/digits/train_loss")
        assert len(hist) >= 2 and len({m.step for m in hist}) == len(hist)
        arts = {a.path for a in c.list_artifacts(r.info.run_id)}
        assert {"metrics.json", "curves.parquet"} <= arts


def test_second_dry_run_has_nothing_to_do(smoke_tree):
    t0 = time.time()
    proc = snakemake(smoke_tree, "all", "--config", "scale=smoke", "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    print(f"no-op dry run: {time.time() - t0:.2f} s")


def test_lint_is_clean():
    proc = snakemake(REPO, "--lint", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Lints for" not in out, out
