"""The C++ corpus and its self-checking test driver: download, extraction, build and test.

* `tinyxml2` (mini): Debian bookworm's source package 9.0.0+dfsg-3.1, fetched with `apt-get source
  --download-only` through a private one-line deb-src list and private state/cache directories, so nothing
  under /etc/apt changes; the orig tarball is sha256-checked (the digest of Debian's archive file).
* `minilib` (smoke, tests): a tiny library with its own test driver shipped in this package (fixture/),
  a stand-in named as such; it goes through the same build / test / mutate code path.

A build compiles the test driver once (`driver.o`) and the library per candidate (`g++ -O0`); the
driver's "Pass N, Fail M" line decides the verdict.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from icml25.core.errors import UserError

FIXTURE = Path(__file__).resolve().parent / "fixture"

SOURCES = {
    "tinyxml2": {
        "kind": "debian", "package": "tinyxml2", "suite": "bookworm", "component": "main",
        "version": "9.0.0+dfsg-3.1", "orig": "tinyxml2_9.0.0+dfsg.orig.tar.xz",
        "sha256": "96510f47a5db537f70dff3e83dd71fd2180cbba4aa76c589a549467e7f34bc9b",
        "lib": "tinyxml2.cpp", "header": "tinyxml2.h", "driver": "xmltest.cpp", "extra": ["resources"],
        "pristine_pass": 463,
    },
    "minilib": {
        "kind": "bundled", "lib": "minilib.cpp", "header": "minilib.h", "driver": "minitest.cpp", "extra": [],
        "pristine_pass": 22,
    },
    "bugscpp": {"kind": "bugscpp"},   # full scale: data_bugscpp.py
}

PASS_RE = re.compile(r"Pass (\d+), Fail (\d+)")


def spec(cfg: dict) -> dict:
    name = cfg["corpus"]["name"]
    if name not in SOURCES:
        raise UserError(f"code_review: unknown corpus '{name}'; known: {', '.join(SOURCES)}")
    return SOURCES[name]


def debian_uri(sources_dir: Path = Path("/etc/apt/sources.list.d"), sources_list: Path = Path("/etc/apt/sources.list")) -> str:
    """The machine's own Debian archive URI (deb822 `URIs:` or a one-line `deb` entry), not the security one."""
    cands = []
    for f in sorted(sources_dir.glob("*.sources")) if sources_dir.is_dir() else []:
        cands += re.findall(r"(?m)^URIs:\s*(\S+)", f.read_text(errors="replace"))
    files = [sources_list] + (sorted(sources_dir.glob("*.list")) if sources_dir.is_dir() else [])
    for f in files:
        if f.exists():
            cands += re.findall(r"(?m)^deb(?:-src)?\s+(?:\[[^\]]*\]\s+)?(\S+)", f.read_text(errors="replace"))
    for uri in cands:
        if "security" not in uri and "debian" in uri:
            return uri.rstrip("/")
    return "http://deb.debian.org/debian"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def download(cfg: dict, raw_dir: Path) -> None:
    s = spec(cfg)
    if s["kind"] == "bugscpp":
        from . import data_bugscpp

        return data_bugscpp.download(cfg, raw_dir)
    if s["kind"] == "bundled":
        dest = raw_dir / cfg["corpus"]["name"]
        dest.mkdir(parents=True, exist_ok=True)
        for f in (s["lib"], s["header"], s["driver"]):
            shutil.copy2(FIXTURE / f, dest / f)
        return
    dest = raw_dir / s["orig"]
    if dest.exists() and sha256(dest) == s["sha256"]:
        return
    if shutil.which("apt-get") is None:
        raise UserError("code_review: apt-get is needed to fetch the tinyxml2 source package "
                        f"(or place {s['orig']} in {raw_dir} by hand)")
    with tempfile.TemporaryDirectory(prefix="cr_apt_") as tmp:
        t = Path(tmp)
        for d in ("lists/partial", "cache/archives/partial", "out"):
            (t / d).mkdir(parents=True)
        (t / "sources.list").write_text(f"deb-src {debian_uri()} {s['suite']} {s['component']}\n")
        opts = ["-o", f"Dir::Etc::SourceList={t / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/dev/null",
                "-o", f"Dir::State::Lists={t / 'lists'}", "-o", f"Dir::Cache={t / 'cache'}"]
        for args in (["update"], ["source", "--download-only", f"{s['package']}={s['version']}"]):
            p = subprocess.run(["apt-get", "-q", *opts, *args], cwd=t / "out", capture_output=True, text=True,
                               timeout=600)
            if p.returncode != 0:
                raise UserError(f"code_review: apt-get {' '.join(args)} failed: {p.stderr.strip()[-400:]}")
        got = t / "out" / s["orig"]
        if not got.exists() or sha256(got) != s["sha256"]:
            raise UserError(f"code_review: {s['orig']} missing or its sha256 differs from {s['sha256']}")
        shutil.copy2(got, dest)


