"""Graphs: citation-like stochastic block models (mini / smoke) and the real Cora, Citeseer, CoraFull (full).

Stand-in: a nested SBM (networkx.stochastic_block_model): every class is split into sub-communities of
`sub_block` nodes; a share `local` of the edges falls inside a sub-community, `homophily` - `local` elsewhere in
the class, the rest anywhere. Sub-communities give the locality real citation graphs have and a plain SBM lacks.
Node ids are shuffled, so the "natural" order is not sorted by class (as in Cora). Features: class-conditional
sparse Bernoulli bag-of-words, reduced by PCA (scikit-learn) and standardised.

Full scale: Planetoid Cora / Citeseer (Kipf's pickles, the files torch_geometric's Planetoid downloads) and
CoraFull (Bojchevski's npz, torch_geometric's CitationFull), read into the same arrays.
"""
from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from icml25.core.errors import UserError

PLANETOID = "https://github.com/kimiyoung/planetoid/raw/master/data/ind.{name}.{part}"
PLANETOID_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
CORAFULL = "https://github.com/abojchevski/graph2gauss/raw/master/data/cora.npz"


def sbm_graph(spec: dict, seed: int):
    """(A binary symmetric csr, labels) of a nested SBM with the spec's size, mean degree and classes."""
    import networkx as nx

    rng = np.random.default_rng(seed)
    N, C, sub = int(spec["nodes"]), int(spec["classes"]), int(spec.get("sub_block", 32))
    deg, local, homo = float(spec["degree"]), float(spec.get("local", 0.6)), float(spec.get("homophily", 0.8))
    if not 0 <= local <= homo <= 1:
        raise UserError(f"ficgcn: need 0 <= local <= homophily <= 1, got {local}, {homo}")
    # class sizes ~ Dirichlet (citation classes are unequal), each split into sub-communities
    sizes_c = np.maximum(sub, np.round(rng.dirichlet(np.full(C, 4.0)) * N)).astype(int)
    sizes_c[-1] += N - sizes_c.sum()
    if sizes_c[-1] < 1:
        raise UserError(f"ficgcn: {N} nodes are too few for {C} classes of >= {sub} nodes")
    blocks, block_cls = [], []
    for c, n in enumerate(sizes_c):
        k = max(1, int(round(n / sub)))
        parts = np.full(k, n // k)
        parts[: n % k] += 1
        blocks += parts.tolist()
        block_cls += [c] * k
    blocks, block_cls = np.array(blocks), np.array(block_cls)
    # expected degree split: deg*local inside the sub-community, deg*(homo-local) elsewhere in the class, rest out
    n_cls = np.array([sizes_c[c] for c in block_cls])
    p_loc = deg * local / np.maximum(blocks - 1, 1)
    p_cls = deg * (homo - local) / np.maximum(n_cls - blocks, 1)
    p_out = deg * (1 - homo) / np.maximum(N - n_cls, 1)
    same = block_cls[:, None] == block_cls[None, :]
    P = np.where(same, np.minimum(p_cls[:, None], p_cls[None, :]), np.minimum(p_out[:, None], p_out[None, :]))
    np.fill_diagonal(P, p_loc)
    P = np.clip(P, 0, 1)
    G = nx.stochastic_block_model(blocks.tolist(), P.tolist(), seed=int(rng.integers(2**31)), sparse=True)
    A = nx.to_scipy_sparse_array(G, nodelist=range(N), format="csr").astype(float)
    labels = np.repeat(block_cls, blocks)
    perm = rng.permutation(N)  # the dataset's own order: not sorted by class
    A = sp.csr_matrix(A)[perm][:, perm]
    return A, labels[perm]


def bow_features(labels: np.ndarray, spec: dict, seed: int) -> np.ndarray:
    """Class-conditional sparse Bernoulli bag-of-words -> PCA to `features` dims, standardised."""
    from sklearn.decomposition import PCA

    rng = np.random.default_rng(seed + 7919)
    V, C = int(spec.get("vocab", 256)), int(labels.max()) + 1
    topic = rng.random((C, V)) < float(spec.get("topic_frac", 0.1))
    p = np.where(topic[labels], float(spec.get("p_topic", 0.08)), float(spec.get("p_base", 0.01)))
    bow = (rng.random(p.shape) < p).astype(float)
    F = min(int(spec["features"]), V, len(labels) - 1)
    Z = PCA(n_components=F, random_state=seed).fit_transform(bow)
    return (Z - Z.mean(0)) / (Z.std(0) + 1e-12)


def planetoid_split(labels: np.ndarray, per_class: int, n_val: int, n_test: int, seed: int):
    """Planetoid-style split: `per_class` training nodes per class, then validation and test nodes."""
    rng = np.random.default_rng(seed + 104729)
    train = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:per_class]
                            for c in range(int(labels.max()) + 1)])
    rest = rng.permutation(np.setdiff1d(np.arange(len(labels)), train))
    return np.sort(train), np.sort(rest[:n_val]), np.sort(rest[n_val:n_val + n_test])


