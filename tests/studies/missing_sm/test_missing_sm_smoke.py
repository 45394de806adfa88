"""missing_sm end to end at smoke scale through the CLI (in-process), plus determinism."""
from __future__ import annotations

import json

import pytest

from icml25 import cli
from icml25.core import config

NAME = "missing_sm"


@pytest.fixture(scope="module")
def smoke_root(tmp_path_factory):
    from conftest import copy_workflow

    root = copy_workflow(tmp_path_factory.mktemp("msm") / "wf")
    base = ["--root", str(root), "--scale", "smoke", "--study", NAME]
    assert cli.main(["download", *base]) == 0
    assert cli.main(["preprocess", *base]) == 0
    cfg = config.effective(config.load_study(root, NAME), "smoke")
    for m in cfg["methods"]:
        assert cli.main(["train", *base, "--method", m, "--seed", "0"]) == 0
        assert cli.main(["evaluate", *base, "--method", m, "--seed", "0"]) == 0
    assert cli.main(["table", *base]) == 0
    return root, cfg, base


def _metrics(root, m):
    rec = json.loads((root / "results" / "smoke" / NAME / m / "seed0" / "metrics.json").read_text())
    return {(r["setting"], r["metric"]): r["value"] for r in rec["metrics"]}


def test_every_setting_has_an_auc_in_range(smoke_root):
    root, cfg, _ = smoke_root
    for m in cfg["methods"]:
        got = _metrics(root, m)
        for g in cfg["data"]["graphs"]:
            for p in cfg["data"]["p_miss"]:
                auc = got[(f"{g}_p{float(p):g}", "auc")]
                assert 0.0 <= auc <= 1.0
        last = cfg["gauss_checkpoints"][-1]
        assert got[(f"gauss_it{last}", "fisher_div")] >= 0
    assert _metrics(root, "marg_var")[("all", "phi_steps")] > 0  # the variational net is trained
    assert _metrics(root, "marg_iw")[("all", "phi_steps")] == 0
    md = (root / "results" / "smoke" / "tables" / f"{NAME}.md").read_text()
    assert "Marg-Var" in md and "## Claims" in md


def test_train_is_deterministic(smoke_root):
    root, cfg, base = smoke_root
    before = _metrics(root, "marg_var")
    assert cli.main(["train", *base, "--method", "marg_var", "--seed", "0"]) == 0
    assert cli.main(["evaluate", *base, "--method", "marg_var", "--seed", "0"]) == 0
    after = _metrics(root, "marg_var")
    for k, v in before.items():
        if k[1] != "cpu_seconds":
            assert after[k] == v, k


def test_missing_values_are_never_seen(smoke_root):
    """The missing-data methods get zero-filled rows: changing the hidden values changes nothing."""
    import numpy as np

    from icml25.studies.missing_sm import fit as F

    rng = np.random.default_rng(0)
    X = rng.standard_normal((2, 60, 4))
    M = rng.random(X.shape) > 0.4
    X2 = np.where(M, X, 100.0 + X)
    hp = {"r": 3, "proposal_var": 16.0, "batch": 20, "lr": 0.05, "var_hidden": 8, "var_lr": 1e-3, "var_steps": 1,
          "var_objective": "kl", "path": {"iters_first": 3, "iters_per_gamma": 1, "n_gammas": 3,
                                          "log10_gamma_max": 0.0, "log10_gamma_min": -2.0}}
    for m in ("marg_var", "marg_iw", "em", "zeroed"):
        a = F.fit(m, {"g": {"X": X, "M": M, "kind": "path"}}, hp, 0)["g"]["path"]
        b = F.fit(m, {"g": {"X": X2, "M": M, "kind": "path"}}, hp, 0)["g"]["path"]
        assert np.array_equal(a, b), m
    a = F.fit("full", {"g": {"X": X, "M": M, "kind": "path"}}, hp, 0)["g"]["path"]
    b = F.fit("full", {"g": {"X": X2, "M": M, "kind": "path"}}, hp, 0)["g"]["path"]
    assert not np.array_equal(a, b)  # the oracle does use the complete rows
