"""MRI and sparse-view CT with the denoising-trained models reused unchanged (the paper's other inverse
problems), their forward operators with exact adjoints, and the baselines on the same operators.

- MRI (single coil, as the official test_mri.py): y = M ⊙ F x + n, F the orthonormal 2-D FFT, M a Cartesian
  mask of k-space columns (a fully sampled centre fraction plus random columns up to 1/acceleration, the
  fastMRI-style mask of the official setting acc = 4, cf = 0.08); H^T y = Re F^-1(M ⊙ y), so
  H^T H x = Re F^-1(M ⊙ F x). Complex noise of sd `noise` on real and imaginary parts.
- CT: parallel-beam ray sums over `views` angles in [0, 180) with ceil(sqrt(2) N) unit-spaced detectors,
  the image sampled bilinearly at unit steps along each ray (the geometry of skimage.transform.radon,
  circle=False). The operator is one sparse matrix S / ||S||_2 (unit norm, so the lambda grids are on the
  blur's scale), its adjoint the transpose of the same matrix: exact. Gaussian noise of sd `noise` times the
  clean sinogram's maximum (our reading of the paper's fixed noise level). The input image is the filtered
  back-projection (skimage iradon, ramp), which the official CT code also uses as x0.

Every method gets the same measurement of (seed, task, image). DEAL: `solve_inverse_problem` from 0 for MRI
(the official DEAL_Recon) and from the FBP for CT, sigma_denoiser 15, lambda tuned on the validation image; Tikhonov: CG on (H^T H + lambda D^T D) x = H^T y
(periodic finite differences); TV: FISTA with Chambolle's prox; DnCNN: plug-and-play HQS with a CG data step;
WCRR-NN (full scale): SAGD (wcrr.py) from the zero-filled image / FBP, (λ, σ) tuned on the validation image.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from . import operators as O

TASKS = ("ct", "mri")


# ---- forward operators ------------------------------------------------------------------------------------

def cartesian_mask(n: int, acceleration: float, centre_fraction: float, rng) -> np.ndarray:
    """(n, n) bool mask of sampled k-space columns, in FFT order (DC at index 0): the round(cf n) centre
    columns always, then random other columns so that about n / acceleration are sampled in all."""
    n_centre = max(1, int(round(centre_fraction * n)))
    want = max(n_centre, int(round(n / float(acceleration))))
    centred = np.zeros(n, dtype=bool)
    lo = (n - n_centre + 1) // 2
    centred[lo:lo + n_centre] = True
    rest = np.flatnonzero(~centred)
    centred[rng.choice(rest, size=want - n_centre, replace=False)] = True
    cols = np.fft.ifftshift(centred)  # centred index n // 2 -> DC at 0
    return np.broadcast_to(cols[None, :], (n, n)).copy()


class MRI(O.OnDevice):
    """Single-coil Cartesian MRI: A x = M ⊙ F x (complex), A^T y = Re F^-1(M ⊙ y); ||A|| = 1."""

    def __init__(self, mask: np.ndarray, device=None):
        self.mask_np = np.asarray(mask, bool)
        self.M = torch.as_tensor(self.mask_np, dtype=torch.float32, device=device)

    def device(self) -> torch.device:
        return self.M.device

    def copy_to(self, device) -> "MRI":
        return MRI(self.mask_np, device)

    def A(self, x):
        return torch.fft.fft2(x, norm="ortho") * self.M

    def At(self, y):
        return torch.fft.ifft2(y * self.M, norm="ortho").real


class MultiCoilMRI(MRI):
    """Multi-coil Cartesian MRI (official OpMRI_multicoil_*): A x = M ⊙ F(S_c x) per coil c, with S the (Nc, H, W)
    sensitivity maps; A^T y = Σ_c Re(conj(S_c) F^-1(M ⊙ y_c)), the exact adjoint for real images."""

    def __init__(self, mask: np.ndarray, smaps: np.ndarray, device=None):
        super().__init__(mask, device)
        self.smaps_np = np.asarray(smaps, np.complex64)
        self.S = torch.as_tensor(self.smaps_np, device=device)

    def copy_to(self, device) -> "MultiCoilMRI":
        return MultiCoilMRI(self.mask_np, self.smaps_np, device)

    def A(self, x):  # (B, 1, H, W) real -> (B, Nc, H, W) complex
        return torch.fft.fft2(x * self.S, norm="ortho") * self.M

    def At(self, y):
        return (torch.fft.ifft2(y * self.M, norm="ortho") * self.S.conj()).real.sum(dim=1, keepdim=True)


@lru_cache(maxsize=8)
def _ray_matrix(n: int, views: int):
    """scipy CSR matrix (views * n_det, n * n) of bilinear ray sums, and the angles (degrees). Detector t and
    ray parameter s (unit steps) sample the image at column c + t cos θ + s sin θ, row c - t sin θ + s cos θ,
    c = n // 2 (skimage.transform.radon's rotation about its centre)."""
    import scipy.sparse as sp

    n_det = int(math.ceil(math.sqrt(2) * n))
    theta = np.arange(views) * 180.0 / views
    t = np.arange(n_det) - n_det // 2
    s = np.arange(n_det) - n_det // 2
    c = n // 2
    rows, cols, vals = [], [], []
    for k, th in enumerate(np.deg2rad(theta)):
        ct, st = math.cos(th), math.sin(th)
        col = c + t[:, None] * ct + s[None, :] * st     # (n_det, n_det): detector x ray sample
        row = c - t[:, None] * st + s[None, :] * ct
        c0, r0 = np.floor(col), np.floor(row)
        fc, fr = col - c0, row - r0
        det = np.broadcast_to((k * n_det + np.arange(n_det))[:, None], col.shape)
        for dr, dc, w in ((0, 0, (1 - fr) * (1 - fc)), (0, 1, (1 - fr) * fc), (1, 0, fr * (1 - fc)), (1, 1, fr * fc)):
            rr, cc = r0 + dr, c0 + dc
            ok = (rr >= 0) & (rr < n) & (cc >= 0) & (cc < n) & (w > 0)
            rows.append(det[ok])
            cols.append((rr[ok] * n + cc[ok]).astype(np.int64))
            vals.append(w[ok])
    S = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(views * n_det, n * n), dtype=np.float64)
    return S, theta


