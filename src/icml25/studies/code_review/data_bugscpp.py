"""Full scale: BugsC++ real C/C++ faults as fault-introducing MRs.

BugsC++ (Suresoft-GLaDOS/bugscpp) ships, per defect, `taxonomy/<project>/patch/<NNNN>-buggy.patch`: the
patch that turns the fixed version into the buggy one, i.e. exactly a fault-introducing MR. The loader
keeps the defects whose buggy patch touches one C/C++ file; the key lines are the patch's changed lines
(a pure deletion: the new-file line where the deleted lines were). Without the project checked out
(`bugscpp checkout`, Docker) the MR's file is reconstructed from the hunks (the new side at its own line
numbers, blank elsewhere); with `corpus.checkouts` pointing at checked-out fixed trees the real file is
used. Train/test split: by project (a salted hash), so no project is in both.
"""
from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

from icml25.core.errors import UserError

from .diffing import FileDiff

ARCHIVE = {"url": "https://github.com/Suresoft-GLaDOS/bugscpp/archive/4c7fc04544ce18e41fcd32bad85168a7468680b0.tar.gz",
           "file": "bugscpp.tar.gz", "sha256": None}   # GitHub publishes no digest; the data manifest records it
PATCH_RE = re.compile(r"(?:^|/)taxonomy/([^/]+)/patch/(\d+)-buggy\.patch$")
HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
CXX = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx")


def download(cfg: dict, raw_dir: Path) -> None:
    from icml25.core.download import fetch

    fetch(ARCHIVE["url"], raw_dir / ARCHIVE["file"], ARCHIVE["sha256"])


def parse_patch(text: str) -> dict[str, list[list[str]]]:
    """{file: [hunk lines, ...]} of a git-format patch."""
    files, cur, hunk, left = {}, None, None, [0, 0]
    for row in text.split("\n"):
        if row.startswith("+++ "):
            name = row[4:].strip()
            cur = name[2:] if name.startswith("b/") else name
            files[cur] = []
        elif row.startswith("@@") and cur is not None and (m := HUNK_RE.match(row)):
            hunk = [row]
            files[cur].append(hunk)
            left = [int(m[2] if m[2] is not None else 1), int(m[4] if m[4] is not None else 1)]
        elif hunk is not None and cur is not None and row[:1] in (" ", "+", "-") and any(left):
            # a hunk ends when its header's old / new line counts are used up (the `--` signature after it
            # is no deleted line)
            hunk.append(row)
            left[0] -= row[:1] in (" ", "-")
            left[1] -= row[:1] in (" ", "+")
        elif row.startswith("-- ") or row.startswith("diff --git"):
            hunk = None
    return files


def to_mr(hunks: list[list[str]]) -> tuple[list[str], FileDiff]:
    """The new file's known lines (blank elsewhere) and the FileDiff of a file's hunks."""
    new: dict[int, str] = {}
    fd = FileDiff()
    for h in hunks:
        m = HUNK_RE.match(h[0])
        o, n = int(m.group(1)), int(m.group(3))
        first = n
        for row in h[1:]:
            mark, body = row[:1], row[1:]
            if mark == " ":
                new[n] = body
                o, n = o + 1, n + 1
            elif mark == "-":
                fd.deleted.setdefault(n, []).append((o, body))
                o += 1
            elif mark == "+":
                new[n] = body
                fd.added.append(n)
                n += 1
        fd.hunks.append((first, max(first, n - 1)))
    last = max(list(new) + [1])
    return [new.get(i, "") for i in range(1, last + 1)], fd


def build(cfg: dict, raw_dir: Path, out_dir: Path) -> dict:
    import hashlib

    d = cfg["data"]
    mrs = []
    with tarfile.open(raw_dir / ARCHIVE["file"]) as tar:
        for mem in sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name):
            hit = PATCH_RE.search(mem.name)
            if not hit:
                continue
            project, num = hit.group(1), hit.group(2)
            files = {f: h for f, h in parse_patch(tar.extractfile(mem).read().decode(errors="replace")).items()
                     if f.endswith(CXX) and h}
            if len(files) != 1:
                continue
            (fname, hunks), = files.items()
            lines, fd = to_mr(hunks)
            if not fd.added and not fd.deleted:
                continue
            # a pure deletion: the key line is its deletion anchor, as for the mutants (data_mutants)
            key = fd.added[0] if fd.added else min(fd.deleted)
            mid = f"{project}-{num}"
            (out_dir / "mrs").mkdir(parents=True, exist_ok=True)
            (out_dir / "mrs" / f"{mid}.cpp").write_text("\n".join(lines))
            salt = int(cfg["data_seed"])
            split = "test" if int(hashlib.sha1(f"{salt}:{project}".encode()).hexdigest(), 16) % 100 < int(d["test_percent"]) else "train"
            mrs.append({"id": mid, "file": fname, "function": project, "op": "real_fault", "category": "logic",
                        "key_line": key, "before": "", "after": "", "edits": [], "diff": fd.to_json(),
                        "outcome": {"source": "bugscpp"}, "split": split})
    if not mrs:
        raise UserError("code_review: no single-file C/C++ buggy patch found in the BugsC++ archive")
    (out_dir / "mrs.json").write_text(json.dumps(mrs, indent=1))
    corpus = out_dir / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    train_text = "\n".join((out_dir / "mrs" / f"{m['id']}.cpp").read_text() for m in mrs if m["split"] == "train")
    (corpus / "train_files.cpp").write_text(train_text)
    meta = {"n_mrs": len(mrs), "splits": {k: sum(m["split"] == k for m in mrs) for k in ("train", "test")},
            "library": "train_files.cpp", "test_functions": []}
    (out_dir / "corpus_meta.json").write_text(json.dumps(meta, indent=1))
    return meta
