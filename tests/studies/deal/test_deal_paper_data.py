"""The paper's CT / MRI data at full scale (goujon_data.py) on a tiny LOCAL stand-in written in the official layout
of Goujon et al.'s Zenodo record (axgoujon/convex_ridge_regularizers inverse_problems/{ct,mri}/data/data_loader.py):
a Zenodo-API record JSON and two zip archives served over HTTP, then download / preprocess / train / evaluate of the
full config; and the operators it adds: multi-coil MRI with sensitivity maps and the official CT geometry."""
from __future__ import annotations

import hashlib
import io
import json
import math
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from full_stand_in import full_cfg

CT_TASK = {"kind": "ct", "views": 10, "detectors": 24, "size": 32, "half_width": 64.0, "noise_level": 0.5,
           "max_residual_ratio": 5}


def _dot(a, b) -> float:  # the real inner product of (possibly complex) tensors
    return float((a * b.conj()).real.sum()) if a.is_complex() else float((a * b).sum())


def _mri_parts(rng, coils=3, h=12, w=10):
    mask = rng.random((h, w)) < 0.5
    smaps = (rng.standard_normal((coils, h, w)) + 1j * rng.standard_normal((coils, h, w))).astype(np.complex64)
    x = torch.as_tensor(rng.standard_normal((2, 1, h, w)), dtype=torch.float32)
    y = torch.as_tensor(rng.standard_normal((2, coils, h, w)) + 1j * rng.standard_normal((2, coils, h, w)),
                        dtype=torch.complex64)
    return mask, smaps, x, y


def test_multicoil_adjoint_is_exact():
    from icml25.studies.deal import inverse as I

    mask, smaps, x, y = _mri_parts(np.random.default_rng(0))
    op = I.MultiCoilMRI(mask, smaps)

    def gap(At):
        return abs(_dot(op.A(x), y) - _dot(x, At(y))) / abs(_dot(op.A(x), y))

    assert gap(op.At) < 1e-5
    # deliberately broken adjoints: maps not conjugated; the mask left out
    no_conj = lambda v: (torch.fft.ifft2(v * op.M, norm="ortho") * op.S).real.sum(1, keepdim=True)  # noqa: E731
    no_mask = lambda v: (torch.fft.ifft2(v, norm="ortho") * op.S.conj()).real.sum(1, keepdim=True)  # noqa: E731
    assert gap(no_conj) > 1e-2 and gap(no_mask) > 1e-2


def test_one_coil_of_ones_is_the_single_coil_operator():
    from icml25.studies.deal import inverse as I

    mask, _, x, y = _mri_parts(np.random.default_rng(1), coils=1)
    multi, single = I.MultiCoilMRI(mask, np.ones((1,) + mask.shape, np.complex64)), I.MRI(mask)
    assert torch.allclose(multi.A(x), single.A(x), atol=1e-6)
    assert torch.allclose(multi.At(y), single.At(y), atol=1e-6)
    # and not with maps of another modulus (the check can fail)
    half = I.MultiCoilMRI(mask, 0.5 * np.ones((1,) + mask.shape, np.complex64))
    assert not torch.allclose(half.A(x), single.A(x), atol=1e-3)


def _blob(n: int, R: float, c, a: float) -> np.ndarray:
    """A Gaussian blob exp(-|p - c|^2 / 2a^2) sampled at the pixel centres of the ODL grid (axis 0 = x, 1 = y)."""
    g = -R + (np.arange(n) + 0.5) * (2 * R / n)
    X, Y = np.meshgrid(g, g, indexing="ij")
    return np.exp(-((X - c[0]) ** 2 + (Y - c[1]) ** 2) / (2 * a * a))


def _blob_sinogram(views, n_det, R, c, a, broken=None) -> np.ndarray:
    """The exact ray transform of the blob in ODL's parallel-beam geometry: √(2π) a exp(-(s - <c, θ>)^2 / 2a^2),
    θ = (cos φ, sin φ), φ = (k + 1/2) π / views, s the detector cell centres on [-R√2, R√2]."""
    phi = (np.arange(views) + 0.5) * math.pi / views
    rho = R * math.sqrt(2)
    s = -rho + (np.arange(n_det) + 0.5) * (2 * rho / n_det)
    if broken == "flip_detector":
        s = s[::-1]
    cx, cy = (c[1], c[0]) if broken == "transpose" else c
    if broken == "angles_from_0":
        phi = np.arange(views) * math.pi / views
    d = s[None, :] - (cx * np.cos(phi) + cy * np.sin(phi))[:, None]
    return math.sqrt(2 * math.pi) * a * np.exp(-d * d / (2 * a * a))


