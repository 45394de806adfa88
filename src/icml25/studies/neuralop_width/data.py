"""Data of the neuralop_width study: procedural operator-learning problems and the full-scale loader.

* antiderivative: u ~ GRF (RBF kernel, length 0.2) on m sensors of [0, 1]; G(u)(x) = int_0^x u, by the
  cumulative trapezoid rule on the sensor grid (DeepONet's first example).
* diffusion-reaction: s_t = D s_xx + k s^2 + u(x) on [0, 1] x [0, 1], s(x, 0) = 0, s(0, t) = s(1, t) = 0,
  D = k = 0.01 (DeepONet's example); Crank-Nicolson for the diffusion, the reaction and the source
  explicit, vectorised over all functions at once.
* burgers: u_t + (u^2 / 2)_x = nu u_xx on the periodic unit interval, nu = 0.01, u0 ~ GRF
  N(0, 625 (-Laplacian + 25 I)^-2) (the FNO paper's distribution); pseudo-spectral with the 2/3 rule and
  an integrating-factor RK4 step (the viscous term exactly, the nonlinearity with RK4); G(u0) = u(., 1).

Each problem is stored as one npz: for DeepONet problems `u` (n, sensors), `y` (q, d) query points
shared by all functions and `s` (n, q) targets; for Burgers `u` (n, grid) and `s` (n, grid).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from icml25.core.errors import UserError

# PDEBench 1D Burgers, nu = 0.01 (10k trajectories, 1024 points, t in [0, 2]); URL and MD5 from PDEBench's
# pdebench/data_download/pdebench_data_urls.csv (the sha256 was published by a later mirror check).
FULL_SOURCES = {
    "burgers": {
        "url": "https://darus.uni-stuttgart.de/api/access/datafile/281363",
        "file": "1D_Burgers_Sols_Nu0.01.hdf5",
        "md5": "e6d9a4f62baf9a29121a816b919e2770",
        "sha256": "646f59072348fff722ffe65b47eda755fe1fe106f1dd4a76887cdb89b885ce7b",
    },
}


# ---- Gaussian random fields -------------------------------------------------------------------

def grf_rbf(n: int, x: np.ndarray, length: float, rng: np.random.Generator) -> np.ndarray:
    """n samples of a zero-mean GRF with k(x, x') = exp(-|x - x'|^2 / (2 l^2)) on the points x."""
    d = x[:, None] - x[None, :]
    cov = np.exp(-0.5 * (d / length) ** 2)
    w, v = np.linalg.eigh(cov)  # the RBF Gram matrix is numerically singular: use its PSD square root
    root = v * np.sqrt(np.clip(w, 0.0, None))
    return rng.standard_normal((n, len(x))) @ root.T


def grf_periodic(n: int, grid: int, rng: np.random.Generator, alpha: float = 2.0, tau: float = 5.0,
                 sigma: float = 25.0) -> np.ndarray:
    """n samples of N(0, sigma^2 (-Laplacian + tau^2 I)^-alpha) on the periodic unit interval (FNO paper)."""
    k = np.fft.rfftfreq(grid, d=1.0 / grid)  # 0..grid/2
    sqrt_eig = sigma * (4 * np.pi**2 * k**2 + tau**2) ** (-alpha / 2)
    coef = (rng.standard_normal((n, len(k))) + 1j * rng.standard_normal((n, len(k)))) / np.sqrt(2)
    coef[:, 0] = rng.standard_normal(n)  # the mean mode is real
    if grid % 2 == 0:
        coef[:, -1] = rng.standard_normal(n)
    # u(x) = sum_k a_k e^{2 pi i k x} with Var(a_k) = eig_k: irfft with norm="forward" sums the modes
    return np.fft.irfft(coef * sqrt_eig, n=grid, norm="forward")


# ---- antiderivative ---------------------------------------------------------------------------

def antiderivative(n: int, sensors: int, length: float, rng: np.random.Generator) -> dict:
    from scipy.integrate import cumulative_trapezoid

    x = np.linspace(0.0, 1.0, sensors)
    u = grf_rbf(n, x, length, rng)
    s = cumulative_trapezoid(u, x, axis=1, initial=0.0)
    return {"u": u.astype(np.float32), "y": x[:, None].astype(np.float32), "s": s.astype(np.float32)}


# ---- diffusion-reaction -----------------------------------------------------------------------

def solve_diffusion_reaction(u: np.ndarray, nt: int, D: float = 0.01, k: float = 0.01,
                             T: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """s_t = D s_xx + k s^2 + u(x), zero initial and boundary values, for every row of u at once.

    u is given on nx uniform points of [0, 1] (boundaries included). Crank-Nicolson in the diffusion,
    explicit (forward Euler) in the reaction and the source. Returns x (nx,), t (nt,), s (n, nt, nx).
    """
    from scipy.linalg import lu_factor, lu_solve

    n, nx = u.shape
    x = np.linspace(0.0, 1.0, nx)
    t = np.linspace(0.0, T, nt)
    h, dt = x[1] - x[0], t[1] - t[0]
    m = nx - 2  # interior unknowns
    lap = (np.diag(-2.0 * np.ones(m)) + np.diag(np.ones(m - 1), 1) + np.diag(np.ones(m - 1), -1)) / h**2
    A = np.eye(m) - 0.5 * dt * D * lap
    B = np.eye(m) + 0.5 * dt * D * lap
    lu = lu_factor(A)
    s = np.zeros((n, nt, nx))
    cur = np.zeros((m, n))
    src = u[:, 1:-1].T
    for i in range(1, nt):
        cur = lu_solve(lu, B @ cur + dt * (k * cur**2 + src))
        s[:, i, 1:-1] = cur.T
    return x, t, s


def diffusion_reaction(n: int, nx: int, nt: int, q: int, length: float, rng: np.random.Generator,
                       query_rng: np.random.Generator) -> dict:
    x = np.linspace(0.0, 1.0, nx)
    u = grf_rbf(n, x, length, rng)
    _, t, s = solve_diffusion_reaction(u, nt)
    # q query points (x, t) shared by all functions, drawn once from the grid (DeepONet uses random points)
    flat = query_rng.choice(nx * nt, size=min(q, nx * nt), replace=False)
    ti, xi = np.unravel_index(flat, (nt, nx))
    y = np.stack([x[xi], t[ti]], axis=1)
    return {"u": u.astype(np.float32), "y": y.astype(np.float32), "s": s[:, ti, xi].astype(np.float32)}


# ---- Burgers ----------------------------------------------------------------------------------

def solve_burgers(u0: np.ndarray, nu: float, T: float, cfl: float = 0.8, dt_max: float = 1e-3) -> np.ndarray:
    """u_t + (u^2/2)_x = nu u_xx on the periodic unit interval, for every row of u0; returns u(., T).

    Fourier pseudo-spectral in space with 2/3-rule dealiasing of the quadratic term; integrating-factor
    RK4 in time (the viscous part is integrated exactly, so the step is limited by advection only).
    """
    n, N = u0.shape
    k = 2 * np.pi * np.fft.rfftfreq(N, d=1.0 / N)
    mask = np.fft.rfftfreq(N, d=1.0 / N) < N / 3.0  # 2/3 rule
    umax = max(float(np.abs(u0).max()), 1e-12)  # max|u| does not grow (maximum principle)
    dt = min(dt_max, cfl * (1.0 / N) / umax)
    steps = int(np.ceil(T / dt))
    dt = T / steps
    E = np.exp(-nu * k**2 * dt / 2)  # half-step integrating factor
    E2 = E * E

    def N_(v_hat):
        v = np.fft.irfft(v_hat * mask, n=N, axis=1)
        return -0.5j * k * mask * np.fft.rfft(v * v, axis=1)

    v = np.fft.rfft(u0, axis=1)
    for _ in range(steps):
        a = N_(v)
        b = N_(E * (v + 0.5 * dt * a))
        c = N_(E * v + 0.5 * dt * b)
        d = N_(E2 * v + dt * E * c)
        v = E2 * v + dt / 6.0 * (E2 * a + 2.0 * E * (b + c) + d)
    return np.fft.irfft(v, n=N, axis=1)


def burgers(n: int, grid: int, solve_grid: int, nu: float, T: float, rng: np.random.Generator) -> dict:
    if solve_grid % grid:
        raise UserError(f"neuralop_width: burgers solve_grid {solve_grid} must be a multiple of grid {grid}")
    u0 = grf_periodic(n, solve_grid, rng)
    uT = solve_burgers(u0, nu, T)
    step = solve_grid // grid
    return {"u": u0[:, ::step].astype(np.float32), "s": uT[:, ::step].astype(np.float32)}


# ---- the study's data stage -------------------------------------------------------------------

PROBLEMS = ("antiderivative", "diffusion_reaction", "burgers")


def generate(name: str, spec: dict, split: str, seed: int) -> dict:
    """One split of one problem; independent streams for train and test."""
    n = int(spec[f"n_{split}"])
    rng = np.random.default_rng([seed, PROBLEMS.index(name), 0 if split == "train" else 1])
    if name == "antiderivative":
        return antiderivative(n, int(spec["sensors"]), float(spec["length_scale"]), rng)
    if name == "diffusion_reaction":
        # the query points are shared by the train and test functions
        query_rng = np.random.default_rng([seed, PROBLEMS.index(name), 2])
        return diffusion_reaction(n, int(spec["nx"]), int(spec["nt"]), int(spec["q"]),
                                  float(spec["length_scale"]), rng, query_rng)
    if name == "burgers":
        return burgers(n, int(spec["grid"]), int(spec["solve_grid"]), float(spec["nu"]), float(spec["T"]), rng)
    raise UserError(f"neuralop_width: unknown problem '{name}'; known: {', '.join(PROBLEMS)}")


def write_npz(path: Path, arrays: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)


def load_npz(path: Path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def load_pdebench_burgers(path: Path, n_train: int, n_test: int, grid: int, t_out: float) -> tuple[dict, dict]:
    """PDEBench 1D Burgers HDF5 (`tensor` (N, nt, nx), `t-coordinate`): u(., 0) -> u(., t_out) on `grid` points."""
    import h5py

    with h5py.File(path, "r") as f:
        tensor = f["tensor"]
        tcoord = np.asarray(f["t-coordinate"])
        N, nt, nx = tensor.shape
        if n_train + n_test > N:
            raise UserError(f"{path}: has {N} trajectories, the config asks for {n_train + n_test}")
        if nx % grid:
            raise UserError(f"{path}: {nx} points are not a multiple of grid {grid}")
        ti = int(np.argmin(np.abs(tcoord[:nt] - t_out)))
        step = nx // grid
        u0 = np.asarray(tensor[: n_train + n_test, 0, ::step], dtype=np.float32)
        uT = np.asarray(tensor[: n_train + n_test, ti, ::step], dtype=np.float32)
    return ({"u": u0[:n_train], "s": uT[:n_train]}, {"u": u0[n_train:], "s": uT[n_train:]})
