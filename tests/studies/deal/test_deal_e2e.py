"""deal end to end at smoke scale through the real `snakemake` CLI on a copy of the workflow (table, claims,
figures), and the full-scale image loaders (url splits) on tiny local PNGs served over HTTP."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml


# this study's methods in the session's shared smoke run (conftest.study_smoke): fewer jobs, every stage runs
SMOKE_METHODS = ["deal", "deal_noattn", "tv", "wcrr"]  # wcrr: the official initialisation (no checkpoint)


def test_snakemake_smoke_end_to_end(study_smoke):
    root = study_smoke("deal")  # the session's one snakemake run, with SMOKE_METHODS for this study
    raw = yaml.safe_load((root / "config" / "studies" / "deal.yaml").read_text())
    tables = root / "results" / "smoke" / "tables"
    md = (tables / "deal.md").read_text()
    assert "DEAL, paper (BSD68 gray" in md and "31.61" in md and "## Claims" in md
    assert "CT PSNR" in md and "MRI PSNR" in md  # the reused models on CT and MRI, in the same table
    assert "WCRR-NN (official checkpoint at full scale)" in md  # its DAG path: train (tuning) and evaluate jobs
    claims = {c["id"]: c for c in json.loads((tables / "deal.claims.json").read_text())["claims"]}
    assert claims["deal_near_dncnn"]["verdict"] == "n.a."  # dncnn not run: n.a., not a crash
    assert claims["attention_worth_half_db"]["verdict"] in ("holds", "fails")
    figs = json.loads((root / "results" / "smoke" / "figures" / "deal" / "figures.json").read_text())
    names = {f["name"]: f for f in figs["figures"]}
    assert {"psnr", "fixed_point_residual", "example"} <= set(names)
    assert all(f["caption"] for f in names.values())
    run = root / "results" / "smoke" / "deal" / "deal" / "seed0"
    fp = json.loads((run / "fixed_point.json").read_text())
    assert len(fp["residuals"]["s25"][0]) == raw["scales"]["smoke"]["eval"]["n_out"]


def test_full_scale_url_loaders_on_local_pngs(tmp_path, file_server):
    from PIL import Image

    from icml25.studies.deal import data as D

    site = tmp_path / "site"
    rng = np.random.default_rng(0)
    for sub, names in (("train", ["test_001.png", "test_002.png"]), ("bsd", ["test001.png"]), ("val", ["test_400.png"]),
                       ("set12", ["01.png"])):
        (site / sub).mkdir(parents=True)
        for n in names:
            Image.fromarray(rng.integers(0, 256, (40, 48), dtype=np.uint8)).save(site / sub / n)
    rgb = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(site / "bsd" / "test002.png")
    url = file_server(site)
    cfg = {"data": {"seed": 0, "patch": 16, "patches_per_image": 3, "test_crop": None, "val_crop": 32,
                    "splits": {"train": {"source": "url", "base": f"{url}/train", "pattern": "test_{:03d}.png",
                                         "range": [1, 2]},
                               "test": {"source": "url", "base": f"{url}/bsd", "pattern": "test{:03d}.png",
                                        "range": [1, 2]},
                               "val": {"source": "url", "base": f"{url}/val", "files": ["test_400.png"]},
                               "set12": {"source": "url", "base": f"{url}/set12", "pattern": "{:02d}.png", "range": [1, 1]}},
                    "train_splits": ["train"], "test_splits": ["test"], "deblur_splits": ["set12"], "val_split": "val"},
           "inverse": {"enabled": True, "size": 32, "phantom": True}}
    raw, out = tmp_path / "raw", tmp_path / "out"
    out.mkdir()
    D.download(cfg, raw)
    assert (raw / "train" / "test_002.png").exists() and (raw / "test" / "test002.png").exists()
    D.preprocess(cfg, raw, out)
    patches = np.load(out / "train_patches.npy")
    assert patches.shape == (6, 16, 16) and 0 <= patches.min() and patches.max() <= 1
    test = dict(D.load_images(out / "test.npz"))
    assert set(test) == {"test001", "test002"} and test["test001"].shape == (40, 48)  # whole images
    want = np.asarray(Image.open(site / "bsd" / "test001.png"), np.float32) / 255
    np.testing.assert_allclose(test["test001"], want, atol=1e-6)
    assert test["test002"].ndim == 2  # colour converted to gray
    (name, deblur), = D.load_images(out / "deblur.npz")  # deblurring on its own split (Set12 at full), not BSD68
    assert name == "01"
    np.testing.assert_allclose(deblur, np.asarray(Image.open(site / "set12" / "01.png"), np.float32) / 255, atol=1e-6)
    inv = dict(D.load_images(out / "inverse.npz"))  # CT / MRI: the phantom + square crops of the deblurring split
    assert list(inv) == ["shepp_logan_phantom", "01"] and all(v.shape == (32, 32) for v in inv.values())
    np.testing.assert_allclose(inv["01"], D.centre_crop(deblur, 32), atol=0)
    (name, val), = D.load_images(out / "val.npz")
    assert name == "test_400" and val.shape == (32, 32)
    (raw / "train" / "test_001.png").unlink()
    from icml25.core.errors import UserError

    with pytest.raises(UserError, match="download"):
        D.preprocess(cfg, raw, out)


def test_device_follows_the_config(monkeypatch):
    """`device: auto` is a GPU where one exists (the full scale), the host otherwise; a model and its batches
    land where the config says (only the CPU can be exercised here)."""
    import torch

    from icml25.studies.deal import training as T

    assert T.device_of({}) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert T.device_of({"device": "auto"}) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert T.device_of({"device": "auto"}) == torch.device("cuda")
    assert T.device_of({"device": "cuda"}) == torch.device("cuda")
    x, y, s = next(T._batches(np.zeros((4, 8, 8), np.float32), 2, 1, [5, 30], 0, torch.device("meta")))
    assert x.device.type == y.device.type == s.device.type == "meta"
