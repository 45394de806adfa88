"""dbeta full scale on tiny local stand-ins served over HTTP, through the same download and preprocess code:
MIMIC-IV-ECG (leads stored aVF before aVL), PTB-XL with its four label groupings, CPSC2018 and
Chapman-Shaoxing-Ningbo as CinC-2020-style .hea/.mat records with SNOMED-CT codes, CODE-15% and CODE-test as
HDF5 + csv; every file listed in a SHA256SUMS.txt as PhysioNet publishes it."""
from __future__ import annotations

import hashlib
import json
import zipfile

import numpy as np
import pytest

CANON = ["I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6"]
MIMIC_ORDER = ["I", "II", "III", "aVR", "aVF", "aVL", "V1", "V2", "V3", "V4", "V5", "V6"]
# CODE-test's ecg_tracings.hdf5 stores aVL, aVF, aVR in that order (antonior92/automatic-ecg-diagnosis data/README.md)
CODETEST_ORDER = ["I", "II", "III", "aVL", "aVF", "aVR", "V1", "V2", "V3", "V4", "V5", "V6"]


def _lead_coded(names, n, fs=500):
    """Each lead carries its canonical index + 1 as a level plus a small sine, so lead order is checkable."""
    t = np.arange(n) / fs
    return np.stack([CANON.index(nm) + 1 + 0.1 * np.sin(2 * np.pi * t) for nm in names], axis=1)


def _sums(root):
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()} {p.relative_to(root).as_posix()}"
             for p in sorted(root.rglob("*")) if p.is_file() and p.name != "SHA256SUMS.txt"]
    (root / "SHA256SUMS.txt").write_text("\n".join(lines) + "\n")


def _dx_record(folder, name, dx, rng):
    """A CinC-2020-style record: MATLAB v4 signal file + header with a '#Dx:' line (wfdb's wfdb2mat layout)."""
    import wfdb
    from wfdb.io.convert import matlab

    folder.mkdir(parents=True, exist_ok=True)
    wfdb.wrsamp("tmp", fs=500, units=["mV"] * 12, sig_name=CANON, fmt=["16"] * 12, write_dir=str(folder),
                p_signal=_lead_coded(CANON, 1000) + 0.01 * rng.standard_normal((1000, 12)))
    cwd = __import__("os").getcwd()
    __import__("os").chdir(folder)
    try:
        matlab.wfdb_to_mat("tmp")
    finally:
        __import__("os").chdir(cwd)
    (folder / "tmpm.mat").rename(folder / f"{name}.mat")
    hea = (folder / "tmpm.hea").read_text().replace("tmpm", name)
    (folder / f"{name}.hea").write_text(hea.rstrip("\n") + f"\n#Age: 50\n#Sex: Male\n#Dx: {','.join(dx)}\n#Rx: Unknown\n")
    for f in ("tmp.hea", "tmp.dat", "tmpm.hea"):
        (folder / f).unlink()


PTB = [  # (scp_codes, fold): NORM/SR, IMI+AFIB, LVOLT-only (no diagnostic label), fold-9 record, two test records
    ({"NORM": 100.0, "SR": 0.0}, 1), ({"IMI": 50.0, "AFIB": 100.0}, 2), ({"LVOLT": 100.0}, 3),
    ({"NORM": 100.0, "SR": 0.0}, 9), ({"IMI": 100.0, "SR": 0.0}, 10), ({"NORM": 80.0, "LVOLT": 0.0}, 10)]
STATEMENTS = (",description,diagnostic,form,rhythm,diagnostic_class,diagnostic_subclass\n"
              "NORM,normal ECG,1.0,,,NORM,NORM\nIMI,inferior myocardial infarction,1.0,,,MI,IMI\n"
              "LVOLT,low QRS voltages in the frontal and horizontal leads,,1.0,,,\n"
              "SR,sinus rhythm,,,1.0,,\nAFIB,atrial fibrillation,,,1.0,,\n")
CPSC = {"A0001": ["426783006"], "A0002": ["164889003", "59118001"], "A0003": ["270492004"], "A0004": ["164884008"],
        "A0005": ["426783006"], "A0006": ["429622005", "164931005"], "A0007": ["164909002"], "A0008": ["284470004"],
        "A0009": ["426783006"], "A0010": ["164889003"]}
