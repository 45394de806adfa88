"""Truncated marginal score matching (Sec. 3.2 "Truncated score matching", Sec. 4.1.1 eq. (5),
Cor. 4.11 eq. (11), App. E.1.2 eq. (25)) for the Gaussian model, in torch.

Domains. Every problem g of a stack has a truncation domain X, one of
  box       {x : x_j > lo_j for the j with lo_j > -inf}      (Sec. 5.1.1: the first 3 coordinates above
                                                             their 10% quantile)
  halfspace {x : a^T x <= b}                                (Sec. 5.2.1: a random hyperplane with 20% of
                                                             the mass outside)
  none      lo = -inf, a = 0, b = +inf                       (g = g_cap: the untruncated loss times g_cap)
stored as lo (G, d), a (G, d), b (G,). A problem has a box or a halfspace, not both.

Weight functions. g is the distance to the boundary of the (marginal) domain, as in Liu, Kanamori &
Williams (2022), the same value for every coordinate, capped: g_lam(x_lam) = min(dist(x_lam, dX_lam), g_cap)
(the cap keeps g finite where the marginal domain has no boundary, and makes the untruncated problems of a
stack cost exactly g_cap times their usual loss; g_cap = 1 by default: our choice). The marginal domain X_lam
is the projection of X on the observed coordinates lam:
  box:       X_lam = {x_j > lo_j, j in lam}: dist = min_{j in lam, lo_j > -inf} (x_j - lo_j)
  halfspace: if a missing coordinate has a_k != 0 the projection is all of R^|lam| (no boundary, g = g_cap);
             otherwise dist = (b - a^T x) / ||a||.
d_j g_j is the derivative of that distance (0 where the cap is active).

Marginal scores on a truncated domain. The marginal of the truncated model is
int_{x' : (x_lam, x') in X} q_theta(x_lam, x') dx'. For a box the set of x' does not depend on x_lam, so the
marginal score and its divergence are those of Def. 4.4 / Lemma 4.8 with the draws restricted to X. For a
halfspace it does; we remove that dependence by the change of variables x'_k0 = (b - t - a_lam^T x_lam
- sum_{k != k0} a_k x'_k) / a_k0 (k0: the missing coordinate with the largest |a_k|, t = b - a^T x > 0), after
which the integration domain is a product (t > 0) and Lemma 4.8 holds with the directional derivatives
v_j = e_j - (a_j / a_k0) e_k0 in place of e_j: s~_j = v_j^T s, d_j s~_j = v_j^T H v_j (H = -P). For a box, for no
truncation and for complete rows v_j = e_j, and everything reduces to the untruncated formulas.

Draws. Marg-IW / EM draw x' from p' = N(0, 16 I) restricted to the domain (given x_lam); Marg-Var's p'_phi is
N(mu_phi(x^0), sigma_phi^2 I) restricted to the domain (both reparametrised through the inverse normal cdf).
The official code could not be read here: the weight function, the cap and these restricted families are our
reading of Sec. 3.2 / 4.1.1 / App. E.1.2, checked against analytic truncated-Gaussian marginals in the tests.
"""
from __future__ import annotations

import math

import torch

from . import sm


# ---------------------------------------------------------------------------------------------
# domains
# ---------------------------------------------------------------------------------------------
class Domain:
    """lo (G, d) (-inf: no bound), a (G, d), b (G,) (+inf: no halfspace)."""

    def __init__(self, lo: torch.Tensor, a: torch.Tensor, b: torch.Tensor):
        self.lo, self.a, self.b = lo, a, b

    @classmethod
    def none(cls, G: int, d: int, dtype=torch.float32) -> "Domain":
        return cls(torch.full((G, d), -math.inf, dtype=dtype), torch.zeros(G, d, dtype=dtype),
                   torch.full((G,), math.inf, dtype=dtype))

    @property
    def is_box(self):  # (G,)
        return torch.isfinite(self.lo).any(-1)

    @property
    def is_half(self):  # (G,)
        return torch.isfinite(self.b) & (self.a.abs().sum(-1) > 0)

    def active(self) -> bool:
        return bool(self.is_box.any() or self.is_half.any())

    def inside(self, x: torch.Tensor) -> torch.Tensor:
        """x (G, ..., d) -> bool (G, ...): in the closed domain."""
        lo = sm._bshape(self.lo, x.dim())
        ok = (x >= lo).all(-1)
        a = sm._bshape(self.a, x.dim())
        b = self.b.reshape(-1, *([1] * (x.dim() - 2)))
        lin = (x * a).sum(-1)
        return ok & torch.where(torch.isfinite(b), lin <= b, torch.ones_like(ok))


