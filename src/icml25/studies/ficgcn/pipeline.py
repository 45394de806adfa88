"""One (method, graph) measurement: layout, encrypted inference on the simulator (and SEAL for the paper's
method on the SEAL graph), op counts, modelled latencies, accuracy."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from . import gcn
from .he import Seal, Simulator
from .inference import COST_PAPER, RECIPES, DryRun, infer, units
from .ordering import layout_for
from .packing import choose_t


def load_graph(data_dir: Path, name: str, seed: int) -> dict:
    z = np.load(Path(data_dir) / f"{name}_seed{seed}.npz")
    A = sp.csr_matrix((z["a_data"], z["a_indices"], z["a_indptr"]), shape=tuple(z["a_shape"]))
    return {"A": A, "X": z["X"], "labels": z["labels"], "train": z["train"], "val": z["val"], "test": z["test"]}


def load_weights(base_dir: Path, name: str, seed: int):
    z = np.load(Path(base_dir) / f"gcn_{name}_seed{seed}.npz")
    return z["W1"], z["W2"]


def seal_cost(base_dir: Path | None) -> dict | None:
    f = Path(base_dir) / "op_latency.json" if base_dir else None
    if f is None or not f.exists():
        return None
    lat = json.loads(f.read_text())
    # a PMult needs its plaintext encoded first: both count as the PMult's cost
    return {"rot": lat["rot"], "pmult": lat["pmult"] + lat["encode"], "add": lat["add"], "cmult": lat["cmult"],
            "rescale": lat["rescale"], "modswitch": lat["modswitch"], "enc": lat["encrypt"]}


def layout(cfg: dict, method: str, A, F: int):
    M = int(cfg["slots"])
    n = int(np.diff(A.tocsr().indptr).max())
    t = choose_t(A.shape[0], M, F, n, float(cfg.get("rot_ratio", 20)))
    return layout_for(RECIPES[method][2], A, M, t, int(cfg.get("region_size", 8)))


def measure(cfg: dict, method: str, g: dict, W1, W2, probe: bool, cost_seal: dict | None) -> dict:
    A, X = g["A"], g["X"]
    lay = layout(cfg, method, A, X.shape[1])
    be = Simulator(lay.M)
    res = infer(be, method, X, A, W1, W2, lay, probe=probe)
    c = res.counts
    out = {k: float(c[k]) for k in ("rot", "pmult", "cmult", "add", "rescale", "modswitch", "enc", "depth")}
    out.update(rot_agg1=res.layer_rot["agg1"], rot_agg2=res.layer_rot["agg2"], rot_comb=res.layer_rot["comb"],
               t=lay.t, chunks=lay.n_chunks, nodes=A.shape[0], edges=A.nnz,
               layer1_intra=float(res.modes[0] == "spintra"), layer2_intra=float(res.modes[1] == "spintra"),
               lat_units=units(c, COST_PAPER))
    if res.modes[1] == "spintra":
        out["spintra_rot_agg2"] = res.layer_rot["agg2"]
    if cost_seal:
        out["lat_seal_model_s"] = units(c, cost_seal)
    if res.logits is not None:
        plain = gcn.forward_np(A, X, W1, W2)
        out["sim_max_err"] = float(np.abs(res.logits - plain).max())
        out["plain_acc"] = gcn.accuracy(plain, g["labels"], g["test"])
        out["sim_acc"] = gcn.accuracy(res.logits, g["labels"], g["test"])
    return out


def seal_run(cfg: dict, method: str, g: dict, W1, W2, seed: int | None = None) -> dict:
    """The method end to end on real SEAL CKKS; compares decrypted logits and op counts with the simulator.

    `seed` seeds SEAL's PRNG (keys and encryption noise) when the config's `seal.seeded` is true (smoke and
    mini: the noise-dependent errors are then the same bits on every run); else SEAL draws from the OS."""
    A, X = g["A"], g["X"]
    lay = layout(cfg, method, A, X.shape[1])
    dry = DryRun(lay.M)
    infer(dry, method, X, A, W1, W2, lay)
    depth = int(dry.depth)
    sc = cfg["seal"]
    secure = sc.get("secure", "auto")
    prng = int(seed) if seed is not None and sc.get("seeded", False) else None
    wall0, cpu0 = time.time(), time.process_time()
    try:
        be = Seal(int(sc["ring"]), depth, int(sc["scale_bits"]), int(sc["edge_bits"]), secure is not False,
                  seed=prng)
        is_secure = True
    except Exception:
        if secure is True:
            raise
        be = Seal(int(sc["ring"]), depth, int(sc["scale_bits"]), int(sc["edge_bits"]), False, seed=prng)
        is_secure = False
    setup = time.time() - wall0
    t0, c0 = time.time(), time.process_time()
    res = infer(be, method, X, A, W1, W2, lay)
    wall, cpu = time.time() - t0, time.process_time() - c0
    sim = Simulator(lay.M)
    ref = infer(sim, method, X, A, W1, W2, lay)
    plain = gcn.forward_np(A, X, W1, W2)
    match = float(all(res.counts[k] == ref.counts[k] for k in res.counts))
    return {"seal_wall_s": wall, "seal_cpu_s": cpu, "seal_setup_s": setup, "seal_levels": float(depth),
            "seal_secure_128": float(is_secure), "seal_max_err": float(np.abs(res.logits - plain).max()),
            "seal_vs_sim_err": float(np.abs(res.logits - ref.logits).max()), "seal_counts_match": match,
            "seal_enc_acc": gcn.accuracy(res.logits, g["labels"], g["test"]),
            "seal_plain_acc": gcn.accuracy(plain, g["labels"], g["test"]), "seal_rot": float(res.counts["rot"])}


def measure_op_latency(ring: int = 8192, scale_bits: int = 30, reps: int = 5) -> dict:
    """Median seconds of each SEAL op at ring 8192 under 128-bit security (SEAL's bound: 218 bits of modulus),
    single thread, on a ciphertext one level below the top."""
    be = Seal(ring, 4, scale_bits, 40, True)
    rng = np.random.default_rng(0)
    v = rng.standard_normal(be.M) * 0.1
    ct = be.pmult(be.encrypt(v), np.ones(be.M))

    def t(fn):
        xs = []
        for _ in range(reps):
            s = time.perf_counter()
            fn()
            xs.append(time.perf_counter() - s)
        return float(np.median(xs))

    S = be.S
    out = {}
    out["rot"] = t(lambda: be._rotate(ct, 1))
    pt = be._plain(v, ct.data, be.delta)
    out["encode"] = t(lambda: be._plain(v, ct.data, be.delta))

    def pm():
        o = S.Ciphertext()
        be.ev.multiply_plain(ct.data, pt, o)
        be.ev.rescale_to_next_inplace(o)
    out["pmult"] = t(pm)
    out["add"] = t(lambda: be.ev.add(ct.data, ct.data, S.Ciphertext()))
    out["cmult"] = t(lambda: be._square(ct))
    out["rescale"] = 0.0  # inside pmult / cmult above
    out["modswitch"] = t(lambda: be._modswitch(ct, ct.level + 1))
    out["encrypt"] = t(lambda: be._encrypt(v))
    out.update(ring=ring, scale_bits=scale_bits, reps=reps, levels=4)
    return out