def test_ct_projector_has_the_official_geometry():
    """Our matrix in the official (ODL) geometry equals the analytic ray transform of an off-centre Gaussian in the
    data's length units; a transposed image axis, a reversed detector or angles from 0 do not."""
    from icml25.studies.deal import inverse as I

    task = dict(CT_TASK, size=64, half_width=16.0, views=12, detectors=48)
    op = I.paper_ct(task)
    c, a = (5.0, -3.0), 2.0
    got = I.apply_unnormalised(op, _blob(64, 16.0, c, a))

    def rel(ref):
        return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))

    assert rel(_blob_sinogram(12, 48, 16.0, c, a)) < 0.01
    for broken in ("transpose", "flip_detector", "angles_from_0"):
        assert rel(_blob_sinogram(12, 48, 16.0, c, a, broken)) > 0.1, broken
    # the normalised operator has unit norm and its transpose is the exact adjoint
    x = torch.rand(1, 1, 64, 64)
    y = torch.rand(1, 1, 12, 48)
    assert abs(_dot(op.A(x), y) - _dot(x, op.At(y))) / abs(_dot(op.A(x), y)) < 1e-5


# ---- the official layout through the stages ----------------------------------------------------------------

def _pt(t) -> bytes:
    buf = io.BytesIO()
    torch.save(t, buf)
    return buf.getvalue()


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _write_ct(zf, prefix, rng, broken=False):
    """data_sets/{val,test}/{Phantom,FBP,Sinogram}/*.npy as make_data_sets.py names them; sinograms from our
    projector (no ODL / astra here) plus noise at 0.5 and 1.0."""
    from icml25.studies.deal import inverse as I

    op = I.paper_ct(CT_TASK)
    for split, idx in (("val", [0, 50]), ("test", [301, 302])):
        for i in idx:
            im = _blob(32, 64.0, rng.uniform(-40, 40, 2) * [1, -1], rng.uniform(8, 16)) + 0.1 * rng.random((32, 32))
            im = (im - im.min()) / (im.max() - im.min())
            zf.writestr(f"{prefix}{split}/Phantom/phantom_{i}.npy", _npy(im))
            for sig in (0.5, 1.0):
                sino = I.apply_unnormalised(op, im.T if broken else im) + sig * rng.standard_normal((10, 24))
                zf.writestr(f"{prefix}{split}/Sinogram/sinogram_sig_{sig:.1f}_{i}.npy", _npy(sino.astype(np.float32)))
                fbp = np.clip(im + 0.2 * rng.standard_normal(im.shape), 0, 1)  # a stand-in FBP image
                zf.writestr(f"{prefix}{split}/FBP/fbp_sig_{sig:.1f}_{i}.npy", _npy(fbp.astype(np.float32)))


def _write_mri(zf, prefix, rng):
    """data_sets/<coil>_acc_<a>_cf_<cf>_noisesd_0.002/{pd,pdfs}/{val,test}_images/<file>/*.pt as generate_data.py
    saves them (batch axis first), at 24x20 with a 16x16 crop; multi-coil with 2 coils' maps."""
    h, w, crop = 24, 20, 16
    for folder, coils in (("singlecoil_acc_4_cf_0.08_noisesd_0.002", 0), ("multicoil_acc_8_cf_0.04_noisesd_0.002", 2)):
        for dtype in ("pd", "pdfs"):
            for split, files in (("val", ["file1000001"]), ("test", ["file1000002", "file1000003"])):
                for f in files:
                    x = torch.as_tensor(rng.random((1, 1, h, w)), dtype=torch.float32)
                    mask = torch.as_tensor(np.broadcast_to(rng.random(w) < 0.4, (1, 1, h, w)).copy(), dtype=torch.float32)
                    base = f"{prefix}{folder}/{dtype}/{split}_images/{f}/"
                    if coils:
                        smaps = torch.as_tensor(rng.standard_normal((1, coils, h, w)) + 1j * rng.standard_normal((1, coils, h, w)),
                                                dtype=torch.complex64)
                        smaps = smaps / smaps.abs().pow(2).sum(1, keepdim=True).sqrt()
                        y0 = torch.fft.fft2(x * smaps, norm="ortho") * mask
                        zf.writestr(base + "smaps.pt", _pt(smaps))
                    else:
                        y0 = torch.fft.fft2(x, norm="ortho") * mask
                    noise = 0.002 * (torch.randn(y0.shape) + 1j * torch.randn(y0.shape))
                    zf.writestr(base + "y.pt", _pt((y0 + noise) * mask))
                    zf.writestr(base + "mask.pt", _pt(mask))
                    zf.writestr(base + "x.pt", _pt(x))
                    top = (h - crop) // 2, (w - crop) // 2
                    zf.writestr(base + "x_crop.pt", _pt(x[..., top[0]:top[0] + crop, top[1]:top[1] + crop].clone()))


