"""Full scale: the paper's downstream sets (the MERL benchmark's tasks and CODE) from their public files.

- PTB-XL 1.0.3 with the PTB-XL benchmark's four label groupings (superdiagnostic, subdiagnostic, form,
  rhythm) from scp_statements.csv; folds 1-8 train, 9 validation (unused), 10 test.
- CPSC2018 (the CPSC part of the PhysioNet/CinC Challenge 2020 training set) and Chapman-Shaoxing-Ningbo
  (PhysioNet ecg-arrhythmia 1.0.0): WFDB .hea/.mat records with SNOMED-CT codes on the header's `#Dx:` line;
  a seeded random 72 / 8 / 20 split (train / unused validation / test, the MERL benchmark's proportions).
- CODE: HDF5 tracings (400 Hz, 4096 samples, DI DII DIII aVR aVL aVF V1-V6) with csv labels; CODE-15%
  (Zenodo 4916206) as the probe's training set, CODE-test (Zenodo 3765780, the paper's zero-shot set) as test.

Every record is put in the study's lead order (LEADS), resampled to cfg fs and cut / zero-padded to its length.
Each task is written to <out>/tasks/<task>/ as down_train.npz, down_test.npz and labels.json.
"""
from __future__ import annotations

import json
import zipfile
from math import gcd
from pathlib import Path

import numpy as np

from icml25.core.errors import UserError
from icml25.core.io import write_json

LEADS = ("I", "II", "III", "AVR", "AVL", "AVF", "V1", "V2", "V3", "V4", "V5", "V6")
_ALIAS = {"DI": "I", "DII": "II", "DIII": "III"}  # CODE's lead names


def lead_index(names) -> list[int]:
    """Column of each of LEADS in a record whose leads are called `names` (case-insensitive): MIMIC-IV-ECG
    stores aVF before aVL, so the order is taken from the names, never assumed."""
    up = [_ALIAS.get(str(n).strip().upper(), str(n).strip().upper()) for n in names]
    missing = [lead for lead in LEADS if lead not in up]
    if missing:
        raise UserError(f"dbeta: record has leads {list(names)}; missing {missing}")
    return [up.index(lead) for lead in LEADS]


