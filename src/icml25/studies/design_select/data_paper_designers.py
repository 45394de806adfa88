"""The rest of the paper's RNA menu (official designers.py / vae.py), written in torch / numpy:

- VAE: the official vae.VAE (encoder Flatten-Linear-ReLU-Linear-ReLU -> mean / log-variance heads,
  decoder Linear-ReLU-Linear-ReLU-Linear -> site-wise logits; loss = per-example weighted KL +
  weighted cross-entropy, Adam lr 1e-3, batch 10, 10% validation split, best-validation checkpoint;
  sampling: z ~ N(0, I), decode, one categorical draw per site).
- CbAS / DbAS (Brookes et al. 2019 as the official CbAS class runs them): a VAE fitted to the
  training sequences initialises the design VAE; each of n_iter iterations samples n_sample sequences,
  raises the threshold to the `quantile` of their predictions (never lowers it), weights each sample
  by the predicted exceedance probability P(Y >= threshold | x) = sf(threshold; mu(x), sigma(x))
  (DbAS) times, for CbAS, p_train(x | z) / p_design(x | z) (both decoders at the sample's own z),
  normalises the weights to sum to n_sample, drops weights <= 1e-6 and refits the design VAE for
  n_epoch epochs; designs = n_design samples of the final design VAE.
- 'vae-<predictor>': samples of the training-sequence VAE itself (the official 'vae-ridge').
- PEX (proximal exploration, Ren et al. 2022, as the official PEX class adapts it): frontier
  neighbours = per distance-to-seed, the top `frontier_neighborhood_size` training sequences whose
  label beats every closer sequence's; candidates = new unique mutants (each site redrawn uniformly
  with prob p_mutation) of random frontier neighbours, 2 n_design of them; designs = repeatedly
  peeled proximal frontiers (the monotone upper convex hull of (distance to seed, prediction)).

Distances to the seed are Hamming distances (the official code calls editdistance on equal-length
strings, which can be smaller than Hamming; our Biswas trust region uses Hamming too).
Sequences are integer arrays over data_landscape.ALPHABET."""
from __future__ import annotations

import numpy as np
from scipy.stats import norm

from . import data_landscape as L

# ---- VAE ---------------------------------------------------------------------------------------


