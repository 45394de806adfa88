"""Data manifests: the Snakemake output of download/preprocess, listing each file with its sha256.

Written last, atomically, so a killed job leaves no manifest and the stage reruns; verified before a
stage reads the data, so a missing or truncated file fails with a clear message instead of a wrong table.
"""
from __future__ import annotations

from pathlib import Path

from .errors import UserError
from .io import read_json, write_json
from .provenance import file_digest

NAME = "MANIFEST.json"


def write(directory: Path, **meta) -> dict:
    directory = Path(directory)
    files = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.name != NAME and not path.name.startswith("."):
            rel = path.relative_to(directory).as_posix()
            files[rel] = {"sha256": file_digest(path), "bytes": path.stat().st_size}
    if not files:
        raise RuntimeError(f"{directory}: the stage wrote no files")
    manifest = {**meta, "files": files}
    write_json(directory / NAME, manifest)
    return manifest


def verify(directory: Path, stage_hint: str) -> dict:
    """Check every file of the manifest exists with its size and sha256; return the manifest."""
    directory = Path(directory)
    mpath = directory / NAME
    if not mpath.exists():
        raise UserError(f"missing data: {mpath} does not exist; build it first with {stage_hint}")
    manifest = read_json(mpath)
    for rel, info in manifest["files"].items():
        path = directory / rel
        if not path.exists():
            raise UserError(f"missing data file {path}; restore it with `dvc pull` or rebuild with {stage_hint}")
        size = path.stat().st_size
        if size != info["bytes"]:
            raise UserError(
                f"truncated or altered data file {path} ({size} bytes, manifest says {info['bytes']}); "
                f"restore it with `dvc checkout` or rebuild with {stage_hint}"
            )
        if file_digest(path) != info["sha256"]:
            raise UserError(
                f"corrupt data file {path} (sha256 differs from {mpath.name}); "
                f"restore it with `dvc checkout` or rebuild with {stage_hint}"
            )
    return manifest
