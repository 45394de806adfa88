"""Column-major packing of node-feature matrices and the paper's latency-aware choice of t.

A ciphertext of M slots holds t feature columns, each in a block of B = M / t slots (column-major); a node
has the same position p < B in every block. Graphs larger than one block are split into chunks of B nodes,
each chunk in its own ciphertexts. `Layout` is the node -> (chunk, position) map an ordering produces.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from icml25.core.errors import UserError


def next_pow2(n: int) -> int:
    return 1 << max(0, int(math.ceil(math.log2(max(1, n)))))


def latency_cost(t: int, F: int, n: int, rot_ratio: float = 20.0) -> float:
    """The paper's J(t; F, n) = 2 ceil(F n / t) + 20 ceil(log2 t) (case M > N F'): PMult + Add of the
    neighbour-gathered ciphertexts plus the rotations of the intra-ciphertext sum."""
    return 2 * math.ceil(F * n / t) + rot_ratio * math.ceil(math.log2(t)) if t > 1 else 2 * F * n


def feasible_t(N: int, M: int) -> list[int]:
    if N > M:
        return [1]
    return [1 << i for i in range(int(math.log2(M // next_pow2(N))) + 1)]


def choose_t(N: int, M: int, F: int, n: int, rot_ratio: float = 20.0) -> int:
    """t minimising J among the feasible powers of two (ties: the larger t, fewer ciphertexts)."""
    ts = feasible_t(N, M)
    return min(ts, key=lambda t: (latency_cost(t, F, n, rot_ratio), -t))


@dataclass
class Layout:
    chunk: np.ndarray  # node -> chunk index
    pos: np.ndarray  # node -> position in its chunk's block (< B)
    B: int  # block size (slots per column)
    t: int  # columns per ciphertext
    M: int

    @property
    def n_chunks(self) -> int:
        return int(self.chunk.max()) + 1 if len(self.chunk) else 0

    @property
    def N(self) -> int:
        return len(self.chunk)

    def check(self) -> None:
        if self.B * self.t != self.M:
            raise UserError(f"ficgcn: block {self.B} x t {self.t} != {self.M} slots")
        if (self.pos < 0).any() or (self.pos >= self.B).any():
            raise UserError("ficgcn: a node position lies outside its block")
        key = self.chunk.astype(np.int64) * self.B + self.pos
        if len(np.unique(key)) != len(key):
            raise UserError("ficgcn: two nodes share a slot")

    def slots(self, nodes) -> np.ndarray:
        """(len(nodes), t) slot indices of the nodes in every block."""
        p = self.pos[np.asarray(nodes)]
        return p[:, None] + self.B * np.arange(self.t)[None, :]


def natural_layout(N: int, M: int, t: int, perm=None) -> Layout:
    """Node order `perm` (default 0..N-1) filled into consecutive positions, chunk by chunk."""
    B = M // t
    order = np.arange(N) if perm is None else np.asarray(perm)
    rank = np.empty(N, dtype=np.int64)
    rank[order] = np.arange(N)
    lay = Layout(rank // B, rank % B, B, t, M)
    lay.check()
    return lay


def pack(X: np.ndarray, lay: Layout) -> list[list[np.ndarray]]:
    """X (N x F) -> per chunk, ceil(F / t) slot vectors; zeros in unused slots."""
    N, F = X.shape
    n_ct = math.ceil(F / lay.t)
    out = [[np.zeros(lay.M) for _ in range(n_ct)] for _ in range(lay.n_chunks)]
    for f in range(F):
        c, j = divmod(f, lay.t)
        for q in range(lay.n_chunks):
            nodes = np.flatnonzero(lay.chunk == q)
            out[q][c][j * lay.B + lay.pos[nodes]] = X[nodes, f]
    return out


def unpack(vecs: list[list[np.ndarray]], lay: Layout, F: int) -> np.ndarray:
    X = np.zeros((lay.N, F))
    for f in range(F):
        c, j = divmod(f, lay.t)
        for q in range(lay.n_chunks):
            nodes = np.flatnonzero(lay.chunk == q)
            X[nodes, f] = vecs[q][c][j * lay.B + lay.pos[nodes]]
    return X