def normalized_adjacency(A) -> sp.csr_matrix:
    """D^-1/2 (A + I) D^-1/2 (Kipf & Welling)."""
    A = sp.csr_matrix(A, dtype=float)
    A = ((A + A.T) > 0).astype(float)
    A.setdiag(0)
    A.eliminate_zeros()
    A = A + sp.eye(A.shape[0], format="csr")
    d = np.asarray(A.sum(1)).ravel()
    D = sp.diags(d ** -0.5)
    return sp.csr_matrix(D @ A @ D)


# ---- full scale: the real datasets -------------------------------------------------------------------

def read_planetoid(raw: Path, name: str):
    """(A, X, labels, train, val, test) from Kipf's Planetoid files ind.<name>.*, as torch_geometric reads them
    (Citeseer's isolated test ids get zero rows)."""
    objs = {}
    for part in ("x", "y", "tx", "ty", "allx", "ally", "graph"):
        with open(raw / f"ind.{name}.{part}", "rb") as fh:
            objs[part] = pickle.load(fh, encoding="latin1") if sys.version_info > (3, 0) else pickle.load(fh)
    test_idx = np.loadtxt(raw / f"ind.{name}.test.index", dtype=np.int64).reshape(-1)
    tx, ty = sp.csr_matrix(objs["tx"]), np.asarray(objs["ty"])
    lo, hi = test_idx.min(), test_idx.max()
    if name == "citeseer":  # isolated test nodes: pad
        full = np.arange(lo, hi + 1)
        tx_ext = sp.lil_matrix((len(full), tx.shape[1]))
        tx_ext[test_idx - lo] = tx
        ty_ext = np.zeros((len(full), ty.shape[1]))
        ty_ext[test_idx - lo] = ty
        tx, ty = sp.csr_matrix(tx_ext), ty_ext
    X = sp.vstack([sp.csr_matrix(objs["allx"]), tx]).tolil()
    Y = np.vstack([np.asarray(objs["ally"]), ty])
    order = np.sort(test_idx)
    X[test_idx] = X[order]
    Y[test_idx] = Y[order]
    N = X.shape[0]
    rows, cols = [], []
    for u, nbrs in objs["graph"].items():
        for v in nbrs:
            if u < N and v < N:
                rows.append(u)
                cols.append(v)
    A = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(N, N))
    labels = Y.argmax(1)
    n_cls = Y.shape[1]
    train = np.arange(n_cls * 20)
    val = np.arange(n_cls * 20, n_cls * 20 + 500)
    return A, np.asarray(X.todense(), dtype=float), labels, train, val, np.sort(test_idx)


def read_corafull(path: Path):
    """(A, X, labels) from graph2gauss's cora.npz (CSR parts adj_*, attr_*, labels)."""
    z = np.load(path, allow_pickle=True)
    A = sp.csr_matrix((z["adj_data"], z["adj_indices"], z["adj_indptr"]), shape=tuple(z["adj_shape"]))
    X = sp.csr_matrix((z["attr_data"], z["attr_indices"], z["attr_indptr"]), shape=tuple(z["attr_shape"]))
    return A, np.asarray(X.todense(), dtype=float), np.asarray(z["labels"], dtype=np.int64)


def reduce_features(X: np.ndarray, F: int, seed: int) -> np.ndarray:
    from sklearn.decomposition import TruncatedSVD

    F = min(F, X.shape[1] - 1)
    Z = TruncatedSVD(n_components=F, random_state=seed).fit_transform(X)
    return (Z - Z.mean(0)) / (Z.std(0) + 1e-12)