def weight_fn(dom: Domain, x: torch.Tensor, m: torch.Tensor, cap: float = 1.0):
    """g_lam(x_lam) and d_j g_lam(x_lam) (both (G, ..., d)) for the marginal domain of the observed set m
    (m all True: the full-data g). x may hold anything where m is False (never read)."""
    nd = x.dim()
    lo = sm._bshape(dom.lo, nd).expand_as(x)
    # box: distance to the nearest observed bound
    fin = torch.isfinite(lo)
    gap = torch.where(m & fin, x - torch.where(fin, lo, torch.zeros_like(lo)), torch.full_like(x, math.inf))
    dbox, jbox = gap.min(-1)  # (G, ...)
    # halfspace: a boundary only if no missing coordinate has a_k != 0
    a = sm._bshape(dom.a, nd).expand_as(x)
    b = dom.b.reshape(-1, *([1] * (nd - 2))).expand_as(dbox)
    na = torch.linalg.vector_norm(a, dim=-1).clamp_min(1e-30)
    free = ((~m) & (a != 0)).any(-1)
    lin = (torch.where(m, x, torch.zeros_like(x)) * a).sum(-1)
    has_half = torch.isfinite(b) & ~free & (a.abs().sum(-1) > 0)
    dhalf = torch.where(has_half, (torch.where(torch.isfinite(b), b, torch.zeros_like(b)) - lin) / na,
                        torch.full_like(dbox, math.inf))
    dist = torch.minimum(dbox, dhalf)
    capped = dist >= cap
    g = torch.where(capped, torch.full_like(dist, cap), dist).clamp_min(0.0)
    grad_box = torch.nn.functional.one_hot(jbox, x.shape[-1]).to(x.dtype)
    grad_half = -a / na.unsqueeze(-1)
    use_box = (dbox <= dhalf).unsqueeze(-1)
    dg = torch.where(use_box, grad_box, grad_half)
    dg = torch.where(capped.unsqueeze(-1), torch.zeros_like(dg), dg) * m
    return g.unsqueeze(-1).expand_as(x) * m, dg


def tilt(dom: Domain, m: torch.Tensor):
    """The change of variables of a halfspace: per row, k0 (G, B) (the missing coordinate with the largest
    |a_k|) and c (G, B, d) with v_j = e_j + c_j e_k0 for observed j (c = 0: no tilt)."""
    a = sm._bshape(dom.a, m.dim()).expand(m.shape)
    am = torch.where(~m, a.abs(), torch.zeros_like(a))
    best, k0 = am.max(-1)
    half = dom.is_half.reshape(-1, *([1] * (m.dim() - 2))).expand_as(best)
    on = half & (best > 0)
    ak0 = torch.gather(a, -1, k0.unsqueeze(-1))
    c = torch.where(on.unsqueeze(-1) & m, -a / torch.where(on.unsqueeze(-1), ak0, torch.ones_like(ak0)),
                    torch.zeros_like(a))
    return k0, c


def _dir_score(s, k0, c):
    """s~_j = s_j + c_j s_k0; s (G, B, r, d), k0 (G, B), c (G, B, d)."""
    sk0 = torch.gather(s, -1, k0[:, :, None, None].expand(*s.shape[:-1], 1))
    return s + c.unsqueeze(2) * sk0


def _dir_hess(P, k0, c):
    """v_j^T H v_j with H = -P: -(P_jj + 2 c_j P_j,k0 + c_j^2 P_k0,k0); (G, B, d)."""
    G, B = k0.shape
    dg = torch.diagonal(P, dim1=-2, dim2=-1)  # (G, d)
    col = torch.gather(P, 2, k0.unsqueeze(1).expand(G, P.shape[1], B)).transpose(1, 2)  # (G, B, d): P[j, k0]
    pkk = torch.gather(dg, 1, k0)  # (G, B)
    return -(dg.unsqueeze(1) + 2 * c * col + c**2 * pkk.unsqueeze(-1))


