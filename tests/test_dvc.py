"""DVC round trip in a temporary copy: add, push to a local-directory remote, delete data/, pull,
and the documented restore command leaves Snakemake no data job to run."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git_init, smoke_tree_workflow, snakemake

pytestmark = pytest.mark.slow
DVC = str(Path(sys.executable).with_name("dvc"))


def dvc(cwd, *args):
    proc = subprocess.run([DVC, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"dvc {' '.join(args)}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_dvc_round_trip(tmp_path, smoke_tree):
    # the shared-machinery studies only (every study's data at smoke made this test 143 s, most of it
    # building other studies' data, which the round trip does not depend on)
    root = smoke_tree_workflow(tmp_path / "wf")
    git_init(root)
    dvc(root, "init", "-q")
    snakemake(root, "data", "--config", "scale=smoke", "--cores", "2")
    before = {p.relative_to(root).as_posix(): p.read_bytes() for p in (root / "data").rglob("*") if p.is_file()}
    assert any(k.endswith("digits.npz") for k in before)
    dvc(root, "add", "data")
    assert (root / "data.dvc").exists()
    dvc(root, "remote", "add", "-d", "local", str(tmp_path / "remote"))
    dvc(root, "push")
    shutil.rmtree(root / "data")
    shutil.rmtree(root / ".dvc" / "cache")  # a new machine has no cache either
    # the README's restore command: dvc pull, then mark the data targets up to date
    dvc(root, "pull")
    snakemake(root, "data", "--touch", "--config", "scale=smoke", "--cores", "1")
    after = {p.relative_to(root).as_posix(): p.read_bytes() for p in (root / "data").rglob("*") if p.is_file()}
    assert after == before
    dry = snakemake(root, "data", "--config", "scale=smoke", "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr
    plan = snakemake(root, "all", "--config", "scale=smoke", "-n").stdout
    assert "download" not in plan and "preprocess" not in plan and "train" in plan
    # integrity: a corrupted file is detected and `dvc checkout` restores it
    victim = next(p for p in (root / "data").rglob("*.npz"))
    victim.write_bytes(b"corrupt")
    assert "modified" in dvc(root, "status")
    dvc(root, "checkout", "--force")
    assert victim.read_bytes() == before[victim.relative_to(root).as_posix()]
    # the restored data produce the same tables as the data they were built from
    snakemake(root, "all", "--config", "scale=smoke", "studies=[sand]", "--cores", "2")
    import pandas as pd

    def table(r):
        t = pd.read_csv(r / "results" / "smoke" / "tables" / "sand.csv")
        return t[t.metric != "cpu_seconds"].sort_values(["method", "setting", "metric"]).reset_index(drop=True)

    pd.testing.assert_frame_equal(table(root), table(smoke_tree))
