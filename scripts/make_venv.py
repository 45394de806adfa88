"""Create the project's virtual environment with pip, or stop with one line saying what to install.

`make install` runs this with the system Python before anything else. A plain Debian / Ubuntu `python3` has the
`venv` module but not `ensurepip` (that is the python3.X-venv package), so `python3 -m venv` fails after a
traceback-like paragraph. Here: Python >= 3.11 is checked first; with ensurepip the venv is made as usual;
without it, a pip wheel the system ships (Debian's python3-pip-whl: /usr/share/python-wheels) bootstraps pip
offline into a venv made --without-pip; with neither, one line names the package. Standard library only.

Usage: python3 scripts/make_venv.py VENV   (ICML25_PIP_WHEELS: where to look for a pip wheel)
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import venv

MIN = (3, 11)
WHEELS = os.environ.get("ICML25_PIP_WHEELS", "/usr/share/python-wheels")


def fail(msg: str) -> None:
    print(f"icml25: make install: {msg}", file=sys.stderr)
    raise SystemExit(1)


def pip_wheel() -> str | None:
    wheels = sorted(glob.glob(os.path.join(WHEELS, "pip-*.whl")))
    return wheels[-1] if wheels else None


def main(target: str) -> None:
    ver = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if sys.version_info[:2] < MIN:
        fail(f"needs Python >= {MIN[0]}.{MIN[1]}, this is {ver} ({sys.executable}); install python3.11 "
             "(Debian 12: apt-get install python3.11 python3.11-venv) or run `make install PYTHON=python3.11`")
    try:
        import ensurepip  # noqa: F401  (absent on Debian/Ubuntu without python3.X-venv)
        have_ensurepip = True
    except ImportError:
        have_ensurepip = False
    if have_ensurepip:
        venv.create(target, with_pip=True)
        return
    wheel = pip_wheel()
    if wheel is None:
        fail(f"Python {ver} has no ensurepip (its venv cannot install pip) and no pip wheel was found in "
             f"{WHEELS}: apt-get install python{ver}-venv "
             "(Debian/Ubuntu), or use a python.org / pyenv Python")
    venv.create(target, with_pip=False)
    py = os.path.join(target, "bin", "python")
    # pip runs from its own wheel (a zip on sys.path) and installs itself, offline
    r = subprocess.run([py, os.path.join(wheel, "pip"), "install", "-q", "--no-index", wheel],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"bootstrapping pip from {wheel} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: python3 scripts/make_venv.py VENV")
    main(sys.argv[1])
