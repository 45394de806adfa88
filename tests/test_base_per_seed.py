"""`base_per_seed: true`: one base model per run seed, so a claim's seed interval includes the base's randomness.

Run on lockin (the smallest study with a fit_base) in a copy of the workflow whose smoke scale has two seeds.
"""
import hashlib
import re
from pathlib import Path

import pytest

from conftest import REPO, copy_workflow, git_init, snakemake
from icml25 import cli


def _base_digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")):
        if p.is_file() and p.name != "MANIFEST.json":
            h.update(p.relative_to(d).as_posix().encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def per_seed_tree(tmp_path_factory):
    root = copy_workflow(tmp_path_factory.mktemp("per_seed") / "wf")
    cfg = root / "config" / "studies" / "lockin.yaml"
    text = cfg.read_text()
    text, n = re.subn(r"(?m)^(  smoke:\n    seeds: )\[0\]", r"\1[0, 1]\n    base_per_seed: true", text)
    assert n == 1, "lockin's smoke scale no longer starts with seeds: [0]"
    cfg.write_text(text)
    git_init(root)
    snakemake(root, "results/smoke/tables/lockin.md", "--config", "scale=smoke", "studies=[lockin]",
              "tracking=false", "--cores", "2")
    return root


def test_each_seed_trains_its_own_base(per_seed_tree):
    base = per_seed_tree / "results" / "smoke" / "lockin" / "base"
    assert not (base / "MANIFEST.json").exists(), "a shared base model was trained beside the per-seed ones"
    assert (base / "seed0" / "MANIFEST.json").exists() and (base / "seed1" / "MANIFEST.json").exists()
    assert _base_digest(base / "seed0") != _base_digest(base / "seed1"), "both seeds got the same base model"


def test_a_runs_seed_reads_that_seeds_base(per_seed_tree):
    """Forcing base seed 1 anew reruns exactly the seed-1 runs: the DAG ties run seed k to base k alone."""
    plan = snakemake(per_seed_tree, "results/smoke/tables/lockin.md", "--config", "scale=smoke",
                     "studies=[lockin]", "tracking=false", "-n", "--printshellcmds",
                     "-R", "results/smoke/lockin/base/seed1/MANIFEST.json").stdout
    fits = re.findall(r"icml25 fit-base .*?--seed (\d+)", plan)
    trains = re.findall(r"icml25 train .*?--seed (\d+)", plan)
    assert fits == ["1"], plan[-3000:]
    assert len(trains) == 5 and set(trains) == {"1"}, plan[-3000:]


def test_fit_base_seed_argument_matches_the_config(capsys):
    """--seed on a shared-base study is a one-line error, not a base model in an unread folder."""
    assert cli.main(["fit-base", "--scale", "smoke", "--study", "lockin", "--seed", "1", "--root", str(REPO)]) == 2
    assert "one shared base model" in capsys.readouterr().err


def test_per_seed_config_seeds_the_base_with_the_run_seed():
    assert cli.per_seed_base({"base_seed": 0, "x": 1}, 3) == {"base_seed": 3, "x": 1}
