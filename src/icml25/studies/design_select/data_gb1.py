"""GB1 (Wu et al. 2016; all 20^4 variants at sites V39/D40/G41/V54, the paper's Fig. 3 landscape),
as shipped by the official repository (gb1-models/gb1-data.csv: Variants, log_fitness,
estimated_variance). Full scale only: fetched, parsed into a lookup table (the GB1 oracle)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from icml25.core.errors import UserError

AA = "lsrvaptg*iyfchqnkdewm"  # the official gb1.py amino-acid order (with stop)
AA_NOSTOP = AA.replace("*", "")
WT = "vdgv"
FILE = "gb1-data.csv"


def download(gcfg: dict, raw_dir: Path) -> None:
    from icml25.core.download import fetch

    fetch(gcfg["url"], Path(raw_dir) / FILE, gcfg.get("sha256"))


def read_table(path: Path) -> dict:
    import pandas as pd

    df = pd.read_csv(path)
    missing = {"Variants", "log_fitness"} - set(df.columns)
    if missing:
        raise UserError(f"{path}: missing column(s) {sorted(missing)}; expected the official gb1-data.csv")
    seqs = df["Variants"].str.lower().tolist()
    if any(len(s) != 4 for s in seqs):
        raise UserError(f"{path}: variants must be 4 amino acids")
    lut = {c: i for i, c in enumerate(AA_NOSTOP)}
    try:
        idx = np.array([[lut[c] for c in s] for s in seqs], np.int64)
    except KeyError as exc:
        raise UserError(f"{path}: unknown amino acid {exc}") from None
    var = df["estimated_variance"].to_numpy(float) if "estimated_variance" in df else np.full(len(df), np.nan)
    return {"idx": idx, "y": df["log_fitness"].to_numpy(float), "var": var}


def preprocess(gcfg: dict, raw_dir: Path, out_dir: Path) -> None:
    t = read_table(Path(raw_dir) / FILE)
    if gcfg.get("require_complete", True) and len(t["y"]) != 20 ** 4:
        raise UserError(f"GB1 table has {len(t['y'])} rows, expected all 20^4 = 160000 variants")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    np.savez(Path(out_dir) / "gb1.npz", **t)


class GB1Oracle:
    """Lookup-table oracle: label of a variant = its (imputed) log fitness."""

    def __init__(self, idx: np.ndarray, y: np.ndarray):
        self.table = np.full(20 ** 4, np.nan)
        self.table[idx @ (20 ** np.arange(3, -1, -1))] = y

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        return self.table[np.asarray(idx) @ (20 ** np.arange(3, -1, -1))]
