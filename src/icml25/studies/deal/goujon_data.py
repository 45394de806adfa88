"""The paper's CT and MRI data at full scale: the preprocessed validation / test sets of Goujon et al. (Zenodo
record 8302121, named by axgoujon/convex_ridge_regularizers inverse_problems/{ct,mri}/README.md), read in the
layout its data loaders read (inverse_problems/ct/data/data_loader.py, inverse_problems/mri/data/data_loader.py):

- CT  `data_sets/{val,test}/Phantom/phantom_<i>.npy`, `.../FBP/fbp_sig_<s:.1f>_<i>.npy`,
      `.../Sinogram/sinogram_sig_<s:.1f>_<i>.npy` (512x512 phantom in [0, 1]; its 200x400 noisy sinogram and FBP at
      the noise level s, made by make_data_sets.py with ODL / astra);
- MRI `data_sets/{singlecoil,multicoil}_acc_<acc>_cf_<cf>_noisesd_<sd>/{pd,pdfs}/{val,test}_images/<file>/`
      `mask.pt` (1, 1, H, W), `y.pt` (1, Nc, H, W) complex, `x_crop.pt` (1, 1, 320, 320), and for multi-coil
      `smaps.pt` (1, Nc, H, W) complex (generate_data.py: ESPIRiT maps, ifftshifted Cartesian masks).

The download stage resolves the record's files through Zenodo's REST API (the record names no file in the
official READMEs; the API lists each file with its md5, which is checked) and fetches them; preprocess reads the
members of the zip archives in place, wherever the `data_sets` tree sits inside them, and writes one .npz per
image: data/paper_inverse/<task>/<val|test>/<name>.npz.
"""
from __future__ import annotations

import contextlib
import io
import re
import zipfile
from pathlib import Path

import numpy as np

from icml25.core.errors import UserError

SUBDIR = "paper_inverse"
RAW = "goujon"


def enabled(cfg: dict) -> bool:
    inv = cfg.get("inverse") or {}
    return bool(inv.get("enabled")) and bool((inv.get("paper_data") or {}).get("api"))


# ---- download: the Zenodo record's files -------------------------------------------------------------------

def record_files(record: dict) -> list[tuple[str, str, str | None]]:
    """(file name, download URL, md5 or None) of a Zenodo record's JSON (`files[*].key / links.self / checksum`,
    the same in the legacy and the current API)."""
    out = []
    for f in record.get("files") or []:
        algo, _, digest = str(f.get("checksum", "")).partition(":")
        out.append((f["key"], f["links"]["self"], digest if algo == "md5" and digest else None))
    if not out:
        raise UserError("deal: the Zenodo record lists no files")
    return out


def download(cfg: dict, raw_dir: Path) -> None:
    import json

    from icml25.core.download import fetch

    p = cfg["inverse"]["paper_data"]
    meta = fetch(p["api"], raw_dir / RAW / "record.json", None)
    want = set(p.get("files") or [])
    for name, url, md5 in record_files(json.loads(meta.read_text())):
        if not want or name in want:
            fetch(url, raw_dir / RAW / name, None, md5=md5)


# ---- the official layout ----------------------------------------------------------------------------------

def _num(v) -> str:
    """A setting as the official folder names write it (Python str of 4, 0.08, 0.002)."""
    return f"{float(v):g}"


def mri_folder(task: dict) -> str:
    coil = {"single": "singlecoil", "multi": "multicoil"}[task.get("coil", "single")]
    return f"{coil}_acc_{_num(task['acceleration'])}_cf_{_num(task['centre_fraction'])}_noisesd_{_num(task['noise'])}"


@contextlib.contextmanager
def _members(raw_dir: Path):
    """Every member path of the downloaded zip archives -> (open archive, member): each archive is opened once
    (its central directory read once) for all its members, and closed when the block ends."""
    zips = sorted((raw_dir / RAW).glob("*.zip"))
    if not zips:
        raise UserError(f"deal: no zip archive in {raw_dir / RAW}; run the download stage")
    with contextlib.ExitStack() as stack:
        out = {}
        for z in zips:
            zf = stack.enter_context(zipfile.ZipFile(z))
            out.update((name, (zf, name)) for name in zf.namelist() if not name.endswith("/"))
        yield out


def _match(members: dict, pattern: str) -> dict[str, tuple[Path, str]]:
    """Members whose path ends in `pattern` (a regex over the part below `data_sets/`), keyed by group 1."""
    rx = re.compile(r"(?:^|/)" + pattern + r"$")
    out = {}
    for name, where in members.items():
        m = rx.search(name)
        if m:
            if m.group(1) in out:
                raise UserError(f"deal: two archive members match '{pattern}' for '{m.group(1)}'")
            out[m.group(1)] = where
    return out


def _read(where: tuple[zipfile.ZipFile, str]) -> bytes:
    return where[0].read(where[1])


def _npy(where) -> np.ndarray:
    return np.load(io.BytesIO(_read(where)), allow_pickle=False)


def _pt(where) -> np.ndarray:
    import torch

    return torch.load(io.BytesIO(_read(where)), map_location="cpu", weights_only=True).numpy()