CPSC_NAMES = {"426783006": "NORM", "164889003": "AFIB", "270492004": "1AVB", "164884008": "VPC", "429622005": "STD",
              "164931005": "STE", "164909002": "CLBBB", "284470004": "PAC", "59118001": "CRBBB"}
CSN = {"JS00001": ["426177001"], "JS00002": ["426177001", "164934002"], "JS00003": ["426177001", "999999"],  # an unknown code: dropped
       "JS00004": ["426783006"], "JS00005": ["426177001"], "JS00006": ["164934002"]}


def _site(site, rng):
    import h5py
    import pandas as pd
    import wfdb

    mimic, ptb = site / "mimic", site / "ptbxl"
    recs = []
    for i in range(3):
        rel = f"files/p100/s{i}/{i}"
        (mimic / rel).parent.mkdir(parents=True, exist_ok=True)
        wfdb.wrsamp(f"{i}", fs=500, units=["mV"] * 12, sig_name=MIMIC_ORDER, p_signal=_lead_coded(MIMIC_ORDER, 1000),
                    fmt=["16"] * 12, write_dir=str((mimic / rel).parent))
        recs.append(rel)
    pd.DataFrame({"subject_id": [1, 1, 2], "study_id": [10, 11, 12], "path": recs}).to_csv(mimic / "record_list.csv", index=False)
    pd.DataFrame({"study_id": [10, 11, 12], "report_0": ["Sinus rhythm", "Atrial fibrillation", "Sinus rhythm"],
                  "report_1": ["Normal ECG", None, "Low QRS voltages"]}).to_csv(mimic / "machine_measurements.csv", index=False)
    rows = []
    for i, (codes, fold) in enumerate(PTB):
        rel = f"records500/00000/{i:05d}_hr"
        (ptb / rel).parent.mkdir(parents=True, exist_ok=True)
        wfdb.wrsamp(f"{i:05d}_hr", fs=500, units=["mV"] * 12, sig_name=[n.upper() for n in CANON],
                    p_signal=_lead_coded(CANON, 1000), fmt=["16"] * 12, write_dir=str((ptb / rel).parent))
        rows.append({"ecg_id": i + 1, "filename_hr": rel, "scp_codes": repr(codes), "strat_fold": fold})
    pd.DataFrame(rows).to_csv(ptb / "ptbxl_database.csv", index=False)
    (ptb / "scp_statements.csv").write_text(STATEMENTS)
    cin = site / "challenge"
    for j, (name, dx) in enumerate(CPSC.items()):
        _dx_record(cin / "training" / "cpsc_2018" / f"g{1 + j // 5}", name, dx, rng)
    _dx_record(cin / "training" / "georgia" / "g1", "E0001", ["426783006"], rng)  # another source: not CPSC
    csn = site / "csn"
    for name, dx in CSN.items():
        _dx_record(csn / "WFDBRecords" / "01" / "010", name, dx, rng)
    (csn / "ConditionNames_SNOMED-CT.csv").write_text(
        "Acronym Name,Full Name,Snomed_CT\nSB,Sinus Bradycardia,426177001\nTWC,T wave Change,164934002\n"
        "SR,Sinus Rhythm,426783006\n")
    for root in (mimic, ptb, cin, csn):
        _sums(root)
    # CODE-15%: exam ids in the hdf5 (last row is zero padding), csv in another order
    c15 = site / "code15"
    c15.mkdir()
    x15 = np.stack([_lead_coded(CANON, 4096, 400) * (k + 1) for k in range(4)])
    with h5py.File(c15 / "exams_part0.hdf5", "w") as h:
        h["tracings"] = np.concatenate([x15, np.zeros((1, 4096, 12))]).astype(np.float32)
        h["exam_id"] = np.array([101, 102, 103, 104, 0])
    pd.DataFrame({"exam_id": [104, 102, 101, 103, 999], "1dAVb": [True, False, False, False, True],
                  "RBBB": [False] * 5, "LBBB": [False, False, True, False, False], "SB": [False, True, False, False, False],
                  "ST": [False, False, False, True, False], "AF": [False] * 5,
                  "trace_file": ["exams_part0.hdf5"] * 4 + ["exams_part1.hdf5"]}).to_csv(c15 / "exams.csv", index=False)
    with zipfile.ZipFile(c15 / "exams_part0.zip", "w") as z:
        z.write(c15 / "exams_part0.hdf5", "exams_part0.hdf5")
    (c15 / "exams_part0.hdf5").unlink()
    ct = site / "codetest"
    (ct / "data" / "annotations").mkdir(parents=True)
    with h5py.File(ct / "data" / "ecg_tracings.hdf5", "w") as h:
        h["tracings"] = np.stack([_lead_coded(CODETEST_ORDER, 4096, 400)] * 3).astype(np.float32)
    pd.DataFrame({"1dAVb": [1, 0, 0], "RBBB": [0, 1, 0], "LBBB": [0, 0, 0], "SB": [0, 0, 1], "AF": [0, 1, 0],
                  "ST": [0, 0, 0]}).to_csv(ct / "data" / "annotations" / "gold_standard.csv", index=False)
    with zipfile.ZipFile(ct / "data.zip", "w") as z:
        for p in (ct / "data").rglob("*"):
            if p.is_file():
                z.write(p, p.relative_to(ct).as_posix())
    import shutil

    shutil.rmtree(ct / "data")


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    pytest.importorskip("wfdb")
    pytest.importorskip("h5py")
    import http.server
    import threading
    from functools import partial

    from icml25.core import config
    from conftest import REPO
    from icml25.studies.dbeta import data as D

    tmp = tmp_path_factory.mktemp("dbeta_full")
    site = tmp / "site"
    _site(site, np.random.default_rng(0))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(http.server.SimpleHTTPRequestHandler, directory=str(site)))
    srv.RequestHandlerClass.log_message = lambda *a, **k: None
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    cfg = config.effective(config.load_study(REPO, "dbeta"), "full")
    ds = cfg["data"]["datasets"]
    for name, sub in [("mimic_iv_ecg", "mimic"), ("ptbxl", "ptbxl"), ("cpsc2018", "challenge"), ("csn", "csn"),
                      ("code15", "code15"), ("code_test", "codetest")]:
        ds[name]["base"] = f"{url}/{sub}"
    cfg["data"]["seconds"], cfg["data"]["fs"] = 2, 100
    cfg["data"]["tasks"]["csn"]["min_count"] = 2
    cfg["data"]["tasks"]["cpsc2018"]["split"] = {"test": 0.2, "val": 0.1, "seed": 42}
    cfg["data"]["text"] = {"build_local": True, "init_seed": 0, "d_model": 16, "d_ff": 16, "layers": 1, "heads": 2, "max_len": 32}
    cfg["data"]["n3s"] = {"k": 2}
    raw, out = tmp / "raw", tmp / "out"
    D.download(cfg, raw)
    D.preprocess(cfg, raw, out)
    yield cfg, site, raw, out, url
    srv.shutdown()
    srv.server_close()