# ---------------------------------------------------------------------------------------------
# truncated losses (G,) per problem, for the Gaussian model
# ---------------------------------------------------------------------------------------------
def _tm(g, dg, s, div, m):
    """Per-row L_TM summand of eq. (5): sum_{j in lam} g_j (s_j^2 + 2 d_j s_j) + 2 d_j g_j s_j."""
    return ((g * (s**2 + 2 * div) + 2 * dg * s) * m).sum(-1)


def hyvarinen_t(model: sm.Gaussian, x, dom: Domain, cap: float = 1.0):
    m = torch.ones_like(x, dtype=torch.bool)
    g, dg = weight_fn(dom, x, m, cap)
    return _tm(g, dg, model.score(x), model.diag_jac(x), m).mean(-1)


def zeroed_t(model: sm.Gaussian, x, m, dom: Domain, cap: float = 1.0):
    """Zeroed SM with the truncated objective: s_theta(x^0)_lam in place of the marginal score, g of the
    marginal domain (the naive marginalisation ignores the truncation of the missing coordinates)."""
    x0 = torch.where(m, x, torch.zeros_like(x))
    g, dg = weight_fn(dom, x0, m, cap)
    return _tm(g, dg, model.score(x0), model.diag_jac(x0), m).mean(-1)


def iw_log_weights(model: sm.Gaussian, xk, log_p, dom: Domain):
    """log q(x_k) - log p'(x'_k), pushed to -1e30 outside X (the draws of iw_draws_t are all inside: this
    only guards draws made otherwise)."""
    logw = model.log_q(xk) - log_p
    return torch.where(dom.inside(xk), logw, logw - 1e30)


def iw_draws_t(x, m, dom: Domain, r: int, prop_std: float, gen=None):
    """r proposals per row from p' = N(0, prop_std^2 I) on the missing coordinates restricted to the domain
    (every draw lands in X; an unrestricted p' with the indicator in the weights wastes many draws and made
    Marg-IW diverge on the truncated Sec. 5.1.1 problem in our runs). Returns x_k (G, B, r, d) and
    log p'(x'_k | x_lam) (G, B, r) (its normaliser cancels in the self-normalised weights)."""
    G = x.shape[0]
    xk, logZ = truncated_sample(torch.zeros_like(x), torch.full((G,), float(prop_std), dtype=x.dtype), x, m, dom, r, gen)
    miss = (~m).unsqueeze(2).to(x.dtype)
    log_n = (-0.5 * (xk / prop_std) ** 2 * miss).sum(-1) - miss.sum(-1) * (math.log(prop_std) + 0.5 * sm.LOG_2PI)
    return xk, log_n - logZ.unsqueeze(-1)


def iw_marginal_score_t(model: sm.Gaussian, xk, log_p, m, dom: Domain, weights_grad=True):
    """Eq. (25)'s s_hat_j and d_j s_hat_j under truncation: the self-normalised IW estimates of
    d_j M / M and d_j^2 M / M - s_hat_j^2 for the marginal M(x_lam) = int_X q dx', where (after the halfspace
    change of variables) d_j acts on q only, as in eq. (25): per draw s~_j = v_j^T s, h~_j = v_j^T H v_j,
    s_hat_j = sum_k w_k s~_j, d_j s_hat_j = sum_k w_k (h~_j + s~_j^2) - s_hat_j^2, w_k ∝ q(x_k) / p'(x'_k)."""
    logw = iw_log_weights(model, xk, log_p, dom)
    if not weights_grad:
        logw = logw.detach()
    w = torch.softmax(logw, dim=-1).unsqueeze(-1)
    k0, c = tilt(dom, m)
    s = _dir_score(model.score(xk), k0, c)
    h = _dir_hess(model.P, k0, c).unsqueeze(2)
    s_hat = (w * s).sum(2)
    div_hat = (w * (h + s**2)).sum(2) - s_hat**2
    return s_hat, div_hat, w.squeeze(-1)


