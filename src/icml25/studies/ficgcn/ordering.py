"""Node orders -> layouts: natural (the dataset's order), RCM (scipy, standing in for Rabbit order) and the
paper's Node Order Optimisation (NOO).

NOO, our reading of the paper's three steps:
1. BFS region partition: grow a region by BFS over unassigned nodes from the highest-degree unassigned node
   until it has `region_size` (TH) nodes; leftovers smaller than TH/2 are merged first-fit.
2. Interspersed region order: with R = B / S regions per chunk (S = sub-ring size, a power of two >= TH),
   region r's k-th node sits at position r + R k, so each region is a sub-ring of stride R; a shift inside a
   region is a multiple of R and has at most log2(S t) set bits (a negative one wraps into the sub-ring's
   high bits only, instead of all log2 M bits). Regions are numbered in discovery order (neighbouring regions
   get nearby numbers).
3. Greedy intra-region placement: members in BFS order each take the free index k whose shifts to the
   already placed neighbours (both directions) have the fewest set bits: fewer set bits = fewer rotation stages
   and fewer elements competing for a stage's slots (our proxy of the paper's "minimise conflicts").
"""
from __future__ import annotations

from collections import deque

import numpy as np

from .packing import Layout, natural_layout, next_pow2


def rcm_layout(A, M, t) -> Layout:
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    perm = reverse_cuthill_mckee(A.tocsr(), symmetric_mode=True)
    return natural_layout(A.shape[0], M, t, perm)


def global_bfs(A) -> list[int]:
    """All nodes in BFS order, each component from its highest-degree node (so regions grown from seeds in this
    order are discovered next to the regions they touch)."""
    N = A.shape[0]
    deg = np.diff(A.indptr)
    seen = np.zeros(N, bool)
    out = []
    for s in np.argsort(-deg, kind="stable"):
        if seen[s]:
            continue
        seen[s] = True
        dq = deque([int(s)])
        while dq:
            u = dq.popleft()
            out.append(u)
            for v in A.indices[A.indptr[u]:A.indptr[u + 1]]:
                if not seen[v]:
                    seen[v] = True
                    dq.append(int(v))
    return out


def bitrev(x: int, bits: int) -> int:
    return int(format(x, f"0{bits}b")[::-1], 2) if bits else 0


def bfs_regions(A, size: int) -> list[list[int]]:
    A = A.tocsr()
    N = A.shape[0]
    deg = np.diff(A.indptr)
    seen = np.zeros(N, bool)
    regions = []
    for s in np.argsort(-deg, kind="stable"):
        if seen[s]:
            continue
        reg, dq = [], deque([int(s)])
        seen[s] = True
        while dq and len(reg) < size:
            u = dq.popleft()
            reg.append(u)
            for v in A.indices[A.indptr[u]:A.indptr[u + 1]]:
                if not seen[v] and len(reg) + len(dq) < size:
                    seen[v] = True
                    dq.append(int(v))
        for v in dq:  # queued but not taken: release
            seen[v] = False
        regions.append(reg)
    # merge small leftovers first-fit so the region count stays near N / size
    big = [r for r in regions if len(r) > size // 2]
    small = sorted((r for r in regions if len(r) <= size // 2), key=len, reverse=True)
    bins: list[list[int]] = []
    for r in small:
        for b in bins:
            if len(b) + len(r) <= size:
                b.extend(r)
                break
        else:
            bins.append(list(r))
    return big + bins


def noo_layout(A, M: int, t: int, region_size: int = 8) -> Layout:
    A = A.tocsr()
    N = A.shape[0]
    B = M // t
    S = next_pow2(region_size)
    while True:
        regions = bfs_regions(A, S)
        R = B // S
        n_chunks = -(-len(regions) // R)
        if N <= B * n_chunks and R >= 1:
            break
        S *= 2  # pragma: no cover - only when regions cannot fit (tiny blocks)
    chunk = np.full(N, -1, dtype=np.int64)
    pos = np.full(N, -1, dtype=np.int64)
    free = {}
    for r, reg in enumerate(regions):
        q, rr = divmod(r, R)
        free[r] = list(range(S))
        for u in reg:
            chunk[u] = q
        regions[r] = (q, rr, reg)
    lr = int(np.log2(R))
    rho = list(range(R))  # region r = sub-ring r (stride R)
    pop = lambda x: bin(int(x)).count("1")  # noqa: E731
    for r, (q, rr, reg) in enumerate(regions):
        for u in reg:
            nb = [v for v in A.indices[A.indptr[u]:A.indptr[u + 1]] if pos[v] >= 0 and chunk[v] == q and v != u]
            best, best_cost = None, None
            for k in free[r]:
                p = rho[rr] + R * k
                cost = sum(pop((p - pos[v]) % M) + pop((pos[v] - p) % M) for v in nb)
                if best_cost is None or cost < best_cost:
                    best, best_cost = k, cost
            free[r].remove(best)
            pos[u] = rho[rr] + R * best
    lay = Layout(chunk, pos, B, t, M)
    lay.check()
    return lay


def layout_for(order: str, A, M: int, t: int, region_size: int = 8, seed: int = 0) -> Layout:
    N = A.shape[0]
    if order == "natural":
        return natural_layout(N, M, t)
    if order == "rcm":
        return rcm_layout(A, M, t)
    if order == "noo":
        return noo_layout(A, M, t, region_size)
    if order == "random":
        return natural_layout(N, M, t, np.random.default_rng(seed).permutation(N))
    raise ValueError(order)