def fit_length(sig: np.ndarray, src_fs: float, fs: int, n_out: int) -> np.ndarray:
    """(12, n) at src_fs -> (12, n_out) float32 at fs (polyphase resampling; cut or zero-padded at the end)."""
    from scipy.signal import resample_poly

    sig = np.nan_to_num(np.asarray(sig, np.float64))
    src = int(round(src_fs))
    if src != fs:
        g = gcd(src, fs)
        sig = resample_poly(sig, fs // g, src // g, axis=1)
    out = np.zeros((sig.shape[0], n_out), np.float32)
    n = min(n_out, sig.shape[1])
    out[:, :n] = sig[:, :n]
    return out


def read_wfdb(root: Path, recs: list[str], fs: int, seconds: float) -> np.ndarray:
    """WFDB records (.dat or .mat signal files) as (n, 12, T) float32 in mV, in LEADS order."""
    import wfdb

    T = int(round(fs * seconds))
    out = np.zeros((len(recs), 12, T), np.float32)
    for i, r in enumerate(recs):
        p = root / r
        if not p.with_suffix(".hea").exists():
            raise UserError(f"missing wfdb record {p}.hea: run the download stage again")
        sig, fields = wfdb.rdsamp(str(p))
        out[i] = fit_length(sig[:, lead_index(fields["sig_name"])].T, fields["fs"], fs, T)
    return out


# ---- download ----------------------------------------------------------------------------------------------

def read_sums(path: Path) -> dict[str, str]:
    """PhysioNet's SHA256SUMS.txt: '<sha256> <path>' per line -> {path: sha256}."""
    sums = {}
    for line in path.read_text().splitlines():
        parts = line.strip().split(maxsplit=1)
        if len(parts) == 2:
            sums[parts[1].lstrip("*")] = parts[0].lower()
    return sums


def download_dx(spec: dict, out: Path) -> None:
    """A WFDB set listed by its SHA256SUMS.txt: every .hea/.mat pair under spec['prefix'] (sorted, capped at
    max_records) and the extra files, each verified against the published sha256."""
    from icml25.core.download import fetch

    base = spec["base"].rstrip("/")
    sums = read_sums(fetch(f"{base}/{spec['manifest']}", out / spec["manifest"], None))
    for f in spec.get("files") or []:
        fetch(f"{base}/{f}", out / f, sums.get(f))
    for rec in dx_records(spec, sums):
        for ext in (".hea", ".mat"):
            fetch(f"{base}/{rec}{ext}", out / f"{rec}{ext}", sums.get(rec + ext))


def dx_records(spec: dict, sums: dict[str, str]) -> list[str]:
    recs = sorted(p[:-4] for p in sums if p.startswith(spec["prefix"]) and p.endswith(".hea"))
    cap = spec.get("max_records")
    return recs[: int(cap)] if cap else recs


def download_hdf5(spec: dict, out: Path) -> None:
    """Zenodo files (md5 where given), zip archives unpacked in place."""
    from icml25.core.download import fetch

    base = spec["base"].rstrip("/")
    for f, md5 in (spec.get("files") or {}).items():
        dest = fetch(f"{base}/{f}", out / f, None, md5=md5)
        if dest.suffix == ".zip":
            with zipfile.ZipFile(dest) as z:
                if not all((out / n).exists() for n in z.namelist()):
                    z.extractall(out)


# ---- label sets --------------------------------------------------------------------------------------------

def ptbxl_label_sets(codes: list[set[str]], statements, grouping: str) -> list[set[str]]:
    """The PTB-XL benchmark's aggregation (Strodthoff et al. 2021): every scp code of a record counts, whatever
    its likelihood; diagnostic codes map to their diagnostic_subclass / diagnostic_class, form and rhythm codes
    stay themselves."""
    st = statements
    if grouping in ("superdiagnostic", "subdiagnostic"):
        col = "diagnostic_class" if grouping == "superdiagnostic" else "diagnostic_subclass"
        sel = st[st["diagnostic"] == 1][col].dropna()
        mapping = {str(k): str(v) for k, v in sel.items()}
    elif grouping in ("form", "rhythm"):
        mapping = {str(k): str(k) for k in st.index[st[grouping] == 1]}
    else:
        raise UserError(f"dbeta: unknown PTB-XL grouping {grouping!r} (superdiagnostic, subdiagnostic, form, rhythm)")
    return [{mapping[c] for c in cs if c in mapping} for cs in codes]


def header_dx(path: Path) -> list[str]:
    """SNOMED-CT codes on the '#Dx:' line of a CinC-2020-style header."""
    for line in path.read_text().splitlines():
        if line.startswith("#") and line[1:].strip().lower().startswith("dx"):
            return [c.strip() for c in line.split(":", 1)[1].split(",") if c.strip()]
    return []


def dx_label_sets(dx: list[list[str]], code_to_label: dict[str, str], drop_unknown: bool) -> list[set[str] | None]:
    """Codes -> label names; None (record dropped) if a code is unknown and drop_unknown (the MERL benchmark
    drops such CSN records), else unknown codes are ignored."""
    out: list[set[str] | None] = []
    for codes in dx:
        if drop_unknown and any(c not in code_to_label for c in codes):
            out.append(None)
        else:
            out.append({code_to_label[c] for c in codes if c in code_to_label})
    return out


def random_split(n: int, test: float, val: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) indices: test is `test` of all, validation `val` of the rest (left out, as the benchmark's
    validation set is), train the remainder."""
    perm = np.random.default_rng(seed).permutation(n)
    n_te = int(round(test * n))
    n_va = int(round(val * (n - n_te)))
    return np.sort(perm[n_te + n_va:]), np.sort(perm[:n_te])


def multi_hot(sets: list[set[str]], labels: list[str]) -> np.ndarray:
    return np.array([[int(lab in s) for lab in labels] for s in sets], np.int8).reshape(len(sets), len(labels))


def keep_labels(sets: list[set[str]], min_count: int) -> list[str]:
    counts: dict[str, int] = {}
    for s in sets:
        for lab in s:
            counts[lab] = counts.get(lab, 0) + 1
    return sorted(lab for lab, c in counts.items() if c >= min_count)


# ---- the tasks ---------------------------------------------------------------------------------------------

def build_tasks(cfg: dict, raw_dir: Path, out: Path) -> list[str]:
    """Write every task of data.downstream to out/tasks/<task>/; returns the task names."""
    d = cfg["data"]
    tasks = list(d["downstream"])
    cache: dict = {}
    for name in tasks:
        t = d["tasks"][name]
        spec = d["datasets"][t["dataset"]]
        kind = spec.get("kind", "index")
        if kind == "index":
            split = _ptbxl_task(cfg, t, raw_dir / t["dataset"], cache)
        elif kind == "wfdb_dx":
            split = _dx_task(cfg, t, raw_dir / t["dataset"], cache)
        elif kind == "hdf5":
            split = _code_task(cfg, t, raw_dir)
        else:
            raise UserError(f"dbeta: dataset {t['dataset']} has unknown kind {kind!r}")
        _write_task(out / "tasks" / name, name, *split, t.get("prompts") or {})
    return tasks


def _write_task(td: Path, name, x_tr, y_tr, ids_tr, x_te, y_te, ids_te, labels, fallback, prompts) -> None:
    td.mkdir(parents=True, exist_ok=True)
    if set(ids_tr) & set(ids_te):
        raise UserError(f"dbeta: task {name}: train and test share records")
    np.savez(td / "down_train.npz", x=x_tr, y=y_tr, ids=np.array(ids_tr))
    np.savez(td / "down_test.npz", x=x_te, y=y_te, ids=np.array(ids_te))
    # prompt: the config's, else the dataset's own description of the label, else the label name
    write_json(td / "labels.json", {"labels": labels,
                                    "prompts": [str(prompts.get(k) or fallback.get(k) or k).lower() for k in labels]})


def _ptbxl_task(cfg, t, root: Path, cache):
    import ast

    import pandas as pd

    d = cfg["data"]
    spec = d["datasets"][t["dataset"]]
    key = ("ptbxl", t["dataset"])
    if key not in cache:
        idx = pd.read_csv(root / spec["index"])
        cap = spec.get("max_records")
        idx = idx.iloc[: int(cap)] if cap else idx
        x = read_wfdb(root, [str(r) for r in idx[spec["path_col"]]], int(d["fs"]), float(d["seconds"]))
        st = pd.read_csv(root / spec["statements"], index_col=0)
        cache[key] = (idx, x, st)
    idx, x, st = cache[key]
    codes = [set(ast.literal_eval(s).keys()) for s in idx[spec["label_col"]]]
    sets = ptbxl_label_sets(codes, st, t["grouping"])
    has = np.array([bool(s) for s in sets])              # the benchmark drops records with no label in the group
    fold = idx[spec["fold_col"]].to_numpy()
    test = np.isin(fold, spec["test_folds"]) & has
    train = ~np.isin(fold, list(spec["test_folds"]) + list(spec.get("val_folds") or [])) & has
    labels = keep_labels([s for s, h in zip(sets, has) if h], int(t.get("min_count", 1)))
    y = multi_hot(sets, labels)
    ids = np.array([f"{t['dataset']}:{r}" for r in idx[spec["path_col"]]])
    desc = {str(k): str(v) for k, v in st["description"].items()} if "description" in st else {}
    return x[train], y[train], ids[train], x[test], y[test], ids[test], labels, desc


def _dx_task(cfg, t, root: Path, cache):
    import pandas as pd

    d = cfg["data"]
    spec = d["datasets"][t["dataset"]]
    sums = read_sums(root / spec["manifest"])
    recs = dx_records(spec, sums)
    dx = [header_dx(root / f"{r}.hea") for r in recs]
    if "codes" in t:      # label name -> SNOMED-CT codes, from the config
        code_to_label = {str(c): lab for lab, cs in t["codes"].items() for c in (cs if isinstance(cs, list) else [cs])}
        desc: dict = {}
    else:                 # every condition of the dataset's own table
        c = spec["conditions"]
        tab = pd.read_csv(root / c["file"], dtype=str)
        code_to_label = dict(zip(tab[c["code_col"]].str.strip(), tab[c["name_col"]].str.strip()))
        desc = dict(zip(tab[c["name_col"]].str.strip(), tab[c["prompt_col"]].str.strip())) if c.get("prompt_col") else {}
    sets = dx_label_sets(dx, code_to_label, bool(t.get("drop_unknown", False)))
    keep = [i for i, s in enumerate(sets) if s]          # records with at least one label of the task
    sets = [sets[i] for i in keep]
    recs = [recs[i] for i in keep]
    labels = keep_labels(sets, int(t.get("min_count", 1)))
    y = multi_hot(sets, labels)
    sp = t["split"]
    tr, te = random_split(len(recs), float(sp["test"]), float(sp["val"]), int(sp["seed"]))
    x = read_wfdb(root, recs, int(d["fs"]), float(d["seconds"]))
    ids = np.array([f"{t['dataset']}:{r}" for r in recs])
    return x[tr], y[tr], ids[tr], x[te], y[te], ids[te], labels, desc


def _read_code(cfg, spec: dict, root: Path, label_cols: dict):
    """HDF5 tracings (n, samples, 12) with their csv labels, joined on the exam id where the file has one
    (CODE-15%: exam_id in each part; zero-id padding rows are dropped), else row by row (CODE-test)."""
    import h5py
    import pandas as pd

    d = cfg["data"]
    fs, T = int(d["fs"]), int(round(int(d["fs"]) * float(d["seconds"])))
    lab = pd.read_csv(root / spec["labels_csv"])
    xs, ys, ids = [], [], []
    order = lead_index(spec["leads"])
    for f in spec["hdf5"]:
        with h5py.File(root / f, "r") as h:
            tr = h[spec.get("tracings", "tracings")]
            if spec.get("id_col"):
                eid = np.asarray(h[spec["id_col"]][:])
                table = lab.set_index(spec["id_col"])
                rows = [i for i, e in enumerate(eid) if e in table.index]
                sel = table.loc[eid[rows]]
                names = [f"{f}:{e}" for e in eid[rows]]
            else:
                rows = list(range(len(lab)))
                sel = lab
                names = [f"{f}:{i}" for i in rows]
            cap = spec.get("max_records")
            rows, names, sel = (rows[: int(cap)], names[: int(cap)], sel.iloc[: int(cap)]) if cap else (rows, names, sel)
            for i in rows:
                xs.append(fit_length(np.asarray(tr[i], np.float64)[:, order].T, float(spec["fs"]), fs, T))
            ys.append(sel[list(label_cols)].astype(bool).astype(np.int8).to_numpy())
            ids += names
    x = np.stack(xs) if xs else np.zeros((0, 12, T), np.float32)
    return x, np.concatenate(ys), np.array(ids)


def _code_task(cfg, t, raw_dir: Path):
    d = cfg["data"]
    cols = dict(t["label_cols"])     # csv column -> label name
    x_tr, y_tr, id_tr = _read_code(cfg, d["datasets"][t["dataset"]], raw_dir / t["dataset"], cols)
    x_te, y_te, id_te = _read_code(cfg, d["datasets"][t["test_dataset"]], raw_dir / t["test_dataset"], cols)
    id_tr = np.array([f"{t['dataset']}:{i}" for i in id_tr])
    id_te = np.array([f"{t['test_dataset']}:{i}" for i in id_te])
    return x_tr, y_tr, id_tr, x_te, y_te, id_te, list(cols.values()), {}


def task_dirs(data_dir: Path) -> list[tuple[str, Path, bool]]:
    """(task, directory, counts in the mean) for a multi-task data directory; [] for the mini / smoke layout."""
    p = data_dir / "tasks.json"
    if not p.exists():
        return []
    return [(t["name"], data_dir / "tasks" / t["name"], bool(t["in_mean"])) for t in json.loads(p.read_text())]
