"""The ttfs study end to end at smoke scale through the real `snakemake` CLI (a copy of the workflow), and
its bad-input errors."""
from __future__ import annotations

import json

import pytest

from icml25.core.errors import UserError

STUDY = "ttfs"


@pytest.mark.slow
def test_smoke_through_snakemake(study_smoke):
    root = study_smoke(STUDY)  # the session's one smoke run through the snakemake CLI
    res = root / "results" / "smoke"
    claims = json.loads((res / "tables" / f"{STUDY}.claims.json").read_text())["claims"]
    assert [c["id"] for c in claims] == ["ttfs_exact_lossless", "ttfs_approaches_ann", "naive_ttfs_loses",
                                         "ttfs_fewer_sops_than_rate", "energy_ratio_20_25"]
    md = (res / "tables" / f"{STUDY}.md").read_text()
    assert "TTFSFormer" in md and "rate coding (spikingjelly STA)" in md and "SpikeZIP-TF" in md
    figs = json.loads((res / "figures" / STUDY / "figures.json").read_text())["figures"]
    assert {f["name"] for f in figs} == {"ttfs_acc_vs_p", "ttfs_sops_vs_acc", "ttfs_energy_ratio"}
    assert all(f["caption"] for f in figs)
    runs = json.loads((res / STUDY / "mlflow_runs.json").read_text())["runs"]
    assert len(runs) == 5  # methods x seeds
    rec = json.loads((res / STUDY / "ttfs" / "seed0" / "metrics.json").read_text())
    cells = {(r["setting"], r["metric"]): r["value"] for r in rec["metrics"]}
    assert cells[("digits|vit|exact", "max_spikes_per_neuron")] <= 1
    assert 0 < cells[("digits|vit|exact", "spikes_per_neuron")] <= 1


def test_bad_config_fails_with_one_clear_line():
    from icml25.core import config
    from conftest import REPO
    from icml25.studies.ttfs.study import validate

    cfg = config.effective(config.load_study(REPO, STUDY), "smoke")
    for key, val, msg in (("datasets", {"cifar": {}}, "unknown dataset"),
                          ("convert", {**cfg["convert"], "p": [0]}, "positive integers"),
                          ("models", {"x": {"dim": 10, "heads": 3, "mlp": "gelu"}}, "divisible")):
        with pytest.raises(UserError, match=msg):
            validate({**cfg, key: val})
