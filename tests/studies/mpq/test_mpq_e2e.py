"""mpq end to end at smoke scale through the real `snakemake` CLI (table, claims, figures, policies), and the
full-scale loaders (CIFAR-10 python tarball, ImageNet-style class folders) on tiny local stand-ins through
the study's own preprocess."""
from __future__ import annotations

import io
import json
import pickle
import tarfile

import numpy as np


# this study's methods in the session's shared smoke run (conftest.study_smoke): fewer jobs, every stage runs
SMOKE_METHODS = ["asga", "dmpq"]


def test_snakemake_smoke_end_to_end(study_smoke):
    root = study_smoke("mpq")  # the session's one snakemake run, with SMOKE_METHODS for this study
    tables = root / "results" / "smoke" / "tables"
    md = (tables / "mpq.md").read_text()
    assert "ASGA (proxy)" in md and "## Claims" in md
    claims = {c["id"]: c for c in json.loads((tables / "mpq.claims.json").read_text())["claims"]}
    assert claims["asga_matches_oracle"]["verdict"] == "n.a."  # no oracle run: n.a., not a crash
    assert claims["asga_flatter"]["verdict"] in ("holds", "fails")
    figs = json.loads((root / "results" / "smoke" / "figures" / "mpq" / "figures.json").read_text())
    names = {f["name"]: f for f in figs["figures"]}
    assert {"accuracy_vs_bitops", "sharpness", "search_time"} <= set(names)
    assert all(f["caption"] for f in names.values())
    run = root / "results" / "smoke" / "mpq" / "asga" / "seed0"
    for s in ("mnist", "subset"):
        pol = json.loads((run / f"policy_{s}.json").read_text())["policy"]
        assert pol and all(b in (2, 3, 4, 6) for v in pol.values() for b in v)


def _cifar_tarball(path, n=6):
    rng = np.random.default_rng(0)
    with tarfile.open(path, "w:gz") as tar:
        for name in ["data_batch_1", "data_batch_2", "test_batch", "batches.meta"]:
            d = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"labels": list(rng.integers(0, 10, n))}
            blob = pickle.dumps(d)
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))


def test_full_scale_loaders_on_local_stand_ins(tmp_path):
    from PIL import Image

    from icml25.studies.mpq import data as D
    from icml25.studies.mpq import study as S

    raw, out, imagenet = tmp_path / "raw", tmp_path / "out", tmp_path / "imagenet"
    raw.mkdir()
    _cifar_tarball(raw / D.CIFAR10["file"])
    rng = np.random.default_rng(1)
    for split, n in (("train", 3), ("val", 2)):
        for wnid in ("n01440764", "n01443537"):
            d = imagenet / split / wnid
            d.mkdir(parents=True)
            for i in range(n):
                Image.fromarray(rng.integers(0, 256, (40 + 7 * i, 50, 3), dtype=np.uint8)).save(d / f"{i}.JPEG")
    cfg = {"data_seed": 0, "target": {"source": "image_folder", "root": str(imagenet)},
           "active_proxies": ["cifar10"], "proxies": {"cifar10": {"source": "cifar10", "n_train": 10, "n_test": 4}},
           "model": {"image": 32}}
    (raw / "sources.json").write_text(json.dumps({"target": str(imagenet)}))
    S.preprocess(cfg, raw, out)
    tx, ty = D.read_split(out, "target_train")
    vx, vy = D.read_split(out, "target_test")
    assert isinstance(tx, np.memmap) and not (out / "target_train.npz").exists()  # streamed, opened lazily
    assert tx.shape == (6, 3, 32, 32) and tx.dtype == np.uint8 and sorted(ty.tolist()) == [0, 0, 0, 1, 1, 1]
    assert vx.shape == (4, 3, 32, 32)
    px, py = D.read_npz(out / "proxy_cifar10_train.npz")
    qx, qy = D.read_npz(out / "proxy_cifar10_test.npz")
    assert px.shape == (10, 3, 32, 32) and qx.shape == (4, 3, 32, 32)
    with tarfile.open(raw / D.CIFAR10["file"]) as tar:  # the pixels are the batches' rows, in order
        first = pickle.load(tar.extractfile("cifar-10-batches-py/data_batch_1"), encoding="bytes")
    np.testing.assert_array_equal(px[0].reshape(-1), first[b"data"][0])
    assert py[0] == first[b"labels"][0]