def ct_cases(members: dict, split: str, noise_level: float) -> dict[str, dict]:
    """{slice index: {x, y, x0}}: phantom, noisy sinogram and FBP at one noise level (paired by slice index, as
    the official loader's sorted lists pair them)."""
    sig = f"{float(noise_level):.1f}"
    ph = _match(members, rf"{split}/Phantom/phantom_(\d+)\.npy")
    fbp = _match(members, rf"{split}/FBP/fbp_sig_{re.escape(sig)}_(\d+)\.npy")
    sino = _match(members, rf"{split}/Sinogram/sinogram_sig_{re.escape(sig)}_(\d+)\.npy")
    if not ph or set(ph) != set(fbp) or set(ph) != set(sino):
        raise UserError(f"deal: CT {split} set at noise {sig}: {len(ph)} phantoms, {len(fbp)} FBPs, {len(sino)} "
                        "sinograms, not one of each per slice (the official data_sets/<split>/{Phantom,FBP,Sinogram})")
    return {i: {"x": _npy(ph[i]).astype(np.float32), "y": _npy(sino[i]).astype(np.float32),
                "x0": _npy(fbp[i]).astype(np.float32)} for i in sorted(ph, key=int)}


def mri_cases(members: dict, split: str, task: dict) -> dict[str, dict]:
    """{<data type>_<file>: {x, y, mask[, smaps]}} of one MRI setting (x the 320x320 ground-truth crop; y, mask
    and maps at the full k-space size, batch axis dropped as the official loader does)."""
    folder, multi = mri_folder(task), task.get("coil", "single") == "multi"
    keys = ["mask", "y", "x_crop"] + (["smaps"] if multi else [])
    out = {}
    for dtype in task.get("data_types") or ["pd"]:
        found = {k: _match(members, rf"{re.escape(folder)}/{dtype}/{split}_images/([^/]+)/{k}\.pt") for k in keys}
        names = set(found["x_crop"])
        if not names or any(set(v) != names for v in found.values()):
            raise UserError(f"deal: MRI {folder}/{dtype}/{split}_images: files {dict((k, len(v)) for k, v in found.items())}"
                            f", not {keys} in every image folder")
        for n in sorted(names):
            case = {"x": _pt(found["x_crop"][n])[0, 0].astype(np.float32),
                    "y": _pt(found["y"][n])[0].astype(np.complex64),
                    "mask": _pt(found["mask"][n])[0, 0] != 0}
            if multi:
                case["smaps"] = _pt(found["smaps"][n])[0].astype(np.complex64)
            out[f"{dtype}_{n}"] = case
    return out


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> list[str]:
    """Write every enabled task's val / test cases; with CT, check our projector against the stored sinograms."""
    from icml25.core.io import write_json

    from . import inverse as INV

    inv = cfg["inverse"]
    names = []
    with _members(raw_dir) as members:
        for t in INV.enabled(cfg):
            task = inv["tasks"][t]
            for split in ("val", "test"):
                cases = (ct_cases(members, split, task["noise_level"]) if task["kind"] == "ct"
                         else mri_cases(members, split, task))
                d = out_dir / SUBDIR / t / split
                d.mkdir(parents=True, exist_ok=True)
                for n, c in cases.items():
                    np.savez(d / f"{n}.npz", **c)
                    names.append(f"{t}/{split}/{n}")
    for t in INV.enabled(cfg):
        task = inv["tasks"][t]
        if task["kind"] == "ct":
            write_json(out_dir / SUBDIR / t / "projector_check.json", check_ct(task, out_dir / SUBDIR / t / "val"))
    return names


def check_ct(task: dict, val_dir: Path) -> dict:
    """Our projector against the official measurements on the validation slices: the residual sd of
    S x - y should be the stored noise level where the geometry agrees (a mismatch in orientation or scale
    leaves residuals many times larger, and stops the run)."""
    from . import inverse as INV

    op = INV.paper_ct(task)
    res = []
    for f in sorted(val_dir.glob("*.npz")):
        with np.load(f) as z:
            hx = INV.apply_unnormalised(op, z["x"])
            res.append(float(np.sqrt(np.mean((hx - z["y"]) ** 2))))
    ratio = float(np.mean(res)) / float(task["noise_level"])
    out = {"residual_sd": res, "noise_level": float(task["noise_level"]), "ratio": ratio,
           "max_ratio": float(task.get("max_residual_ratio", 5.0))}
    if ratio > out["max_ratio"]:
        raise UserError(f"deal: our CT projector leaves a residual {ratio:.1f}x the noise level on the official "
                        f"sinograms (limit {out['max_ratio']:g}x): its geometry does not match the data's")
    return out


def cases(task_name: str, split: str, data_dir: Path) -> list[tuple[str, dict]]:
    d = data_dir / SUBDIR / task_name / split
    files = sorted(d.glob("*.npz"))
    if not files:
        raise UserError(f"deal: no preprocessed {task_name} {split} cases in {d}; run the preprocess stage")
    out = []
    for f in files:
        with np.load(f) as z:
            out.append((f.stem, {k: z[k] for k in z.files}))
    return out
