"""The comment filter of the paper: coarse thresholds, Top-k by severity, the Meta-Reviewer merge
(support >= 2 of N reviewers) and the Validator's second threshold.

Scores are the paper's 1-7 answers: Q1 "is it a nitpick?" and Q2 "is it a fake problem?" are scored so
that 7 means "certainly not" (a comment is dropped when Q1 <= 4 or Q2 <= 4); Q3 is severity.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class Comment:
    line: int
    category: str
    q1: int
    q2: int
    q3: int
    reviewer: int = 0
    slice: int = 0
    support: int = 1

    def to_json(self):
        return asdict(self)


def coarse(comments: list[Comment], t1: int = 4, t2: int = 4) -> list[Comment]:
    return [c for c in comments if c.q1 > t1 and c.q2 > t2]


def top_k(comments: list[Comment], k: int) -> list[Comment]:
    """The k most severe (stable: ties keep their order)."""
    return sorted(comments, key=lambda c: -c.q3)[:k]


def meta_merge(per_reviewer: list[list[Comment]], window: int = 2, min_support: int = 2) -> list[Comment]:
    """Cluster the reviewers' comments by line (within +-window of the cluster's first comment) and keep
    clusters raised by at least `min_support` distinct reviewers; a cluster becomes its most severe
    comment with the rounded mean scores. With one reviewer, min_support is 1 (nothing to agree with)."""
    need = min(min_support, len(per_reviewer))
    flat = sorted((c for cs in per_reviewer for c in cs), key=lambda c: (c.line, -c.q3))
    clusters: list[list[Comment]] = []
    for c in flat:
        for cl in clusters:
            if abs(cl[0].line - c.line) <= window:
                cl.append(c)
                break
        else:
            clusters.append([c])
    out = []
    for cl in clusters:
        who = {c.reviewer for c in cl}
        if len(who) >= need:
            best = max(cl, key=lambda c: c.q3)
            m = lambda f: int(round(sum(getattr(c, f) for c in cl) / len(cl)))
            out.append(replace(best, q1=m("q1"), q2=m("q2"), q3=m("q3"), support=len(who)))
    return out


def validate(comments: list[Comment], rescore, t1: int = 4, t2: int = 4) -> list[Comment]:
    """Re-score each comment with `rescore(comment) -> (q1, q2, q3)` and apply the thresholds again."""
    out = []
    for c in comments:
        q1, q2, q3 = rescore(c)
        if q1 > t1 and q2 > t2:
            out.append(replace(c, q1=q1, q2=q2, q3=q3))
    return out
