"""Budget sweeps through the real Snakemake CLI: derived scales run through the same DAG, the sweep
table and figure are written, the plain scale's results stay untouched."""
import json
import os
import subprocess
import sys
from pathlib import Path
import shutil

import pytest

from conftest import snakemake
from icml25.core import config as icfg
from icml25.core import sweep
from icml25.core.errors import UserError


def test_derived_scale_multiplies_knobs_only():
    raw = {"study": "toy", "methods": ["a"], "common": {"train": {"steps": 10, "lr": 0.1}, "per": {"x": {"e": 2}, "y": {"e": 3}}},
           "scales": {"mini": {"seeds": [0, 1], "sweep": {"knobs": ["train.steps", "per.*.e"], "factors": [1, 3], "seeds": [5]}}}}
    cfg = icfg.effective(raw, "mini-x3")
    assert cfg["train"] == {"steps": 30, "lr": 0.1} and cfg["per"] == {"x": {"e": 6}, "y": {"e": 9}}
    assert cfg["seeds"] == [5] and cfg["scale"] == "mini" and cfg["budget_factor"] == 3
    # declaring a sweep does not change what the plain scale computes
    plain = icfg.effective(raw, "mini")
    del raw["scales"]["mini"]["sweep"]
    assert icfg.config_hash(icfg.result_config(plain)) == icfg.config_hash(icfg.result_config(icfg.effective(raw, "mini")))
    with pytest.raises(UserError, match="declares no budget knob"):
        icfg.effective(raw, "mini-x3")
    with pytest.raises(UserError, match="unknown scale"):
        icfg.parse_scale("mini-x0")


def test_trend_sentences():
    c = lambda v, m, iv=None: {"verdict": v, "margin": m, "unit": "acc", "interval": iv}
    assert sweep.trend([(1, c("fails", -4.3, [-5, -3.6])), (3, c("fails", -2.0)), (10, c("fails", -1.2))]) == \
        "fails at this budget (margin -4.3 -> -1.2 acc from 1x to 10x)"
    assert sweep.trend([(1, c("fails", -1.0, [-2, 0.0])), (3, c("fails", -1.1))]).startswith("fails (no trend with budget")
    assert sweep.trend([(1, c("inconclusive", -0.1, [-0.3, 0.1])), (3, c("holds", 0.5, [0.2, 0.8]))]).startswith(
        "inconclusive at this budget, holds from 3x")
    # a verdict that changes without a trend says so (deal's near-DnCNN claim: inconclusive at 1x, fails at 3x)
    assert sweep.trend([(1, c("inconclusive", -0.156, [-1.11, 0.8])), (3, c("fails", -0.034))]) == \
        "inconclusive at 1x, fails at 3x (no trend with budget: margin -0.156 -> -0.034 acc from 1x to 3x)"


def test_sweep_through_snakemake(smoke_tree, tmp_path):
    root = tmp_path / "wf"
    shutil.copytree(smoke_tree, root, symlinks=True, ignore=shutil.ignore_patterns("mlflow.db*", "mlartifacts"))
    plain = sorted((root / "results" / "smoke").glob("lockin/**/metrics.json")) + \
        sorted((root / "results" / "smoke" / "tables").glob("lockin.*"))
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in plain}
    snakemake(root, "sweep", "--cores", "2", "--config", "scale=smoke", "tracking=false", "studies=[lockin]")
    out = root / "results" / "smoke" / "sweeps"
    md = (out / "lockin.md").read_text()
    assert "| 1x | 2x | with budget |" in md
    rec = json.loads((out / "lockin.json").read_text())
    assert rec["factors"] == [1, 2] and all(len(c["points"]) == 2 and c["trend"] for c in rec["claims"])
    assert (out / "lockin_margins.png").stat().st_size > 1000 and (out / "summary.md").exists()
    x2 = root / "results" / "smoke-x2"
    assert json.loads(next(x2.glob("lockin/*/seed0/metrics.json")).read_text())["params"]["loop.rounds"] == 6
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in plain} == before, "the sweep touched the plain smoke results"
    # the summary written after a sweep says, per claim, what budget does (the sweep's own sentence)
    subprocess.run(["icml25", "summary", "--scale", "smoke", "--studies", "lockin"], cwd=root, check=True,
                   env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    summary = (root / "results" / "smoke" / "summary.md").read_text()
    assert "| with budget |" in summary and rec["claims"][0]["trend"] in summary
    # a study without knobs: one clear line
    proc = snakemake(root, "sweep", "--cores", "1", "--config", "scale=smoke", "tracking=false",
                     "studies=[neuralop_width]", check=False)
    assert proc.returncode != 0 and "declares a budget knob" in proc.stdout + proc.stderr