def extract(cfg: dict, raw_dir: Path, dest: Path) -> Path:
    """The library, header, driver and the driver's data files in `dest` (returned)."""
    s = spec(cfg)
    dest.mkdir(parents=True, exist_ok=True)
    if s["kind"] == "bundled":
        for f in (s["lib"], s["header"], s["driver"]):
            shutil.copy2(raw_dir / cfg["corpus"]["name"] / f, dest / f)
        return dest
    with tarfile.open(raw_dir / s["orig"]) as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        top = members[0].name.split("/")[0]
        keep = (s["lib"], s["header"], s["driver"])
        for m in members:
            rel = m.name[len(top) + 1:]
            if rel in keep or any(rel.startswith(e + "/") for e in s["extra"]):
                out = dest / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(m) as fh:
                    out.write_bytes(fh.read())
    return dest


def _aslr_off_works() -> bool:
    try:
        return shutil.which("setarch") is not None and subprocess.run(
            ["setarch", "-R", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@dataclass
class Outcome:
    compiled: bool
    passed: int = 0
    failed: int = 0
    crashed: bool = False
    timed_out: bool = False
    unstable: bool = False     # the runs disagreed: some noticed the change, some did not

    def killed(self, pristine_pass: int) -> bool:
        """The library's own tests notice the change on every run: a failed check, a crash, a timeout, or
        fewer passes. A mutant that fails on some runs only (undefined behaviour) is not a kill."""
        return self.compiled and not self.unstable and (
            self.failed > 0 or self.crashed or self.timed_out or self.passed != pristine_pass)


class Harness:
    """Builds the driver once; `run(lib_text)` compiles a library variant, links and runs the tests."""

    def __init__(self, src_dir: Path, s: dict, timeout: float = 20.0, runs: int = 3):
        self.src, self.s, self.timeout, self.runs = Path(src_dir), s, timeout, int(runs)
        # ASLR off (setarch -R) makes a mutant that reads out of bounds behave the same on every run
        # (measured on minilib: a `<` -> `<=` mutant killed 6 of 12 runs with ASLR, 0 of 12 without).
        self.prefix = ["setarch", "-R"] if _aslr_off_works() else []
        if shutil.which("g++") is None:
            raise UserError("code_review: g++ is needed to build and test the C++ corpus")
        self.work = Path(tempfile.mkdtemp(prefix="cr_build_"))
        for e in s["extra"]:
            shutil.copytree(self.src / e, self.work / e, dirs_exist_ok=True)
        shutil.copy2(self.src / s["header"], self.work / s["header"])
        self._cc(["-c", str(self.src / s["driver"]), "-I", str(self.work), "-o", str(self.work / "driver.o")])

    def _cc(self, args):
        p = subprocess.run(["g++", "-O0", "-w", *args], capture_output=True, text=True, timeout=300)
        return p.returncode == 0

    def run(self, lib_text: str) -> Outcome:
        lib = self.work / self.s["lib"]
        lib.write_text(lib_text)
        exe = self.work / "test_bin"
        exe.unlink(missing_ok=True)
        if not self._cc(["-c", str(lib), "-I", str(self.work), "-o", str(self.work / "lib.o")]):
            return Outcome(False)
        if not self._cc([str(self.work / "driver.o"), str(self.work / "lib.o"), "-o", str(exe)]):
            return Outcome(False)
        outs = [self._execute(exe) for _ in range(self.runs)]
        noticed = [o.killed(self.s["pristine_pass"]) for o in outs]
        if all(noticed) or not any(noticed):
            return outs[0]
        quiet = outs[noticed.index(False)]
        return Outcome(True, quiet.passed, quiet.failed, unstable=True)

    def _execute(self, exe: Path) -> Outcome:
        try:
            p = subprocess.run([*self.prefix, str(exe)], cwd=self.work, capture_output=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return Outcome(True, timed_out=True)
        out = p.stdout.decode(errors="replace")
        m = PASS_RE.findall(out)
        if not m:
            return Outcome(True, crashed=True)
        passed, failed = int(m[-1][0]), int(m[-1][1])
        return Outcome(True, passed, failed, crashed=p.returncode < 0)

    def close(self):
        shutil.rmtree(self.work, ignore_errors=True)