class VAE:
    """Official vae.VAE. `predict`-free: fit / sample / decode_probs / log-likelihood given z."""

    def __init__(self, seq_len: int, n_alpha: int = 4, latent_dim: int = 10, n_hidden: int = 20, seed: int = 0):
        import torch
        from torch import nn

        torch.manual_seed(seed)
        self.L, self.a, self.d = seq_len, n_alpha, latent_dim
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(seq_len * n_alpha, n_hidden), nn.ReLU(),
                                     nn.Linear(n_hidden, n_hidden), nn.ReLU())
        self.mean_layer = nn.Linear(n_hidden, latent_dim)
        self.logvar_layer = nn.Linear(n_hidden, latent_dim)
        self.decoder = nn.Sequential(nn.Linear(latent_dim, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_hidden),
                                     nn.ReLU(), nn.Linear(n_hidden, seq_len * n_alpha))
        self.net = nn.ModuleDict({"encoder": self.encoder, "mean": self.mean_layer, "logvar": self.logvar_layer,
                                  "decoder": self.decoder})

    # parameters
    def state_dict(self):
        import copy

        return copy.deepcopy(self.net.state_dict())

    def load_state_dict(self, s):
        self.net.load_state_dict(s)

    # pieces
    def _logits(self, z):
        return self.decoder(z).view(-1, self.L, self.a)

    def losses(self, X1, w, eps=None):
        """Per-example (weighted) KL and cross-entropy sums for one-hot X1 (n, L, a) as torch tensors."""
        import torch

        h = self.encoder(X1)
        mu, logvar = self.mean_layer(h), self.logvar_layer(h)
        eps = torch.randn_like(logvar) if eps is None else eps
        z = mu + torch.exp(0.5 * logvar) * eps
        logits = self._logits(z)
        ce = -(torch.log_softmax(logits, 2) * X1).sum((1, 2))
        kl = -0.5 * (1 + logvar - mu ** 2 - torch.exp(logvar)).sum(1)
        return (w * kl).sum(), (w * ce).sum()

    def neg_elbo(self, X_idx: np.ndarray, seed: int = 0) -> float:
        """Mean single-sample negative ELBO (KL + reconstruction cross-entropy) per sequence."""
        import torch

        with torch.no_grad():
            g = torch.Generator().manual_seed(seed)
            X1 = torch.tensor(L.onehot(X_idx, self.a).reshape(-1, self.L, self.a), dtype=torch.float32)
            eps = torch.randn(len(X1), self.d, generator=g)
            kl, ce = self.losses(X1, torch.ones(len(X1)), eps)
        return float(kl + ce) / len(X1)

    def fit(self, X_idx: np.ndarray, weights: np.ndarray | None = None, n_epoch: int = 10, batch_size: int = 10,
            lr: float = 1e-3, val_frac: float = 0.1, seed: int = 0) -> list[dict]:
        """Official VAE.fit: weights rescaled to mean 1; validation loss (weighted KL + CE per example)
        before each epoch's Adam pass, parameters of the best validation loss kept (the state after the
        last epoch is scored too). Returns per-epoch {'train', 'val'} losses per example."""
        import torch

        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        n = len(X_idx)
        w = np.ones(n) if weights is None else np.asarray(weights, float)
        w = w * n / w.sum()
        X1 = torch.tensor(L.onehot(X_idx, self.a).reshape(n, self.L, self.a), dtype=torch.float32)
        wt = torch.tensor(w, dtype=torch.float32)
        perm = rng.permutation(n)
        n_val = int(val_frac * n)
        tr, va = perm[n_val:], perm[:n_val]
        opt = torch.optim.Adam(self.net.parameters(), lr=lr)

        def val_loss():
            if n_val == 0:
                return np.inf
            with torch.no_grad():
                kl, ce = self.losses(X1[va], wt[va])
            return float(kl + ce) / n_val

        hist, best, best_state = [], np.inf, self.state_dict()
        for _ in range(n_epoch):
            vl = val_loss()
            if vl < best:
                best, best_state = vl, self.state_dict()
            order = tr[torch.randperm(len(tr)).numpy()]
            tot = 0.0
            for i in range(0, len(order), batch_size):
                b = order[i:i + batch_size]
                kl, ce = self.losses(X1[b], wt[b])
                loss = (kl + ce) / len(b)
                opt.zero_grad()
                loss.backward()
                opt.step()
                tot += float((kl + ce).detach())
            hist.append({"train": tot / max(len(tr), 1), "val": vl})
        vl = val_loss()
        if vl < best or not np.isfinite(best):
            best, best_state = vl, self.state_dict()
        self.load_state_dict(best_state)
        return hist

    def decode_probs(self, z: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return torch.softmax(self._logits(torch.tensor(z, dtype=torch.float32)), 2).double().numpy()

    def generate(self, n: int, rng: np.random.Generator):
        """(X (n, L) int, decoder probabilities (n, L, a), z (n, d)): z ~ N(0, I), one draw per site."""
        z = rng.standard_normal((n, self.d))
        P = self.decode_probs(z)
        if not np.isfinite(P).all():
            raise ValueError("NaN and/or inf in the decoded probabilities")
        c = np.cumsum(P, 2)
        u = rng.random((n, self.L, 1))
        X = np.minimum((u > c).sum(2), self.a - 1)
        return X, P, z


def loglik_given_z(P: np.ndarray, X: np.ndarray) -> np.ndarray:
    """sum_l log P[n, l, X[n, l]]: the official log p(x | z) from decoder probabilities."""
    n, Ls = X.shape
    return np.log(P[np.arange(n)[:, None], np.arange(Ls)[None, :], X]).sum(1)


# ---- CbAS / DbAS ---------------------------------------------------------------------------------


def bas_weights(mu: np.ndarray, sigma: np.ndarray, threshold: float, weight_type: str,
                logp_train: np.ndarray | None = None, logp_design: np.ndarray | None = None,
                tol: float = 1e-6):
    """One iteration's refitting weights (official fit_design_distribution): DbAS w = sf(threshold; mu,
    sigma); CbAS w = sf * exp(log p_train(x|z) - log p_design(x|z)); normalised to sum to n; kept
    where w > tol. Returns (weights of the kept samples, their indices)."""
    w = norm.sf(threshold, loc=mu, scale=sigma)
    if weight_type == "cbas":
        w = w * np.exp(logp_train - logp_design)
    elif weight_type != "dbas":
        raise ValueError(weight_type)
    s = w.sum()
    if not s > 0:
        return np.zeros(0), np.zeros(0, int)
    w = len(w) * w / s
    keep = np.flatnonzero(w > tol)
    return w[keep], keep


def fit_train_vae(X_train: np.ndarray, seed: int, latent_dim: int = 10, n_hidden: int = 20, n_init_epoch: int = 5,
                  batch_size: int = 10, lr: float = 1e-3, n_alpha: int = 4) -> VAE:
    vae = VAE(X_train.shape[1], n_alpha, latent_dim, n_hidden, seed=seed)
    vae.fit(X_train, n_epoch=n_init_epoch, batch_size=batch_size, lr=lr, seed=seed)
    return vae


def bas(predict_mu_sigma, train_vae: VAE, n_design: int, quantile: float, weight_type: str,
        rng: np.random.Generator, n_iter: int = 20, n_sample: int = 1000, n_epoch: int = 5, batch_size: int = 10,
        lr: float = 1e-3, n_alpha: int = 4, history: list | None = None) -> np.ndarray:
    """CbAS (weight_type='cbas') or DbAS ('dbas') from the training VAE; returns n_design designs."""
    assert 0 <= quantile <= 1
    design = VAE(train_vae.L, train_vae.a, train_vae.d, train_vae.decoder[0].out_features)
    design.load_state_dict(train_vae.state_dict())
    threshold = -np.inf
    for t in range(n_iter):
        X, Pd, z = design.generate(n_sample, rng)
        mu, sigma = predict_mu_sigma(L.onehot(X, n_alpha))
        threshold = max(threshold, float(np.quantile(mu, quantile)))
        lt = ld = None
        if weight_type == "cbas":
            ld = loglik_given_z(Pd, X)
            lt = loglik_given_z(train_vae.decode_probs(z), X)
        w, keep = bas_weights(mu, sigma, threshold, weight_type, lt, ld)
        if history is not None:
            history.append({"iter": t, "X": X, "mu": mu, "sigma": sigma, "threshold": threshold, "logp_train": lt,
                            "logp_design": ld, "weights": w, "keep": keep})
        if len(keep) < 2:  # nothing left to refit on (the official fit would fail); keep the current design VAE
            continue
        design.fit(X[keep], w, n_epoch=n_epoch, batch_size=batch_size, lr=lr, seed=int(rng.integers(2 ** 31)))
    return design.generate(n_design, rng)[0]


# ---- PEX -----------------------------------------------------------------------------------------


def hamming_to(X: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return (X != ref[None, :]).sum(1)


def pex_frontier_neighbours(X_train: np.ndarray, y_train: np.ndarray, seed_idx: np.ndarray, size: int = 5) -> np.ndarray:
    """Indices of the training sequences near the proximal frontier (official PEX.design_sequences):
    going outwards in distance to the seed, the top `size` of each distance whose label exceeds the
    best label of every closer distance."""
    dist = hamming_to(X_train, seed_idx)
    out, height = [], -np.inf
    for d in np.unique(dist):
        idx = np.flatnonzero(dist == d)
        idx = idx[np.argsort(-y_train[idx], kind="stable")]
        out.extend(int(i) for i in idx[:size] if y_train[i] > height)
        height = max(height, float(y_train[idx[0]]))
    return np.array(out, int)


def _cross(o, a, b):
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def proximal_frontier(points: list[tuple[float, float]]) -> list[int]:
    """Andrew's monotone chain over (distance, prediction) points sorted by distance (one per distance):
    the upper hull, then trailing points lower than their predecessor dropped. Returns positions."""
    stack: list[int] = []
    for j, p in enumerate(points):
        while len(stack) > 1 and _cross(points[stack[-2]], points[stack[-1]], p) > 0:
            stack.pop()
        stack.append(j)
    while len(stack) >= 2 and points[stack[-1]][1] < points[stack[-2]][1]:
        stack.pop()
    return stack


def pex_select(dist: np.ndarray, pred: np.ndarray, n_design: int, rounds: list | None = None) -> np.ndarray:
    """Candidate indices in the order PEX takes them: peel the proximal frontier round by round."""
    by_d, head = {}, {}  # per distance: candidates by decreasing prediction, and the next one's position
    for d in np.unique(dist):
        idx = np.flatnonzero(dist == d)
        by_d[int(d)] = idx[np.argsort(-pred[idx], kind="stable")]
        head[int(d)] = 0
    chosen: list[int] = []
    while len(chosen) < n_design:
        ds = [d for d in sorted(by_d) if head[d] < len(by_d[d])]
        if not ds:
            break
        pts = [(float(d), float(pred[by_d[d][head[d]]])) for d in ds]
        this = []
        for j in proximal_frontier(pts):
            if len(chosen) < n_design:
                i = by_d[ds[j]][head[ds[j]]]
                head[ds[j]] += 1
                chosen.append(int(i))
                this.append(int(i))
        if rounds is not None:
            rounds.append(this)
    return np.array(chosen, int)


def pex(predict, X_train: np.ndarray, y_train: np.ndarray, seed_idx: np.ndarray, n_design: int, p_mutation: float,
        rng: np.random.Generator, frontier_neighborhood_size: int = 5, n_candidates: int | None = None,
        n_alpha: int = 4, info: dict | None = None) -> np.ndarray:
    n_candidates = n_candidates or 2 * n_design
    nb = pex_frontier_neighbours(X_train, y_train, seed_idx, frontier_neighborhood_size)
    seen = {r.tobytes() for r in X_train.astype(np.int8)}
    cands, parents = [], []
    while len(cands) < n_candidates:
        m = n_candidates - len(cands)
        par = nb[rng.integers(0, len(nb), m)]
        Xp = X_train[par]
        mask = rng.random(Xp.shape) < p_mutation  # official get_mutant: redraw uniformly (may keep the letter)
        kids = np.where(mask, rng.integers(0, n_alpha, Xp.shape), Xp)
        for k, p in zip(kids.astype(np.int8), par):
            key = k.tobytes()
            if key not in seen:
                seen.add(key)
                cands.append(k)
                parents.append(p)
    C = np.stack(cands).astype(np.int64)
    pred = predict(L.onehot(C, n_alpha))
    dist = hamming_to(C, seed_idx)
    rounds = [] if info is not None else None
    order = pex_select(dist, pred, n_design, rounds)
    if info is not None:
        info.update(neighbours=nb, candidates=C, parents=np.array(parents), pred=pred, dist=dist, rounds=rounds,
                    order=order)
    return C[order]
