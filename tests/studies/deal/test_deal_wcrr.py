"""WCRR-NN (wcrr.py), the full-scale learned-regulariser baseline: properties only a faithful WCRR-NN has
(the profile is 1-weakly convex after the σ scaling, even and 0 at 0; the closed-form gradient is the
gradient of R; SAGD decreases the objective and converges; with H = I and λ → 0 it returns y), each also
checked on a deliberately broken variant where it fails; and the official checkpoint through the study's
own stages on a tiny local stand-in written in the official key layout, served over HTTP."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from icml25.studies.deal import wcrr
from icml25.studies.deal.operators import Blur, gaussian_kernel
from full_stand_in import full_cfg, staged

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[3]
SIGMAS = (1.0, 5.0, 15.0, 25.0, 40.0)


def _model(seed=0, channels=(1, 4, 8, 16), sn_size=32):
    """A WCRR off its initialisation: random spline coefficients (raw slopes well outside [0, 1], so the
    projection matters), random scaling spline and μ."""
    torch.manual_seed(seed)
    m = wcrr.WCRR(channels=channels, sn_size=sn_size).double()
    with torch.no_grad():
        for sp in (m.activation_cvx, m.activation_ccv):
            sp.coefficients.add_(0.01 * torch.randn_like(sp.coefficients))
        m.spline_scaling.coefficients.add_(0.3 * torch.randn_like(m.spline_scaling.coefficients))
        m.mu_.add_(0.5)
    m.set_spectral_norm(50)
    return m


class _SlopeTwo(wcrr.WeaklyConvexSpline):
    """Broken: the concave part's slopes clamped to [0, 2] instead of [0, 1]."""

    def projected(self):
        cs = self.coefficients
        s = ((cs[:, 1:] - cs[:, :-1]) / self.step).clamp(0.0, 2.0)
        z = torch.zeros_like(s[:, :1])
        s = torch.cat([z, s[:, 1:-1], z], 1)
        new = torch.cat([z, torch.cumsum(s, 1) * self.step], 1)
        return 0.5 * (new - new.flip(1))


class _NotAntisymmetric(wcrr.WeaklyConvexSpline):
    """Broken: no antisymmetrisation (the re-integrated spline starts at 0 on the left knot)."""

    def projected(self):
        cs = self.coefficients
        s = ((cs[:, 1:] - cs[:, :-1]) / self.step).clamp(0.0, 1.0)
        z = torch.zeros_like(s[:, :1])
        return torch.cat([z, torch.cumsum(torch.cat([z, s[:, 1:-1], z], 1), 1) * self.step], 1)


def _break(m, cls, which="activation_ccv"):
    old = getattr(m, which)
    new = cls(old.num_knots, old.x_min, old.x_max, "zero").double()
    with torch.no_grad():
        new.coefficients.copy_(old.coefficients)
    setattr(m, which, new)
    return m


def _curvature_floor(m):
    """min over σ, channels and a grid of filter responses of ψ'' by second differences of ψ (and of the
    closed-form ψ''): the official constraint is ψ'' ≥ −ρ = −1 after the σ scaling."""
    z = torch.linspace(-0.6, 0.6, 6001, dtype=torch.float64)
    h = float(z[1] - z[0])
    zz = z.view(1, 1, 1, -1).expand(1, m.conv.channels[-1], 1, -1).contiguous()
    worst_fd, worst_cf = np.inf, np.inf
    with torch.no_grad():
        for sig in SIGMAS:
            s = m.scaling(sig)
            psi = m.psi(zz, s)
            fd = (psi[..., 2:] - 2 * psi[..., 1:-1] + psi[..., :-2]) / h ** 2
            worst_fd = min(worst_fd, float(fd.min()))
            worst_cf = min(worst_cf, float(m.d2psi(zz, s).min()))
    return worst_fd, worst_cf


