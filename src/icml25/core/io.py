"""Atomic file writes: a killed job never leaves a half-written output behind.

Everything is written to a temporary file in the destination's directory and moved into place
with os.replace, which is atomic on POSIX filesystems.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to `dest`; on success it replaces `dest`, on error it is removed."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix + ".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, dest)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def write_bytes(dest: str | os.PathLike, data: bytes) -> None:
    with atomic_path(dest) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())


def write_text(dest: str | os.PathLike, text: str) -> None:
    write_bytes(dest, text.encode("utf-8"))


def write_json(dest: str | os.PathLike, obj: Any) -> None:
    write_text(dest, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_parquet(dest: str | os.PathLike, frame) -> None:
    with atomic_path(dest, suffix=".parquet") as tmp:
        frame.to_parquet(tmp, index=False)


def write_npz(dest: str | os.PathLike, **arrays) -> None:
    import numpy as np

    with atomic_path(dest, suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)


def _json_default(obj: Any):
    # numpy scalars/arrays appear in metrics; serialise them as plain Python values.
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
