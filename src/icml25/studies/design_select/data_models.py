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


class CNNEnsemble:
    """The official models.CNN ensemble (3 members): Conv1d(a->F, k)-ReLU-Conv1d(F->F, k)-ReLU-MaxPool1d(1)-
    Conv1d(F->F, k)-ReLU-Flatten-Linear(., H)-ReLU-Linear(H, H)-ReLU-Linear(H, 1); ensemble mean as the
    prediction, member std as the forecast's sigma. Fitted with torch (TorchRegressorEnsemble.fit defaults:
    Adam lr 1e-3, batch 64, unweighted MSE, best-validation checkpoint); weights kept as numpy arrays."""
    kind = "cnn"

    def __init__(self, members: list[dict], seq_len: int, n_alpha: int):
        self.members, self.L, self.a = members, int(seq_len), int(n_alpha)

    @staticmethod
    def _torch_members(seq_len, n_alpha, n_filters, n_hidden, kernel, n_models):
        from torch import nn

        flat = n_filters * (seq_len - 3 * (kernel - 1))
        return nn.ModuleList([nn.Sequential(
            nn.Conv1d(n_alpha, n_filters, kernel), nn.ReLU(), nn.Conv1d(n_filters, n_filters, kernel), nn.ReLU(),
            nn.MaxPool1d(1), nn.Conv1d(n_filters, n_filters, kernel), nn.ReLU(), nn.Flatten(),
            nn.Linear(flat, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_hidden), nn.ReLU(), nn.Linear(n_hidden, 1))
            for _ in range(n_models)])

    @classmethod
    def fit(cls, X1h, y, seq_len: int, seed: int, n_alpha: int = 4, n_models: int = 3, n_filters: int = 32,
            n_hidden: int = 100, kernel: int = 5, n_epoch: int = 5, batch_size: int = 64, lr: float = 1e-3,
            val_frac: float = 0.1):
        import copy

        import torch
        from torch import nn

        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        models = cls._torch_members(seq_len, n_alpha, n_filters, n_hidden, kernel, n_models)
        X = torch.tensor(np.asarray(X1h, np.float32).reshape(-1, seq_len, n_alpha)).transpose(1, 2).contiguous()
        yy = torch.tensor(np.asarray(y, np.float32))
        perm = rng.permutation(len(y))
        n_val = int(val_frac * len(y))
        va, tr = perm[:n_val], perm[n_val:]
        fwd = lambda Xb: torch.cat([m(Xb) for m in models], 1).mean(1)
        opt = torch.optim.Adam(models.parameters(), lr=lr)
        best, best_state = np.inf, copy.deepcopy(models.state_dict())
        for _ in range(n_epoch + 1):
            with torch.no_grad():
                vl = float(((fwd(X[va]) - yy[va]) ** 2).mean()) if n_val else -np.inf
            if vl < best:
                best, best_state = vl, copy.deepcopy(models.state_dict())
            if _ == n_epoch:
                break
            order = tr[torch.randperm(len(tr)).numpy()]
            for i in range(0, len(order), batch_size):
                b = order[i:i + batch_size]
                loss = ((fwd(X[b]) - yy[b]) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        models.load_state_dict(best_state)
        members = []
        for m in models:
            mods = [mod for mod in m if isinstance(mod, (nn.Conv1d, nn.Linear))]
            members.append({f"{'c' if isinstance(mod, nn.Conv1d) else 'l'}{j}_{k}": v.detach().numpy().astype(np.float64)
                            for j, mod in enumerate(mods) for k, v in (("W", mod.weight), ("b", mod.bias))})
        return cls(members, seq_len, n_alpha)

    def member_predict(self, X1h: np.ndarray, batch: int = 8192) -> np.ndarray:
        """(n, n_models) member predictions: torch float32 (conv1d is the hot path of every CNN-guided
        designer), on CUDA when available; returned as float64."""
        import torch
        import torch.nn.functional as F

        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if getattr(self, "_dev", None) != dev:
            self._t = [{k: torch.tensor(v, dtype=torch.float32, device=dev) for k, v in m.items()} for m in self.members]
            self._dev = dev
        X = np.asarray(X1h, np.float32).reshape(-1, self.L, self.a)
        out = np.empty((len(X), len(self.members)))
        with torch.no_grad():
            for s in range(0, len(X), batch):
                xb = torch.tensor(X[s:s + batch], device=dev).transpose(1, 2)
                for i, m in enumerate(self._t):
                    h = xb
                    for j in range(3):
                        h = torch.relu(F.conv1d(h, m[f"c{j}_W"], m[f"c{j}_b"]))
                    h = h.flatten(1)
                    for j in range(3, 6):
                        h = F.linear(h, m[f"l{j}_W"], m[f"l{j}_b"])
                        if j < 5:
                            h = torch.relu(h)
                    out[s:s + batch, i] = h[:, 0].double().cpu().numpy()
        return out

    def predict(self, X1h):
        return self.member_predict(X1h).mean(1)

    def predict_mu_sigma(self, X1h):
        P = self.member_predict(X1h)
        return P.mean(1), P.std(1)

    def state(self) -> dict:
        out = {"n_models": np.array(len(self.members)), "seq_len": np.array(self.L), "n_alpha": np.array(self.a)}
        for i, m in enumerate(self.members):
            out.update({f"m{i}_{k}": v for k, v in m.items()})
        return out

    @classmethod
    def from_state(cls, s):
        n = int(s["n_models"])
        members = [{k.split("_", 1)[1]: np.asarray(s[k]) for k in s if k.startswith(f"m{i}_")} for i in range(n)]
        return cls(members, int(s["seq_len"]), int(s["n_alpha"]))


def exceed_forecast(mu: np.ndarray, sigma: np.ndarray, gamma: float) -> np.ndarray:
    """Predicted P(Y >= gamma | x) = sf(gamma; mu, sigma) (official predict_prob_exceedance)."""
    return norm.sf(gamma, loc=mu, scale=np.maximum(sigma, 1e-6))