def test_profile_is_one_weakly_convex():
    m = _model()
    fd, cf = _curvature_floor(m)
    # second differences average ψ'' over a cell, so they lie within [min ψ'', max ψ'']
    assert fd >= -1 - 1e-6 and cf >= -1 - 1e-9
    assert cf < -0.5  # the bound is reached somewhere: the concave part is active (not a trivially convex ψ)
    # broken: concave slopes up to 2 -> ψ'' reaches −2
    fd_b, cf_b = _curvature_floor(_break(_model(), _SlopeTwo))
    assert fd_b < -1.5 and cf_b < -1.5


def test_profile_is_even_and_zero_at_zero():
    m = _model()
    z = torch.linspace(-0.5, 0.5, 1001, dtype=torch.float64).view(1, 1, 1, -1).expand(1, 16, 1, -1).contiguous()

    def check(model):
        with torch.no_grad():
            errs = []
            for sig in SIGMAS:
                s = model.scaling(sig)
                psi = model.psi(z, s)
                errs.append((float((psi - psi.flip(-1)).abs().max()), float(psi[..., 500].abs().max()),
                             float(psi.abs().max())))
        return errs

    for even, at0, size in check(m):
        assert size > 1e-4 and even <= 1e-9 * size + 1e-15 and at0 <= 1e-15
    # broken: without the antisymmetrisation ψ is not even
    assert max(e for e, _, s in check(_break(_model(), _NotAntisymmetric, "activation_cvx"))) > 1e-6


def test_closed_form_gradient_is_autograd_of_R():
    m = _model()
    x = torch.rand(2, 1, 20, 20, dtype=torch.float64, requires_grad=True)
    for sig in (5.0, 25.0):
        s = m.scaling(sig, 2).detach()
        (auto,) = torch.autograd.grad(m.cost(x, s).sum(), x)
        closed = m.grad(x, s)
        assert torch.allclose(closed, auto, rtol=1e-9, atol=1e-12), float((closed - auto).abs().max())
        assert float(closed.detach().abs().max()) > 1e-3
        # broken: the activation not scaled back by 1/s is not ∇R
        wrong = m.conv.transpose(m.dpsi(m.conv(x), s) * s)
        assert not torch.allclose(wrong, auto, rtol=1e-3, atol=1e-6)


def _blur_problem(seed=0, n=16):
    b = Blur(gaussian_kernel(5, 1.0).astype(np.float64), (n, n))
    b.K = b.K.to(torch.complex128)
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(1, 1, n, n, dtype=torch.float64, generator=g)
    y = b.A(x) + 0.01 * torch.randn(1, 1, n, n, dtype=torch.float64, generator=g)
    return b, y


@pytest.mark.parametrize("lam,sigma", [(1.0, 15.0), (20.0, 25.0)])
def test_sagd_decreases_the_objective_and_converges(lam, sigma):
    m = _model()
    b, y = _blur_problem()
    trace = []
    x = wcrr.reconstruct(m, y, b.A, b.At, lam, sigma, max_iter=3000, tol=1e-7, trace=trace)
    d = np.diff(trace)
    assert len(trace) < 3000  # stopped by the tolerance, not the cap
    assert d.max() <= 1e-9 * abs(trace[0])  # monotone (up to rounding)
    s = m.scaling(sigma)
    start = float(wcrr.objective(m, torch.zeros_like(y), y, b.A, lam, s))
    assert trace[-1] < trace[0] < start
    # converged to a critical point of the constrained problem: the projected gradient step is still
    L = lam * float(m.mu()) + 1.0
    g = b.At(b.A(x) - y) + lam * m.grad(x, s)
    step = (x - g / L).clamp_min(0) - x
    assert float(step.norm() / x.norm()) < 1e-5
    # broken: a step 1/L from a wrong ||H|| (0.05 instead of 1) with a small λ: the objective rises
    bad = []
    wcrr.reconstruct(m, y, b.A, b.At, 1e-3, sigma, op_norm=0.05, max_iter=50, trace=bad)
    assert np.diff(bad).max() > 1e-6 * abs(bad[0])


