"""Score matching objectives with missing data (Givens, Liu & Reeve, ICML 2025), in torch.

Shapes: every function works on a stack of G independent problems (the settings of a job are run
side by side, which is exactly G separate runs: nothing is shared between problems).
  x    (G, B, d) data; missing entries may hold anything (they are never read)
  m    (G, B, d) bool, True where observed (the set Lambda of each row)
  mu   (G, d), P (G, d, d) symmetric: the Gaussian model q_theta(x) = exp(-(x-mu)^T P (x-mu) / 2)

Every loss returns a (G,) tensor: per problem, the mean over the batch of the per-row objective.

Methods (the paper's notation; s = s_theta, d_j s_j = its diagonal Jacobian):
  full      Hyvarinen (2005): 2 sum_j d_j s_j + ||s||^2 on complete rows (oracle upper bound).
  zeroed    App. D.2, eq. (23): zero-fill, score only the observed outputs.
  marg_iw   Alg. 1, Def. 4.4 / eq. (24): s_hat = grad log of the IW marginal, with self-normalised
            weights w_k ∝ q(x_Lambda, x'_k)/p'(x'_k), x'_k ~ p' = N(0, 16 I) on the missing coordinates;
            s_hat_j = sum_k w_k s(x_k)_j, d_j s_hat_j = sum_k w_k (d_j s(x_k)_j + s(x_k)_j^2) - s_hat_j^2.
            The weights are functions of theta and gradients flow through them.
  em        Uehara et al. (2020) fractional imputation: the same weights at the current theta,
            detached, then full-data score matching on the imputed rows.
  marg_var  Alg. 2: gradient of Cor. 4.9 through the pseudo-loss of Prop. A.20, with E', Cov' under a
            variational p'_phi(x_missing | x_observed) = N(mu_phi(x^0), sigma_phi^2 I).
  marg_var_diag  ours, not the paper's (an ablation of App. E.2's family): Marg-Var with one sigma per
            coordinate, p'_phi = N(mu_phi(x^0), diag(sigma_phi)^2).
"""
from __future__ import annotations

import math

import torch

LOG_2PI = math.log(2 * math.pi)


# ---------------------------------------------------------------------------------------------
# Gaussian score model
# ---------------------------------------------------------------------------------------------
def _bshape(t: torch.Tensor, ndim: int) -> torch.Tensor:
    """(G, ...) parameter -> broadcastable against a (G, *, d) tensor with `ndim` dims."""
    return t.reshape(t.shape[0], *([1] * (ndim - t.dim())), *t.shape[1:])


class Gaussian:
    """q_theta(x) = exp(-1/2 (x-mu)^T P (x-mu)); s_theta(x) = -P (x - mu); d_j s_theta(x)_j = -P_jj."""

    def __init__(self, mu: torch.Tensor, P: torch.Tensor):
        self.mu, self.P = mu, P

    def _diff(self, x):
        return x - _bshape(self.mu, x.dim())

    def log_q(self, x):
        diff = self._diff(x)
        return -0.5 * (self._pdiff(diff) * diff).sum(-1)

    def _pdiff(self, diff):
        # (G, ..., d) x (G, d, d) -> (G, ..., d)
        flat = diff.reshape(diff.shape[0], -1, diff.shape[-1])
        return torch.bmm(flat, self.P.transpose(1, 2)).reshape(diff.shape)

    def score(self, x):
        return -self._pdiff(self._diff(x))

    def diag_jac(self, x):
        """d_j s(x)_j, shape of x."""
        dg = torch.diagonal(self.P, dim1=-2, dim2=-1)
        return (-_bshape(dg, x.dim())).expand_as(x)

    def detach(self) -> "Gaussian":
        return Gaussian(self.mu.detach(), self.P.detach())


def cholesky_precision(L_raw: torch.Tensor, log_diag: torch.Tensor) -> torch.Tensor:
    """P = L L^T with L lower triangular, positive diagonal exp(log_diag) (Sec. 5.1 / App. E.3.1)."""
    L = torch.tril(L_raw, -1) + torch.diag_embed(torch.exp(log_diag))
    return L @ L.transpose(-1, -2)


def sym(A: torch.Tensor) -> torch.Tensor:
    return 0.5 * (A + A.transpose(-1, -2))


# ---------------------------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------------------------
def hyvarinen(model: Gaussian, x: torch.Tensor) -> torch.Tensor:
    s = model.score(x)
    return (2 * model.diag_jac(x) + s**2).sum(-1).mean(-1)


