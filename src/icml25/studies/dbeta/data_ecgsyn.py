"""A batched numpy implementation of the ECGSYN dynamical model (McSharry et al. 2003), the model behind
`neurokit2.ecg_simulate(method="multileads")`, with the conditions of the synthetic corpus.

ECGSYN moves a point on the unit circle with angular speed 2*pi / RR (so the phase theta advances 2*pi per
beat) and drives the height z by Gaussian "waves" at fixed angles (P, Q, R, S, T):

    dz/dt = - sum_i a_i * dtheta_i * exp(-dtheta_i^2 / (2 b_i^2)) - (z - z_base(t)),

with dtheta_i = wrap(theta - theta_i) and z_base a 0.25 Hz respiration term. neurokit2 solves this ODE with
`solve_ivp` once per lead (12 leads = the same ODE with per-lead amplitudes gamma[lead] * a); here theta is
integrated from the beat-to-beat RR series in closed form (it is piecewise linear), and z, a linear ODE in
z, is integrated for all records and leads at once with the exact first-order filter on the forcing
(trapezoidal forcing, internal rate `fs_int`), then subsampled to `fs`. The heart-rate adjustment of the
wave angles and widths (sqrt(HR/60) factors) is neurokit2's. neurokit2 min-max scales each lead to
[-0.4, 1.2]; we do NOT (it would erase low voltage): z is multiplied by one global constant.
"""
from __future__ import annotations

import numpy as np

LEADS = ("I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6")
# the 12 x 5 lead amplitude matrix (P, Q, R, S, T) of neurokit2's multilead ECGSYN
GAMMA = np.array([
    [1, 0.1, 1, 1.2, 1], [2, 0.2, 0.2, 0.2, 3], [1, -0.1, -0.8, -1.1, 2.5], [-1, -0.05, -0.8, -0.5, -1.2],
    [0.05, 0.05, 1, 1, 1], [1, -0.05, -0.1, -0.1, 3], [-0.5, 0.05, 0.2, 0.5, 1], [0.05, 0.05, 1.3, 2.5, 2],
    [1, 0.05, 1, 2, 1], [1.2, 0.05, 1, 2, 2], [1.5, 0.1, 0.8, 1, 2], [1.8, 0.05, 0.5, 0.1, 2]], float)
TI = np.array([-70.0, -15.0, 0.0, 15.0, 100.0])   # wave angles, degrees (P Q R S T)
AI = np.array([1.2, -5.0, 30.0, -7.5, 0.75])      # wave amplitudes
BI = np.array([0.25, 0.1, 0.1, 0.1, 0.4])          # wave widths, radians
SCALE = 10.0  # global z -> mV-like scale (one constant for every lead and record)

LABELS = ("SR", "SBRAD", "STACH", "AFIB", "1AVB", "BBB", "TWI", "STE", "LVOLT")
RHYTHMS = ("SR", "SBRAD", "STACH", "AFIB")
ANTERIOR = [6, 7, 8, 9]   # V1-V4
INFERIOR = [1, 2, 5]      # II, III, aVF


def hr_adjusted(ti_deg, bi, hr):
    """neurokit2's heart-rate adjustment: widths * sqrt(HR/60); P and T angles * (HR/60)^(1/4), Q and S
    angles * sqrt(HR/60). ti_deg, bi: (..., 5 or more); hr: (...). Extra waves (index >= 5) scale like T."""
    hrfact = np.sqrt(np.asarray(hr, float) / 60.0)[..., None]
    hrfact2 = np.sqrt(hrfact)
    n = ti_deg.shape[-1]
    f = np.concatenate([hrfact2, hrfact, np.ones_like(hrfact), hrfact, hrfact2] + [hrfact2] * (n - 5), axis=-1)
    return np.deg2rad(ti_deg) * f, bi * hrfact


def phase(rr: np.ndarray, t: np.ndarray) -> np.ndarray:
    """theta(t) in (-pi, pi] for each record: 2*pi per beat, linear within a beat, theta(0) = 0.
    rr: (B, K) beat durations (s); t: (T,) times (s). Returns (B, T)."""
    ends = np.cumsum(rr, axis=1)
    starts = ends - rr
    out = np.empty((rr.shape[0], t.size))
    for b in range(rr.shape[0]):
        k = np.minimum(np.searchsorted(ends[b], t, side="right"), rr.shape[1] - 1)
        out[b] = 2 * np.pi * (t - starts[b, k]) / rr[b, k]
    return np.angle(np.exp(1j * out))