def _sparse(S, device):
    S = S.tocoo()
    idx = torch.as_tensor(np.stack([S.row, S.col]), dtype=torch.int64)
    return torch.sparse_coo_tensor(idx, torch.as_tensor(S.data, dtype=torch.float32), size=S.shape, device=device,
                                   check_invariants=True).coalesce()


class ParallelBeamCT(O.OnDevice):
    """A x = (S / ||S||) x on (B, 1, n, n) images -> (B, 1, views, n_det) sinograms; A^T = its transpose."""

    def __init__(self, n: int, views: int, device=None, normalise: bool = True):
        from scipy.sparse.linalg import svds

        S, self.theta = _ray_matrix(int(n), int(views))
        self.n, self.views, self.n_det = int(n), int(views), S.shape[0] // int(views)
        # the largest singular value (float64); the radon comparison uses normalise=False
        self.norm = float(svds(S, k=1, return_singular_vectors=False, random_state=0)[0]) if normalise else 1.0
        self._set_matrix(S, device)

    def _set_matrix(self, S, device):
        """A = S / ||S|| and its transpose as torch sparse tensors, normalised once; the host matrix is not kept
        (at the paper's 512 px it is GBs), and copies on other devices are made once each (`to`)."""
        Sn = S / self.norm
        self.S, self.St = _sparse(Sn, device), _sparse(Sn.T, device)

    def device(self) -> torch.device:
        return self.S.device

    def copy_to(self, device) -> "ParallelBeamCT":
        """A and A^T moved as they are: no rebuild, no second normalisation."""
        new = object.__new__(type(self))
        new.__dict__.update({k: v for k, v in self.__dict__.items() if k != "_copies"})
        new.S, new.St = self.S.to(device), self.St.to(device)
        return new

    def A(self, x):
        b = x.shape[0]
        y = (self.S @ x.reshape(b, -1).T).T
        return y.reshape(b, 1, self.views, self.n_det)

    def At(self, y):
        b = y.shape[0]
        x = (self.St @ y.reshape(b, -1).T).T
        return x.reshape(b, 1, self.n, self.n)

    def fbp(self, y: np.ndarray) -> np.ndarray:
        """Filtered back-projection of one (views, n_det) sinogram of A (skimage's iradon, ramp filter)."""
        from skimage.transform import iradon

        return iradon((np.asarray(y, np.float64) * self.norm).T, theta=self.theta, output_size=self.n,
                      circle=False, filter_name="ramp").astype(np.float32)