def _task(out, name):
    d = out / "tasks" / name
    tr, te = np.load(d / "down_train.npz"), np.load(d / "down_test.npz")
    return tr, te, json.loads((d / "labels.json").read_text())


def test_tasks_and_pretraining_layout(full_run):
    cfg, _, raw, out, _ = full_run
    names = [t["name"] for t in json.loads((out / "tasks.json").read_text())]
    assert names == cfg["data"]["downstream"] == ["ptbxl_super", "ptbxl_sub", "ptbxl_form", "ptbxl_rhythm", "cpsc2018", "csn", "code"]
    assert [t["in_mean"] for t in json.loads((out / "tasks.json").read_text())] == [True] * 6 + [False]
    pre = np.load(out / "pretrain.npz")
    assert pre["x"].shape == (3, 12, 200)                    # 2 s at 500 Hz resampled to 100 Hz
    # MIMIC stores aVF before aVL: each lead's level is its canonical index + 1 after reordering
    assert np.allclose(pre["x"][:, :, 50:150].mean(-1), np.arange(1, 13)[None], atol=0.05)
    reports = json.loads((out / "pretrain_reports.json").read_text())
    assert reports == ["sinus rhythm. normal ecg", "atrial fibrillation", "sinus rhythm. low qrs voltages"]
    assert (raw / "cpsc2018" / "training/cpsc_2018/g1/A0001.mat").exists()
    assert not (raw / "cpsc2018" / "training/georgia").exists()  # only the CPSC part of the challenge set


