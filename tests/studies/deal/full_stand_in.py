"""The deal full scale pointed at a local stand-in site: one config recipe and one staging helper for the
full-path tests (DRUNet, WCRR-NN, the paper's CT / MRI data), so each test states only what is its own."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def full_cfg(url: str) -> dict:
    """The full scale's effective config with its image splits served from `url` (train/, bsd/, set12/; one
    image per split) and 16-px patches: the same loaders and stages, a few seconds of work."""
    from icml25.core.config import effective, load_study

    cfg = effective(load_study(ROOT, "deal"), "full")
    d = cfg["data"]
    d.update(patch=16, patches_per_image=2, val_crop=32)
    for split, sub in (("train", "train"), ("test_skimage", "bsd"), ("test_sklearn", "set12"), ("val", "train")):
        d["splits"][split]["base"] = f"{url}/{sub}"
    for split in ("train", "test_skimage", "test_sklearn"):
        d["splits"][split]["range"] = [1, 1]
    cfg["device"] = "cpu"
    return cfg


def staged(cfg: dict, tmp_path: Path) -> tuple[Path, Path, Path]:
    """validate, download and preprocess into fresh raw / data / run folders under tmp_path."""
    from icml25.studies.deal import study as S

    S.validate(cfg)
    raw, data, run = tmp_path / "raw", tmp_path / "data", tmp_path / "run"
    data.mkdir()
    run.mkdir()
    S.download(cfg, raw)
    S.preprocess(cfg, raw, data)
    return raw, data, run
