"""CBSD68 colour denoising (the `full-color` variant) on tiny local stand-ins through the study's own stages:
a tiny BSDS500-like tar archive of colour JPEGs (one of them named like a CBSD68 test image) and tiny colour
PNGs served over HTTP in place of BSR_bsds500.tgz and the CBSD68 copies; a tiny colour DEAL and DnCNN."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]


def _archive(path: Path, rng) -> None:
    from PIL import Image

    with tarfile.open(path, "w:gz") as tar:
        for sub, stem in (("train", "2092"), ("train", "8023"), ("test", "3096"), ("val", "2000"), ("val", "101085")):
            buf = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(buf, format="JPEG")
            info = tarfile.TarInfo(f"BSR/BSDS500/data/images/{sub}/{stem}.jpg")
            info.size = buf.tell()
            buf.seek(0)
            tar.addfile(info, buf)
        info = tarfile.TarInfo("BSR/BSDS500/data/groundTruth/train/2092.mat")  # not an image: never matched
        info.size = 3
        tar.addfile(info, io.BytesIO(b"mat"))


def _cfg(url: str) -> dict:
    from icml25.core.config import effective, load_study

    cfg = effective(load_study(ROOT, "deal"), "full-color")
    d = cfg["data"]
    assert d["color"] and cfg["model"]["channels"] == [3, 12, 24, 128] and len(d["splits"]["test_skimage"]["files"]) == 68
    assert not cfg["deblur"]["enabled"]
    d.update(patch=16, patches_per_image=2, val_crop=32, test_crop=32)
    for k in ("train", "val"):
        d["splits"][k]["url"] = f"{url}/BSR_bsds500.tgz"
    d["splits"]["test_skimage"].update(base=f"{url}/cbsd68", files=["3096.png", "101085.png"])
    cfg.update(device="cpu", methods=["deal", "dncnn", "tv", "tikhonov", "noisy"])
    cfg["model"].update(channels=[3, 4, 6, 8], kernel=5, sn_size=64)
    cfg["train"].update(steps=2, batch=2, n_out=[2, 3], n_in=5)
    cfg["dncnn"].update(depth=3, features=4, steps=2, batch=2)
    cfg["eval"].update(sigmas=[25], n_out=4, n_in=10)
    cfg["tune"].update(tikhonov_lambdas=[0.1, 1.0], tv_weights=[0.05, 0.1])
    return cfg


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, file_server):
    from PIL import Image

    from icml25.studies.deal import study as S

    tmp = tmp_path_factory.mktemp("color")
    site = tmp / "site"
    (site / "cbsd68").mkdir(parents=True)
    rng = np.random.default_rng(0)
    _archive(site / "BSR_bsds500.tgz", rng)
    for n in ("3096", "101085"):
        Image.fromarray(rng.integers(0, 256, (36, 44, 3), dtype=np.uint8)).save(site / "cbsd68" / f"{n}.png")
    cfg = _cfg(file_server(site))
    S.validate(cfg)
    raw, data = tmp / "raw", tmp / "data"
    data.mkdir()
    S.download(cfg, raw)
    S.preprocess(cfg, raw, data)
    return cfg, site, data


def test_colour_loaders_hold_out_the_test_and_validation_images(prepared):
    from PIL import Image

    from icml25.core.io import read_json
    from icml25.studies.deal import data as D

    cfg, site, data = prepared
    names = read_json(data / "images.json")
    assert names["test"] == ["3096", "101085"]
    # the validation image: the first (sorted) "val" member not in CBSD68: 101085 is a test image, so 2000
    assert names["val"] == ["2000"]
    # training: BSDS500 minus CBSD68 (3096, 101085) and the validation image: 2092 and 8023, 2 patches each
    patches = np.load(data / "train_patches.npy")
    assert patches.shape == (4, 3, 16, 16) and 0 <= patches.min() and patches.max() <= 1
    test = dict(D.load_images(data / "test.npz"))
    want = np.moveaxis(np.asarray(Image.open(site / "cbsd68" / "3096.png"), np.float32) / 255, -1, 0)
    np.testing.assert_allclose(test["3096"], D.centre_crop(want, 32), atol=1e-6)
    assert test["3096"].shape == (3, 32, 32)  # channels first, centre crop of min(32, h, w)


@pytest.mark.parametrize("method", ["deal", "dncnn", "tv", "tikhonov", "noisy"])
def test_colour_methods_run_and_score(prepared, method, tmp_path):
    from icml25.studies.deal import study as S

    cfg, _, data = prepared
    S.train(cfg, method, 0, data, None, tmp_path)
    rows = S.evaluate(cfg, method, 0, data, None, tmp_path)
    got = {(r["setting"], r["metric"]): r["value"] for r in rows}
    assert np.isfinite(got[("denoise/s25", "psnr")]) and 0 < got[("denoise/s25", "ssim")] <= 1
    assert not any(r["setting"] == "deblur" for r in rows)  # colour: denoising only
    ex = np.load(tmp_path / "example.npz")
    assert ex["out"].shape == ex["clean"].shape == (3, 32, 32)
    if method == "deal":
        assert ex["mask"].shape == (32, 32)
        model = S._load_model(cfg, "deal", tmp_path, data)
        assert model.W1.channels[0] == 3
        # the colour spectral estimate: L = sum over input channels of each one's peak |DFT| of W^T W
        with torch.no_grad():
            L = float(model.W1.normalise())
            k = model.W1.raw_WtW_kernel(model.W1.kernels())
            p = (model.W1.sn_size - 1) // 2 - model.W1.pad_total
            spec = torch.fft.fft2(torch.nn.functional.pad(k, (p, p, p, p))).abs()
        assert L == pytest.approx(sum(float(spec[:, c].max()) for c in range(3)), rel=1e-6)
        assert L > float(spec.max())
    if method == "noisy":
        assert got[("denoise/s25", "psnr")] == pytest.approx(20.2, abs=0.6)  # sigma 25 noise on [0, 1] images


def test_colour_needs_a_colour_model():
    from icml25.core.config import effective, load_study
    from icml25.core.errors import UserError
    from icml25.studies.deal import study as S

    cfg = effective(load_study(ROOT, "deal"), "full-color")
    cfg["model"]["channels"] = [1, 4, 8, 128]
    with pytest.raises(UserError, match="channels"):
        S.validate(cfg)
    label, psnr, params = S.paper_reference(effective(load_study(ROOT, "deal"), "full-color"))
    assert "CBSD68" in label and psnr == {5: 40.33, 15: 33.95, 25: 31.31} and params == "847,002"