def test_ptbxl_groupings(full_run):
    _, _, _, out, _ = full_run
    tr, te, lab = _task(out, "ptbxl_super")
    assert lab["labels"] == ["MI", "NORM"]
    assert lab["prompts"] == ["myocardial infarction", "normal ecg"]
    # train: records 0, 1 (record 2 has no diagnostic code, record 3 is fold 9); test: records 4, 5
    assert [i.split("/")[-1] for i in tr["ids"]] == ["00000_hr", "00001_hr"]
    assert tr["y"].tolist() == [[0, 1], [1, 0]] and te["y"].tolist() == [[1, 0], [0, 1]]
    _, _, sub = _task(out, "ptbxl_sub")
    assert sub["labels"] == ["IMI", "NORM"]
    tr, te, lab = _task(out, "ptbxl_form")
    assert lab["labels"] == ["LVOLT"] and len(tr["y"]) == 1 and te["y"].tolist() == [[1]]  # likelihood 0 counts
    assert lab["prompts"] == ["low qrs voltages in the frontal and horizontal leads"]
    tr, te, lab = _task(out, "ptbxl_rhythm")
    assert lab["labels"] == ["AFIB", "SR"] and tr["y"].tolist() == [[0, 1], [1, 0]] and te["y"].tolist() == [[0, 1]]
    assert tr["x"].shape[1:] == (12, 200)
    assert np.allclose(tr["x"][:, :, 50:150].mean(-1), np.arange(1, 13)[None], atol=0.05)


def test_cpsc_and_csn_labels_and_splits(full_run):
    _, _, _, out, _ = full_run
    tr, te, lab = _task(out, "cpsc2018")
    assert set(lab["labels"]) == {"NORM", "AFIB", "1AVB", "CLBBB", "CRBBB", "PAC", "VPC", "STD", "STE"}
    ids = list(tr["ids"]) + list(te["ids"])
    assert len(te["ids"]) == 2 and len(tr["ids"]) == 7 and not set(tr["ids"]) & set(te["ids"])  # 10 -> 2 test, 1 val
    y = {i.split("/")[-1]: row for i, row in zip(ids, np.concatenate([tr["y"], te["y"]]))}
    L = lab["labels"]
    for name, dx in CPSC.items():
        if name in y:
            want = {CPSC_NAMES[c] for c in dx}
            assert {L[j] for j in np.flatnonzero(y[name])} == want, name
    assert tr["x"].shape[1:] == (12, 200) and np.allclose(tr["x"][:, :, 50:150].mean(-1), np.arange(1, 13)[None], atol=0.05)
    tr, te, lab = _task(out, "csn")
    ids = [i.split("/")[-1] for i in list(tr["ids"]) + list(te["ids"])]
    assert sorted(ids) == ["JS00001", "JS00002", "JS00004", "JS00005", "JS00006"]   # the unknown code's record dropped
    assert lab["labels"] == ["SB", "TWC"]                                             # SR has 1 record < min_count 2
    assert lab["prompts"] == ["sinus bradycardia", "t wave change"]
    y = dict(zip(ids, np.concatenate([tr["y"], te["y"]]).tolist()))
    assert y["JS00002"] == [1, 1] and y["JS00004"] == [0, 0] and y["JS00006"] == [0, 1]
    assert not set(tr["ids"]) & set(te["ids"])


def test_code_hdf5_join_and_rate(full_run):
    _, _, _, out, _ = full_run
    tr, te, lab = _task(out, "code")
    assert lab["labels"] == ["1AVB", "RBBB", "LBBB", "SBRAD", "AFIB", "STACH"]
    assert len(tr["y"]) == 4 and len(te["y"]) == 3                # the zero-id padding row is dropped
    # joined on exam_id: exam 101 is LBBB, 102 SB, 103 ST, 104 1dAVb; exam k's tracing is scaled by k - 100
    by_id = {i.split(":")[-1]: (row, x) for i, row, x in zip(tr["ids"], tr["y"].tolist(), tr["x"])}
    assert by_id["101"][0] == [0, 0, 1, 0, 0, 0] and by_id["104"][0] == [1, 0, 0, 0, 0, 0]
    assert by_id["103"][0] == [0, 0, 0, 0, 0, 1] and by_id["102"][0] == [0, 0, 0, 1, 0, 0]
    for k in (101, 102, 103, 104):
        assert np.allclose(by_id[str(k)][1][:, 50:150].mean(-1), (k - 100) * np.arange(1, 13), rtol=0.02)
    assert tr["x"].shape[1:] == (12, 200)                          # 400 Hz -> 100 Hz, cut to 2 s
    assert te["y"].tolist() == [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 1, 0], [0, 0, 0, 1, 0, 0]]
    # CODE-test's file order (aVL, aVF, aVR) is put back in the canonical order by the config's lead names
    assert np.allclose(te["x"][:, :, 50:150].mean(-1), np.arange(1, 13), rtol=0.02)
    assert not set(tr["ids"]) & set(te["ids"])


