"""The one download function every study uses for the full scale's real data.

sha256-verified, retried with exponential backoff, resumed from a partial `.part` file with an HTTP
Range request; on a checksum mismatch nothing is left at the destination.
"""
from __future__ import annotations

import os
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

from .errors import UserError
from .provenance import file_digest

_CHUNK = 1 << 16


class _Retryable(Exception):
    pass


def fetch(url: str, dest: str | os.PathLike, sha256: str | None, *, md5: str | None = None,
          retries: int = 4, backoff: float = 0.5, timeout: float = 60.0) -> Path:
    """Download `url` to `dest` unless a verified copy is already there; return `dest`.

    Some sources publish only an md5 (MNIST, Fashion-MNIST): it is checked the same way. With no
    checksum at all the digest is recorded by the data manifest (and so by DVC) instead.
    """
    dest = Path(dest)
    algo, want = ("sha256", sha256) if sha256 or not md5 else ("md5", md5)
    if dest.exists() and (want is None or file_digest(dest, algo) == want):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    for attempt in range(retries):
        try:
            _transfer(url, part, timeout)
            break
        except urllib.error.HTTPError as exc:
            if exc.code < 500 and exc.code not in (408, 429):
                part.unlink(missing_ok=True)
                raise UserError(f"download of {url} failed: HTTP {exc.code} {exc.reason}; check the URL") from None
            err = f"HTTP {exc.code}"
        except (_Retryable, urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            err = str(exc) or type(exc).__name__
        if attempt == retries - 1:
            raise UserError(
                f"download of {url} failed after {retries} attempts ({err}); check the network, "
                f"or place the file at {dest} by hand"
            )
        time.sleep(backoff * 2**attempt)
    digest = file_digest(part, algo)
    if want is not None and digest != want:
        part.unlink(missing_ok=True)
        raise UserError(
            f"checksum mismatch for {url}: expected {algo} {want}, got {digest}; the download was "
            f"deleted. The source changed or the transfer was corrupted: retry, or update the checksum "
            f"only if the new file is known to be right"
        )
    os.replace(part, dest)
    return dest


def _transfer(url: str, part: Path, timeout: float) -> None:
    have = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "icml25-pipeline"}
    if have:
        headers["Range"] = f"bytes={have}-"
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        status = getattr(resp, "status", 200)
        if have and status != 206:
            have = 0  # the server ignored the range: start over
        expected = resp.headers.get("Content-Length")
        got = 0
        with open(part, "ab" if have else "wb") as fh:
            while block := resp.read(_CHUNK):
                fh.write(block)
                got += len(block)
    if expected is not None and got < int(expected):
        # urllib returns a short body on a cut connection instead of raising: keep the part, resume
        raise _Retryable(f"transfer cut off after {have + got} bytes")


def copy_verified(src: str | os.PathLike, dest: str | os.PathLike, digest: str | None,
                  algo: str = "sha256", install_hint: str = "") -> Path:
    """Copy a file shipped by an installed package into the raw data dir, verifying its checksum."""
    src, dest = Path(src), Path(dest)
    if not src.exists():
        raise UserError(f"missing source file {src}{'; ' + install_hint if install_hint else ''}")
    if digest is not None and file_digest(src, algo) != digest:
        raise UserError(f"checksum mismatch for {src}: expected {algo} {digest}; reinstall the package that ships it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)
    return dest
