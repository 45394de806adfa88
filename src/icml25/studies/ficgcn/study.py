"""ficgcn study glue: data stages, the base (trained GCNs + SEAL per-op latencies), per-method measurement,
the table (paper beside ours) and the claims."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from icml25.core import evidence
from icml25.core.errors import UserError
from icml25.core.io import write_json, write_npz
from icml25.core.registry import Claim, ClaimResult, Method, Paper, Study, lazy_hook

PAPER = Paper(
    title="FicGCN: Unveiling the Homomorphic Encryption Efficiency from Irregular Graph Convolutional Networks",
    authors="Kan, Han, Shi, Hua, Lu, Li, Mu, Hu",
    arxiv="2506.10399",
    code="none released (implemented from the paper)",
)

METHODS = {
    "ficgcn": Method("ficgcn", "FicGCN (latency-aware t, per-layer mode, SpIntra-CA, NOO)", True,
                     "t by J(t); per layer the cheaper of Inter-CA / SpIntra-CA; NOO node order"),
    "diagonal": Method("diagonal", "naive diagonal (Halevi-Shoup / Gazelle-style)", False,
                       "one rotation per non-zero generalised diagonal of A, both layers"),
    "inter_ca": Method("inter_ca", "Inter-CA only", False,
                       "client-gathered neighbour copies in layer 1; server rotation-gathered copies in layer 2"),
    "spintra_natural": Method("spintra_natural", "SpIntra-CA, natural order", False, "SpIntra-CA both layers"),
    "spintra_rcm": Method("spintra_rcm", "SpIntra-CA, RCM order (for Rabbit order)", False,
                          "SpIntra-CA both layers, scipy reverse Cuthill-McKee order"),
}
BASELINES_2X = ("diagonal", "inter_ca", "spintra_natural")
BASELINES_ALL = ("diagonal", "inter_ca", "spintra_natural", "spintra_rcm")

METRICS = {
    "rot": ("rotation key switches of the whole 2-layer inference", "lower"),
    "pmult": ("plaintext multiplications", "lower"),
    "cmult": ("ciphertext multiplications (x^2)", "lower"),
    "add": ("ciphertext additions", "lower"),
    "rescale": ("rescales", "lower"),
    "modswitch": ("level alignments before additions", "lower"),
    "enc": ("ciphertexts the client encrypts", "lower"),
    "depth": ("multiplicative depth used", "lower"),
    "rot_agg1": ("rotations of the layer-1 aggregation", "lower"),
    "rot_agg2": ("rotations of the layer-2 aggregation", "lower"),
    "rot_comb": ("rotations of the combinations XW", "lower"),
    "spintra_rot_agg2": ("rotations of the layer-2 SpIntra-CA aggregation (only when it runs SpIntra-CA)", "lower"),
    "t": ("feature columns per ciphertext", ""),
    "chunks": ("node chunks (ciphertexts per column)", ""),
    "nodes": ("graph nodes", ""),
    "edges": ("non-zeros of the normalised adjacency (with self loops)", ""),
    "layer1_intra": ("1 if layer 1 aggregates with SpIntra-CA, 0 for Inter-CA / diagonal", ""),
    "layer2_intra": ("1 if layer 2 aggregates with SpIntra-CA", ""),
    "lat_units": ("modelled latency, paper ratios (Rot 20, PMult 1, Add 1, CMult 20)", "lower"),
    "lat_seal_model_s": ("modelled latency, per-op seconds measured on SEAL N=8192 in this run", "lower"),
    "sim_max_err": ("max |simulator logits - plaintext logits| (executed graphs)", "lower"),
    "sim_acc": ("test accuracy of the simulator's decrypted logits", "higher"),
    "plain_acc": ("test accuracy of the plaintext GCN", "higher"),
    "seal_wall_s": ("SEAL wall-clock of the encrypted inference, 1 thread (noisy: shared machine)", "lower"),
    "seal_cpu_s": ("SEAL process CPU time of the encrypted inference", "lower"),
    "seal_setup_s": ("SEAL context and key generation", "lower"),
    "seal_levels": ("modulus levels the SEAL context was built with (= the kernel's depth)", ""),
    "seal_secure_128": ("1 if SEAL accepted the parameters under 128-bit security", ""),
    "seal_max_err": ("max |SEAL decrypted logits - plaintext logits|", "lower"),
    "seal_vs_sim_err": ("max |SEAL logits - simulator logits|", "lower"),
    "seal_counts_match": ("1 if SEAL and simulator op counts are identical", "higher"),
    "seal_enc_acc": ("test accuracy from SEAL-decrypted logits", "higher"),
    "seal_plain_acc": ("plaintext test accuracy on the SEAL graph", "higher"),
    "seal_rot": ("rotations executed on SEAL", "lower"),
    "train_acc_plain": ("plaintext test accuracy of the trained GCN (fit_base)", "higher"),
}

# The paper's numbers (secondary sources; see README): end-to-end seconds, rotation counts on Cora
PAPER_LAT = {"cora": {"ficgcn": 64.1, "diagonal": 1535.3, "penguin": 128.8, "cryptogcn": 131.1},
             "citeseer": {"ficgcn": 80.0, "diagonal": 2897.3, "penguin": 142.9, "cryptogcn": 150.4},
             "corafull": {"ficgcn": 7733.0, "penguin": 35565.0, "cryptogcn": 31735.0}}
PAPER_ROT_CORA = {"spintra_natural": 7040, "ficgcn": 1930, "spintra_rcm": 2850}
PAPER_ADVANTAGE = {"cora": 2.01, "corafull": 4.10}


def graphs(cfg) -> dict:
    return {k: v for k, v in cfg["graphs"].items() if v}


def validate(cfg: dict) -> None:
    M = cfg["slots"]
    if not isinstance(M, int) or M < 16 or M & (M - 1):
        raise UserError(f"ficgcn: slots must be a power of two >= 16, got {M!r}")
    if cfg["source"] not in ("sbm", "real"):
        raise UserError(f"ficgcn: source must be 'sbm' or 'real', got {cfg['source']!r}")
    gs = graphs(cfg)
    if not gs:
        raise UserError("ficgcn: no graph enabled in config/studies/ficgcn.yaml")
    for name, g in gs.items():
        if cfg["source"] == "sbm" and (int(g.get("nodes", 0)) < 8 or int(g.get("classes", 0)) < 2):
            raise UserError(f"ficgcn: graph '{name}' needs nodes >= 8 and classes >= 2")
    sg = cfg["seal"].get("graph")
    if sg is not None and sg not in gs:
        raise UserError(f"ficgcn: seal.graph names '{sg}', which is not an enabled graph")
    for role in ("small", "large"):
        if cfg["claims"][role] not in gs:
            raise UserError(f"ficgcn: claims.{role} names '{cfg['claims'][role]}', which is not an enabled graph")


# ---- stages --------------------------------------------------------------------------------------------

def download(cfg: dict, raw_dir: Path) -> None:
    """sbm: generate each graph per seed (offline). real: fetch the Planetoid / CitationFull files."""
    from . import data as D

    raw_dir = Path(raw_dir)
    if cfg["source"] == "real":
        from icml25.core.download import fetch

        base = cfg.get("mirror")  # a local mirror (tests) replaces the hosts, same file names
        for name, g in graphs(cfg).items():
            if g["dataset"] == "corafull":
                url = f"{base}/cora.npz" if base else D.CORAFULL
                fetch(url, raw_dir / name / "cora.npz", g.get("sha256", {}).get("cora.npz"))
            else:
                for part in D.PLANETOID_PARTS:
                    fn = f"ind.{g['dataset']}.{part}"
                    url = f"{base}/{fn}" if base else D.PLANETOID.format(name=g["dataset"], part=part)
                    fetch(url, raw_dir / name / fn, g.get("sha256", {}).get(fn))
        return
    for name, g in graphs(cfg).items():
        for seed in cfg["seeds"]:
            A, labels = D.sbm_graph({**cfg["sbm"], **g}, 1000 * seed + _hash(name))
            A = A.tocsr()
            write_npz(raw_dir / f"{name}_seed{seed}.npz", a_data=A.data, a_indices=A.indices, a_indptr=A.indptr,
                      a_shape=np.array(A.shape), labels=labels)


def _hash(name: str) -> int:
    return sum(ord(c) * 31 ** i for i, c in enumerate(name)) % 997


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    """Normalised adjacency with self loops, features reduced to `features` dims, Planetoid-style splits."""
    import scipy.sparse as sp

    from . import data as D

    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    F, sp_cfg = int(cfg["features"]), cfg["split"]
    for name, g in graphs(cfg).items():
        for seed in cfg["seeds"]:
            if cfg["source"] == "real":
                if g["dataset"] == "corafull":
                    A, Xr, labels = D.read_corafull(raw_dir / name / "cora.npz")
                    tr, va, te = D.planetoid_split(labels, sp_cfg["per_class"], sp_cfg["val"], sp_cfg["test"], seed)
                else:
                    A, Xr, labels, tr, va, te = D.read_planetoid(raw_dir / name, g["dataset"])
                X = D.reduce_features(Xr, F, seed)
            else:
                z = np.load(raw_dir / f"{name}_seed{seed}.npz")
                A = sp.csr_matrix((z["a_data"], z["a_indices"], z["a_indptr"]), shape=tuple(z["a_shape"]))
                labels = z["labels"]
                X = D.bow_features(labels, {**cfg["sbm"], "features": F}, seed)
                tr, va, te = D.planetoid_split(labels, sp_cfg["per_class"], sp_cfg["val"], sp_cfg["test"], seed)
            An = D.normalized_adjacency(A)
            write_npz(out_dir / f"{name}_seed{seed}.npz", a_data=An.data, a_indices=An.indices, a_indptr=An.indptr,
                      a_shape=np.array(An.shape), X=X, labels=labels, train=tr, val=va, test=te)


def fit_base(cfg: dict, data_dir: Path, out_dir: Path) -> None:
    """The plaintext GCN of every (graph, seed), and the SEAL per-op latencies (measured once, this machine)."""
    from . import gcn
    from .pipeline import load_graph, measure_op_latency

    tc, out_dir = cfg["train"], Path(out_dir)
    accs = {}
    for name in graphs(cfg):
        for seed in cfg["seeds"]:
            g = load_graph(data_dir, name, seed)
            W1, W2 = gcn.train_gcn(g["A"], g["X"], g["labels"], g["train"], int(cfg["hidden"]), int(tc["epochs"]),
                                   float(tc["lr"]), float(tc["weight_decay"]), float(tc["dropout"]), seed)
            write_npz(out_dir / f"gcn_{name}_seed{seed}.npz", W1=W1, W2=W2)
            accs[f"{name}_seed{seed}"] = gcn.accuracy(gcn.forward_np(g["A"], g["X"], W1, W2), g["labels"], g["test"])
    write_json(out_dir / "plain_acc.json", accs)
    if cfg["seal"].get("measure_latency", True):
        write_json(out_dir / "op_latency.json", measure_op_latency(int(cfg["seal"]["ring"]),
                                                                   int(cfg["seal"]["scale_bits"]),
                                                                   int(cfg["seal"].get("latency_reps", 5))))


def train(cfg, method, seed, data_dir, base_dir, run_dir) -> dict:
    import sys

    from tqdm import tqdm

    from .pipeline import load_graph, load_weights, measure, seal_cost, seal_run

    cost = seal_cost(base_dir)
    rows = []
    for name, g in tqdm(list(graphs(cfg).items()), desc=f"ficgcn/{method}/seed{seed}", file=sys.stderr):
        gr = load_graph(data_dir, name, seed)
        W1, W2 = load_weights(base_dir, name, seed)
        met = measure(cfg, method, gr, W1, W2, bool(g.get("probe", False)), cost)
        if method == "ficgcn" and name == cfg["seal"].get("graph"):
            met.update(seal_run(cfg, method, gr, W1, W2, seed))
        rows += [{"setting": name, "metric": k, "value": float(v)} for k, v in met.items()]
    return {"metrics": rows}


def evaluate(cfg, method, seed, data_dir, base_dir, run_dir) -> list:
    """Everything is measured in train (the encrypted inference is the experiment)."""
    return []


# ---- table ------------------------------------------------------------------------------------------------

def _c(agg, m, s, metric, digits=0, scale=1.0):
    from icml25.tables import fmt, lookup

    c = lookup(agg, m, s, metric)
    return fmt(c[0] * scale, c[1] * scale, digits) if c else "–"


def make_table(agg, cfg):
    import pandas as pd

    from icml25.tables import lookup

    rows = []
    for name in graphs(cfg):
        for m in cfg["methods"]:
            if lookup(agg, m, name, "rot") is None:
                continue
            modes = "–"
            l1, l2 = lookup(agg, m, name, "layer1_intra"), lookup(agg, m, name, "layer2_intra")
            if m in ("diagonal",):
                modes = "diag / diag"
            elif l1 and l2:
                modes = ("SpIntra" if l1[0] > 0.5 else "Inter") + " / " + ("SpIntra" if l2[0] > 0.5 else "Inter")
            paper = []
            if name in PAPER_LAT and m in PAPER_LAT[name]:
                paper.append(f"{PAPER_LAT[name][m]:g} s")
            if name == "cora" and m in PAPER_ROT_CORA:
                paper.append(f"{PAPER_ROT_CORA[m] / 1000:.2f}K rot (agg.)")
            rows.append({
                "graph": name, "nodes": int(lookup(agg, m, name, "nodes")[0]), "method": m,
                "t": int(lookup(agg, m, name, "t")[0]), "agg. L1 / L2": modes,
                "rotations": _c(agg, m, name, "rot"), "rot L2 agg.": _c(agg, m, name, "rot_agg2"),
                "PMult": _c(agg, m, name, "pmult"), "Add": _c(agg, m, name, "add"),
                "latency (paper units, k)": _c(agg, m, name, "lat_units", 1, 1e-3),
                "latency (SEAL-measured model, s)": _c(agg, m, name, "lat_seal_model_s", 1),
                "SEAL wall s": _c(agg, m, name, "seal_wall_s", 1),
                "paper": "; ".join(paper) or "–",
            })
    extra = [f"{k} {v:g} s" for k, v in PAPER_LAT["cora"].items() if k in ("penguin", "cryptogcn")]
    if rows:
        rows.append({"graph": "cora (paper only)", "nodes": 2708, "method": "Penguin / CryptoGCN", "t": "–",
                     "agg. L1 / L2": "–", "rotations": "–", "rot L2 agg.": "–", "PMult": "–", "Add": "–",
                     "latency (paper units, k)": "–", "latency (SEAL-measured model, s)": "–", "SEAL wall s": "–",
                     "paper": "; ".join(extra) + "; CoraFull CryptoGCN 31735 s (not re-implemented)"})
    return pd.DataFrame(rows)


# ---- claims ---------------------------------------------------------------------------------------------

def _sv(agg, m, s, metric):
    return evidence.seed_values(agg, m, s, metric)


def _op(a: dict, b: dict, fn) -> dict:
    """fn(a[s], b[s]) per seed both have (paired over seeds)."""
    return {s: fn(a[s], b[s]) for s in sorted(set(a) & set(b))}


def claim_2x(agg, cfg):
    """FicGCN needs >= 2x fewer modelled latency units than each of diagonal, Inter-CA only, SpIntra-CA natural,
    on every graph size: margin = worst ratio - 2."""
    per, words = [], []
    for name in (cfg["claims"]["small"], cfg["claims"].get("medium"), cfg["claims"]["large"]):
        if not name:
            continue
        f = _sv(agg, "ficgcn", name, "lat_units")
        for b in BASELINES_2X:
            r = _op(_sv(agg, b, name, "lat_units"), f, lambda x, y: x / y)
            per.append(r)
            words.append(f"{name} {b} {np.mean(list(r.values())):.2f}x")
    worst = evidence.combine(per, min)
    return ClaimResult.of("latency ratio baseline / FicGCN: " + ", ".join(words),
                          unit="x over 2x (worst graph and baseline)", per_seed={s: v - 2 for s, v in worst.items()})


def claim_noo(agg, cfg):
    """NOO cuts the SpIntra-CA rotations (layer-2 aggregation) below both natural and RCM order: margin =
    1 - NOO / min(natural, RCM), worst graph."""
    per, words = [], []
    for name in graphs(cfg):
        if name == cfg["seal"].get("graph"):
            continue
        f = _sv(agg, "ficgcn", name, "spintra_rot_agg2")
        nat, rcm = _sv(agg, "spintra_natural", name, "rot_agg2"), _sv(agg, "spintra_rcm", name, "rot_agg2")
        best = evidence.combine([nat, rcm], min)
        per.append(_op(f, best, lambda x, y: 1 - x / y))
        words.append(f"{name}: NOO {np.mean(list(f.values())):.0f} vs natural {np.mean(list(nat.values())):.0f}, "
                     f"RCM {np.mean(list(rcm.values())):.0f}")
    worst = evidence.combine(per, min)
    return ClaimResult.of("; ".join(words), unit="fraction of rotations saved (worst graph)", per_seed=worst)


def _advantage(agg, name):
    f = _sv(agg, "ficgcn", name, "lat_units")
    best = evidence.combine([_sv(agg, b, name, "lat_units") for b in BASELINES_ALL], min)
    return {s: best[s] / f[s] for s in sorted(set(f) & set(best))}


def claim_grows(agg, cfg):
    small, large = cfg["claims"]["small"], cfg["claims"]["large"]
    a, b = _advantage(agg, small), _advantage(agg, large)
    per = {s: b[s] - a[s] for s in sorted(set(a) & set(b))}
    return ClaimResult.of(f"advantage over the best baseline: {small} {np.mean(list(a.values())):.2f}x -> "
                          f"{large} {np.mean(list(b.values())):.2f}x (paper 2.01x -> 4.10x)",
                          unit="x (large minus small)", per_seed=per)


def claim_accuracy(agg, cfg):
    g = cfg["seal"].get("graph")
    if g is None:
        raise KeyError("seal.graph")
    enc, pl = _sv(agg, "ficgcn", g, "seal_enc_acc"), _sv(agg, "ficgcn", g, "seal_plain_acc")
    err = _sv(agg, "ficgcn", g, "seal_max_err")
    per = {s: 0.5 - 100 * abs(enc[s] - pl[s]) for s in sorted(set(enc) & set(pl))}
    return ClaimResult.of(f"SEAL CKKS test acc {np.mean(list(enc.values())):.3f} vs plaintext "
                          f"{np.mean(list(pl.values())):.3f} on {g}; max |logit err| {max(err.values()):.1e}",
                          unit="points under the 0.5-point bound", per_seed=per)


CLAIMS = [
    Claim("ficgcn_2x_fewer_latency", "FicGCN needs at least 2x fewer modelled latency units than the naive diagonal, "
          "Inter-CA-only and natural-order SpIntra-CA baselines, at every graph size",
          "Cora 64.1 s vs 128.8 (Penguin) / 131.1 (CryptoGCN) / 1535.3 (Gazelle), 2.01x (Table 2)", claim_2x),
    Claim("noo_cuts_rotations", "NOO cuts the SpIntra-CA rotations relative to natural and RCM order",
          "Cora: SpIntra-CA 7.04K rot, +NOO 1.93K, Rabbit order 2.85K (ablation)", claim_noo),
    Claim("advantage_grows_with_size", "FicGCN's advantage over the best baseline grows from Cora size to CoraFull size",
          "2.01x on Cora -> 4.10x on CoraFull (vs CryptoGCN; Table 2)", claim_grows),
    Claim("encrypted_accuracy_within_half_point", "Encrypted (SEAL CKKS) test accuracy is within 0.5 points of plaintext",
          "Cora 0.792 encrypted vs 0.815 plaintext", claim_accuracy),
]

STUDY = Study(
    name="ficgcn",
    paper=PAPER,
    methods=METHODS,
    metrics=METRICS,
    download=download,
    preprocess=preprocess,
    fit_base=fit_base,
    train=train,
    evaluate=evaluate,
    make_table=make_table,
    validate=validate,
    figures=lazy_hook("icml25.studies.ficgcn.figures", "figures"),
    claims=CLAIMS,
    stand_ins={
        "smoke": "tiny nested SBMs (60-300 nodes, 256 slots), 30 training epochs, SEAL at ring 512 without security; "
                 "numbers meaningless.",
        "mini": "nested stochastic block models at Cora / Citeseer / CoraFull sizes (2708 / 3327 / 19793 nodes, 7 / 6 / 70 "
                "classes, mean degree 3.9 / 2.8 / 6.4) with class-conditional bag-of-words features reduced to 32 dims, "
                "3 graph seeds; op counts on the exact slot simulator (4096 slots); real SEAL CKKS (ring 8192) end to end "
                "only on a 1000-node SBM; Penguin and CryptoGCN not re-implemented.",
        "full": "the real Cora, Citeseer (Planetoid) and CoraFull (CitationFull) graphs, features reduced to 32 dims by "
                "truncated SVD; simulator op counts, SEAL end to end on Cora at ring 8192.",
    },
)
