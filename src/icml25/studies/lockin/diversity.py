"""Diversity measures: histogram entropy of beliefs and lineage diversity on a concept tree."""
from __future__ import annotations

from itertools import combinations

import numpy as np


def label_entropy(labels) -> float:
    """Shannon entropy (nats) of the empirical distribution of discrete labels."""
    _, counts = np.unique(np.asarray(labels), return_counts=True)
    if counts.sum() == 0:
        return 0.0
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def level_histogram_entropy(beliefs, levels: int = 10) -> float:
    """Entropy of the belief histogram whose bins are the stated levels 0..levels (bins centred on k/levels,
    so a population agreeing on one stated level has entropy 0 whichever side of it each belief lies)."""
    return label_entropy(stated_levels(beliefs, levels))


def stated_levels(beliefs, levels: int = 10) -> np.ndarray:
    return np.rint(np.clip(np.asarray(beliefs, dtype=float), 0.0, 1.0) * levels).astype(int)


class ConceptTree:
    """A fixed concept hierarchy given as child -> parent (the root has parent None)."""

    def __init__(self, parent: dict):
        self.parent = dict(parent)
        roots = [c for c, p in self.parent.items() if p is None]
        if len(roots) != 1:
            raise ValueError(f"a concept tree needs exactly one root, got {roots}")
        self.root = roots[0]
        self._path = {c: self._ancestry(c) for c in self.parent}

    def _ancestry(self, c) -> list:
        path = [c]
        while self.parent[path[-1]] is not None:
            path.append(self.parent[path[-1]])
            if len(path) > len(self.parent):
                raise ValueError("the concept tree has a cycle")
        return path[::-1]  # root ... c

    def depth(self, c) -> int:
        return len(self._path[c]) - 1

    def lca_depth(self, a, b) -> int:
        pa, pb = self._path[a], self._path[b]
        d = 0
        while d < min(len(pa), len(pb)) and pa[d] == pb[d]:
            d += 1
        return d - 1

    def distance(self, a, b) -> float:
        """1 - depth(LCA) / min depth: 0 for the same concept, 1 when the common ancestor is the root."""
        m = min(self.depth(a), self.depth(b))
        return 0.0 if m == 0 else 1.0 - self.lca_depth(a, b) / m


def lineage_diversity(concepts, tree: ConceptTree) -> float:
    """Mean pairwise lineage distance over all pairs of the multiset `concepts` (0 when < 2 concepts)."""
    concepts = list(concepts)
    if len(concepts) < 2:
        return 0.0
    # count identical concepts once per distinct pair type: O(k^2) in distinct concepts
    vals, counts = np.unique(np.array(concepts, dtype=object).astype(str), return_counts=True)
    lookup = {str(c): c for c in concepts}
    total, n = 0.0, len(concepts)
    for (i, a), (j, b) in combinations(enumerate(vals), 2):
        total += counts[i] * counts[j] * tree.distance(lookup[a], lookup[b])
    return float(total / (n * (n - 1) / 2))


def belief_tree(levels: int = 10) -> ConceptTree:
    """The fixed concept tree of one topic: root -> stance (against / neutral / for) -> stated level 0..levels."""
    parent = {"topic": None, "against": "topic", "neutral": "topic", "for": "topic"}
    for k in range(levels + 1):
        parent[f"level{k}"] = "against" if 2 * k < levels else ("neutral" if 2 * k == levels else "for")
    return ConceptTree(parent)


def belief_concepts(beliefs, levels: int = 10) -> list[str]:
    return [f"level{k}" for k in stated_levels(beliefs, levels)]


def tree_lineage_diversity(ids, paths: np.ndarray, sizes: np.ndarray, rng: np.random.Generator | None = None,
                           max_pairs: int = 200_000) -> float:
    """Section 5's lineage diversity of a multiset of concepts `ids` in a concept tree with |T| leaves:
    D = (log|T| - log E_{u,v}[|T| / |T_lca(u,v)|]) / log|T|, u != v positions of the multiset; 0 when
    all concepts are the same (the LCA is the leaf itself), 1 when every pair meets at the root.
    `paths`/`sizes` as data_concepts.build_tree returns them; pairs are sampled beyond `max_pairs`."""
    ids = np.asarray(ids, dtype=np.int64)
    m = len(ids)
    if m < 2:
        return float("nan")
    if m * (m - 1) // 2 <= max_pairs:
        i, j = np.triu_indices(m, 1)
    else:
        rng = rng or np.random.default_rng(0)
        i = rng.integers(m, size=max_pairs)
        j = rng.integers(m - 1, size=max_pairs)
        j = j + (j >= i)
    pu, pv = paths[ids[i]], paths[ids[j]]
    k = np.cumprod(pu == pv, axis=1).sum(axis=1)  # length of the common root-to-leaf prefix
    lca = np.where(k == 0, 0, pu[np.arange(len(k)), np.maximum(k - 1, 0)])
    total = float(sizes[0])
    e = float(np.mean(total / sizes[lca]))
    return float((np.log(total) - np.log(e)) / np.log(total))
