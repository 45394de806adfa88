"""The line-aware code format (the paper's Table 1) and its parser.

inline: ` N|kept`, `-N|deleted` (old-file number), `+N|added` (new-file number), `...` between
        non-adjacent lines; none: the same marks without numbers (` kept`, `-deleted`, `+added`).
"""
from __future__ import annotations

import re

from .diffing import FileDiff

MODES = ("inline", "none")
LINE_RE = re.compile(r"^([ +-])(\d+)\|(.*)$")


def render(new_lines: list[str], shown: list[int], fd: FileDiff, mode: str = "inline") -> str:
    if mode not in MODES:
        raise ValueError(f"unknown line format {mode}")
    added = set(fd.added)
    out, prev = [], None
    for ln in sorted(set(shown)):
        if prev is not None and ln != prev + 1:
            out.append("...")
        for old_no, old_text in fd.deleted.get(ln, []):
            out.append(f"-{old_no}|{old_text}" if mode == "inline" else f"-{old_text}")
        mark = "+" if ln in added else " "
        text = new_lines[ln - 1]
        out.append(f"{mark}{ln}|{text}" if mode == "inline" else f"{mark}{text}")
        prev = ln
    return "\n".join(out)


def parse(rendered: str) -> list[tuple[str, int, str]]:
    """[(mark, number, text)] of an inline-formatted snippet ('...' skipped)."""
    out = []
    for row in rendered.split("\n"):
        m = LINE_RE.match(row)
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(3)))
    return out
