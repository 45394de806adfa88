"""Properties only a correct DEAL has: the outer step is the weighted-Tikhonov solve, the operator is
symmetric positive definite, W is a unit-norm operator with a true adjoint, mask = 1 converges in one
step, the implicit gradient is the fixed point's gradient, and the inference matches deepinv's port."""
from __future__ import annotations

import math

import pytest
import torch

from icml25.studies.deal.deal_model import DEAL
from icml25.studies.deal.operators import Blur, gaussian_kernel

torch.set_num_threads(1)


def _model(attention=True, channels=(1, 4, 8, 16), kernel=5, seed=0, sn_size=64):
    torch.manual_seed(seed)
    m = DEAL(list(channels), kernel, attention=attention, sn_size=sn_size).double()
    with torch.no_grad():  # move the splines off their initialisation so every part matters
        for name, p in m.named_parameters():
            if "spline" in name:
                p.add_(0.1 * torch.randn_like(p))
    return m


def _dense(op, shape):
    """The matrix of a linear map on images of `shape` (1, 1, h, w), column by column."""
    n = shape[-1] * shape[-2]
    eye = torch.eye(n, dtype=torch.float64).reshape(n, 1, *shape[-2:])
    return op(eye).reshape(n, n).T


def _setup(m, x, sigma=20.0):
    m.W1.normalise()
    m.set_sigma(torch.full((x.shape[0], 1, 1, 1), sigma, dtype=x.dtype))
    m.cal_mask(x)


@pytest.mark.parametrize("blur", [False, True])
def test_outer_step_is_the_dense_weighted_tikhonov_solve(blur):
    m = _model()
    g = torch.Generator().manual_seed(1)
    x_k = torch.rand(1, 1, 16, 16, generator=g, dtype=torch.float64)
    y = x_k + 0.1 * torch.randn(x_k.shape, generator=g, dtype=torch.float64)
    H = Ht = lambda z: z
    if blur:
        b = Blur(gaussian_kernel(5, 1.0), (16, 16))
        b.K = b.K.to(torch.complex128)
        H, Ht = b.A, b.At
    with torch.no_grad():
        _setup(m, x_k)
        lam = float(m.lmbda)
        HtH = _dense(lambda z: Ht(H(z)), x_k.shape)
        WtM2W = _dense(lambda z: m.Lt(m.L(z)), x_k.shape)
        A = HtH + lam * WtM2W
        assert torch.allclose(A, A.T, atol=1e-10)  # symmetric
        assert float(torch.linalg.eigvalsh(A).min()) > 0  # positive definite
        # the mask matters: W^T M^2 W differs from W^T W
        assert float((WtM2W - _dense(lambda z: m.W1.transpose(m.W1(z)), x_k.shape)).abs().max()) > 1e-3
        want = torch.linalg.solve(A, Ht(y).reshape(-1))
        got = m.cg(Ht(y), x_k, 500, 1e-20, H, Ht)
        assert float((got.reshape(-1) - want).abs().max()) < 1e-5


def test_W_adjoint_and_unit_spectral_norm():
    m = _model(channels=(1, 4, 8, 16), kernel=5, sn_size=128)
    m.W1.normalise()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 1, 40, 40, generator=g, dtype=torch.float64)
    z = torch.randn(2, 16, 40, 40, generator=g, dtype=torch.float64)
    with torch.no_grad():
        assert abs(float((m.W1(x) * z).sum() - (x * m.W1.transpose(z)).sum())) < 1e-9
        first = m.W1.kernels()[0]
        assert float(first.sum(dim=(1, 2, 3)).abs().max()) < 1e-12  # zero-mean first filter
        # the Fourier normalisation makes ||W|| = 1 up to boundary effects (zero padding can only lower it)
        norm = m.W1.power_norm(size=48, steps=100)
        assert 0.9 < norm <= 1.0 + 1e-6
        # without the normalisation the norm is far from 1 (so the check has teeth)
        L = float(m.W1.L)
        assert abs(math.sqrt(L) - 1) > 0.1
        m.W1.L = torch.tensor(1.0, dtype=torch.float64)
        assert abs(m.W1.power_norm(size=48, steps=100) - math.sqrt(L)) < 0.1 * math.sqrt(L)


def test_mask_one_reaches_the_fixed_point_in_one_outer_step():
    m = _model(attention=False)
    g = torch.Generator().manual_seed(3)
    y = torch.rand(2, 1, 16, 16, generator=g, dtype=torch.float64)
    res = []
    with torch.no_grad():
        m.denoise(y, 20.0, n_out=4, n_in=500, eps_in=1e-26, eps_out=0.0, residuals=res)
    assert res[1] < 1e-10 and res[2] < 1e-10
    # with attention the mask moves with x_k, so the second step still changes the iterate
    res_att = []
    with torch.no_grad():
        _model(attention=True).denoise(y, 20.0, n_out=3, n_in=500, eps_in=1e-26, eps_out=0.0, residuals=res_att)
    assert res_att[1] > 1e-6


def _unrolled(m, y, sigma, steps):
    """The fixed point by `steps` outer iterations with exact (dense) inner solves, differentiable:
    autograd through it is the reference gradient."""
    m.W1.normalise()
    m.set_sigma(torch.full((1, 1, 1, 1), sigma, dtype=y.dtype))
    x = torch.zeros_like(y)
    lam = m.lmbda.reshape(())
    for _ in range(steps):
        m.cal_mask(x)
        A = torch.eye(y.numel(), dtype=y.dtype) + lam * _dense(lambda z: m.Lt(m.L(z)), y.shape)
        x = torch.linalg.solve(A, y.reshape(-1)).reshape(y.shape)
    return x


def test_implicit_gradient_matches_autograd_through_the_unrolled_fixed_point():
    g = torch.Generator().manual_seed(4)
    clean = torch.rand(1, 1, 8, 8, generator=g, dtype=torch.float64)
    y = clean + 0.1 * torch.randn(clean.shape, generator=g, dtype=torch.float64)
    sigma = 25.0
    m = _model(channels=(1, 4, 8, 8), kernel=3, sn_size=32)
    loss = ((_unrolled(m, y, sigma, 80) - clean) ** 2).sum()
    ref = torch.autograd.grad(loss, list(m.parameters()), allow_unused=True)
    out = m.denoise(y, sigma, n_out=300, n_in=400, eps_in=1e-24, eps_out=1e-13, train=True, eps_bck=1e-24)
    assert float((out - _unrolled(m, y, sigma, 80)).abs().max()) < 1e-8  # same fixed point
    imp = torch.autograd.grad(((out - clean) ** 2).sum(), list(m.parameters()), allow_unused=True)
    a = torch.cat([r.reshape(-1) for r, i in zip(ref, imp) if r is not None and i is not None])
    b = torch.cat([i.reshape(-1) for r, i in zip(ref, imp) if r is not None and i is not None])
    cos = float(a @ b / (a.norm() * b.norm()))
    assert cos >= 0.99, cos
    # a wrong backward (the gradient of the last step alone, no adjoint solve: eps_bck huge) is worse
    out_naive = m.denoise(y, sigma, n_out=300, n_in=400, eps_in=1e-24, eps_out=1e-13, train=True, eps_bck=1e12)
    naive = torch.autograd.grad(((out_naive - clean) ** 2).sum(), list(m.parameters()), allow_unused=True)
    c = torch.cat([n.reshape(-1) for r, n in zip(ref, naive) if r is not None and n is not None])
    cos_naive = float(a @ c / (a.norm() * c.norm()))
    assert cos_naive < cos - 0.01, (cos_naive, cos)
