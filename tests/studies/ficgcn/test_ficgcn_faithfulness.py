"""FicGCN faithfulness: properties only a correct HE kernel / schedule / order has, each able to fail."""
from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from icml25.studies.ficgcn import aggregation as ag
from icml25.studies.ficgcn import gcn, he, inference as inf, ordering as od
from icml25.studies.ficgcn.data import normalized_adjacency, sbm_graph
from icml25.studies.ficgcn.packing import choose_t, latency_cost, natural_layout, pack, unpack


def _karate():
    A = nx.to_scipy_sparse_array(nx.karate_club_graph(), format="csr")
    return normalized_adjacency((A > 0).astype(float))


@pytest.fixture(scope="module")
def sbm1000():
    A, labels = sbm_graph({"nodes": 1000, "classes": 7, "degree": 3.9}, 0)
    return normalized_adjacency(A), labels


def _run_kernel(be, kernel, A, lay, X):
    if kernel == "inter_client":
        out = ag.inter_client(be, X, A, lay)
    else:
        xs = [[be.encrypt(v) for v in ch] for ch in pack(X, lay)]
        out = inf.aggregate(be, kernel, xs, A, lay)
    return unpack([[be.decrypt(c) for c in ch] for ch in out], lay, X.shape[1])


def test_rotation_without_its_key_costs_one_key_switch_per_set_bit():
    be = he.Simulator(64)
    x = be.encrypt(np.arange(64.0))
    y = be.rotate(x, 7)
    assert be.counts["rot"] == 3 and be.counts["rot_calls"] == 1
    np.testing.assert_array_equal(be.decrypt(y), np.roll(np.arange(64.0), -7))
    be.add_keys([7])
    be.rotate(x, 7)
    assert be.counts["rot"] == 4


def test_spintra_reproduces_a_random_permutation_with_bit_bounded_groups():
    rng = np.random.default_rng(3)
    M, N = 512, 300
    pi = rng.permutation(N)
    P = sp.csr_matrix((np.ones(N), (np.arange(N), pi)), shape=(N, N))  # (P x)[i] = x[pi[i]]
    lay = natural_layout(N, M, 1)
    be = he.Simulator(M)
    x = rng.standard_normal((N, 1))
    xs = [[be.encrypt(v) for v in ch] for ch in pack(x, lay)]
    out, plans, group_rot = ag.spintra(be, xs, P, lay)
    y = unpack([[be.decrypt(c) for c in ch] for ch in out], lay, 1)
    np.testing.assert_array_equal(y[:, 0], x[pi, 0])  # exact: masks are 0/1 and weights 1
    groups = plans[(0, 0)]
    assert len(groups) > 1  # a random permutation has conflicts: split into several ciphertexts
    for g, r in zip(groups, group_rot):
        orr = int(np.bitwise_or.reduce(g.k))
        assert r == bin(orr).count("1") <= math.ceil(math.log2(M))  # executed rotations = distinct set bits
        # conflict-free: no two elements on one slot at any stage
        pos = ag.stage_positions(g.ps, g.k, int(math.log2(M)), M)
        assert all(len(set(pos[:, s])) == len(g.ps) for s in range(pos.shape[1]))
    assert be.counts["rot"] == sum(group_rot)


@pytest.mark.parametrize("kernel", ["spintra", "diagonal", "inter_gather", "inter_client"])
def test_every_kernel_computes_a_times_x(kernel):
    A = _karate()
    X = np.random.default_rng(0).standard_normal((A.shape[0], 5))
    for t in (1, 2):
        lay = od.layout_for("noo", A, 128, t, 4)
        Y = _run_kernel(he.Simulator(128), kernel, A, lay, X)
        np.testing.assert_allclose(Y, A @ X, atol=1e-12)


def _small_gcn(seed: int):
    """Karate club, 4 features, a 4-3-2 GCN with small random weights, NOO layout at 256 slots (t = 2): fits SEAL's
    ring 512 at 25-bit scale."""
    A = _karate()
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((A.shape[0], 4)) * 0.5
    W1, W2 = rng.standard_normal((4, 3)) * 0.5, rng.standard_normal((3, 2)) * 0.5
    return A, X, W1, W2, od.layout_for("noo", A, 256, 2, 4)


def test_simulator_and_seal_run_the_same_kernel():
    """Same numbers (|err| < 1e-3) and identical op counts, on real SEAL CKKS."""
    pytest.importorskip("tenseal")
    A, X, W1, W2, lay = _small_gcn(1)
    sim = he.Simulator(256)
    r_sim = inf.infer(sim, "ficgcn", X, A, W1, W2, lay)
    seal = he.Seal(512, int(r_sim.counts["depth"]), 25, 40, secure=False)
    r_seal = inf.infer(seal, "ficgcn", X, A, W1, W2, lay)
    assert r_seal.counts == r_sim.counts and r_seal.modes == r_sim.modes
    assert r_sim.counts["rot"] > 0 and r_sim.counts["cmult"] > 0
    plain = gcn.forward_np(A, X, W1, W2)
    np.testing.assert_allclose(r_sim.logits, plain, atol=1e-10)
    assert np.abs(r_seal.logits - r_sim.logits).max() < 1e-3


