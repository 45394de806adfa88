"""Faithfulness tests of the neuralop_width study: data generators, NTK layers, the spectral layer against
`neuralop`, the GD step and the Hessian probe. Each test checks a property a wrong implementation breaks.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icml25.studies.neuralop_width import data as D
from icml25.studies.neuralop_width import hessian as H
from icml25.studies.neuralop_width import models as M
from icml25.studies.neuralop_width import optim as O

torch.set_num_threads(1)


# ---- data ---------------------------------------------------------------------------------------

def test_antiderivative_is_cumulative_trapezoid_of_a_grf_with_rbf_covariance():
    from scipy.integrate import cumulative_trapezoid

    rng = np.random.default_rng(0)
    d = D.antiderivative(3000, 50, 0.2, rng)
    x = d["y"][:, 0].astype(np.float64)
    u, s = d["u"].astype(np.float64), d["s"].astype(np.float64)
    np.testing.assert_allclose(s, cumulative_trapezoid(u, x, axis=1, initial=0.0), atol=1e-5)
    assert np.all(s[:, 0] == 0)
    # the input field has the RBF covariance exp(-|x-x'|^2 / (2 * 0.2^2))
    emp = np.cov(u[:, [0, 5, 10, 25]].T)
    pts = x[[0, 5, 10, 25]]
    want = np.exp(-0.5 * ((pts[:, None] - pts[None, :]) / 0.2) ** 2)
    np.testing.assert_allclose(emp, want, atol=0.08)


def test_antiderivative_converges_to_exact_integral_for_smooth_input():
    from scipy.integrate import cumulative_trapezoid

    for n, tol in ((50, 1e-3), (200, 1e-4)):
        x = np.linspace(0, 1, n)
        s = cumulative_trapezoid(np.cos(3 * x)[None], x, axis=1, initial=0.0)[0]
        assert np.max(np.abs(s - np.sin(3 * x) / 3)) < tol


def test_diffusion_reaction_matches_exact_linear_solution_and_boundaries():
    # with k = 0 and u = sin(pi x): s = (1 - exp(-D pi^2 t)) sin(pi x) / (D pi^2)
    Dc = 0.01
    x = np.linspace(0, 1, 101)
    u = np.sin(np.pi * x)[None]
    xs, t, s = D.solve_diffusion_reaction(u, nt=201, D=Dc, k=0.0)
    exact = (1 - np.exp(-Dc * np.pi**2 * t))[:, None] * np.sin(np.pi * xs)[None] / (Dc * np.pi**2)
    assert np.max(np.abs(s[0] - exact)) < 2e-3 * np.abs(exact).max()
    # the reaction term matters with k = 0.01 and raises s (s^2 >= 0); boundary and initial values are zero
    _, _, s2 = D.solve_diffusion_reaction(u, nt=201, D=Dc, k=0.01)
    assert np.all(s2[0, -1] >= s[0, -1] - 1e-12) and np.max(s2[0, -1] - s[0, -1]) > 1e-4
    assert np.all(s2[:, :, 0] == 0) and np.all(s2[:, :, -1] == 0) and np.all(s2[:, 0] == 0)


def test_burgers_conserves_mean_loses_energy_and_is_not_trivial():
    rng = np.random.default_rng(1)
    u0 = D.grf_periodic(6, 128, rng)
    prev = (u0**2).mean(1)
    u = u0
    for _ in range(4):
        u = D.solve_burgers(u, nu=0.01, T=0.25)
        np.testing.assert_allclose(u.mean(1), u0.mean(1), atol=1e-10)
        energy = (u**2).mean(1)
        assert np.all(energy <= prev + 1e-12)
        prev = energy
    # at nu = 0.01 the map u0 -> u(1) changes the field substantially (a non-trivial target)
    assert np.linalg.norm(u - u0) / np.linalg.norm(u0 - u0.mean(1, keepdims=True)) > 0.3


def test_burgers_reduces_to_heat_equation_at_high_viscosity():
    rng = np.random.default_rng(2)
    u0 = 1e-3 * D.grf_periodic(3, 64, rng)  # small amplitude: the nonlinearity is negligible
    nu, T = 0.5, 0.05
    k = 2 * np.pi * np.fft.rfftfreq(64, d=1 / 64)
    heat = np.fft.irfft(np.fft.rfft(u0, axis=1) * np.exp(-nu * k**2 * T), n=64, axis=1)
    got = D.solve_burgers(u0, nu=nu, T=T)
    assert np.linalg.norm(got - heat) / np.linalg.norm(heat) < 1e-3
    # and at low viscosity and O(1) amplitude it is not the heat equation
    big = D.grf_periodic(3, 64, rng)
    far = D.solve_burgers(big, nu=0.01, T=0.5)
    heat_big = np.fft.irfft(np.fft.rfft(big, axis=1) * np.exp(-0.01 * k**2 * 0.5), n=64, axis=1)
    assert np.linalg.norm(far - heat_big) / np.linalg.norm(heat_big) > 0.05


def test_burgers_resolution_converges():
    rng = np.random.default_rng(3)
    u0 = D.grf_periodic(2, 256, rng)
    fine = D.solve_burgers(u0, 0.01, 0.3)
    coarse = D.solve_burgers(u0[:, ::2], 0.01, 0.3)
    assert np.linalg.norm(coarse - fine[:, ::2]) / np.linalg.norm(fine) < 1e-3


# ---- NTK parameterisation -------------------------------------------------------------------------

def _readout_variance(features_fn, width, draws, readouts=2000, beta=0.1):
    vals = []
    for d in range(draws):
        torch.manual_seed(1000 + d)
        feats = features_fn(width)  # (..., width), one hidden draw
        torch.manual_seed(5000 + d)
        out = M.NTKLinear(width, readouts, beta=beta)(feats)  # `readouts` independent readout draws
        vals.append(out.reshape(-1, readouts))
    return float(torch.cat(vals).var())


@torch.no_grad()
def test_ntk_deeponet_branch_output_variance_is_width_independent():
    x = torch.randn(1, 100)

    def feats(m):
        return M.NTKMLP(100, m, 1, depth=2, act="tanh", beta=0.1).features(x)

    ref = _readout_variance(feats, 4096, draws=3)
    for m, draws in ((16, 300), (64, 100), (256, 30), (1024, 8)):
        v = _readout_variance(feats, m, draws)
        assert abs(v / ref - 1) < 0.10, (m, v, ref)


@torch.no_grad()
def test_standard_parameterisation_would_fail_the_width_check():
    # the same check on a layer without 1/sqrt(fan_in): variance grows with width (so the test can fail)
    x = torch.randn(1, 100)
    var = []
    for m in (16, 1024):
        torch.manual_seed(0)
        W1, W2 = torch.randn(m, 100), torch.randn(m, m)
        h = torch.tanh(torch.tanh(x @ W1.T / 10) @ W2.T)  # hidden layer without the 1/sqrt(m)
        var.append(float((h**2).sum() / 1))  # readout v ~ N(0, 1) without 1/sqrt(m): Var = |h|^2
    assert var[1] / var[0] > 10


@torch.no_grad()
def test_ntk_fno_output_variance_is_width_independent():
    u = torch.as_tensor(D.grf_periodic(1, 64, np.random.default_rng(0)), dtype=torch.float32)

    def feats(m):
        return _fno_features(M.FNO1d(m, modes=16, layers=2), u)

    # the per-draw second moment is heavy-tailed at small width: many draws there, fewer when wide
    ref = _readout_variance(feats, 128, draws=60, readouts=200)
    for m, draws in ((16, 600), (32, 250)):
        v = _readout_variance(feats, m, draws, readouts=500)
        assert abs(v / ref - 1) < 0.10, (m, v, ref)


def _fno_features(net, u):
    n, grid = u.shape
    x = torch.arange(grid, dtype=u.dtype) / grid
    v = net.lift(torch.stack([u, x.expand(n, grid)], dim=-1))
    for W, Kc in zip(net.pointwise, net.spectral):
        v = net.act(W(v) + Kc(v.transpose(1, 2)).transpose(1, 2))
    return v


def test_fno_features_helper_matches_forward():
    torch.manual_seed(0)
    net = M.FNO1d(8, modes=6, layers=2)
    u = torch.randn(2, 32)
    np.testing.assert_allclose(net.readout(_fno_features(net, u)).squeeze(-1).detach(), net(u).detach(), atol=1e-6)


# ---- spectral convolution vs neuralop -------------------------------------------------------------

@pytest.mark.parametrize("modes,grid", [(6, 40), (16, 64), (16, 31)])
def test_spectral_conv_equals_neuralop_given_same_weights(modes, grid):
    pytest.importorskip("neuralop")
    from neuralop.layers.spectral_convolution import SpectralConv

    torch.manual_seed(0)
    ref = SpectralConv(6, 5, n_modes=(2 * modes - 1,), bias=True)
    with torch.no_grad():
        ref.bias.normal_()
    w = ref.weight.to_tensor() if hasattr(ref.weight, "to_tensor") else ref.weight
    w = torch.as_tensor(w).detach()
    assert w.shape == (6, 5, modes)
    ours = M.SpectralConv1d(6, 5, modes, scale=1.0, bias=True)
    with torch.no_grad():
        ours.weight.copy_(torch.view_as_real(w))
        ours.bias.copy_(ref.bias.detach().reshape(5, 1))
    x = torch.randn(3, 6, grid)
    np.testing.assert_allclose(ours(x).detach().numpy(), ref(x).detach().numpy(), atol=1e-5)
    # the NTK layer (scale 1/sqrt(in), no bias) is neuralop's layer with weights divided by sqrt(in)
    ntk = M.SpectralConv1d(6, 5, modes)
    with torch.no_grad():
        ntk.weight.copy_(torch.view_as_real(w))
        ref.weight.tensor.data.div_(math.sqrt(6)) if hasattr(ref.weight, "tensor") else ref.weight.data.div_(math.sqrt(6))
    np.testing.assert_allclose(ntk(x).detach().numpy(), (ref(x) - ref.bias).detach().numpy(), atol=1e-5)


# ---- gradient descent ---------------------------------------------------------------------------

def test_gd_step_is_exactly_theta_minus_eta_grad():
    rng = np.random.default_rng(0)
    data = D.antiderivative(6, 12, 0.2, rng)
    torch.manual_seed(0)
    net = M.DeepONet(12, 1, 16, 4, depth=2)
    thetas = [[p.detach().clone() for p in net.parameters()]]
    net.unused = torch.nn.Parameter(torch.ones(3))  # gets no gradient: must not move (no weight decay)
    lr = 0.3
    target = torch.as_tensor(data["s"])
    for _ in range(2):  # the expected trajectory, computed independently
        net_copy = M.DeepONet(12, 1, 16, 4, depth=2)
        with torch.no_grad():
            for p, q in zip(net_copy.parameters(), thetas[-1]):
                p.copy_(q)
        loss = ((net_copy(torch.as_tensor(data["u"]), torch.as_tensor(data["y"])) - target) ** 2).mean()
        grads = torch.autograd.grad(loss, list(net_copy.parameters()))
        thetas.append([q - lr * g for q, g in zip(thetas[-1], grads)])
    res = O.train(net, "don", data, "gd", lr, steps=2, threshold=0.0, log_every=1)
    params = [p for n, p in net.named_parameters() if n != "unused"]
    assert len(params) == len(thetas[-1])
    for p, want in zip(params, thetas[-1]):
        np.testing.assert_allclose(p.detach().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert torch.equal(net.unused.detach(), torch.ones(3))
    assert res["curve"][0][0] == 0 and res["steps_to_threshold"] == 2 and res["reached"] == 0.0


def test_training_loss_is_the_papers_operator_loss():
    pred = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    target = torch.tensor([[1.0, 1.0, 1.0], [1.0, 2.0, 2.0]])
    # (1/n) sum_i (1/q) sum_j (G - y)^2 = ((0 + 1 + 4)/3 + (1 + 4 + 4)/3) / 2
    assert float(O.operator_loss(pred, target)) == pytest.approx((5 / 3 + 9 / 3) / 2)


# ---- Hessian probe ------------------------------------------------------------------------------

def test_hessian_probe_recovers_top_eigenvalue_of_a_quadratic():
    torch.manual_seed(0)
    q, _ = torch.linalg.qr(torch.randn(12, 12, dtype=torch.float64))
    lam = torch.tensor([3.0, -7.0, 2.0, 1.0, 0.5, -0.2, 0.1, 0, 0, 0, 0.3, 6.0], dtype=torch.float64)
    A = (q * lam) @ q.T
    theta = torch.nn.Parameter(torch.randn(12, dtype=torch.float64))
    f = 0.5 * theta @ A @ theta
    got = H.block_norms(f, {"all": [theta]}, iters=500, tol=1e-10)["full"]
    assert got == pytest.approx(7.0, rel=1e-4)  # the top |eigenvalue| (a negative one here)


def test_hessian_blocks_and_cross_block_of_a_bilinear_form():
    torch.manual_seed(1)
    C = torch.randn(5, 4, dtype=torch.float64)
    Ax = torch.randn(5, 5, dtype=torch.float64)
    Ax = Ax @ Ax.T
    x = torch.nn.Parameter(torch.randn(5, dtype=torch.float64))
    y = torch.nn.Parameter(torch.randn(4, dtype=torch.float64))
    f = x @ C @ y + 0.5 * x @ Ax @ x
    res = H.block_norms(f, {"a": [x], "b": [y]}, iters=1000, tol=1e-12, cross=("a", "b"))
    assert res["a"] == pytest.approx(float(torch.linalg.eigvalsh(Ax).max()), rel=1e-5)
    assert res["b"] == 0.0
    assert res["cross"] == pytest.approx(float(torch.linalg.svdvals(C)[0]), rel=1e-5)
    full = torch.zeros(9, 9, dtype=torch.float64)
    full[:5, :5], full[:5, 5:], full[5:, :5] = Ax, C, C.T
    assert res["full"] == pytest.approx(float(torch.linalg.eigvalsh(full).abs().max()), rel=1e-5)


def test_deeponet_block_hessians_shrink_with_width_but_cross_does_not():
    # the paper's "different reasons": branch/trunk blocks O(1/sqrt(m)), the cross block O(1)
    rng = np.random.default_rng(0)
    d = D.antiderivative(2, 20, 0.2, rng)
    u, y = torch.as_tensor(d["u"]), torch.as_tensor(d["y"])
    out = {}
    for m in (16, 256):
        acc = []
        for s in range(3):
            torch.manual_seed(s)
            net = M.DeepONet(20, 1, m, 8)
            acc.append(H.block_norms(net(u[:1], y[7:8])[0, 0], net.blocks(), 40, 1e-4, s, cross=("branch", "trunk")))
        out[m] = {k: np.mean([a[k] for a in acc]) for k in acc[0]}
    ratio = {k: out[256][k] / out[16][k] for k in out[16]}
    assert ratio["branch"] < 0.45 and ratio["trunk"] < 0.45  # 1/sqrt(16) = 0.25 asymptotically
    assert ratio["cross"] > ratio["branch"] and ratio["cross"] > 0.3