def _odl_ray_matrix(n: int, views: int, n_det: int, half_width: float):
    """scipy CSR matrix (views * n_det, n * n) of the parallel-beam ray transform in the official CT geometry
    (inverse_problems/ct/utils_ct/ct_forward_utils.py: ODL's `uniform_discr([-R, -R], [R, R], (n, n))` and
    `parallel_beam_geometry(space, num_angles=views, det_shape=n_det)`), in ODL 0.7's conventions: array axis 0
    is x and axis 1 is y, pixel centres at -R + (i + 1/2) h, h = 2R / n; angles (k + 1/2) π / views; detector cells
    on [-ρ, ρ], ρ = R √2 (the domain's corner), centres s_d; ray (k, d) = {s_d θ + t θ⊥}, θ = (cos φ, sin φ),
    θ⊥ = (-sin φ, cos φ) (detector axis (1, 0) and position (0, 1) rotated by φ). Line integrals in the
    domain's length units: bilinear samples at steps h along t, times h (our discretisation; the official
    projector is astra's)."""
    import scipy.sparse as sp

    R = float(half_width)
    h = 2 * R / n
    rho = R * math.sqrt(2)
    phi = (np.arange(views) + 0.5) * math.pi / views
    s = -rho + (np.arange(n_det) + 0.5) * (2 * rho / n_det)
    m = int(math.ceil(2 * rho / h)) + 1
    t = (np.arange(m) - (m - 1) / 2) * h
    blocks = []
    for ph in phi:
        c, sn = math.cos(ph), math.sin(ph)
        x = s[:, None] * c - t[None, :] * sn          # (n_det, m) sample points
        y = s[:, None] * sn + t[None, :] * c
        u, v = (x + R) / h - 0.5, (y + R) / h - 0.5   # continuous array indices (axis 0, axis 1)
        u0, v0 = np.floor(u), np.floor(v)
        fu, fv = u - u0, v - v0
        det = np.broadcast_to(np.arange(n_det)[:, None], u.shape)
        rows, cols, vals = [], [], []
        for du, dv, w in ((0, 0, (1 - fu) * (1 - fv)), (0, 1, (1 - fu) * fv), (1, 0, fu * (1 - fv)), (1, 1, fu * fv)):
            iu, iv = u0 + du, v0 + dv
            ok = (iu >= 0) & (iu < n) & (iv >= 0) & (iv < n) & (w > 0)
            rows.append(det[ok])
            cols.append((iu[ok] * n + iv[ok]).astype(np.int64))
            vals.append((w[ok] * h).astype(np.float32))
        blocks.append(sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                    shape=(n_det, n * n), dtype=np.float32))
    return sp.vstack(blocks, format="csr")


