"""Predictors: ridge on one-hot (RidgeCV, as the official RidgeRegressor) and a small MLP ensemble
(the official FeedForward: Linear-ReLU-Linear-ReLU-Linear per member, ensemble mean as prediction,
member std as the forecast's sigma). Fitted with torch; kept as numpy weights so later stages
predict without importing torch."""
from __future__ import annotations

import numpy as np
from scipy.stats import norm


class Ridge:
    kind = "ridge"

    def __init__(self, coef: np.ndarray, intercept: float, sigma: float):
        self.coef, self.intercept, self.sigma = np.asarray(coef, np.float64), float(intercept), float(sigma)

    @classmethod
    def fit(cls, X1h: np.ndarray, y: np.ndarray, rng: np.random.Generator, val_frac: float = 0.1):
        from sklearn.linear_model import RidgeCV

        perm = rng.permutation(len(y))
        n_val = int(val_frac * len(y))
        va, tr = perm[:n_val], perm[n_val:]
        m = RidgeCV(alphas=np.logspace(-5, 5, 11)).fit(X1h[tr], y[tr])
        mse = float(np.mean((y[va] - m.predict(X1h[va])) ** 2))  # official: validation MSE -> sigma
        return cls(m.coef_, m.intercept_, np.sqrt(mse))

    def predict(self, X1h: np.ndarray) -> np.ndarray:
        return X1h @ self.coef + self.intercept

    def predict_mu_sigma(self, X1h):
        mu = self.predict(X1h)
        return mu, np.full_like(mu, self.sigma)

    def site_weights(self, L: int, a: int) -> np.ndarray:
        """beta_{l,a}: f(x) = sum_l beta_{l, x_l} + b."""
        return self.coef.reshape(L, a)

    def state(self) -> dict:
        return {"coef": self.coef, "intercept": np.array(self.intercept), "sigma": np.array(self.sigma)}

    @classmethod
    def from_state(cls, s):
        return cls(s["coef"], float(s["intercept"]), float(s["sigma"]))


class MLPEnsemble:
    kind = "mlp"

    def __init__(self, layers: list[list[tuple[np.ndarray, np.ndarray]]]):
        self.layers = layers  # per member: [(W1,b1),(W2,b2),(W3,b3)], W: (in, out)

    @classmethod
    def fit(cls, X1h, y, seed: int, n_models: int = 3, n_hidden: int = 64, n_epoch: int = 30,
            batch_size: int = 256, lr: float = 2e-3, val_frac: float = 0.1, weights: np.ndarray | None = None):
        """weights: per-example loss weights (official EnrichmentFeedForward: 1 / (2 var)); None = plain MSE."""
        import copy

        import torch
        from torch import nn

        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        d = X1h.shape[1]
        models = nn.ModuleList([nn.Sequential(nn.Linear(d, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_hidden),
                                              nn.ReLU(), nn.Linear(n_hidden, 1)) for _ in range(n_models)])
        perm = rng.permutation(len(y))
        n_val = int(val_frac * len(y))
        va, tr = perm[:n_val], perm[n_val:]
        Xt, yt = torch.tensor(X1h[tr]), torch.tensor(y[tr], dtype=torch.float32)
        Xv, yv = torch.tensor(X1h[va]), torch.tensor(y[va], dtype=torch.float32)
        fwd = lambda X: torch.cat([m(X) for m in models], 1).mean(1)
        if weights is None:
            lossf = lambda pred, y, idx: ((pred - y) ** 2).mean()
        else:
            wt = torch.tensor(np.asarray(weights, np.float32))
            wtr, wva = wt[tr], wt[va]
            lossf = lambda pred, y, idx: (idx * (pred - y) ** 2).mean()
        opt = torch.optim.Adam(models.parameters(), lr=lr)
        best, best_state = np.inf, None
        for _ in range(n_epoch):
            with torch.no_grad():
                vl = float(lossf(fwd(Xv), yv, None if weights is None else wva))
            if vl < best:  # official: keep the parameters of the best validation epoch
                best, best_state = vl, copy.deepcopy(models.state_dict())
            order = torch.randperm(len(yt))
            for i in range(0, len(yt), batch_size):
                b = order[i:i + batch_size]
                loss = lossf(fwd(Xt[b]), yt[b], None if weights is None else wtr[b])
                opt.zero_grad()
                loss.backward()
                opt.step()
        with torch.no_grad():
            if float(lossf(fwd(Xv), yv, None if weights is None else wva)) < best:
                best_state = copy.deepcopy(models.state_dict())
        models.load_state_dict(best_state)
        layers = []
        for m in models:
            lin = [mod for mod in m if isinstance(mod, nn.Linear)]
            layers.append([(l.weight.detach().numpy().T.astype(np.float64), l.bias.detach().numpy().astype(np.float64))
                           for l in lin])
        return cls(layers)

    def member_predict(self, X1h: np.ndarray) -> np.ndarray:
        outs = []
        for layer in self.layers:
            h = X1h
            for j, (W, b) in enumerate(layer):
                h = h @ W + b
                if j < len(layer) - 1:
                    h = np.maximum(h, 0.0)
            outs.append(h[:, 0])
        return np.stack(outs, 1)

    def predict(self, X1h):
        return self.member_predict(X1h).mean(1)

    def predict_mu_sigma(self, X1h):
        P = self.member_predict(X1h)
        return P.mean(1), P.std(1)

    def state(self) -> dict:
        out = {"n_models": np.array(len(self.layers))}
        for i, layer in enumerate(self.layers):
            for j, (W, b) in enumerate(layer):
                out[f"m{i}_W{j}"], out[f"m{i}_b{j}"] = W, b
        return out

    @classmethod
    def from_state(cls, s):
        n = int(s["n_models"])
        layers = []
        for i in range(n):
            j, layer = 0, []
            while f"m{i}_W{j}" in s:
                layer.append((np.asarray(s[f"m{i}_W{j}"]), np.asarray(s[f"m{i}_b{j}"])))
                j += 1
            layers.append(layer)
        return cls(layers)


def exceed_forecast(mu: np.ndarray, sigma: np.ndarray, gamma: float) -> np.ndarray:
    """Predicted P(Y >= gamma | x) = sf(gamma; mu, sigma) (official predict_prob_exceedance)."""
    return norm.sf(gamma, loc=mu, scale=np.maximum(sigma, 1e-6))
