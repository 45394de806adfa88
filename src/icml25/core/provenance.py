"""Hashes and commit ids that tie every run and table row to its code, config and data.

Imported by the Snakefile at DAG-build time: keep it standard-library only and cheap.
"""
from __future__ import annotations

import fnmatch
import hashlib
import subprocess
from pathlib import Path


def file_digest(path: Path, algo: str = "sha256", chunk: int = 1 << 20) -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def tree_hash(files: list[Path], base: Path) -> str:
    """Hash of file names (relative to base) and contents; order-independent."""
    h = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(base).as_posix()):
        h.update(path.relative_to(base).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:12]


def code_hash(study: str, pattern: str = "*.py", root: Path | None = None, exclude: str | None = None) -> str:
    """Hash of a study package's sources: a rule param, so editing one study reruns only its jobs.

    Reads `<root>/src/icml25/studies/<study>` when the workflow root has the sources (a checkout,
    installed editable), else the installed package.
    """
    base = Path(__file__).resolve().parent.parent / "studies" / study
    if root is not None and (Path(root) / "src" / "icml25" / "studies" / study).is_dir():
        base = Path(root) / "src" / "icml25" / "studies" / study
    files = [p for p in base.rglob(pattern) if "__pycache__" not in p.parts]
    if exclude:
        files = [p for p in files if not fnmatch.fnmatch(p.name, exclude)]
    return tree_hash(files, base)


def data_hash(directory: Path) -> str:
    """Hash of a data directory's contents (what DVC would cache for it)."""
    files = [p for p in Path(directory).rglob("*") if p.is_file() and not p.name.startswith(".")]
    return tree_hash(files, Path(directory)) if files else "none"


def git_commit(root: Path) -> str:
    """HEAD's commit, suffixed '-dirty' when the work tree has uncommitted changes to tracked files."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10,
        )
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