class OdlParallelBeamCT(ParallelBeamCT):
    """The official CT geometry (`_odl_ray_matrix`) as A = S / ||S|| on (B, 1, n, n) images; the official
    measurements y enter as y / ||S|| (the same problem, λ on the unit-norm scale of our grids)."""

    def __init__(self, n: int, views: int, n_det: int, half_width: float, device=None):
        from scipy.sparse.linalg import svds

        S = _odl_ray_matrix(int(n), int(views), int(n_det), float(half_width))
        self.n, self.views, self.n_det, self.theta = int(n), int(views), int(n_det), None
        self.norm = float(svds(S.astype(np.float64), k=1, return_singular_vectors=False, random_state=0)[0])
        self._set_matrix(S, device)


@lru_cache(maxsize=2)
def _paper_ct(n: int, views: int, n_det: int, half_width: float) -> OdlParallelBeamCT:
    return OdlParallelBeamCT(n, views, n_det, half_width)


def paper_ct(task: dict) -> OdlParallelBeamCT:
    """The official geometry: 512 px on [-128, 128]^2, 200 views, 400 detector cells (config: size, views,
    detectors, half_width)."""
    return _paper_ct(int(task.get("size", 512)), int(task["views"]), int(task.get("detectors", 400)),
                     float(task.get("half_width", 128.0)))


def apply_unnormalised(op: ParallelBeamCT, im: np.ndarray) -> np.ndarray:
    """S x in the data's units (a (views, n_det) sinogram) of one image: ||S|| A x, on the host in float64."""
    x = torch.as_tensor(np.asarray(im, np.float64).reshape(-1, 1))
    return (op.to("cpu").S.double() @ x).numpy().reshape(op.views, op.n_det) * op.norm


# ---- one task: the operator and the measurement of one image ----------------------------------------------

def operator(task: dict, n: int, seed: int, index: int):
    """The task's operator for image `index` at a seed (the MRI mask is drawn per (seed, image))."""
    if task["kind"] == "mri":
        rng = np.random.default_rng([int(seed), 777_001, int(index)])
        return MRI(cartesian_mask(n, float(task["acceleration"]), float(task["centre_fraction"]), rng))
    if task["kind"] == "ct":
        return _ct(int(n), int(task["views"]))
    raise KeyError(task["kind"])


@lru_cache(maxsize=8)
def _ct(n: int, views: int) -> ParallelBeamCT:
    return ParallelBeamCT(n, views)


def measure(task: dict, op, im: np.ndarray, seed: int, index: int):
    """(y, input image): the noisy measurement (torch, (1, 1, ...)) and the classical reconstruction from it
    (zero-filled for MRI, FBP for CT); the noise from (seed, task, image)."""
    rng = np.random.default_rng([int(seed), 777_002 if task["kind"] == "mri" else 777_003, int(index)])
    hx = op.A(O.to_batch(im))
    if task["kind"] == "mri":
        n = float(task["noise"]) * (rng.standard_normal(hx.shape) + 1j * rng.standard_normal(hx.shape))
        y = (hx + torch.as_tensor(n, dtype=torch.complex64)) * op.M
        return y, O.from_batch(op.At(y))
    sd = float(task["noise"]) * float(hx.abs().max())
    y = hx + torch.as_tensor(sd * rng.standard_normal(hx.shape), dtype=torch.float32)
    return y, op.fbp(y[0, 0].numpy())


# ---- solvers on an operator -------------------------------------------------------------------------------

def cg(apply, b, x0, iters: int, tol: float = 1e-10):
    """Plain CG for a symmetric positive definite `apply`, from x0; stops at ||r||^2 <= tol ||b||^2."""
    x = x0.clone()
    r = b - apply(x)
    p = r.clone()
    rr = float((r * r).sum())
    stop = tol * float((b * b).sum())
    for _ in range(int(iters)):
        if rr <= stop:
            break
        Ap = apply(p)
        alpha = rr / float((p * Ap).sum())
        x = x + alpha * p
        r = r - alpha * Ap
        rr_new = float((r * r).sum())
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def fd_gram(x):
    """D^T D x for periodic forward differences (Fourier)."""
    return torch.fft.ifft2(torch.fft.fft2(x) * O.fd_symbol(x.shape[-2:], x.device)).real


