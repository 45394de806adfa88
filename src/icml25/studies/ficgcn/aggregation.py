"""Encrypted aggregation A_hat @ X, four kernels over one packed layout (see packing.py).

* `spintra`: the paper's SpIntra-CA. Edges (dst <- src) of each chunk pair are split into conflict-free
  groups; a group moves every source value to its destination slot with masked power-of-two rotations, bit by
  bit from low to high: ct <- ct * Mask1_b + Rot(ct, 2^b) * Mask2_b, only for the bits set in some shift of
  the group, so a group costs popcount(OR of its shifts) <= log2 M rotations. A_hat's weights ride on the last
  stage's masks. Conflict-free = no two elements of the group on one slot at any stage (initial, after every
  bit, final), over all t column blocks: that also makes sources and destinations injective.
* `inter_client`: the paper's Inter-CA in layer 1: the client encrypts one neighbour-gathered copy of X per
  neighbour index k; the server needs only PMult + Add, no rotation.
* `inter_gather`: Inter-CA in a later layer: the server gathers the k-th neighbour copies itself, one rotation
  per distinct shift of each neighbour index (Galois keys for those steps).
* `diagonal`: the naive Halevi-Shoup / Gazelle-style diagonal method: one rotation per distinct non-zero
  generalised diagonal (shift) of A_hat in the layout, Galois keys for those steps.

Masks depend only on the graph and the layout (the server's data), never on decrypted values.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .packing import Layout


def _bitrev(k: np.ndarray, bits: int) -> np.ndarray:
    out = np.zeros_like(k)
    for b in range(bits):
        out |= ((k >> b) & 1) << (bits - 1 - b)
    return out


def edges(A, lay: Layout):
    """(dst, src, w) of the sparse matrix A (y = A x), int64 / float arrays."""
    A = A.tocoo()
    return A.row.astype(np.int64), A.col.astype(np.int64), A.data.astype(float)


def chunk_pairs(A, lay: Layout):
    """{(src chunk, dst chunk): (dst pos, src pos, w)} in the layout."""
    dst, src, w = edges(A, lay)
    out = {}
    cs, cd = lay.chunk[src], lay.chunk[dst]
    for qs, qd in sorted(set(zip(cs.tolist(), cd.tolist()))):
        sel = (cs == qs) & (cd == qd)
        out[(qs, qd)] = (lay.pos[dst[sel]], lay.pos[src[sel]], w[sel])
    return out


@dataclass
class Group:
    ps: np.ndarray  # source positions (in block 0)
    pd: np.ndarray  # destination positions
    w: np.ndarray
    k: np.ndarray  # left-rotation shift of each element, (ps - pd) mod M

    @property
    def bits(self) -> list[int]:
        orr = int(np.bitwise_or.reduce(self.k)) if len(self.k) else 0
        return [b for b in range(orr.bit_length()) if (orr >> b) & 1]


def stage_positions(ps: np.ndarray, k: np.ndarray, log_m: int, M: int) -> np.ndarray:
    """(E, log_m + 1): each element's slot initially and after each bit stage b = 0..log_m-1."""
    cols = [ps % M]
    for b in range(log_m):
        cols.append((ps - (k & ((1 << (b + 1)) - 1))) % M)
    return np.stack(cols, axis=1)


def _allowed_candidates(k: np.ndarray, pd: np.ndarray, log_m: int, M: int, top: int = 3) -> list[int]:
    """The bit set of the next group: grown one bit at a time (each time the bit that makes the most remaining
    edges eligible, i.e. shift bits within the set), keeping the set with the most eligible destinations per
    rotation. Eligible destinations bound what a conflict-free group can take (one element per slot)."""
    if np.any(k == 0):
        return [0]
    A, path = 0, []
    for _ in range(log_m):
        cand = []
        for b in range(log_m):
            if (A >> b) & 1:
                continue
            A2 = A | (1 << b)
            elig = (k & ~A2) == 0
            cap = np.count_nonzero(np.bincount(pd[elig], minlength=M)) if elig.any() else 0
            cand.append((cap, -b, A2))
        cap, _, A = max(cand)
        if cap:
            path.append((cap / bin(A).count("1"), A))
        if cap == len(k):
            break
    return [a for _, a in sorted(path, reverse=True)[:top]]


