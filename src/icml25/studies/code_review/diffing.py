"""Unified diffs of one file (difflib), as the MR's added lines, deletions and hunks."""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field


@dataclass
class FileDiff:
    added: list[int] = field(default_factory=list)                 # 1-based new-file lines
    deleted: dict[int, list[tuple[int, str]]] = field(default_factory=dict)  # anchor new line -> [(old line, text)]
    hunks: list[tuple[int, int]] = field(default_factory=list)     # new-file line ranges (inclusive) of hunks

    @property
    def changed(self) -> list[int]:
        """The lines a reviewer can comment on as changed: added lines and deletion anchors (the new-file
        line now standing where deleted lines were; for a replacement that is its first added line)."""
        return sorted(set(self.added) | set(self.deleted))

    def to_json(self):
        return {"added": self.added, "deleted": {str(k): v for k, v in self.deleted.items()}, "hunks": self.hunks}

    @classmethod
    def from_json(cls, d):
        return cls(list(d["added"]), {int(k): [tuple(x) for x in v] for k, v in d["deleted"].items()},
                   [tuple(h) for h in d["hunks"]])


def diff(old: list[str], new: list[str], context: int = 3) -> FileDiff:
    sm = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    out = FileDiff()
    for group in sm.get_grouped_opcodes(context):
        out.hunks.append((group[0][3] + 1, max(group[-1][4], group[0][3] + 1)))
        for tag, i1, i2, j1, j2 in group:
            if tag in ("replace", "insert"):
                out.added += list(range(j1 + 1, j2 + 1))
            if tag in ("replace", "delete"):
                out.deleted.setdefault(j1 + 1, []).extend((i + 1, old[i]) for i in range(i1, i2))
    return out


def unified(old: list[str], new: list[str], name: str) -> str:
    return "\n".join(difflib.unified_diff(old, new, f"a/{name}", f"b/{name}", lineterm=""))