def marg_iw_t(model, x, m, dom: Domain, r=10, prop_std=4.0, gen=None, draws=None, cap: float = 1.0):
    xk, log_p = draws if draws is not None else iw_draws_t(x, m, dom, r, prop_std, gen)
    s_hat, div_hat, _ = iw_marginal_score_t(model, xk, log_p, m, dom)
    x0 = torch.where(m, x, torch.zeros_like(x))
    g, dg = weight_fn(dom, x0, m, cap)
    return _tm(g, dg, s_hat, div_hat, m).mean(-1)


def em_t(model, x, m, dom: Domain, r=10, prop_std=4.0, gen=None, draws=None, cap: float = 1.0):
    """Uehara et al. (2020) with truncated full-data SM on the imputed rows: weights at the current theta
    (restricted to X), detached; the full-data g of each imputed row."""
    xk, log_p = draws if draws is not None else iw_draws_t(x, m, dom, r, prop_std, gen)
    with torch.no_grad():
        w = torch.softmax(iw_log_weights(model, xk, log_p, dom), dim=-1)
    full = torch.ones_like(xk, dtype=torch.bool)
    g, dg = weight_fn(dom, xk, full, cap)
    per = _tm(g, dg, model.score(xk), model.diag_jac(xk), full)  # (G, B, r)
    return (w * per).sum(-1).mean(-1)


def var_pseudo_loss_t(model: sm.Gaussian, xk, m, dom: Domain, cap: float = 1.0):
    """Cor. 4.11 through the Prop. A.20 pseudo-loss: gradient
    E[2 sum_{j in lam} g_j {Psi(s~_j^2 + d_j s~_j) - E'[s~_j] Psi(s~_j)} + d_j g_j Psi(s~_j)], with E', Cov' over
    the r draws xk of the (truncated) variational conditional. Returns (pseudo, L_TM value estimate)."""
    k0, c = tilt(dom, m)
    lq = model.log_q(xk)
    s = _dir_score(model.score(xk), k0, c)
    dj = _dir_hess(model.P, k0, c).unsqueeze(2).expand_as(s)
    sd, djd = s.detach(), dj.detach()
    Es = sd.mean(2)
    psi_s = s.mean(2) + sm._cov(lq, sd)
    t1 = -2 * Es * psi_s
    t2 = 2 * ((s**2).mean(2) + sm._cov(lq, sd**2))
    t3 = 2 * (dj.mean(2) + sm._cov(lq, djd))
    x0 = torch.where(m, xk[:, :, 0], torch.zeros_like(xk[:, :, 0]))
    g, dg = weight_fn(dom, x0, m, cap)
    mf = m.to(xk.dtype)
    pseudo = ((g * (t1 + t2 + t3) + 2 * dg * psi_s) * mf).sum(-1).mean(-1)
    value = ((g * (-Es**2 + 2 * (sd**2).mean(2) + 2 * djd.mean(2)) + 2 * dg * Es) * mf).sum(-1).mean(-1)
    return pseudo, value