def _site(root: Path, url: str, broken_ct=False) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    for sub, name in (("train", "test_001.png"), ("train", "test_400.png"), ("bsd", "test001.png"), ("set12", "01.png")):
        (root / sub).mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (40, 48), dtype=np.uint8)).save(root / sub / name)
    with zipfile.ZipFile(root / "CT_data.zip", "w") as zf:      # a top folder named data_sets ...
        _write_ct(zf, "data_sets/", rng, broken_ct)
    with zipfile.ZipFile(root / "MRI_data.zip", "w") as zf:     # ... or another one: both are found
        _write_mri(zf, "mri/data_sets/", rng)
    (root / "README.txt").write_text("not an archive")
    files = []
    for name in ("CT_data.zip", "MRI_data.zip", "README.txt"):
        md5 = hashlib.md5((root / name).read_bytes()).hexdigest()
        files.append({"key": name, "checksum": f"md5:{md5}", "links": {"self": f"{url}/files/{name}/content"}})
        (root / "files" / name).mkdir(parents=True, exist_ok=True)
        (root / "files" / name / "content").write_bytes((root / name).read_bytes())
    (root / "api" / "records").mkdir(parents=True)
    (root / "api" / "records" / "8302121").write_text(json.dumps({"id": 8302121, "files": files}))


def _cfg(url: str) -> dict:
    cfg = full_cfg(url)
    inv = cfg["inverse"]
    assert inv["paper_data"]["api"] == "https://zenodo.org/api/records/8302121"
    assert sorted(inv["tasks"]) == ["ct", "mri", "mri_multi"]
    assert (inv["tasks"]["ct"]["views"], inv["tasks"]["ct"]["detectors"], inv["tasks"]["ct"]["size"]) == (200, 400, 512)
    inv["paper_data"]["api"] = f"{url}/api/records/8302121"
    inv["tasks"]["ct"].update(CT_TASK)
    inv.update(n_out=3, n_in=5, pnp_iters=2, tv_iters=2, tikhonov_lambdas=[0.001, 0.1], tv_weights=[0.001, 0.01],
               deal_lambdas=[0.1, 1.0])
    cfg["methods"] = ["deal", "tikhonov", "noisy"]
    cfg["model"].update(channels=[1, 2, 4, 8], kernel=5, sn_size=64)
    cfg["train"].update(steps=1, batch=2, n_out=[2, 2], n_in=5)
    cfg["eval"].update(sigmas=[25], n_out=3, n_in=5)
    cfg["deblur"]["enabled"] = False
    return cfg


@pytest.fixture(scope="module")
def staged(tmp_path_factory, file_server):
    from icml25.studies.deal import study as S

    tmp = tmp_path_factory.mktemp("paper")
    site = tmp / "site"
    site.mkdir()
    url = file_server(site)
    _site(site, url)
    cfg = _cfg(url)
    S.validate(cfg)
    raw, data = tmp / "raw", tmp / "data"
    data.mkdir()
    S.download(cfg, raw)
    S.preprocess(cfg, raw, data)
    return cfg, site, raw, data, tmp


