"""The full-scale code path (download with checksums -> parse the paper's raw formats -> train ->
evaluate -> table), run on tiny local stand-ins of the real files served by a real HTTP server."""
import gzip
import hashlib
import io
import struct
import zipfile

import numpy as np
import pytest
import yaml

from icml25 import cli
from icml25.studies.sand import datasets as D


def _idx(arr: np.ndarray) -> bytes:
    code = 0x0800 | arr.ndim
    return gzip.compress(struct.pack(">I", code) + b"".join(struct.pack(">I", d) for d in arr.shape) + arr.tobytes())


def _stand_ins(rng):
    files = {}
    n, nt = 120, 40
    ytr, yte = np.arange(n) % 10, np.arange(nt) % 10
    # class-dependent bright pixel block so the tiny MNIST stand-in is learnable
    def imgs(y):
        x = rng.integers(0, 30, (len(y), 28, 28)).astype(np.uint8)
        for i, c in enumerate(y):
            x[i, 2 * c:2 * c + 3, 5:20] = 250
        return x
    files["mnist/train-images-idx3-ubyte.gz"] = _idx(imgs(ytr))
    files["mnist/train-labels-idx1-ubyte.gz"] = _idx(ytr.astype(np.uint8))
    files["mnist/t10k-images-idx3-ubyte.gz"] = _idx(imgs(yte))
    files["mnist/t10k-labels-idx1-ubyte.gz"] = _idx(yte.astype(np.uint8))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for split, m in (("train", 100), ("valid", 40)):
            X = rng.integers(0, 999, (m, 500))
            y = np.where(X[:, 0] > 500, 1, -1)
            zf.writestr(f"MADELON/madelon_{split}.data", "\n".join(" ".join(map(str, r)) + " " for r in X) + "\n")
            zf.writestr(f"MADELON/madelon_{split}.labels", "\n".join(map(str, y)) + "\n")
    files["madelon/madelon.zip"] = buf.getvalue()
    from PIL import Image

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for obj in (1, 2):
            for pose in range(12):
                img = Image.fromarray((rng.random((128, 128)) * 255 * obj / 2).astype(np.uint8))
                b = io.BytesIO()
                img.save(b, format="PNG")
                zf.writestr(f"coil-20-proc/obj{obj}__{pose}.png", b.getvalue())
    files["coil20/coil-20-proc.zip"] = buf.getvalue()
    return files


@pytest.fixture
def served(tmp_path, monkeypatch, file_server):
    files = _stand_ins(np.random.default_rng(0))
    www = tmp_path / "www"
    for rel, blob in files.items():
        (www / rel).parent.mkdir(parents=True, exist_ok=True)
        (www / rel).write_bytes(blob)
    base = file_server(www)
    # point the real source table at the stand-ins, with their real checksums
    for name in ("mnist", "madelon", "coil20"):
        entry = {**D.FULL_SOURCES[name], "files": {}}
        for fname in D.FULL_SOURCES[name]["files"]:
            blob = files[f"{name}/{fname}"]
            algo = "md5" if D.FULL_SOURCES[name]["files"][fname].get("md5") else "sha256"
            entry["files"][fname] = {"url": f"{base}/{name}/{fname}", "md5": None, "sha256": None,
                                     algo: getattr(hashlib, algo)(blob).hexdigest()}
        monkeypatch.setitem(D.FULL_SOURCES, name, entry)
    return base


def test_full_scale_path_on_stand_ins(served, workflow_copy):
    path = workflow_copy / "config" / "studies" / "sand.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["methods"] = ["sand", "anova", "random"]
    full = raw["scales"]["full"]
    full.update(seeds=[0], data={"datasets": ["mnist", "madelon", "coil20"]}, hp={"epochs": 3, "batch_size": 32})
    full["k"] = {"mnist": 20, "madelon": 5, "coil20": 10}
    path.write_text(yaml.safe_dump(raw))
    base = ["--root", str(workflow_copy), "--scale", "full", "--study", "sand"]
    assert cli.main(["download", *base]) == 0
    assert cli.main(["preprocess", *base]) == 0
    for m in raw["methods"]:
        assert cli.main(["train", *base, "--method", m, "--seed", "0"]) == 0
        assert cli.main(["evaluate", *base, "--method", m, "--seed", "0"]) == 0
    assert cli.main(["table", *base]) == 0
    proc = workflow_copy / "data" / "processed" / "full" / "sand"
    mn = D.load_npz(proc / "mnist.npz")
    assert mn["X_train"].shape[1] == 784 and len(mn["y_test"]) == 40  # official test split kept
    assert D.load_npz(proc / "madelon.npz")["X_train"].shape[1] == 500
    coil = D.load_npz(proc / "coil20.npz")
    assert coil["X_train"].shape[1] == 1024 and set(coil["y_train"].tolist()) == {0, 1}
    md = (workflow_copy / "results" / "full" / "tables" / "sand.md").read_text()
    assert "mnist (acc)" in md and "coil20 (acc)" in md


def test_checksum_mismatch_on_full_download_fails_clearly(served, workflow_copy, monkeypatch, capsys):
    entry = D.FULL_SOURCES["madelon"]
    bad = {"madelon.zip": {**entry["files"]["madelon.zip"], "sha256": "0" * 64}}
    monkeypatch.setitem(D.FULL_SOURCES, "madelon", {**entry, "files": bad})
    path = workflow_copy / "config" / "studies" / "sand.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["scales"]["full"]["data"] = {"datasets": ["madelon"]}
    path.write_text(yaml.safe_dump(raw))
    rc = cli.main(["download", "--root", str(workflow_copy), "--scale", "full", "--study", "sand"])
    assert rc == 2
    assert "checksum mismatch" in capsys.readouterr().err
    assert not (workflow_copy / "data" / "raw" / "full" / "sand" / "madelon" / "madelon.zip").exists()
    assert not (workflow_copy / "data" / "raw" / "full" / "sand" / "MANIFEST.json").exists()
