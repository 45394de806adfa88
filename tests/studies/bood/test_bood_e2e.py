"""bood end to end at smoke scale through the real `snakemake` CLI (fit_base, train, evaluate, table, claims,
figures), and the full-scale loaders (CIFAR-100 python tarball, SVHN .mat, image tarballs) on tiny local
stand-ins served over HTTP through the same download / preprocess code."""
from __future__ import annotations

import io
import json
import pickle
import tarfile

import numpy as np
import yaml


# this study's methods in the session's shared smoke run (conftest.study_smoke): fewer jobs, every stage runs
SMOKE_METHODS = ["bood", "msp"]


def test_snakemake_smoke_end_to_end(study_smoke):
    root = study_smoke("bood")  # the session's one snakemake run, with SMOKE_METHODS for this study
    raw = yaml.safe_load((root / "config" / "studies" / "bood.yaml").read_text())
    tables = root / "results" / "smoke" / "tables"
    md = (tables / "bood.md").read_text()
    assert "BOOD, paper (CIFAR-100" in md and "10.67" in md and "40.31" in md and "## Claims" in md
    claims = {c["id"]: c for c in json.loads((tables / "bood.claims.json").read_text())["claims"]}
    assert claims["boundary_beats_random_features"]["verdict"] == "n.a."  # the ablation was not run
    assert claims["vos_npos_not_worse_than_posthoc"]["verdict"] == "n.a."  # neither npos nor energy
    assert claims["synthesised_features_cross"]["verdict"] in ("holds", "fails")
    figs = json.loads((root / "results" / "smoke" / "figures" / "bood" / "figures.json").read_text())
    names = {f["name"]: f for f in figs["figures"]}
    assert {"fpr95", "auroc", "steps_to_boundary", "decoded_outliers"} <= set(names)
    assert all(f["caption"] for f in names.values())
    run = root / "results" / "smoke" / "bood" / "bood" / "seed0"
    m = {(r["setting"], r["metric"]): r["value"] for r in json.loads((run / "metrics.json").read_text())["metrics"]}
    assert m[("synth", "n_outliers")] == raw["scales"]["smoke"]["synth"]["n_outliers"]
    assert 0 <= m[("mean", "fpr95")] <= 100 and 0 <= m[("mean", "auroc")] <= 100
    assert (root / "results" / "smoke" / "bood" / "base" / "decoder.pt").exists()


def _tar(path, files: dict):
    with tarfile.open(path, "w:gz") as tar:
        for name, blob in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))


def _png(rng, h, w):
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def test_full_scale_loaders_on_local_stand_ins(tmp_path, file_server):
    from scipy.io import savemat

    from icml25.core.provenance import file_digest
    from icml25.studies.bood import data as D

    rng = np.random.default_rng(0)
    site = tmp_path / "site"
    site.mkdir()
    train = {"data": rng.integers(0, 256, (6, 3072), dtype=np.uint8), "fine_labels": [0, 1, 2, 0, 1, 2]}
    test = {"data": rng.integers(0, 256, (3, 3072), dtype=np.uint8), "fine_labels": [2, 1, 0]}
    meta = {"fine_label_names": ["apple", "bear", "cloud"]}
    _tar(site / "cifar-100-python.tar.gz", {f"cifar-100-python/{k}": pickle.dumps(v) for k, v in
                                            (("train", train), ("test", test), ("meta", meta))})
    svhn = rng.integers(0, 256, (32, 32, 3, 5), dtype=np.uint8)
    savemat(site / "test_32x32.mat", {"X": svhn, "y": np.ones((5, 1))})
    _tar(site / "dtd.tar.gz", {f"dtd/images/banded/b{i}.jpg": _png(rng, 40, 50) for i in range(4)})
    url = file_server(site)
    files = {"cifar100": {"url": f"{url}/cifar-100-python.tar.gz", "file": "cifar-100-python.tar.gz",
                          "md5": file_digest(site / "cifar-100-python.tar.gz", "md5")},
             "svhn": {"url": f"{url}/test_32x32.mat", "file": "test_32x32.mat", "format": "mat"},
             "textures": {"url": f"{url}/dtd.tar.gz", "file": "dtd.tar.gz"}}
    cfg = {"data": {"source": "cifar100", "seed": 0, "train_per_class": None, "ood_per_set": 3,
                    "ood_sets": ["svhn", "textures"], "files": files}}
    raw, out = tmp_path / "raw", tmp_path / "out"
    out.mkdir()
    D.download(cfg, raw)
    D.preprocess(cfg, raw, out)
    x, y = D.load(out, "train")
    assert x.shape == (6, 3, 32, 32) and y.tolist() == [0, 1, 2, 0, 1, 2]
    np.testing.assert_allclose(x[0], train["data"][0].reshape(3, 32, 32) / 255.0, atol=1e-6)
    xt, yt = D.load(out, "test")
    assert xt.shape == (3, 3, 32, 32) and yt.tolist() == [2, 1, 0]
    assert json.loads((out / "classes.json").read_text()) == ["apple", "bear", "cloud"]
    xs, ys = D.load(out, "ood_svhn")
    assert xs.shape == (3, 3, 32, 32) and (ys == -1).all()
    assert any(np.allclose(xs[0], svhn[..., i].transpose(2, 0, 1) / 255.0) for i in range(5))
    xd, _ = D.load(out, "ood_textures")
    assert xd.shape == (3, 3, 32, 32) and 0 <= xd.min() and xd.max() <= 1
