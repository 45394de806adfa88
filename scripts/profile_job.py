"""Where one pipeline job's time goes: py-spy samples a CLI job (`icml25 train|evaluate ...`) and this prints the
functions by self time and the project's functions by inclusive time, as shares of the samples.

    python scripts/profile_job.py --py-spy /tmp/pyspy/bin/py-spy -- train --root R --scale mini --study sand \
        --method sand --seed 0

py-spy is not a project dependency (`pip install --target /tmp/pyspy py-spy`). Idle samples (a process waiting) are
left out with --idle off, so the shares are of CPU samples. Writes the collapsed stacks beside --out when given.
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>[^:()]+)(?::\d+)?\)$")


def parse(collapsed: str):
    """[(frames root -> leaf, count)] from py-spy's raw (collapsed) output."""
    out = []
    for line in collapsed.splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            out.append((stack.split(";"), int(n)))
    return out


def label(frame: str) -> str:
    """`function (module path)` shortened to the part after site-packages/ or src/."""
    m = FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    f = m["file"]
    for cut in ("site-packages/", "/src/", "lib/python3.11/"):
        if cut in f:
            f = f.split(cut, 1)[1]
    return f"{m['func']} ({f})"


def shares(stacks):
    total = sum(n for _, n in stacks) or 1
    self_t, incl = collections.Counter(), collections.Counter()
    for frames, n in stacks:
        self_t[label(frames[-1])] += n
        for lab in {label(f) for f in frames if "icml25/" in f}:
            incl[lab] += n
    return total, self_t, incl


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--py-spy", default="py-spy")
    ap.add_argument("--rate", type=int, default=50, help="samples per second")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--out", type=Path, help="keep the collapsed stacks here")
    ap.add_argument("job", nargs=argparse.REMAINDER, help="-- then the icml25 CLI arguments")
    a = ap.parse_args(argv)
    job = a.job[1:] if a.job[:1] == ["--"] else a.job
    raw = a.out or Path(tempfile.mkstemp(suffix=".txt")[1])
    cmd = [a.py_spy, "record", "--format", "raw", "-r", str(a.rate), "-o", str(raw), "--",
           sys.executable, "-m", "icml25.cli", *job]
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode
    total, self_t, incl = shares(parse(raw.read_text()))
    print(f"{' '.join(job)}: {total} samples at {a.rate}/s (≈ {total / a.rate:.1f} CPU-s), rc {rc}")
    print("self time:")
    for lab, n in self_t.most_common(a.top):
        print(f"  {100 * n / total:5.1f} %  {lab}")
    print("inclusive, project code:")
    for lab, n in incl.most_common(a.top):
        print(f"  {100 * n / total:5.1f} %  {lab}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