def _maximal_set(cand: np.ndarray, keys: np.ndarray, n_keys: int) -> np.ndarray:
    occupied = np.zeros(n_keys, bool)
    taken = []
    while cand.size:
        K = keys[cand]
        rank = np.arange(cand.size)
        best = np.full(n_keys, cand.size, dtype=np.int64)
        np.minimum.at(best, K.ravel(), np.repeat(rank, K.shape[1]))
        win = (best[K] == rank[:, None]).all(axis=1)
        taken.append(cand[win])
        occupied[K[win].ravel()] = True
        rest = cand[~win]
        cand = rest[~occupied[keys[rest]].any(axis=1)] if rest.size else rest
    return np.sort(np.concatenate(taken))


def plan_groups(pd, ps, w, lay: Layout) -> list[Group]:
    """Greedy conflict-free grouping. Each group first fixes its bit set (`_allowed_bits`: the rotation stages
    it will pay for), then takes a maximal conflict-free set of the eligible edges, in priority order (shifts
    in bit-reversed order, then destination) by rounds: an element whose every (stage, slot) key it holds with
    the highest priority joins; candidates touching a taken key leave. This is the sequential greedy's maximal
    set, vectorised."""
    M, B, t = lay.M, lay.B, lay.t
    log_m = int(np.log2(M))
    ps, pd, w = np.asarray(ps, np.int64), np.asarray(pd, np.int64), np.asarray(w, float)
    k = (ps - pd) % M
    order = np.lexsort((pd, _bitrev(k, log_m)))
    ps, pd, w, k = ps[order], pd[order], w[order], k[order]
    pos = stage_positions(ps, k, log_m, M)  # (E, S)
    S = pos.shape[1]
    copies = (pos[:, :, None] + B * np.arange(t)[None, None, :]) % M  # (E, S, t)
    keys = (np.arange(S)[None, :, None] * M + copies).reshape(len(ps), -1)
    n_keys = S * M
    remaining = np.arange(len(ps))
    groups = []
    while remaining.size:
        best_g, best_score = None, -1.0
        for allowed in _allowed_candidates(k[remaining], pd[remaining], log_m, M):
            g = _maximal_set(remaining[(k[remaining] & ~allowed) == 0], keys, n_keys)
            score = len(g) / max(1, bin(allowed).count("1"))  # elements moved per rotation
            if score > best_score:
                best_g, best_score = g, score
        g = best_g
        groups.append(Group(ps[g], pd[g], w[g], k[g]))
        remaining = np.setdiff1d(remaining, g, assume_unique=True)
    return groups


def run_group(be, x, g: Group, lay: Layout):
    """Execute one conflict-free group on ciphertext x; returns a ciphertext with w * x[src] at every dst."""
    M, B, t = lay.M, lay.B, lay.t
    rep = lambda p: ((p[:, None] + B * np.arange(t)[None, :]) % M).ravel()  # noqa: E731
    wrep = np.repeat(g.w, t)
    bits = g.bits
    if not bits:  # every shift is 0 (self loops): one masked product
        m = np.zeros(M)
        m[rep(g.ps)] = wrep
        return be.pmult(x, m)
    cur = g.ps.copy()
    c = x
    for i, b in enumerate(bits):
        last = i == len(bits) - 1
        move = ((g.k >> b) & 1).astype(bool)
        new = np.where(move, (cur - (1 << b)) % M, cur)
        val = wrep if last else np.ones(len(wrep))
        stay_mask, move_mask = np.zeros(M), np.zeros(M)
        sel_s, sel_m = np.repeat(~move, t), np.repeat(move, t)
        stay_mask[rep(cur)[sel_s]] = val[sel_s]
        move_mask[rep(new)[sel_m]] = val[sel_m]
        a = be.pmult(c, stay_mask) if sel_s.any() else None
        r = be.pmult(be.rotate(c, 1 << b), move_mask) if sel_m.any() else None
        c = be.add(a, r)
        cur = new
    assert np.array_equal(cur, g.pd)
    return c


