"""The CT and MRI operators DEAL is reused on: exact adjoints, H^T H symmetric positive semi-definite (so
DEAL's CG system stays SPD), the CT projector equal to scikit-image's radon, a fully sampled MRI giving back
the image as lambda -> 0, and the fastMRI-style Cartesian mask. Each check is also run on a deliberately
broken operator and must fail there."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.studies.deal import inverse as I
from icml25.studies.deal.data import phantom
from icml25.studies.deal.deal_model import DEAL

torch.set_num_threads(1)


class _Op:
    def __init__(self, A, At):
        self.A, self.At = A, At


def _adjoint_gap(op, x, y) -> float:
    """|<Ax, y> - <x, A^T y>| / |<Ax, y>| (real part of the complex inner product for MRI)."""
    lhs = float((op.A(x) * y.conj()).sum().real) if y.is_complex() else float((op.A(x) * y).sum())
    rhs = float((x * op.At(y)).sum())
    return abs(lhs - rhs) / abs(lhs)


def _dense_gram(op, n, dtype=torch.float32):
    """The matrix of H^T H on n x n images, column by column."""
    eye = torch.eye(n * n, dtype=dtype).reshape(n * n, 1, n, n)
    return op.At(op.A(eye)).reshape(n * n, n * n).T.double()


def _ct_ok(op, n):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 1, n, n, generator=g)
    y = torch.randn(3, 1, op.views, op.n_det, generator=g)
    return _adjoint_gap(op, x, y) < 1e-5


def test_ct_adjoint_is_exact_and_a_broken_one_fails():
    op = I.ParallelBeamCT(24, 9)
    assert _ct_ok(op, 24)
    scaled = I.ParallelBeamCT(24, 9)
    scaled.St = op.St * 1.001  # an adjoint off by 0.1% (an unnormalised back-projection would be off by ||S||)
    assert not _ct_ok(scaled, 24)
    flipped = I.ParallelBeamCT(24, 9)
    flipped.At = lambda y: op.At(y).transpose(-1, -2)  # back-projection with the image axes swapped
    assert not _ct_ok(flipped, 24)


def test_mri_adjoint_is_exact_and_a_broken_one_fails():
    n = 16
    op = I.MRI(I.cartesian_mask(n, 4, 0.08, np.random.default_rng(0)))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 1, n, n, generator=g)
    y = torch.complex(torch.randn(2, 1, n, n, generator=g), torch.randn(2, 1, n, n, generator=g))
    assert _adjoint_gap(op, x, y) < 1e-5
    unorm = _Op(op.A, lambda z: torch.fft.ifft2(z * op.M).real)  # the default (1/n^2) inverse FFT: off by a scale
    assert _adjoint_gap(unorm, x, y) > 1e-2
    nomask = _Op(op.A, lambda z: torch.fft.ifft2(z, norm="ortho").real)  # forgets the mask on the way back
    assert _adjoint_gap(nomask, x, y) > 1e-2


@pytest.mark.parametrize("kind", ["ct", "mri"])
def test_gram_is_symmetric_positive_semidefinite_and_unit_norm(kind):
    n = 8
    op = I.ParallelBeamCT(n, 5) if kind == "ct" else I.MRI(I.cartesian_mask(n, 2, 0.25, np.random.default_rng(0)))
    G = _dense_gram(op, n)
    assert torch.allclose(G, G.T, atol=1e-5 * float(G.abs().max()))
    ev = torch.linalg.eigvalsh((G + G.T) / 2)
    assert float(ev.min()) > -1e-5 and abs(float(ev.max()) - 1.0) < 1e-4  # ||H|| = 1: the blur's lambda scale
    # deliberately broken: an adjoint of the wrong orientation (image transposed) is not symmetric
    broken = _Op(op.A, lambda z: op.At(z).transpose(-1, -2))
    Gb = _dense_gram(broken, n)
    assert not torch.allclose(Gb, Gb.T, atol=1e-5 * float(Gb.abs().max()))


def test_deal_system_with_mri_is_spd():
    """(H^T H + lambda W^T M^2 W) / (1 + lambda) with MRI's H: the matrix DEAL's CG needs symmetric positive definite."""
    n = 8
    torch.manual_seed(0)
    m = DEAL([1, 2, 4, 8], 5, attention=True, sn_size=32).double()
    op = I.MRI(I.cartesian_mask(n, 2, 0.25, np.random.default_rng(0)))
    x = torch.rand(1, 1, n, n, dtype=torch.float64)
    m.W1.normalise()
    m.set_sigma(torch.full((1, 1, 1, 1), 15.0, dtype=torch.float64))
    m.cal_mask(x)
    eye = torch.eye(n * n, dtype=torch.float64).reshape(n * n, 1, n, n)
    mask = m.mask.expand(n * n, -1, -1, -1)
    with torch.no_grad():
        A = m.system(eye, op.A, op.At, mask=mask).reshape(n * n, n * n).T
    assert torch.allclose(A, A.T, atol=1e-10)
    assert float(torch.linalg.eigvalsh(A).min()) > 0


def test_ct_projector_equals_skimage_radon_and_a_transposed_one_does_not():
    from skimage.transform import radon

    n, views = 32, 12
    op = I.ParallelBeamCT(n, views, normalise=False)
    ph = phantom(n)
    ours = op.A(torch.as_tensor(ph)[None, None])[0, 0].numpy().T  # (n_det, views), radon's layout
    ref = radon(ph.astype(np.float64), theta=op.theta, circle=False)
    assert ours.shape == ref.shape
    assert np.linalg.norm(ours - ref) / np.linalg.norm(ref) < 1e-4  # same bilinear sampling: equal up to rounding
    wrong = op.A(torch.as_tensor(ph.T.copy())[None, None])[0, 0].numpy().T  # a projector with its axes swapped
    assert np.linalg.norm(wrong - ref) / np.linalg.norm(ref) > 1e-2


def test_fully_sampled_mri_returns_the_image_as_lambda_goes_to_zero():
    n = 16
    torch.manual_seed(0)
    m = DEAL([1, 2, 4, 8], 5, attention=True, sn_size=32)
    x = torch.as_tensor(phantom(n))[None, None]
    full = I.MRI(np.ones((n, n), bool))
    y = full.A(x)
    out = m.solve_inverse_problem(y, full.A, full.At, 15.0, 1e-7, n_out=3, n_in=50)
    assert float((out - x).abs().max()) < 1e-4
    # the same with an undersampled mask is not the image: the check can tell
    under = I.MRI(I.cartesian_mask(n, 4, 0.08, np.random.default_rng(0)))
    out_u = m.solve_inverse_problem(under.A(x), under.A, under.At, 15.0, 1e-7, n_out=3, n_in=50)
    assert float((out_u - x).abs().max()) > 1e-2


def test_cartesian_mask_samples_whole_columns_with_the_centre():
    n = 64
    mask = I.cartesian_mask(n, 4, 0.08, np.random.default_rng(3))
    assert (mask == mask[:1]).all()  # whole k-space columns (phase-encoding lines)
    cols = mask[0]
    assert cols.sum() == round(n / 4)
    centred = np.fft.fftshift(cols)
    k = round(0.08 * n)
    lo = (n - k + 1) // 2
    assert centred[lo:lo + k].all() and cols[0]  # the low frequencies, DC included
    assert not np.array_equal(cols, I.cartesian_mask(n, 4, 0.08, np.random.default_rng(4))[0])  # random elsewhere


def test_measurements_are_paired_across_methods():
    """The noise and the MRI mask depend on (seed, task, image) only: every method sees the same data."""
    task = {"kind": "mri", "acceleration": 4, "centre_fraction": 0.08, "noise": 0.002}
    im = phantom(16)
    a = I.measure(task, I.operator(task, 16, 1, 2), im, 1, 2)[0]
    b = I.measure(task, I.operator(task, 16, 1, 2), im, 1, 2)[0]
    c = I.measure(task, I.operator(task, 16, 2, 2), im, 2, 2)[0]
    assert torch.equal(a, b) and not torch.equal(a, c)
    ct = {"kind": "ct", "views": 6, "noise": 0.01}
    y, fbp = I.measure(ct, I.operator(ct, 16, 0, 0), im, 0, 0)
    assert y.shape == (1, 1, 6, 23) and fbp.shape == (16, 16)