def test_identity_with_tiny_lambda_returns_y():
    m = _model()
    g = torch.Generator().manual_seed(1)
    y = torch.rand(1, 1, 16, 16, dtype=torch.float64, generator=g)
    ident = (lambda v: v)
    x = wcrr.reconstruct(m, y, ident, ident, 1e-6, 15.0, x_init=torch.zeros_like(y), max_iter=2000, tol=1e-10)
    assert float((x - y).norm() / y.norm()) < 1e-4
    # a real λ moves it away (the regulariser acts)
    x1 = wcrr.reconstruct(m, y, ident, ident, 5.0, 15.0, x_init=torch.zeros_like(y), max_iter=2000, tol=1e-10)
    assert float((x1 - y).norm() / y.norm()) > 1e-2


def test_denoise_is_the_lambda_one_minimiser():
    """The official denoiser (FISTA + restart, λ = 1) reaches the same point as SAGD on H = I (no clamp needed
    for an image well inside [0, 1])."""
    m = _model()
    g = torch.Generator().manual_seed(2)
    y = 0.5 + 0.05 * torch.randn(1, 1, 16, 16, dtype=torch.float64, generator=g)
    a = wcrr.denoise(m, y, 15.0, max_iter=3000, tol=1e-10)
    ident = (lambda v: v)
    b = wcrr.reconstruct(m, y, ident, ident, 1.0, 15.0, x_init=y, max_iter=3000, tol=1e-10, positivity=False)
    assert float((a - b).norm() / b.norm()) < 1e-6
    assert float((a - y).norm() / y.norm()) > 1e-3


# ---- the official checkpoint through the stages ---------------------------------------------------------

def _official_layout(model: wcrr.WCRR) -> dict:
    """Our state dict in the official WCvxConvNet's key layout (what checkpoint_6000.pth holds)."""
    out = {}
    for k, v in model.state_dict().items():
        if k.startswith("conv.weights."):
            j = k.split(".")[-1]
            k = f"conv_layer.conv_layers.{j}." + ("parametrizations.weight.original" if j == "0" else "weight")
        out[k] = v.clone()
    return out


def _full_cfg(url: str) -> dict:
    cfg = full_cfg(url)
    w = cfg["wcrr"]
    assert "wcrr" in cfg["methods"] and w["url"].startswith(
        "https://raw.githubusercontent.com/axgoujon/weakly_convex_ridge_regularizer/")
    cfg["methods"] = [m for m in cfg["methods"] if m != "drunet"]  # DRUNet's own test serves its weights
    w["url"] = f"{url}/wcrr/{w['file']}"  # the published file's name, served from the local stand-in
    w.update(sn_steps=3, max_iter=10, denoise={"max_iter": 10, "tol": 1e-4})
    cfg["eval"]["sigmas"] = [15]
    cfg["deblur"].update(wcrr_lambdas=[0.5, 2.0], wcrr_sigmas=[5])
    cfg["inverse"].pop("paper_data")  # our CT / MRI measurements here (the paper's data: test_deal_paper_data.py)
    cfg["inverse"].update(size=16, tasks={"ct": {"kind": "ct", "views": 6, "noise": 0.01},
                                          "mri": cfg["inverse"]["tasks"]["mri"]},
                          wcrr_lambdas=[1.0], wcrr_sigmas=[2, 10])
    return cfg


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from PIL import Image

    from icml25.core.config import effective, load_study

    site = tmp_path_factory.mktemp("site")
    rng = np.random.default_rng(0)
    for sub, name in (("train", "test_001.png"), ("train", "test_400.png"), ("bsd", "test001.png"), ("set12", "01.png")):
        (site / sub).mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (40, 48), dtype=np.uint8)).save(site / sub / name)
    spec = effective(load_study(ROOT, "deal"), "full")["wcrr"]
    torch.manual_seed(0)
    net = wcrr.WCRR.from_config(spec["model"])  # the official architecture, random weights off the init
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.01 * torch.randn_like(p))
    (site / "wcrr").mkdir()
    torch.save({"epoch": 6000, "state_dict": _official_layout(net), "L": torch.tensor(343.2),
                "optimizer_state_dict": {}}, site / "wcrr" / spec["file"])
    return site, net


