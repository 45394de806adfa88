"""Multinomial-classification density-ratio estimation (MDRE), after the official dre.py: one
classifier over {labelled (class 0)} ∪ design configurations; class-balanced cross-entropy, input
standardisation, full-batch Adam, best-validation checkpoint. log q_k(x)/p(x) = logit_k - logit_0
(exact under balanced class weights); ratios are self-normalised over the labelled sample."""
from __future__ import annotations

import numpy as np


class MDRE:
    def __init__(self, state: dict):
        self.s = {k: np.asarray(v) for k, v in state.items()}

    @classmethod
    def fit(cls, X_by_class: list[np.ndarray], seed: int, n_hidden: int = 128, n_epoch: int = 300,
            lr: float = 1e-3, val_frac: float = 0.1, dropout: float = 0.5):
        import copy

        import torch
        from torch import nn

        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        Xtr, ytr, Xva, yva = [], [], [], []
        for k, X in enumerate(X_by_class):
            X = X[rng.permutation(len(X))]
            nv = int(val_frac * len(X))
            Xva.append(X[:nv]); yva.append(np.full(nv, k))
            Xtr.append(X[nv:]); ytr.append(np.full(len(X) - nv, k))
        Xtr, ytr = np.concatenate(Xtr).astype(np.float32), np.concatenate(ytr)
        Xva, yva = np.concatenate(Xva).astype(np.float32), np.concatenate(yva)
        mean, std = Xtr.mean(0), np.maximum(Xtr.std(0), 1e-3)
        K, d = len(X_by_class), Xtr.shape[1]
        # balanced class weights: each class contributes equally, so logit differences are log ratios
        cw = lambda y: torch.tensor(len(y) / (K * np.bincount(y, minlength=K)), dtype=torch.float32)
        net = nn.Sequential(nn.Linear(d, n_hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(n_hidden, n_hidden),
                            nn.ReLU(), nn.Dropout(dropout), nn.Linear(n_hidden, K))
        tX, ty = torch.tensor((Xtr - mean) / std), torch.tensor(ytr)
        vX, vy = torch.tensor((Xva - mean) / std), torch.tensor(yva)
        loss_tr, loss_va = nn.CrossEntropyLoss(weight=cw(ytr)), nn.CrossEntropyLoss(weight=cw(yva))
        opt = torch.optim.Adam(net.parameters(), lr=lr)
        best, best_state = np.inf, None
        for _ in range(n_epoch):
            net.eval()
            with torch.no_grad():
                vl = float(loss_va(net(vX), vy))
            if vl < best:
                best, best_state = vl, copy.deepcopy(net.state_dict())
            net.train()
            loss = loss_tr(net(tX), ty)
            opt.zero_grad()
            loss.backward()
            opt.step()
        net.load_state_dict(best_state)
        lin = [m for m in net if isinstance(m, nn.Linear)]
        state = {"mean": mean, "std": std, "val_loss": np.array(best)}
        for j, l in enumerate(lin):
            state[f"W{j}"] = l.weight.detach().numpy().T.astype(np.float64)
            state[f"b{j}"] = l.bias.detach().numpy().astype(np.float64)
        return cls(state)

    def state(self) -> dict:
        return dict(self.s)

    def logits(self, X1h: np.ndarray) -> np.ndarray:
        h = (X1h - self.s["mean"]) / self.s["std"]
        j = 0
        while f"W{j}" in self.s:
            h = h @ self.s[f"W{j}"] + self.s[f"b{j}"]
            if f"W{j + 1}" in self.s:
                h = np.maximum(h, 0.0)
            j += 1
        return h

    def log_ratios(self, X1h: np.ndarray) -> np.ndarray:
        """(n, K-1): estimated log q_k(x)/p(x) for the design classes k = 1..K-1."""
        z = self.logits(X1h)
        return z[:, 1:] - z[:, :1]


def self_normalise(log_w: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(log_w) scaled to sum to the sample size along `axis` (official get_dr(self_normalize=True))."""
    c = log_w.max(axis=axis, keepdims=True)
    w = np.exp(log_w - c)
    return w / w.sum(axis=axis, keepdims=True) * log_w.shape[axis]
