"""The README's main command, `make run`, from a shell that has no venv on PATH (a fresh login)."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, copy_workflow, git_init


@pytest.mark.slow
def test_make_run_finds_the_pipeline_cli_without_an_activated_venv(tmp_path):
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make on this machine")
    wf = copy_workflow(tmp_path / "wf")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(REPO / name, wf / name)
    os.utime(wf / "pyproject.toml", (time.time() - 3600,) * 2)
    stamp = tmp_path / "installed"  # the venv running these tests is installed: do not reinstall into it
    stamp.touch()
    git_init(wf)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                                  if p and Path(p).resolve() != Path(bin_dir).resolve())
    assert shutil.which("icml25", path=env["PATH"]) is None  # the situation the Makefile must handle
    proc = subprocess.run([make, "run", f"VENV={Path(sys.prefix)}", f"STAMP={stamp}", "CORES=2",
                           "ARGS=--config scale=smoke studies=[sand] tracking=false"],
                          cwd=wf, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (wf / "results" / "smoke" / "tables" / "sand.md").exists()
    assert "sand" in (wf / "results" / "smoke" / "summary.md").read_text()