def test_wcrr_checkpoint_through_the_stages(site, file_server, tmp_path):
    from icml25.core.io import read_json
    from icml25.studies.deal import data as D
    from icml25.studies.deal import evaluation as E
    from icml25.studies.deal import study as S

    root, net = site
    cfg = _full_cfg(file_server(root))
    raw, data, run = staged(cfg, tmp_path)
    assert (raw / "wcrr" / cfg["wcrr"]["file"]).read_bytes() == (root / "wcrr" / cfg["wcrr"]["file"]).read_bytes()
    out = S.train(cfg, "wcrr", 0, data, None, run)
    assert {"setting": "train", "metric": "n_params", "value": 13763} in out["metrics"]  # the official count
    loaded = S._load_model(cfg, "wcrr", run, data)
    for k, v in net.state_dict().items():  # the served weights are the ones loaded
        assert torch.equal(loaded.state_dict()[k], v), k
    tuned = read_json(run / "tuned.json")
    assert float(loaded.conv.L) > 0 and not torch.isclose(loaded.conv.L, torch.tensor(343.2))  # power method, not
    # the checkpoint's training-time L
    assert tuned["deblur"] in ([0.5, 5.0], [2.0, 5.0]) and len(tuned["deblur_val_psnr"]) == 2
    assert tuned["ct"] in ([1.0, 2.0], [1.0, 10.0]) and tuned["mri"] in ([1.0, 2.0], [1.0, 10.0])
    rows = S.evaluate(cfg, "wcrr", 0, data, None, run)
    got = {(r["setting"], r["metric"]): r["value"] for r in rows}
    assert {("denoise/s15", "psnr"), ("deblur", "psnr"), ("ct", "psnr"), ("mri", "psnr")} <= set(got)
    # denoising is the official λ = 1 solver told the test noise level
    (_, clean), = D.load_images(data / "test.npz")
    y = D.noisy(clean, 15, 0, 0)
    want = wcrr.denoise(loaded, torch.as_tensor(y)[None, None], 15, max_iter=10)[0, 0].numpy()
    assert got[("denoise/s15", "psnr")] == pytest.approx(E.O.psnr(want, clean), abs=1e-6)
    # the table shows WCRR-NN beside DEAL, with the official repository's numbers (the DEAL paper's: not quoted)
    import pandas as pd

    agg = pd.DataFrame([{"method": "wcrr", "setting": "denoise/s15", "metric": "psnr", "mean": 30.0, "std": 0.1,
                         "n": 1}])
    tab = S.make_table(agg, cfg)
    assert "WCRR-NN (official checkpoint at full scale); SAGD for inverse problems" in set(tab["method"])
    ref = tab[tab["method"].str.startswith("WCRR-NN: DEAL paper not quoted")]
    assert ref.iloc[0]["PSNR σ=15"] == "31.21"


def test_wcrr_checkpoint_of_another_shape_fails(tmp_path):
    from icml25.core.config import effective, load_study

    cfg = effective(load_study(ROOT, "deal"), "full")
    other = wcrr.WCRR(channels=(1, 4, 8, 32))
    torch.save({"state_dict": _official_layout(other)}, tmp_path / "w.pth")
    with pytest.raises(RuntimeError, match="state_dict"):
        wcrr.load(tmp_path / "w.pth", cfg)
    # our own key layout is not the official one: refused
    torch.save({"state_dict": wcrr.WCRR.from_config(cfg["wcrr"]["model"]).state_dict()}, tmp_path / "ours.pth")
    with pytest.raises(RuntimeError, match="state_dict"):
        wcrr.load(tmp_path / "ours.pth", cfg)