@torch.no_grad()
def tikhonov(y, op, lam: float, x0, iters: int = 200):
    return cg(lambda x: op.At(op.A(x)) + lam * fd_gram(x), op.At(y), x0, iters)


@torch.no_grad()
def pnp_hqs(y, op, denoiser, mu: float, x0, iters: int = 20, cg_iters: int = 30):
    """Plug-and-play HQS: x = argmin ||Hx - y||^2 + mu ||x - z||^2 (CG), z = D(x)."""
    Hty = op.At(y)
    z = x = x0
    for _ in range(int(iters)):
        x = cg(lambda v: op.At(op.A(v)) + mu * v, Hty + mu * z, x, cg_iters)
        z = denoiser(x)
    return z


def solver(method: str, model, cfg: dict):
    """f(y, op, input image, hyperparameter) -> x (numpy) on one task's measurement."""
    from . import baselines as B
    from .training import model_device

    inv = cfg["inverse"]
    if method == "noisy":
        return lambda y, op, x0, p: x0
    if method == "tikhonov":
        return lambda y, op, x0, p: O.from_batch(tikhonov(y, op, p, O.to_batch(x0)))
    if method == "tv":
        return lambda y, op, x0, p: B.tv_inverse(y, op.A, op.At, p, O.to_batch(x0), int(inv["tv_iters"]))
    dev = model_device(model)
    if method == "dncnn":
        return lambda y, op, x0, p: O.from_batch(pnp_hqs(y.to(dev), op.to(dev), model, p, O.to_batch(x0, dev),
                                                         int(inv["pnp_iters"])))
    if method == "wcrr":  # SAGD from the classical reconstruction (official: zero-filled for MRI, FBP for CT)
        from . import wcrr

        w = cfg["wcrr"]

        def f(y, op, x0, p):
            op = op.to(dev)
            x = wcrr.reconstruct(model, y.to(dev), op.A, op.At, p[0], p[1], x_init=O.to_batch(x0, dev),
                                 max_iter=int(w["max_iter"]), tol=float(w["tol"]))
            return O.from_batch(x)
        return f
    if method in ("deal", "deal_noattn"):
        def f(y, op, x0, p):
            op = op.to(dev)
            # MRI from 0 (the official DEAL_Recon); CT from the FBP (the CT pipeline of the official baselines)
            start = torch.zeros_like(O.to_batch(x0, dev)) if isinstance(op, MRI) else O.to_batch(x0, dev)
            x = model.solve_inverse_problem(y.to(dev), op.A, op.At, float(inv["sigma_denoiser"]), p,
                                            x_init=start, n_out=int(inv["n_out"]), n_in=int(inv["n_in"]),
                                            eps_in=float(inv["eps_in"]), eps_out=float(inv["eps_out"]))
            return O.from_batch(x)
        return f
    raise KeyError(method)


GRID = {"tikhonov": "tikhonov_lambdas", "tv": "tv_weights", "dncnn": "pnp_mus", "deal": "deal_lambdas",
        "deal_noattn": "deal_lambdas", "noisy": None, "wcrr": ("wcrr_lambdas", "wcrr_sigmas")}


def grid_values(section: dict, key) -> list:
    """A method's candidate hyperparameters: one list, or for WCRR-NN the (λ, σ) pairs of two lists (the
    official tunes both), or [None] for none."""
    if key is None:
        return [None]
    if isinstance(key, tuple):
        return [[float(a), float(b)] for a in section[key[0]] for b in section[key[1]]]
    return section[key]


def pick(grid: list, scores: list):
    best = grid[int(np.argmax(scores))]
    return None if best is None else [float(v) for v in best] if isinstance(best, list) else float(best)


