"""Model-free baselines: flag every changed line (maximum recall), one random changed line, and Cppcheck's
findings on the changed lines (`cppcheck --enable=warning,style`). Changed lines are the added lines and
the deletion anchors (`FileDiff.changed`), so a deleted guard or break is flagged at its anchor."""
from __future__ import annotations

import random
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from icml25.core.errors import UserError


def all_added(mr) -> list[int]:
    return list(mr["fd"].changed)


def random_line(mr, seed: int) -> list[int]:
    rng = random.Random(f"{seed}/{mr['id']}")
    return [rng.choice(mr["fd"].changed)] if mr["fd"].changed else []


def cppcheck(mr, header_dir: Path) -> list[int]:
    exe = shutil.which("cppcheck")
    if exe is None:
        raise UserError("code_review: the cppcheck baseline needs `cppcheck` (make system-code-review)")
    with tempfile.TemporaryDirectory(prefix="cr_cppcheck_") as tmp:
        f = Path(tmp) / mr["file"]
        f.write_text(mr["text"])
        p = subprocess.run([exe, "--enable=warning,style", "--max-configs=1", "--quiet", f"-I{header_dir}",
                            "--template={line}|{severity}|{id}", str(f)], capture_output=True, text=True, timeout=600)
    changed = set(mr["fd"].changed)
    lines = [int(m) for m in re.findall(r"(?m)^(\d+)\|", p.stderr)]
    return [ln for ln in lines if ln in changed]
