"""Smoke-scale end-to-end run of the neuralop_width study through the CLI, its determinism and its table,
and the full-scale Burgers loader on a tiny local PDEBench-format stand-in."""
from __future__ import annotations

import json

import numpy as np
import pytest

from icml25 import cli
from icml25.core import config

STUDY = "neuralop_width"
TIMING = {"train_seconds", "step_time_ours", "step_time_neuralop", "step_time_ratio"}


def _metrics(root, method, seed=0):
    rec = json.loads((root / "results" / "smoke" / STUDY / method / f"seed{seed}" / "metrics.json").read_text())
    return {(r["setting"], r["metric"]): r["value"] for r in rec["metrics"] if r["metric"] not in TIMING}


def test_smoke_end_to_end_is_deterministic_and_tabulated(workflow_copy):
    root = workflow_copy
    base = ["--root", str(root), "--scale", "smoke", "--study", STUDY]
    assert cli.main(["download", *base]) == 0
    assert cli.main(["preprocess", *base]) == 0
    cfg = config.effective(config.load_study(root, STUDY), "smoke")
    first = {}
    for m in cfg["methods"]:
        assert cli.main(["train", *base, "--method", m, "--seed", "0"]) == 0
        assert cli.main(["evaluate", *base, "--method", m, "--seed", "0"]) == 0
        first[m] = _metrics(root, m)
    # the same (config, seed) gives the same numbers
    assert cli.main(["train", *base, "--method", "gd", "--seed", "0"]) == 0
    assert cli.main(["evaluate", *base, "--method", "gd", "--seed", "0"]) == 0
    assert _metrics(root, "gd") == first["gd"]
    # every width of every problem has a loss; the gd job carries the Hessian probe
    for p, spec in cfg["problems"].items():
        for w in spec["widths"]:
            assert np.isfinite(first["gd"][(f"{p}|{w}", "final_train_loss")])
    assert any(k[1] == "hess_cross" for k in first["gd"])
    assert not any(k[1].startswith("hess_") for k in first["adam"])
    assert (root / "results" / "smoke" / STUDY / "gd" / "seed0" / "loss_curves.png").exists()
    assert cli.main(["table", *base]) == 0
    md = (root / "results" / "smoke" / "tables" / f"{STUDY}.md").read_text()
    assert "Hessian log-log slope" in md and "## Claims" in md


def test_pdebench_burgers_loader_on_a_local_stand_in(tmp_path):
    h5py = pytest.importorskip("h5py")
    from icml25.studies.neuralop_width import data as D
    from icml25.studies.neuralop_width.study import preprocess

    rng = np.random.default_rng(0)
    tensor = rng.standard_normal((7, 5, 16)).astype(np.float32)  # (N, nt, nx) as in PDEBench
    raw = tmp_path / "raw"
    raw.mkdir()
    with h5py.File(raw / D.FULL_SOURCES["burgers"]["file"], "w") as f:
        f["tensor"] = tensor
        f["t-coordinate"] = np.linspace(0, 2, 6)
        f["x-coordinate"] = np.linspace(0, 1, 16, endpoint=False)
    cfg = {"problems": {"burgers": {"model": "fno", "source": "pdebench", "n_train": 4, "n_test": 2, "grid": 8,
                                    "T": 0.8, "widths": [4]}}, "data_seed": 0}
    out = tmp_path / "out"
    preprocess(cfg, raw, out)
    tr, te = D.load_npz(out / "burgers_train.npz"), D.load_npz(out / "burgers_test.npz")
    np.testing.assert_array_equal(tr["u"], tensor[:4, 0, ::2])
    np.testing.assert_array_equal(tr["s"], tensor[:4, 2, ::2])  # t = 0.8 is the third time stamp
    np.testing.assert_array_equal(te["s"], tensor[4:6, 2, ::2])
    cfg["problems"]["burgers"]["n_train"] = 7
    with pytest.raises(Exception, match="trajectories"):
        preprocess(cfg, raw, out)