def simulate_z(rr, ti, ai, bi, gamma, duration, fs_int=500, z0=0.04):
    """The ECGSYN z of every record and lead. rr: (B, K) s; ti, bi: (B, W) radians; ai: (B, W);
    gamma: (B, L, W). Returns (B, L, N) at fs_int with N = duration * fs_int."""
    from scipy.signal import lfilter

    n = int(round(duration * fs_int))
    dt = 1.0 / fs_int
    t = np.arange(n) * dt
    theta = phase(rr, t)                                            # (B, N)
    d = theta[:, None, :] - ti[:, :, None]                          # (B, W, N)
    d = d - np.round(d / (2 * np.pi)) * 2 * np.pi                   # neurokit2's wrap
    g = -ai[:, :, None] * d * np.exp(-0.5 * (d / bi[:, :, None]) ** 2)
    f = np.einsum("blw,bwn->bln", gamma, g) + 0.005 * np.sin(2 * np.pi * 0.25 * t)  # dz/dt = f - z
    # z[k+1] = e z[k] + (1 - e) (f[k] + f[k+1]) / 2, e = exp(-dt): the exact decay, trapezoidal forcing
    e = np.exp(-dt)
    bcoef = np.array([(1 - e) / 2, (1 - e) / 2])
    acoef = np.array([1.0, -e])
    # state so that the first output is e*z0 + (1-e)(f[-1] + f[0])/2 with f[-1] := f[0]: z starts at z0
    zi = (e * z0 + (1 - e) / 2 * f[..., :1])
    z = lfilter(bcoef, acoef, f, axis=-1, zi=zi)[0]
    return np.concatenate([np.full(f.shape[:-1] + (1,), z0), z[..., :-1]], axis=-1)


