"""The paper's metrics (App. M): KBI, FAR1, FAR2, CPI1, CPI2, LSR.

* KBI = recalled key bugs / all key bugs x 100; a comment recalls an MR's key bug when it is on the bug's
  file and within +-`tol` lines of the mutated line (never file level).
* FAR1 = mean over MRs that received comments of (false-alarm comments / comments) x 100; FAR2 = the same
  mean over the MRs whose key bug was recalled. (Our reading: an MR without comments raises no alarm and
  is left out of the mean; with no commented MR at all FAR is 0.)
* CPI_i = 2 KBI (100 - FAR_i) / (KBI + 100 - FAR_i), 0 when both are 0.
* LSR = mean over commented MRs of the share of comments whose line is a line of the reviewed snippet.
"""
from __future__ import annotations


def cpi(kbi: float, far: float) -> float:
    good = 100.0 - far
    return 0.0 if kbi + good <= 0 else 2.0 * kbi * good / (kbi + good)


def hits(comment_line: int, key_line: int, tol: int = 1) -> bool:
    return abs(int(comment_line) - int(key_line)) <= tol


def score(mrs: list[dict], tol: int = 1) -> dict:
    """mrs: [{"key_line": int, "comments": [{"line": int, "valid": bool}, ...]}] -> the metrics."""
    n = len(mrs)
    recalled, far_all, far_hit, lsr = 0, [], [], []
    n_comments = 0
    for mr in mrs:
        cs = mr["comments"]
        n_comments += len(cs)
        good = [hits(c["line"], mr["key_line"], tol) for c in cs]
        hit = any(good)
        recalled += hit
        if cs:
            far = 100.0 * sum(not g for g in good) / len(cs)
            far_all.append(far)
            if hit:
                far_hit.append(far)
            lsr.append(100.0 * sum(bool(c.get("valid", True)) for c in cs) / len(cs))
    kbi = 100.0 * recalled / n if n else 0.0
    far1 = sum(far_all) / len(far_all) if far_all else 0.0
    far2 = sum(far_hit) / len(far_hit) if far_hit else 0.0
    return {"kbi": kbi, "far1": far1, "far2": far2, "cpi1": cpi(kbi, far1), "cpi2": cpi(kbi, far2),
            "lsr": sum(lsr) / len(lsr) if lsr else 0.0, "comments_per_mr": n_comments / n if n else 0.0}