def spintra(be, xs: list, A, lay: Layout, plans=None):
    """SpIntra-CA over every chunk pair. xs[q] = list of column ciphertexts of chunk q (same schedule each).
    Returns (out per chunk, plans, per-group rotation counts)."""
    if plans is None:  # planning is the expensive part: once per (graph, layout), reused by dry runs
        cache = lay.__dict__.setdefault("_plans", {})
        if id(A) not in cache:
            cache[id(A)] = (A, {pair: plan_groups(*v, lay) for pair, v in chunk_pairs(A, lay).items()})
        plans = cache[id(A)][1]
    out = [[None] * len(xs[0]) for _ in range(len(xs))]
    group_rot = []
    for (qs, qd), groups in plans.items():
        for g in groups:
            before = be.counts["rot"]
            for c in range(len(xs[qs])):
                out[qd][c] = be.add(out[qd][c], run_group(be, xs[qs][c], g, lay))
            group_rot.append((be.counts["rot"] - before) // max(1, len(xs[qs])))
    return out, plans, group_rot


def _shift_kernel(be, xs, triples, lay: Layout):
    """sum over distinct shifts d of Rot(x, d) * mask_d (mask: w at the destinations of shift d)."""
    M, B, t = lay.M, lay.B, lay.t
    out = [[None] * len(xs[0]) for _ in range(len(xs))]
    for (qs, qd), (pd, ps, w) in triples:
        k = (ps - pd) % M
        for d in np.unique(k):
            sel = k == d
            m = np.zeros(M)
            m[((pd[sel][:, None] + B * np.arange(t)[None, :]) % M).ravel()] = np.repeat(w[sel], t)
            for c in range(len(xs[qs])):
                out[qd][c] = be.add(out[qd][c], be.pmult(be.rotate(xs[qs][c], int(d)), m))
    return out


def diagonal_steps(A, lay):
    return sorted({int(d) for (pd, ps, w) in chunk_pairs(A, lay).values() for d in np.unique((ps - pd) % lay.M)})


def diagonal(be, xs, A, lay: Layout):
    """Naive diagonal method; the client supplies Galois keys for every shift it uses (one key switch each)."""
    be.add_keys(diagonal_steps(A, lay))
    return _shift_kernel(be, xs, list(chunk_pairs(A, lay).items()), lay)


def neighbour_lists(A):
    """Per node, its (neighbour, weight) pairs in column order: neighbour index k = k-th entry of row i."""
    A = A.tocsr()
    A.sort_indices()
    n_max = int(np.diff(A.indptr).max())
    return A, n_max


def _kth(A, k):
    """(dst, src, w) of every row's k-th non-zero."""
    counts = np.diff(A.indptr)
    rows = np.flatnonzero(counts > k)
    idx = A.indptr[rows] + k
    return rows, A.indices[idx].astype(np.int64), A.data[idx]


def inter_gather(be, xs, A, lay: Layout):
    """Inter-CA in a later layer: the server gathers each neighbour index's copy with rotations."""
    A, n_max = neighbour_lists(A)
    triples, steps = [], set()
    for k in range(n_max):
        dst, src, w = _kth(A, k)
        for q_pair, v in chunk_pairs(_csr(A.shape, dst, src, w), lay).items():
            triples.append((q_pair, v))
            steps |= {int(d) for d in np.unique((v[1] - v[0]) % lay.M)}
    be.add_keys(steps)
    return _shift_kernel(be, xs, triples, lay)


def _csr(shape, dst, src, w):
    import scipy.sparse as sp

    return sp.csr_matrix((w, (dst, src)), shape=shape)


def inter_client(be, X: np.ndarray, A, lay: Layout):
    """Inter-CA in layer 1: the client packs and encrypts X[nbr_k(i)] into node i's slots, for every k; the
    server multiplies each by the k-th weights and adds. No rotation."""
    from .packing import pack

    A, n_max = neighbour_lists(A)
    out = None
    for k in range(n_max):
        dst, src, w = _kth(A, k)
        G = np.zeros_like(X)
        G[dst] = X[src]
        cts = [[be.encrypt(v) for v in chunk] for chunk in pack(G, lay)]
        wk = np.zeros(lay.N)
        wk[dst] = w
        masks = pack(np.repeat(wk[:, None], lay.t, axis=1), lay)  # the k-th weight in every block
        if out is None:
            out = [[None] * len(cts[0]) for _ in range(len(cts))]
        for q in range(len(cts)):
            if not np.any(masks[q][0]):  # no node of this chunk has a k-th neighbour
                continue
            for c in range(len(cts[q])):
                out[q][c] = be.add(out[q][c], be.pmult(cts[q][c], masks[q][0]))
    return out