def ecgsyn(hr, n_beats_extra=3, duration=8.0, fs=500, fs_int=500, hr_std=0.0, rng=None, gamma=None):
    """Plain multilead ECGSYN at a constant heart rate (the oracle comparison): (B, 12, duration*fs)."""
    rng = np.random.default_rng(0) if rng is None else rng
    hr = np.atleast_1d(np.asarray(hr, float))
    k = int(np.ceil(duration * hr.max() / 60)) + n_beats_extra
    rr = 60.0 / hr[:, None] * np.ones((hr.size, k)) + hr_std * rng.standard_normal((hr.size, k)) * 60 / hr[:, None] ** 2
    ti, bi = hr_adjusted(np.broadcast_to(TI, (hr.size, 5)), np.broadcast_to(BI, (hr.size, 5)), hr)
    g = np.broadcast_to(GAMMA if gamma is None else gamma, (hr.size, 12, 5))
    z = simulate_z(rr, ti, np.broadcast_to(AI, (hr.size, 5)).copy(), bi, np.ascontiguousarray(g), duration, fs_int)
    return z[..., :: fs_int // fs]


def sample_conditions(n: int, rng, p: dict) -> np.ndarray:
    """Multi-label ground truth (n, 9): one rhythm (SR / SBRAD / STACH / AFIB) and independent morphologies."""
    y = np.zeros((n, len(LABELS)), np.int8)
    r = rng.choice(4, size=n, p=np.asarray(p["rhythm"], float) / np.sum(p["rhythm"]))
    y[np.arange(n), r] = 1
    for j, name in enumerate(LABELS[4:], start=4):
        y[:, j] = rng.random(n) < float(p[name])
    y[y[:, 3] == 1, 4] = 0  # no PR interval (no P wave) in atrial fibrillation
    return y


def generate(labels: np.ndarray, rng, cfg: dict) -> np.ndarray:
    """12-lead records (n, 12, duration*fs) float32 with the conditions in `labels` and the nuisances of
    `cfg` (keys: fs, duration, hr ranges, noise). Records are simulated in chunks."""
    out = []
    chunk = int(cfg.get("chunk", 200))
    for s in range(0, len(labels), chunk):
        out.append(_generate_chunk(labels[s:s + chunk], rng, cfg))
    return np.concatenate(out).astype(np.float32)


def _generate_chunk(y, rng, cfg):
    n = len(y)
    fs, fs_int, dur = int(cfg["fs"]), int(cfg.get("fs_int", 500)), float(cfg["duration"])
    lead_in = 1.5
    sim = dur + lead_in + 0.5
    hr_rng = cfg["hr"]
    rhythm = y[:, :4].argmax(1)
    hr = np.empty(n)
    for j, name in enumerate(RHYTHMS):
        lo, hi = hr_rng[name]
        m = rhythm == j
        hr[m] = rng.uniform(lo, hi, m.sum())
    k = int(np.ceil(sim * hr.max() / 60 * 1.6)) + 4
    beat = np.arange(k)
    # sinus: RR with LF (0.1 Hz) and HF (0.25 Hz, respiratory) modulation and a little jitter
    rr0 = 60.0 / hr[:, None]
    tk = beat[None, :] * rr0
    rr = rr0 * (1 + 0.03 * np.sin(2 * np.pi * 0.1 * tk + rng.uniform(0, 2 * np.pi, (n, 1)))
                + 0.02 * np.sin(2 * np.pi * 0.25 * tk + rng.uniform(0, 2 * np.pi, (n, 1)))
                + 0.01 * rng.standard_normal((n, k)))
    af = y[:, 3] == 1
    cv = rng.uniform(*cfg["af_rr_cv"], af.sum())[:, None]
    rr[af] = rr0[af] * np.clip(1 + cv * rng.standard_normal((af.sum(), k)), 0.45, 2.2)

    ti = np.tile(np.r_[TI, 40.0], (n, 1))
    ai = np.tile(np.r_[AI, 0.0], (n, 1))
    bi = np.tile(np.r_[BI, 0.3], (n, 1))
    gamma = np.tile(np.c_[GAMMA, np.zeros(12)], (n, 1, 1))
    # per-record morphology jitter (amplitudes of the waves)
    ai[:, :5] *= rng.lognormal(0, 0.1, (n, 5))
    ai[af, 0] = 0.0                                             # AFIB: no P wave
    avb = y[:, 4] == 1
    ti[avb, 0] = rng.uniform(-105, -95, avb.sum())              # 1AVB: P angle -70 -> -100 (long PR)
    bbb = y[:, 5] == 1
    bi[bbb, 1:4] *= 1.8                                         # BBB: wide Q, R, S
    rbbb = bbb & (rng.random(n) < 0.5)
    lbbb = bbb & ~rbbb
    gamma[np.ix_(rbbb, [6, 7], [3])] *= -1.5                    # RBBB: terminal R' in V1-V2
    gamma[np.ix_(lbbb, [0, 4, 10, 11], [3])] *= -1.0            # LBBB: no S in I, aVL, V5, V6 ...
    gamma[np.ix_(lbbb, [6, 7], [3])] *= 1.8                     # ... and deep S in V1-V2
    twi = y[:, 6] == 1
    ant = rng.random(n) < 0.5
    for m, leads in ((twi & ant, ANTERIOR), (twi & ~ant, INFERIOR)):
        gamma[np.ix_(m, leads, [4])] = -np.abs(gamma[np.ix_(m, leads, [4])])  # negative T
    ste = y[:, 7] == 1
    ant = rng.random(n) < 0.5
    ai[ste, 5] = rng.uniform(*cfg["ste_amp"], ste.sum())     # an extra wave at +40 deg (ST segment)
    for m, leads in ((ste & ant, ANTERIOR), (ste & ~ant, INFERIOR)):
        gamma[np.ix_(m, leads, [5])] = 1.0

    tiad, biad = hr_adjusted(ti, bi, hr)
    z = simulate_z(rr, tiad, ai, biad, gamma, sim, fs_int)[..., :: fs_int // fs]
    # crop a 5 s window after the start-up transient (random beat phase at the start)
    off = (rng.uniform(lead_in, lead_in + 0.5, n) * fs).astype(int)
    idx = off[:, None] + np.arange(int(dur * fs))[None, :]
    x = np.take_along_axis(z, idx[:, None, :].repeat(12, 1), axis=2) * SCALE
    t = np.arange(int(dur * fs)) / fs
    if af.any():  # f-waves, 4-8 Hz, strongest in V1 and the inferior leads
        f0 = rng.uniform(4, 8, (af.sum(), 1, 1))
        amp = rng.uniform(*cfg["fwave_amp"], (af.sum(), 1, 1))
        pat = np.full(12, 0.4)
        pat[[1, 2, 5, 6]] = 1.0
        ph = rng.uniform(0, 2 * np.pi, (af.sum(), 12, 1))
        drift = 0.5 * np.sin(2 * np.pi * 0.3 * t + rng.uniform(0, 6.3, (af.sum(), 1, 1)))
        x[af] += amp * pat[None, :, None] * np.sin(2 * np.pi * f0 * t + ph + drift)
    x *= np.where(y[:, 8] == 1, float(cfg["lvolt_gain"]), 1.0)[:, None, None]   # LVOLT
    return x * 1.0 + _nuisance(n, t, rng, cfg["noise"])


def _nuisance(n, t, rng, nz):
    """Additive nuisances (baseline wander, EMG, mains hum); lead gains are applied by `add_gains`."""
    L = 12
    bw = rng.uniform(0, nz["wander"], (n, L, 1)) * np.sin(
        2 * np.pi * rng.uniform(0.05, 0.5, (n, 1, 1)) * t + rng.uniform(0, 6.3, (n, L, 1)))
    emg = rng.uniform(0, nz["emg"], (n, 1, 1)) * rng.standard_normal((n, L, t.size))
    hum = rng.uniform(0, nz["hum"], (n, 1, 1)) * np.sin(2 * np.pi * 50 * t + rng.uniform(0, 6.3, (n, L, 1)) + 0.3)
    return bw + emg + hum


def add_gains(x, rng, sd):
    """Per-record, per-lead electrode gains (log-normal)."""
    return (x * rng.lognormal(0, sd, (x.shape[0], x.shape[1], 1))).astype(np.float32)
