"""The full-scale ImageNet-100 path (variant imagenet100) on a tiny local stand-in: an image-folder tree
(train/<wnid>/, val/<wnid>/, PNG and JPEG written with Pillow) and an OOD tarball, through the same
preprocess -> lazy store -> fit_base / train / evaluate code the variant runs."""
from __future__ import annotations

import copy
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from icml25.studies.bood import data as D
from icml25.studies.bood.store import ImageStore

CLASSES = [["n001", "cat"], ["n002", "dog"], ["n003", "fox"]]
SIZES = [(30, 20), (20, 26), (17, 17), (40, 22)]   # (w, h) per image index


def _img(rng, w, h):
    return Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("in")
    rng = np.random.default_rng(0)
    for split, per in (("train", 4), ("val", 2)):
        for w, _ in CLASSES + [["n999", "other"]]:      # n999: a class folder not in the list
            (root / "imagenet" / split / w).mkdir(parents=True)
            for k in range(per):
                ext = "png" if split == "train" else "JPEG"   # ImageNet's upper-case extension
                _img(rng, *SIZES[k]).save(root / "imagenet" / split / w / f"{w}_{k}.{ext}")
    raw = root / "raw"
    raw.mkdir()
    with tarfile.open(raw / "tex.tar.gz", "w:gz") as tar:
        for k in range(3):
            p = root / f"t{k}.jpg"
            _img(rng, 24, 18).save(p)
            tar.add(p, arcname=f"dtd/images/striped/t{k}.jpg")
    out = root / "processed"
    out.mkdir()
    cfg = {"data": {"source": "image_folder", "root": str(root / "imagenet"), "classes": CLASSES, "image": 8,
                    "resize": 10, "seed": 0, "workers": 2, "train_per_class": None, "test_per_class": None,
                    "ood_per_set": None, "ood_sets": ["tex"], "files": {"tex": {"file": "tex.tar.gz"}}}}
    D.preprocess(cfg, raw, out)
    return root, out, cfg


def _expected(path: Path, w: int, h: int) -> np.ndarray:
    """torchvision's Resize(10) + CenterCrop(8) worked out by hand for this image size."""
    nw, nh = (10, int(10 * h / w)) if w <= h else (int(10 * w / h), 10)
    top, left = int(round((nh - 8) / 2)), int(round((nw - 8) / 2))
    im = Image.open(path).convert("RGB").resize((nw, nh), Image.BILINEAR).crop((left, top, left + 8, top + 8))
    return np.asarray(im, np.float32).transpose(2, 0, 1) / 255


def test_preprocess_writes_lazy_uint8_splits_with_the_right_images_and_labels(tree):
    root, out, _ = tree
    x, y = D.load(out, "train")
    assert isinstance(x, ImageStore) and isinstance(x.images, np.memmap)   # opened lazily, not read
    assert x.images.dtype == np.uint8 and x.shape == (12, 3, 8, 8)
    assert y.tolist() == [0] * 4 + [1] * 4 + [2] * 4                       # position in the class list; n999 left out
    assert not (out / "train.npz").exists()
    # (30, 20) -> (15, 10), crop at (4, 1); (20, 26) -> (10, 13), crop at (1, 2); (40, 22) -> (18, 10)
    idx = [5, 0, 11, 2]
    batch = x[idx]
    assert batch.dtype == np.float32 and batch.shape == (4, 3, 8, 8)
    for row, i in zip(batch, idx):
        w, k = CLASSES[i // 4][0], i % 4
        assert np.array_equal(row, _expected(root / "imagenet" / "train" / w / f"{w}_{k}.png", *SIZES[k]))
    xt, yt = D.load(out, "test")
    assert len(xt) == 6 and yt.tolist() == [0, 0, 1, 1, 2, 2]
    xo, yo = D.load(out, "ood_tex")
    assert xo.shape == (3, 3, 8, 8) and (yo == -1).all()
    assert D.load(out, "train")[0][2:4].shape == (2, 3, 8, 8)              # slices too
    import json

    assert json.loads((out / "classes.json").read_text()) == ["cat", "dog", "fox"]


def test_imagenet100_class_list_is_dream_oods():
    from icml25.studies.bood.imagenet100 import IMAGENET100

    wnids = [w for w, _ in IMAGENET100]
    assert len(set(wnids)) == 100 and wnids == sorted(wnids)
    assert wnids[:3] == ["n01498041", "n01514859", "n01582220"] and wnids[-1] == "n07745940"
    assert D.class_list({"classes": "imagenet100"}) == list(IMAGENET100)


def test_missing_tree_names_the_login_sources(tmp_path):
    from icml25.core.errors import UserError

    with pytest.raises(UserError, match="login required"):
        D.download({"data": {"source": "image_folder", "root": str(tmp_path), "ood_sets": [], "files": {}}}, tmp_path)


def _tiny_cfg(tree_cfg):
    from icml25.core.config import effective, load_study

    cfg = effective(load_study(Path(__file__).resolve().parents[3], "bood"), "smoke")
    cfg = copy.deepcopy(cfg)
    cfg["data"] = tree_cfg["data"]
    cfg["classifier"].update({"arch": "resnet18", "stem": "imagenet", "batch": 4, "ood_batch": 2, "epochs": 1})
    cfg["latent"].update({"epochs": 3, "batch": 4})
    cfg["independent"].update({"batch": 4})
    cfg["decoder"].update({"steps": 2, "batch": 4, "n_check": 3})
    cfg["synth"]["n_outliers"] = 5
    cfg["bood"].update({"r": 1.0, "k_max": 100, "alpha": 0.2})
    return cfg


def test_fit_base_train_evaluate_read_the_store_a_batch_at_a_time(tree, tmp_path, monkeypatch):
    from icml25.studies.bood import study

    _, out, tcfg = tree
    cfg = _tiny_cfg(tcfg)
    reads = []
    get = ImageStore.__getitem__
    # (split size, rows read) of every batch read by index; slices (the saved examples) are not batches
    def counted(self, idx):
        rows = get(self, idx)
        if not isinstance(idx, slice):
            reads.append((len(self), rows.shape[0]))
        return rows

    monkeypatch.setattr(ImageStore, "__getitem__", counted)
    base, run = tmp_path / "base", tmp_path / "run"
    base.mkdir()
    run.mkdir()
    study.fit_base(cfg, out, base)
    assert (base / "encoder.pt").exists() and np.load(base / "z_train.npy").shape == (12, 32)
    reads.clear()
    res = study.train(cfg, "bood", 0, out, base, run)
    m = {(r["setting"], r["metric"]): r["value"] for r in res["metrics"]}
    assert m[("synth", "n_outliers")] == 5
    outl = ImageStore(run, "outliers")                       # the decoded outliers, stored like a split
    assert outl.shape == (5, 3, 8, 8) and outl.images.dtype == np.uint8
    # training read batches of the 12 training images (4) and of the 5 outliers (2), never a whole split
    train_reads = [k for n, k in reads if n == 12]
    assert train_reads and max(train_reads) <= 4
    assert max(k for n, k in reads if n == 5) <= 2
    rows = study.evaluate(cfg, "bood", 0, out, base, run)
    got = {(r["setting"], r["metric"]) for r in rows}
    assert {("id", "acc"), ("tex", "fpr95"), ("mean", "auroc")} <= got