@pytest.mark.parametrize("rel", ["challenge/training/cpsc_2018/g1/A0002.hea", "ptbxl/records500/00000/00001_hr.hea"])
def test_checksum_mismatch_is_refused(full_run, tmp_path, rel):
    from icml25.core.errors import UserError
    from icml25.studies.dbeta import data as D

    cfg, site, _, _, _ = full_run
    rec = site / rel
    good = rec.read_text()
    rec.write_text(good + "# tampered after SHA256SUMS.txt was written\n")
    try:
        with pytest.raises(UserError, match="checksum"):
            D.download(cfg, tmp_path / "raw")
    finally:
        rec.write_text(good)


def test_task_means_skip_out_of_mean_tasks(full_run, monkeypatch):
    from icml25.studies.dbeta import evaluation as E

    _, _, _, out, _ = full_run
    vals = {"ptbxl_super": 0.6, "ptbxl_sub": 0.7, "ptbxl_form": 0.8, "ptbxl_rhythm": 0.9, "cpsc2018": 0.5, "csn": 0.5, "code": 0.1}
    monkeypatch.setattr(E, "_evaluate_set", lambda cfg, m, s, d, model=None, tok=None: [
        {"setting": "lp1", "metric": "auc", "value": vals[d.name]}, {"setting": "train", "metric": "n_labelled", "value": 3.0}])
    rows = E.evaluate({}, "supervised", 0, out)
    got = {r["setting"]: r["value"] for r in rows if r["metric"] == "auc"}
    assert got["lp1.code"] == 0.1 and got["lp1.csn"] == 0.5
    assert got["lp1"] == pytest.approx(np.mean([0.6, 0.7, 0.8, 0.9, 0.5, 0.5]))   # CODE is not in the mean


# Rows of the PhysioNet/CinC Challenge 2020 mapping tables (physionetchallenges/evaluation-2020,
# dx_mapping_scored.csv and dx_mapping_unscored.csv): Dx, SNOMED-CT code, abbreviation, records in the CPSC source.
# The nine codes with CPSC records are CPSC2018's nine classes; the scored PVC / VPB codes have none there.
CINC2020_DX = """Dx,SNOMED CT Code,Abbreviation,CPSC
1st degree av block,270492004,IAVB,722
atrial fibrillation,164889003,AF,1221
complete right bundle branch block,713427006,CRBBB,0
left bundle branch block,164909002,LBBB,236
premature atrial contraction,284470004,PAC,616
premature ventricular contractions,427172004,PVC,0
right bundle branch block,59118001,RBBB,1857
sinus rhythm,426783006,NSR,918
supraventricular premature beats,63593006,SVPB,0
ventricular premature beats,17338001,VPB,0
st depression,429622005,STD,869
st elevation,164931005,STE,220
ventricular ectopics,164884008,VEB,700
"""


def test_cpsc_codes_are_the_challenge_tables_cpsc_codes(tmp_path):
    """The config's CPSC2018 code table is exactly the set of codes that label CPSC records in the challenge's
    headers (a PVC class coded 427172004 or 17338001 would label no CPSC record at all)."""
    import pandas as pd

    from icml25.core import config
    from conftest import REPO

    (tmp_path / "dx.csv").write_text(CINC2020_DX)
    tab = pd.read_csv(tmp_path / "dx.csv", dtype={"SNOMED CT Code": str})
    in_cpsc = set(tab.loc[tab["CPSC"] > 0, "SNOMED CT Code"])
    codes = config.effective(config.load_study(REPO, "dbeta"), "full")["data"]["tasks"]["cpsc2018"]["codes"]
    assert set(codes.values()) == in_cpsc and len(codes) == 9
    assert codes["VPC"] == "164884008"       # "ventricular ectopics": CPSC's 700 PVC records
