#!/usr/bin/env python3
"""Installs the cluster executor plugins (pyproject's `cluster` extra) into a side directory, not the venv.

    .venv/bin/python scripts/cluster/plugins.py .venv/cluster-plugins    # what `make install` runs

Why: Snakemake imports every executor plugin installed in its environment at each start, and
snakemake-executor-plugin-slurm then runs `scontrol show config` wherever SLURM client tools are on
PATH. With no reachable controller (e.g. after the SLURM tests' teardown stopped slurmctld) scontrol
retries for ~10 s: every Snakemake call stalls. So the default venv has no cluster plugin; the SLURM
tests put DIR on PYTHONPATH for their own Snakemake runs (tests/conftest.py: cluster_env). On a cluster,
`make install-cluster` installs the extra into the venv (there the controller answers at once).

Run with the venv's python. The plugins' own dependencies (numpy, pandas, pyyaml, throttler, Snakemake's
plugin interfaces) come with Snakemake and the project: the plugins are installed with --no-deps and their
declared requirements checked against the venv. Copies that an older `make install` left in
the venv are removed (they would keep stalling); `make install-cluster` marks the venv (<venv>/.cluster)
so that they stay.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def requirements() -> list[str]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return list(extras["cluster"])


def dist_name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]


def unmet(plugin_dir: Path, ours: set[str]) -> list[str]:
    """Requirements of the plugins in plugin_dir that this interpreter's environment does not satisfy."""
    from importlib.metadata import PackageNotFoundError, distributions, version

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    bad = []
    for d in distributions(path=[str(plugin_dir)]):
        for line in d.requires or []:
            req = Requirement(line)
            if canonicalize_name(req.name) in ours or (req.marker and not req.marker.evaluate({"extra": ""})):
                continue
            try:
                have = version(req.name)
            except PackageNotFoundError:
                bad.append(f"{req} (missing)")
                continue
            if not req.specifier.contains(have, prereleases=True):
                bad.append(f"{req} (have {have})")
    return bad


def main() -> int:
    from importlib.metadata import distributions

    from packaging.utils import canonicalize_name

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", type=Path)
    a = ap.parse_args()
    reqs = requirements()
    ours = {canonicalize_name(dist_name(r)) for r in reqs}
    pip = [sys.executable, "-m", "pip"]
    tmp = a.target.with_name(a.target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(pip + ["install", "-q", "--no-deps", "--target", str(tmp), *reqs], check=True)
    bad = unmet(tmp, ours)
    if bad:
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"plugins.py: the venv lacks what the cluster plugins need: {'; '.join(bad)}", file=sys.stderr)
        return 1
    shutil.rmtree(a.target, ignore_errors=True)
    tmp.rename(a.target)
    if not (Path(sys.prefix) / ".cluster").exists():
        site = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
        names = sorted({d.metadata["Name"] for d in distributions(path=site)
                        if canonicalize_name(d.metadata["Name"]) in ours})
        if names:
            print(f"plugins.py: removing {', '.join(names)} from the venv (now in {a.target}; "
                  "`make install-cluster` keeps them in the venv)", file=sys.stderr)
            subprocess.run(pip + ["uninstall", "-q", "-y", *names], check=True)
    print(f"cluster plugins in {a.target}: {', '.join(reqs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