def test_download_takes_the_records_files_with_their_md5(staged, tmp_path):
    from icml25.core.errors import UserError
    from icml25.studies.deal import goujon_data as G

    cfg, site, raw, _, _ = staged
    got = sorted(p.name for p in (raw / "goujon").iterdir())
    assert got == ["CT_data.zip", "MRI_data.zip", "README.txt", "record.json"]
    assert (raw / "goujon" / "CT_data.zip").read_bytes() == (site / "CT_data.zip").read_bytes()
    # the record's md5 is checked: a wrong one fails the download
    rec = json.loads((site / "api" / "records" / "8302121").read_text())
    rec["files"][0]["checksum"] = "md5:" + "0" * 32
    (site / "api" / "records" / "bad").write_text(json.dumps(rec))
    bad = {**cfg, "inverse": {**cfg["inverse"], "paper_data": {"api": cfg["inverse"]["paper_data"]["api"][:-7] + "bad"}}}
    with pytest.raises(UserError, match="checksum mismatch"):
        G.download(bad, tmp_path)


def test_preprocess_reads_the_official_layout(staged):
    from icml25.core.io import read_json

    cfg, site, _, data, _ = staged
    root = data / "paper_inverse"
    assert sorted(p.stem for p in (root / "ct" / "test").glob("*.npz")) == ["301", "302"]
    assert sorted(p.stem for p in (root / "mri" / "val").glob("*.npz")) == ["pd_file1000001", "pdfs_file1000001"]
    assert len(list((root / "mri_multi" / "test").glob("*.npz"))) == 4
    with zipfile.ZipFile(site / "CT_data.zip") as zf:  # the noise level's files, paired by slice index
        sino = np.load(io.BytesIO(zf.read("data_sets/test/Sinogram/sinogram_sig_0.5_302.npy")))
        fbp = np.load(io.BytesIO(zf.read("data_sets/test/FBP/fbp_sig_0.5_302.npy")))
    with np.load(root / "ct" / "test" / "302.npz") as z:
        assert np.array_equal(z["y"], sino) and np.array_equal(z["x0"], fbp)
    with np.load(root / "mri_multi" / "val" / "pdfs_file1000001.npz") as z:
        assert z["y"].shape == (2, 24, 20) and z["smaps"].shape == (2, 24, 20) and z["x"].shape == (16, 16)
    # our projector reproduces the stored sinograms to their noise level (residual sd / noise sd near 1)
    check = read_json(root / "ct" / "projector_check.json")
    assert 0.7 < check["ratio"] < 1.3


def test_ct_and_mri_are_evaluated_on_the_official_cases(staged):
    from icml25.core.io import read_json
    from icml25.studies.deal import inverse as I
    from icml25.studies.deal import operators as O
    from icml25.studies.deal import study as S
    from icml25.studies.deal.data import centre_crop

    cfg, _, _, data, tmp = staged
    rows = {}
    for m in ("deal", "tikhonov", "noisy"):
        run = tmp / f"run_{m}"
        run.mkdir()
        S.train(cfg, m, 0, data, None, run)
        tuned = read_json(run / "tuned.json")
        if m != "noisy":  # tuned on the official validation cases, one value per task from the grid
            grid = cfg["inverse"]["deal_lambdas" if m == "deal" else "tikhonov_lambdas"]
            assert all(tuned[t] in grid and len(tuned[f"{t}_val_psnr"]) == 2 for t in ("ct", "mri", "mri_multi"))
        rows[m] = {(r["setting"], r["metric"]): r["value"] for r in S.evaluate(cfg, m, 0, data, None, run)}
    for t in ("ct", "mri", "mri_multi"):
        assert all(np.isfinite(rows[m][(t, "psnr")]) for m in rows)
    # the noisy row is the official input: the stored FBP for CT, the zero-filled image's centre crop for MRI
    fbp, zf = [], []
    for f in sorted((data / "paper_inverse" / "ct" / "test").glob("*.npz")):
        with np.load(f) as z:
            fbp.append(O.psnr(z["x0"], z["x"]))
    for f in sorted((data / "paper_inverse" / "mri_multi" / "test").glob("*.npz")):
        with np.load(f) as z:
            op = I.MultiCoilMRI(z["mask"], z["smaps"])
            x0 = O.from_batch(op.At(torch.as_tensor(z["y"])[None]))
            zf.append(O.psnr(centre_crop(x0, 16), z["x"]))
    assert rows["noisy"][("ct", "psnr")] == pytest.approx(np.mean(fbp), abs=1e-6)
    assert rows["noisy"][("mri_multi", "psnr")] == pytest.approx(np.mean(zf), abs=1e-5)
    # Tikhonov on the official measurements (CT: the stored sinogram on our unit-norm scale) improves on the inputs
    assert rows["tikhonov"][("mri", "psnr")] > rows["noisy"][("mri", "psnr")]
    assert rows["tikhonov"][("ct", "psnr")] > rows["noisy"][("ct", "psnr")]
    import pandas as pd

    agg = pd.DataFrame([{"method": m, "setting": k[0], "metric": k[1], "mean": v, "std": 0.0, "n": 1}
                        for m, r in rows.items() for k, v in r.items()])
    table = S.make_table(agg, cfg).set_index("method")
    assert table.loc[S.METHODS["tikhonov"].label, "MRI_MULTI PSNR"] == f"{rows['tikhonov'][('mri_multi', 'psnr')]:.2f} ± 0.00"