def zeroed(model: Gaussian, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    x0 = torch.where(m, x, torch.zeros_like(x))
    s = model.score(x0)
    per = (2 * model.diag_jac(x0) + s**2) * m
    return per.sum(-1).mean(-1)


def iw_draws(x, m, r: int, prop_std: float, gen=None):
    """r proposals per row: x_k = (x_Lambda, x'_k), x'_k ~ N(0, prop_std^2 I) on the missing coords.

    Returns x_k (G, B, r, d) and log p'(x'_k) (G, B, r) over the missing coordinates.
    """
    eps = torch.randn((*x.shape[:2], r, x.shape[-1]), generator=gen, dtype=x.dtype)
    xp = prop_std * eps
    mk = m.unsqueeze(2)
    xk = torch.where(mk, x.unsqueeze(2), xp)
    n_miss = (~m).sum(-1, keepdim=True).to(x.dtype)  # (G, B, 1)
    log_p = (-0.5 * eps**2 * (~mk)).sum(-1) - n_miss * (math.log(prop_std) + 0.5 * LOG_2PI)
    return xk, log_p


def iw_marginal_score(model: Gaussian, xk, log_p, weights_grad: bool = True):
    """Closed form of Def. 4.4 with self-normalised weights. Returns (s_hat, div_hat, w) over all d coords
    (only the observed ones are meaningful): s_hat_j and d_j s_hat_j of the IW marginal."""
    logw = model.log_q(xk) - log_p  # (G, B, r)
    if not weights_grad:
        logw = logw.detach()
    w = torch.softmax(logw, dim=-1).unsqueeze(-1)  # (G, B, r, 1)
    s = model.score(xk)
    dj = model.diag_jac(xk)
    s_hat = (w * s).sum(2)
    div_hat = (w * (dj + s**2)).sum(2) - s_hat**2
    return s_hat, div_hat, w.squeeze(-1)


def marg_iw(model: Gaussian, x, m, r: int = 10, prop_std: float = 4.0, gen=None, draws=None):
    xk, log_p = draws if draws is not None else iw_draws(x, m, r, prop_std, gen)
    s_hat, div_hat, _ = iw_marginal_score(model, xk, log_p, weights_grad=True)
    return ((2 * div_hat + s_hat**2) * m).sum(-1).mean(-1)


def em(model: Gaussian, x, m, r: int = 10, prop_std: float = 4.0, gen=None, draws=None):
    """Uehara et al. (2020): weights at the current theta, detached (E-step); full-data SM on the
    r imputed rows, weighted (M-step gradient)."""
    xk, log_p = draws if draws is not None else iw_draws(x, m, r, prop_std, gen)
    with torch.no_grad():
        w = torch.softmax(model.log_q(xk) - log_p, dim=-1)
    s = model.score(xk)
    per = (2 * model.diag_jac(xk) + s**2).sum(-1)  # (G, B, r): all d coordinates of the imputed row
    return (w * per).sum(-1).mean(-1)


# ---------------------------------------------------------------------------------------------
# variational approach
# ---------------------------------------------------------------------------------------------
def _cov(a, b):
    """Sample covariance over the draws axis 2: a (G,B,r), b (G,B,r,d) -> (G,B,d)."""
    ac = a - a.mean(2, keepdim=True)
    bc = b - b.mean(2, keepdim=True)
    return (ac.unsqueeze(-1) * bc).mean(2)


def var_pseudo_loss(model: Gaussian, xk, m):
    """Prop. A.20: a pseudo-loss whose theta-gradient is the Monte-Carlo estimate of Cor. 4.9,
    nabla_theta L_M = E[2 sum_{j in Lambda} Psi(s_j^2 + d_j s_j) - E'[s_j] Psi(s_j)],
    Psi(h) = E'[nabla h] + Cov'(nabla log q, h), with E', Cov' over the r draws xk (G,B,r,d) of p'.

    Returns (pseudo, L_M_hat): `pseudo` is only for its gradient; `L_M_hat` is the plug-in estimate
    of the marginal objective sum_{j in Lambda} -E'[s_j]^2 + 2 E'[s_j^2] + 2 E'[d_j s_j] (its value).
    """
    lq = model.log_q(xk)  # (G, B, r), carries theta
    s = model.score(xk)
    dj = model.diag_jac(xk)
    sd, djd = s.detach(), dj.detach()
    Es = sd.mean(2)
    t1 = -2 * Es * (s.mean(2) + _cov(lq, sd))
    t2 = 2 * ((s**2).mean(2) + _cov(lq, sd**2))
    t3 = 2 * (dj.mean(2) + _cov(lq, djd))
    mf = m.to(xk.dtype)
    pseudo = ((t1 + t2 + t3) * mf).sum(-1).mean(-1)
    value = ((-Es**2 + 2 * (sd**2).mean(2) + 2 * djd.mean(2)) * mf).sum(-1).mean(-1)
    return pseudo, value


class VarNet(torch.nn.Module):
    """p'_phi(x_-L | x_L) = N(mu'_phi(x^0)_-L, sigma_phi^2 I): G independent d->200->200->d tanh MLPs
    on the zero-filled input (App. E.2, after Burda et al. 2016) and one global sigma per problem.

    diag=True is our ablation, not the paper's family: one global sigma per coordinate and problem,
    N(mu'_phi(x^0)_-L, diag(sigma_phi)^2) (log_sigma of shape (G, d) instead of (G,)); with every
    coordinate's sigma equal it is the scalar family."""

    def __init__(self, G: int, d: int, hidden: int = 200, gen=None, diag: bool = False):
        super().__init__()
        dims = [d, hidden, hidden, d]
        self.W = torch.nn.ParameterList()
        self.b = torch.nn.ParameterList()
        for a, c in zip(dims[:-1], dims[1:]):
            bound = 1 / math.sqrt(a)  # torch.nn.Linear's default init
            self.W.append(torch.nn.Parameter((torch.rand(G, a, c, generator=gen) * 2 - 1) * bound))
            self.b.append(torch.nn.Parameter((torch.rand(G, 1, c, generator=gen) * 2 - 1) * bound))
        self.diag = bool(diag)
        self.log_sigma = torch.nn.Parameter(torch.zeros(G, d) if self.diag else torch.zeros(G))

    def mean(self, x0):
        h = x0
        for i, (W, b) in enumerate(zip(self.W, self.b)):
            h = torch.baddbmm(b, h, W)
            if i < len(self.W) - 1:
                h = torch.tanh(h)
        return h

    def sigma4(self):
        """sigma broadcastable against (G, B, r, d): (G, 1, 1, 1), or (G, 1, 1, d) with diag."""
        return torch.exp(self.log_sigma).reshape(self.log_sigma.shape[0], 1, 1, -1)

    def sample(self, x, m, r: int, gen=None):
        """(x_k, eps, sigma): r draws per row, observed coordinates kept; reparametrised in phi."""
        x0 = torch.where(m, x, torch.zeros_like(x))
        G, B, d = x.shape
        mu = self.mean(x0).unsqueeze(2)  # (G, B, 1, d)
        eps = torch.randn((G, B, r, d), generator=gen, dtype=x.dtype)
        sigma = self.sigma4()
        xk = torch.where(m.unsqueeze(2), x.unsqueeze(2), mu + sigma * eps)
        return xk, eps, sigma


def var_phi_objective(net: VarNet, model: Gaussian, x, m, objective: str = "kl", r: int = 1, gen=None):
    """J_KL or J_F of Sec. 4.3.2 (Bao et al. 2020), theta held fixed; (G,) per-problem means."""
    model = model.detach()
    xk, eps, sigma = net.sample(x, m, r, gen)
    miss = (~m).unsqueeze(2).to(x.dtype)
    if objective == "kl":
        # E[log p'_phi(x'|x_L) - log q_theta(x_L, x')]; log p'_phi = -|miss| log sigma - ||eps||^2/2 + c
        if net.diag:  # log p'_phi = -sum_{j missing} log sigma_j - ||eps||^2/2 + c
            log_p = -(miss * torch.log(sigma)).sum(-1) - 0.5 * (eps**2 * miss).sum(-1)
        else:
            log_p = -(miss.sum(-1)) * torch.log(sigma.reshape(-1, 1, 1)) - 0.5 * (eps**2 * miss).sum(-1)
        per = log_p - model.log_q(xk)
    elif objective == "fisher":
        grad_logp = -eps / sigma  # d/dx' log N(x'; mu, sigma^2 I) at x' = mu + sigma eps
        per = (((grad_logp - model.score(xk)) * miss) ** 2).sum(-1)
    else:
        raise ValueError(f"unknown variational objective {objective!r}")
    return per.mean((1, 2))


# ---------------------------------------------------------------------------------------------
# analytic references for a Gaussian model (used by tests and metrics)
# ---------------------------------------------------------------------------------------------
def analytic_marginal_score(mu, P, x, lam):
    """-(Sigma_{LL})^{-1}(x_L - mu_L) for one problem: mu (d,), P (d,d), x (B,d), lam index list."""
    Sigma = torch.linalg.inv(P)
    S = Sigma[lam][:, lam]
    return -(x[:, lam] - mu[lam]) @ torch.linalg.inv(S).T


def conditional(mu, P, x, lam):
    """Mean (B, |miss|) and covariance of X_-L | X_L = x_L under N(mu, P^-1)."""
    d = P.shape[0]
    miss = [j for j in range(d) if j not in set(lam)]
    Pmm = P[miss][:, miss]
    Pmo = P[miss][:, lam]
    C = torch.linalg.inv(Pmm)
    mean = mu[miss] - (x[:, lam] - mu[lam]) @ (C @ Pmo).T
    return mean, C, miss


def fisher_divergence(mu_hat, P_hat, mu, P, x):
    """E||s(x) - s_hat(x)||^2 on complete rows x (B, d), single problem."""
    s = -(x - mu) @ P.T
    sh = -(x - mu_hat) @ P_hat.T
    return ((s - sh) ** 2).sum(-1).mean()
