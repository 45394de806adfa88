"""`make install` on a Python without ensurepip (a plain Debian / Ubuntu python3 without python3.X-venv): it makes
the venv from the system's pip wheel, or stops at once with one line naming the package (issue 56)."""
import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

PYTHON = getattr(sys, "_base_executable", sys.executable)  # the interpreter the venv was made from
WHEELS = "/usr/share/python-wheels"


def _no_ensurepip(tmp_path: Path) -> dict:
    """The environment of a Python whose ensurepip cannot be imported (as on Debian without python3.X-venv)."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "ensurepip.py").write_text("raise ImportError('ensurepip is in python3.11-venv')\n")
    return {**os.environ, "PYTHONPATH": str(shadow)}


def test_without_ensurepip_or_a_pip_wheel_make_install_stops_with_one_line(tmp_path):
    env = {**_no_ensurepip(tmp_path), "ICML25_PIP_WHEELS": str(tmp_path / "no-wheels")}
    venv = tmp_path / "venv"
    r = subprocess.run(["make", "-C", str(REPO), "install", f"VENV={venv}", f"PYTHON={PYTHON}"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    ours = [ln for ln in r.stderr.splitlines() if ln.startswith("icml25:")]
    assert len(ours) == 1 and "apt-get install python3.11-venv" in ours[0], r.stderr
    assert "Traceback" not in r.stderr
    assert "pip install" not in r.stdout, "make went on to install packages"


@pytest.mark.skipif(not glob.glob(f"{WHEELS}/pip-*.whl"), reason=f"no system pip wheel in {WHEELS}")
def test_without_ensurepip_the_system_pip_wheel_bootstraps_the_venv(tmp_path):
    venv = tmp_path / "venv"
    r = subprocess.run([PYTHON, str(REPO / "scripts" / "make_venv.py"), str(venv)], env=_no_ensurepip(tmp_path),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--version"], capture_output=True, text=True)
    assert pip.returncode == 0 and str(venv) in pip.stdout, pip.stdout + pip.stderr


def test_with_ensurepip_the_venv_has_pip(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([PYTHON, str(REPO / "scripts" / "make_venv.py"), str(venv)], check=True, timeout=300)
    assert subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--version"]).returncode == 0