# ---------------------------------------------------------------------------------------------
# the truncated variational family: N(mu_phi, sigma^2 I) restricted to the domain, reparametrised
# ---------------------------------------------------------------------------------------------
def truncated_sample(mu, sigma, x, m, dom: Domain, r: int, gen=None):
    """r draws of x' ~ N(mu, sigma^2 I) on the missing coordinates restricted to {(x_lam, x') in X}.

    mu (G, B, d), sigma (G,) or, per coordinate (the marg_var_diag ablation), (G, d); x (G, B, d). With
    x' = mu + sigma * z, z ~ N(0, I): box: each bounded missing coordinate is an independent lower-truncated
    normal (inverse-cdf reparametrisation); halfspace: in z the constraint is w^T z <= c with
    w = sigma * a_miss, so the component of z along n = w / ||w|| is an upper-truncated normal and the
    orthogonal ones are free (for a scalar sigma, n = a_miss / ||a_miss||). Returns x_k (G, B, r, d) and
    log Z (G, B) (the log normaliser: log p' = log N - log Z)."""
    G, B, d = x.shape
    mu4 = mu.unsqueeze(2)
    sig = sigma.reshape(G, 1, 1, -1)
    eps = torch.randn((G, B, r, d), generator=gen, dtype=x.dtype)
    u = torch.rand((G, B, r, d), generator=gen, dtype=x.dtype).clamp(1e-7, 1 - 1e-7)
    miss = (~m).unsqueeze(2)
    # box: z = -ndtri(u * ndtr(-alpha)) > alpha, alpha = (lo - mu) / sigma
    lo = dom.lo.reshape(G, 1, 1, d)
    bounded = miss & torch.isfinite(lo)
    # (in float64, the bound clamped to 30 sd: the inverse cdf stays finite far in the tails)
    lo_f = torch.where(torch.isfinite(lo), lo, torch.zeros_like(lo))  # no inf in the graph (NaN gradients)
    alpha = torch.where(bounded, (lo_f - mu4) / sig, torch.zeros_like(eps)).clamp(-30.0, 30.0)
    a64 = alpha.double()
    z_box = (-torch.special.ndtri(u.double() * torch.special.ndtr(-a64))).to(x.dtype)
    z = torch.where(bounded, torch.maximum(z_box, alpha), eps)
    logZ = (torch.special.log_ndtr(-a64).to(x.dtype) * bounded).sum(-1)[:, :, 0]
    # halfspace: a_miss^T x' <= b - a_lam^T x_lam
    a = dom.a.reshape(G, 1, d).expand(G, B, d)
    am = torch.where(~m, a, torch.zeros_like(a))
    w = am * sigma.reshape(G, 1, -1)  # the normal in z-space
    na = torch.linalg.vector_norm(w, dim=-1)  # (G, B)
    half = dom.is_half.reshape(G, 1) & (na > 0)
    n = w / na.clamp_min(1e-30).unsqueeze(-1)
    bb = torch.where(torch.isfinite(dom.b), dom.b, torch.zeros_like(dom.b)).reshape(G, 1)
    beta = (bb - (torch.where(m, x, torch.zeros_like(x)) * a).sum(-1) - (am * mu).sum(-1)) / na.clamp_min(1e-30)
    beta = torch.where(half, beta, torch.zeros_like(beta)).clamp(-30.0, 30.0)
    b64 = beta.double().unsqueeze(-1)
    zt = torch.minimum(torch.special.ndtri(u[..., 0].double() * torch.special.ndtr(b64)).to(x.dtype),
                       beta.unsqueeze(-1))  # (G, B, r), <= beta
    n4 = n.unsqueeze(2)
    proj = (z * n4).sum(-1, keepdim=True)
    z_half = z - proj * n4 + zt.unsqueeze(-1) * n4
    z = torch.where(half[:, :, None, None], z_half, z)
    logZ = logZ + torch.where(half, torch.special.log_ndtr(beta.double()).to(x.dtype), torch.zeros_like(beta))
    xk = torch.where(miss, mu4 + sig * z, x.unsqueeze(2))
    return xk, logZ


def var_phi_objective_t(net: sm.VarNet, model: sm.Gaussian, x, m, dom: Domain, objective="kl", r=1, gen=None):
    """J_KL / J_F (Prop. 4.12) for the truncated variational family, theta fixed."""
    model = model.detach()
    x0 = torch.where(m, x, torch.zeros_like(x))
    mu = net.mean(x0)
    sigma = torch.exp(net.log_sigma)
    xk, logZ = truncated_sample(mu, sigma, x, m, dom, r, gen)
    miss = (~m).unsqueeze(2).to(x.dtype)
    diff = (xk - mu.unsqueeze(2)) * miss
    sig = net.sigma4()
    if objective == "kl":
        log_p = (-(diff / sig) ** 2 / 2).sum(-1) - (miss * torch.log(sig)).sum(-1) - logZ.unsqueeze(-1)
        per = log_p - model.log_q(xk)
    elif objective == "fisher":
        per = (((-diff / sig**2 - model.score(xk)) * miss) ** 2).sum(-1)
    else:
        raise ValueError(f"unknown variational objective {objective!r}")
    return per.mean((1, 2))


def var_sample_t(net: sm.VarNet, x, m, dom: Domain, r: int, gen=None):
    x0 = torch.where(m, x, torch.zeros_like(x))
    xk, _ = truncated_sample(net.mean(x0), torch.exp(net.log_sigma), x, m, dom, r, gen)
    return xk