def test_a_projector_that_does_not_match_the_data_stops_preprocess(tmp_path, file_server):
    """Sinograms made with the image axes swapped (another geometry) leave residuals far above the noise."""
    from icml25.core.errors import UserError
    from icml25.studies.deal import study as S

    site = tmp_path / "site"
    site.mkdir()
    url = file_server(site)
    _site(site, url, broken_ct=True)
    cfg = _cfg(url)
    raw, data = tmp_path / "raw", tmp_path / "data"
    data.mkdir()
    S.download(cfg, raw)
    with pytest.raises(UserError, match="geometry does not match"):
        S.preprocess(cfg, raw, data)


# ---- the full path's costs: each archive read once, the CT matrix built and normalised once -------------------

def test_preprocess_opens_each_archive_once(staged, tmp_path, monkeypatch):
    """Preprocess of three tasks over two archives opens each archive once (not once per member it reads), and
    writes the same cases as before."""
    from icml25.studies.deal import goujon_data as G
    from icml25.studies.deal import study as S

    cfg, _, raw, data, _ = staged
    opened = []

    class Counting(zipfile.ZipFile):
        def __init__(self, file, *a, **k):
            name = Path(getattr(file, "name", file)).name
            if name.endswith(".zip"):  # the downloaded archives (np.load reads the written .npz files too)
                opened.append(name)
            super().__init__(file, *a, **k)

    monkeypatch.setattr(G.zipfile, "ZipFile", Counting)
    again = tmp_path / "data"
    again.mkdir()
    S.preprocess(cfg, raw, again)
    assert sorted(opened) == ["CT_data.zip", "MRI_data.zip"]
    for f in sorted((data / "paper_inverse").rglob("*.npz")):
        with np.load(f) as a, np.load(again / f.relative_to(data)) as b:
            assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files), f


def test_ct_operator_holds_one_normalised_matrix_and_copies_it_once_per_device(monkeypatch):
    """The operator keeps no host (scipy) copy of its matrix, only A = S/||S|| and A^T; `to` a device makes one
    copy per device from those tensors (no rebuild, no second normalisation) and returns it on every later call."""
    import scipy.sparse as sp

    from icml25.studies.deal import inverse as I

    op = I.OdlParallelBeamCT(16, 4, 12, 4.0)
    assert not any(sp.issparse(v) for v in vars(op).values())
    assert op.to("cpu") is op
    monkeypatch.setattr(I, "_sparse", lambda *a, **k: pytest.fail("to() rebuilt the matrix"))
    meta = op.to("meta")
    assert meta is op.to("meta") and meta.S.device.type == "meta" and meta.St.device.type == "meta"
    assert meta.S.shape == op.S.shape and meta.norm == op.norm and op.S.device.type == "cpu"
    blur = I.O.Blur(I.O.gaussian_kernel(3, 1.0), (8, 8))  # the deblurring operator likewise
    assert blur.to("cpu") is blur and blur.to("meta") is blur.to("meta")
    # the unnormalised ray sums are ||S|| A x: the stored matrix times its norm
    x = np.random.default_rng(0).random((16, 16))
    got = I.apply_unnormalised(op, x)
    ref = I._odl_ray_matrix(16, 4, 12, 4.0).astype(np.float64) @ x.reshape(-1)
    assert np.allclose(got.reshape(-1), ref, rtol=1e-5, atol=1e-6)