def enabled(cfg: dict) -> list[str]:
    """The enabled tasks (kind ct or mri), by name in sorted order (ct before mri, as the tables list them)."""
    inv = cfg.get("inverse") or {}
    if not inv.get("enabled", False):
        return []
    return sorted(t for t, v in (inv.get("tasks") or {}).items() if (v or {}).get("kind") in TASKS)


def paper_case(task: dict, case: dict):
    """(operator, y, input image, target, crop) of one official case (goujon_data): CT from the stored sinogram
    and FBP (y scaled with our unit-norm operator); MRI with the stored mask (and maps), started from the
    zero-filled image, scored on the 320x320 centre crop against x_crop (the official `crop=True`)."""
    if task["kind"] == "ct":
        op = paper_ct(task)
        y = torch.as_tensor(case["y"], dtype=torch.float32)[None, None] / op.norm
        return op, y, case["x0"].astype(np.float32), case["x"], None
    mask = case["mask"]
    op = MultiCoilMRI(mask, case["smaps"]) if "smaps" in case else MRI(mask)
    y = torch.as_tensor(case["y"], dtype=torch.complex64)[None]
    return op, y, O.from_batch(op.At(y)), case["x"], case["x"].shape[-1]


def _cases(cfg: dict, t: str, split: str, seed: int, images, data_dir):
    """(operator, y, input image, target, crop) per image of one task: the official data where the scale names
    it (inverse.paper_data), else our measurement of each image (the MRI mask and the noise from (seed, image))."""
    from . import goujon_data as G

    task = cfg["inverse"]["tasks"][t]
    if G.enabled(cfg):
        for _, case in G.cases(t, split, data_dir):
            yield paper_case(task, case)
        return
    for i, (_, im) in enumerate(images):
        op = operator(task, im.shape[-1], seed, i)
        y, x0 = measure(task, op, im, seed, i)
        yield op, y, x0, im, None


def _score(fn, x, target, crop):
    from .data import centre_crop

    return fn(centre_crop(x, crop) if crop else x, target)


def tune(cfg: dict, method: str, model, val: np.ndarray, data_dir=None) -> dict:
    """Per task: the method's hyperparameter picked by mean PSNR on the validation image(s) (never on test): our
    validation image, or the official validation set where the scale reads the paper's data."""
    out = {}
    if method not in GRID:
        return out
    f = solver(method, model, cfg)
    for t in enabled(cfg):
        cases = list(_cases(cfg, t, "val", 10_000, [("val", val)], data_dir))
        grid = grid_values(cfg["inverse"], GRID[method])
        scores = [float(np.mean([_score(O.psnr, f(y, op, x0, p), gt, crop) for op, y, x0, gt, crop in cases]))
                  for p in grid]
        out[t] = pick(grid, scores)
        out[f"{t}_val_psnr"] = [float(s) for s in scores]
    return out


def test(cfg: dict, method: str, model, params: dict, seed: int, data_dir) -> list[dict]:
    """Rows (setting = task) of PSNR / SSIM / CPU seconds per image on the task's test images."""
    import time

    from . import goujon_data as G
    from .data import load_images

    rows = []
    f = solver(method, model, cfg)
    images = None if G.enabled(cfg) else load_images(data_dir / "inverse.npz")
    for t in enabled(cfg):
        outs, t0 = [], time.process_time()
        for op, y, x0, gt, crop in _cases(cfg, t, "test", seed, images, data_dir):
            outs.append((f(y, op, x0, params.get(t)), gt, crop))
        dt = time.process_time() - t0
        rows += [{"setting": t, "metric": "psnr", "value": float(np.mean([_score(O.psnr, *o) for o in outs]))},
                 {"setting": t, "metric": "ssim", "value": float(np.mean([_score(O.ssim, *o) for o in outs]))},
                 {"setting": t, "metric": "cpu_s_per_image", "value": dt / len(outs)}]
    return rows
