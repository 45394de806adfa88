"""GaussMarker at smoke scale through the real `snakemake` CLI on a copy of the workflow: every stage of the
generic DAG (download -> preprocess -> fit_base -> train -> evaluate -> table -> figures -> track), one MLflow
run per (method, seed), the table beside the paper's number, computed verdicts and the three figures."""
import json

import pytest
import yaml


@pytest.mark.slow
def test_smoke_through_snakemake(study_smoke):
    root = study_smoke("gaussmarker")  # the session's one smoke run through the snakemake CLI
    raw = yaml.safe_load((root / "config/studies/gaussmarker.yaml").read_text())
    methods = raw["methods"]
    runs = json.loads((root / "results/smoke/gaussmarker/mlflow_runs.json").read_text())["runs"]
    assert len(runs) == len(methods) * len(raw["scales"]["smoke"]["seeds"])
    md = (root / "results/smoke/tables/gaussmarker.md").read_text()
    assert "0.997" in md and "Tree-Ring" in md and "## Claims" in md
    claims = json.loads((root / "results/smoke/tables/gaussmarker.claims.json").read_text())["claims"]
    assert [c["id"] for c in claims] == ["fused_beats_single_geometric", "no_loss_photometric", "lossless_latent"]
    assert all(c["verdict"] in ("holds", "fails", "inconclusive") and c["margin"] is not None for c in claims)
    figs = json.loads((root / "results/smoke/figures/gaussmarker/figures.json").read_text())["figures"]
    assert {f["name"] for f in figs} == {"tpr_per_distortion", "roc_rotation", "gnr_flip_rate"}
    assert all(f["caption"] for f in figs)
    metrics = json.loads((root / "results/smoke/gaussmarker/gaussmarker/seed0/metrics.json").read_text())["metrics"]
    got = {(r["setting"], r["metric"]) for r in metrics}
    assert ("rot75", "tpr1") in got and ("z_T", "sign_equals_m") in got and ("gnr", "gnr_random_bits") in got
    assert next(r["value"] for r in metrics if r["metric"] == "sign_equals_m") == 1.0


def test_bad_config_fails_with_one_line(workflow_copy, capsys):
    from icml25 import cli

    path = workflow_copy / "config/studies/gaussmarker.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["common"]["watermark"]["gs_factors"] = [1, 3, 3]
    path.write_text(yaml.safe_dump(raw))
    assert cli.main(["download", "--root", str(workflow_copy), "--scale", "smoke", "--study", "gaussmarker"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gs_factors" in err[0]