def test_seeded_seal_gives_the_same_bits_and_another_seed_other_noise():
    """A seeded SEAL PRNG (keys + encryption noise) makes the decrypted logits reproducible bit for bit; a
    different seed draws different noise, and SEAL's default (OS-seeded) does too: the seed is really used."""
    pytest.importorskip("tenseal")
    A, X, W1, W2, lay = _small_gcn(2)
    depth = int(inf.infer(he.Simulator(256), "ficgcn", X, A, W1, W2, lay).counts["depth"])

    def logits(seed):
        return inf.infer(he.Seal(512, depth, 25, 40, secure=False, seed=seed), "ficgcn", X, A, W1, W2, lay).logits

    a, b, c = logits(7), logits(7), logits(8)
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 0
    assert np.abs(logits(None) - logits(None)).max() > 0


def test_probe_counts_equal_full_execution_and_masks_ignore_the_data():
    A = _karate()
    rng = np.random.default_rng(2)
    X, W1, W2 = rng.standard_normal((34, 6)), rng.standard_normal((6, 4)), rng.standard_normal((4, 3))
    for method in inf.RECIPES:
        lay = od.layout_for(inf.RECIPES[method][2], A, 128, 2, 4)
        full = inf.infer(he.Simulator(128), method, X, A, W1, W2, lay).counts
        probe = inf.infer(he.Simulator(128), method, X, A, W1, W2, lay, probe=True).counts
        other = inf.infer(he.Simulator(128), method, -3 * X + 1, A, W1, W2, lay).counts
        dry = inf.infer(inf.DryRun(128), method, X, A, W1, W2, lay).counts  # no data at all
        assert full == probe == other == dry, method


def test_encrypted_gcn_matches_plaintext_and_ficgcn_needs_fewer_rotations(sbm1000):
    A, labels = sbm1000
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, 8))
    W1, W2 = rng.standard_normal((8, 4)) * 0.3, rng.standard_normal((4, 7)) * 0.3
    res = {}
    for m in ("ficgcn", "spintra_natural", "diagonal"):
        n = int(np.diff(A.indptr).max())
        lay = od.layout_for(inf.RECIPES[m][2], A, 4096, choose_t(1000, 4096, 8, n), 8)
        res[m] = inf.infer(he.Simulator(4096), m, X, A, W1, W2, lay)
        np.testing.assert_allclose(res[m].logits, gcn.forward_np(A, X, W1, W2), atol=1e-9)
    assert res["ficgcn"].counts["rot"] < res["spintra_natural"].counts["rot"] < res["diagonal"].counts["rot"]
    assert res["ficgcn"].modes == ("inter_client", "spintra")


def test_noo_never_increases_spintra_rotations_over_natural_order(sbm1000):
    """One column per ciphertext (t = 1: each region's sub-ring closes over the whole ciphertext, as at Cora size).
    With t > 1 column-major blocks the sub-ring does not close inside a block; see the README."""
    A, _ = sbm1000
    for t in (1,):
        rot = {}
        for order in ("natural", "noo"):
            lay = od.layout_for(order, A, 4096, t, 8)
            be = inf.DryRun(4096)
            ag.spintra(be, [[be.encrypt(np.zeros(4096))]], A, lay)
            rot[order] = be.counts["rot"]
        assert rot["noo"] <= rot["natural"], (t, rot)


def test_noo_sub_rings_cut_rotations_where_natural_order_wraps_negative_shifts():
    """256 disjoint 8-cycles numbered cycle by cycle: natural (and RCM) order gives shifts +-1 and +-7, and the
    negative ones wrap mod M into 12 / 10 set bits. NOO makes each cycle one region = one sub-ring of stride
    R = 512, so every shift is a multiple of R (bits 9-11 only). The executed schedules: natural 25 rotations,
    NOO 6. Fails if the sub-ring layout, the BFS regions or the greedy placement breaks."""
    G = nx.disjoint_union_all([nx.cycle_graph(8) for _ in range(256)])
    A = normalized_adjacency(nx.to_scipy_sparse_array(G, nodelist=range(2048), format="csr"))
    M, rot, lays = 4096, {}, {}
    for order in ("natural", "rcm", "noo"):
        lays[order] = lay = od.layout_for(order, A, M, 1, 8)
        be = inf.DryRun(M)
        ag.spintra(be, [[be.encrypt(np.zeros(M))]], A, lay)
        rot[order] = be.counts["rot"]
    c = A.tocoo()
    k = (lays["noo"].pos[c.col] - lays["noo"].pos[c.row]) % M
    assert np.all(k % (M // 8) == 0)  # every edge inside its region's sub-ring
    k_nat = (lays["natural"].pos[c.col] - lays["natural"].pos[c.row]) % M
    assert max(bin(int(x)).count("1") for x in k_nat) == 12  # natural order wraps -1 into all-high bits
    assert 3 * rot["noo"] <= rot["natural"] and 3 * rot["noo"] <= rot["rcm"], rot


def test_noo_layout_is_interspersed_sub_rings():
    A = _karate()
    lay = od.noo_layout(A, 256, 1, 4)
    R = 256 // 4
    regions = od.bfs_regions(A.tocsr(), 4)
    for reg in regions:
        assert len({int(lay.pos[u]) % R for u in reg}) == 1  # one region = one residue class mod R (a sub-ring)
    assert len(set(lay.pos.tolist())) == 34


def test_latency_aware_t_minimises_the_papers_cost():
    assert latency_cost(4, 32, 10) == 2 * 80 + 20 * 2
    t = choose_t(1000, 4096, 32, 10)
    assert t == min((1, 2, 4), key=lambda t: latency_cost(t, 32, 10))
    assert choose_t(2708, 4096, 32, 10) == 1  # one column per ciphertext: 2708 nodes need the 4096 slots
    assert choose_t(5000, 4096, 32, 10) == 1
