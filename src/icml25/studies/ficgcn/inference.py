"""Encrypted 2-layer GCN inference, logits = A (A X W1)^2 W2, on any Backend, and the per-method recipes.

Layer 1 aggregates first (A X, the client's data), then combines (XW1) and squares; layer 2 combines first
(to the C class columns) and aggregates last, so the expensive intra-ciphertext aggregation runs on the fewest
columns. Combination XW with t columns per ciphertext: PMult by per-block broadcast weights, then the
intra-ciphertext sum over the t blocks with log2 t rotations, then a block mask packs t outputs per ciphertext.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import aggregation as agg
from .he import Backend
from .packing import Layout, pack, unpack

# method -> (layer-1 aggregation, layer-2 aggregation, node order); "auto" = the paper's per-layer choice
RECIPES = {
    "ficgcn": ("auto", "auto", "noo"),
    "diagonal": ("diagonal", "diagonal", "natural"),
    "inter_ca": ("inter_client", "inter_gather", "natural"),
    "spintra_natural": ("spintra", "spintra", "natural"),
    "spintra_rcm": ("spintra", "spintra", "rcm"),
}
LAYER1_MODES = ("inter_client", "spintra")  # candidates of the per-layer choice
LAYER2_MODES = ("spintra", "inter_gather")


class DryRun(Backend):
    """Counts a schedule without computing: the planner's view of a kernel's cost (same code path)."""

    name = "dryrun"

    def _encrypt(self, vec):
        return None

    def _decrypt(self, ct):
        return np.zeros(self.M)

    _rotate = _pmult = _square = _modswitch = _add = lambda self, *a: None


def combine(be: Backend, xs, W: np.ndarray, lay: Layout):
    """xs[q][c] holds columns c*t .. c*t+t-1 of chunk q; returns the packed X W."""
    F, H = W.shape
    t, B, M = lay.t, lay.B, lay.M
    n_out = math.ceil(H / t)
    out = [[None] * n_out for _ in xs]
    for q, cts in enumerate(xs):
        for o in range(H):
            acc = None
            for c, ct in enumerate(cts):
                w = np.zeros(M)
                for j in range(t):
                    f = c * t + j
                    if f < F:
                        w[j * B:(j + 1) * B] = W[f, o]
                if np.any(w):
                    acc = be.add(acc, be.pmult(ct, w))
            for i in range(int(math.log2(t))):  # every block <- sum of all t blocks
                acc = be.add(acc, be.rotate(acc, B << i))
            if t > 1:
                m = np.zeros(M)
                m[(o % t) * B:(o % t + 1) * B] = 1.0
                acc = be.pmult(acc, m)
            out[q][o // t] = be.add(out[q][o // t], acc)
    return out


def aggregate(be, mode: str, xs, A, lay: Layout):
    if mode == "spintra":
        out, _, _ = agg.spintra(be, xs, A, lay)
        return out
    if mode == "diagonal":
        return agg.diagonal(be, xs, A, lay)
    if mode == "inter_gather":
        return agg.inter_gather(be, xs, A, lay)
    raise ValueError(mode)


COST_PAPER = {"rot": 20.0, "pmult": 1.0, "add": 1.0, "cmult": 20.0, "rescale": 0.0, "modswitch": 0.0, "enc": 0.0}


def units(counts: dict, cost: dict) -> float:
    return float(sum(counts.get(op, 0) * c for op, c in cost.items()))


def choose_mode(candidates, layer, A, lay, F, cost=COST_PAPER) -> tuple[str, dict]:
    """The per-layer mode with the lower modelled latency, from dry runs of each candidate's schedule."""
    costs = {}
    n = math.ceil(F / lay.t)  # one column ciphertext per chunk, counted for all n (same schedule)
    for mode in candidates:
        be = DryRun(lay.M)
        with be.multiplicity(n):
            if mode == "inter_client":
                agg.inter_client(be, np.zeros((lay.N, lay.t)), A, lay)
            else:
                aggregate(be, mode, [[be.encrypt(np.zeros(lay.M))] for _ in range(lay.n_chunks)], A, lay)
        costs[mode] = units(be.counts, cost)
    return min(costs, key=costs.get), costs


@dataclass
class Result:
    logits: np.ndarray | None
    counts: dict
    layer_rot: dict
    modes: tuple
    group_rot: list


def infer(be: Backend, method: str, X, A, W1, W2, lay: Layout, probe: bool = False) -> Result:
    """Encrypted inference of one method. probe=True runs each aggregation on one column ciphertext per chunk
    standing for all of them (op counts x number of column ciphertexts; logits then not computed)."""
    m1, m2, _ = RECIPES[method]
    F, H = W1.shape
    C = W2.shape[1]
    if m1 == "auto":
        m1, _ = choose_mode(LAYER1_MODES, 1, A, lay, F)
    if m2 == "auto":
        m2, _ = choose_mode(LAYER2_MODES, 2, A, lay, C)
    layer_rot = {}
    # ---- layer 1: aggregation, combination, x^2
    r0 = be.counts["rot"]
    if m1 == "inter_client" and probe:  # one t-column slice per chunk stands for all ceil(F / t)
        n = math.ceil(F / lay.t)
        with be.multiplicity(n):
            one = agg.inter_client(be, X[:, : lay.t], A, lay)
        h = [[chunk[0]] * n for chunk in one]
    elif m1 == "inter_client":
        h = agg.inter_client(be, X, A, lay)
    else:
        xs = [[be.encrypt(v) for v in chunk] for chunk in pack(X, lay)]
        h = _maybe_probe(be, lambda xs_: aggregate(be, m1, xs_, A, lay), xs, probe, lay)
    layer_rot["agg1"] = be.counts["rot"] - r0
    r0 = be.counts["rot"]
    h = combine(be, h, W1, lay)
    h = [[be.square(ct) for ct in chunk] for chunk in h]
    h = combine(be, h, W2, lay)
    layer_rot["comb"] = be.counts["rot"] - r0
    r0 = be.counts["rot"]
    out = _maybe_probe(be, lambda xs_: aggregate(be, m2, xs_, A, lay), h, probe, lay)
    layer_rot["agg2"] = be.counts["rot"] - r0
    logits = None if probe else unpack([[be.decrypt(ct) for ct in chunk] for chunk in out], lay, C)
    return Result(logits, be.snapshot(), layer_rot, (m1, m2), [])


def _maybe_probe(be, fn, xs, probe, lay, X=None):
    """fn(xs) on every column ciphertext, or (probe) on the first of each chunk, counted for all of them."""
    if not probe:
        return fn(xs)
    n = len(xs[0])
    with be.multiplicity(n):
        one = fn([chunk[:1] for chunk in xs])
    return [[chunk[0]] * n for chunk in one]
