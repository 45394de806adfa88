"""dbeta end to end at smoke scale through the real `snakemake` CLI (table, claims, figures; the data
contract: probing never sees pretraining records, prompts never in reports), and the full-scale PhysioNet
loaders on tiny local wfdb records served over HTTP."""
from __future__ import annotations

import json

import numpy as np
import pytest


# this study's methods in the session's shared smoke run (conftest.study_smoke): fewer jobs, every stage runs
SMOKE_METHODS = ["random", "dbeta", "supervised"]


def test_snakemake_smoke_end_to_end(study_smoke):
    root = study_smoke("dbeta")  # the session's one snakemake run, with SMOKE_METHODS for this study
    tables = root / "results" / "smoke" / "tables"
    md = (tables / "dbeta.md").read_text()
    assert "paper: D-BETA" in md and "80.52" in md and "## Claims" in md
    claims = {c["id"]: c for c in json.loads((tables / "dbeta.claims.json").read_text())["claims"]}
    assert claims["lp1_dbeta_beats_clip"]["verdict"] == "n.a."      # clip not run: n.a., not a crash
    assert claims["zs_needs_contrastive"]["verdict"] in ("holds", "fails")
    figs = json.loads((root / "results" / "smoke" / "figures" / "dbeta" / "figures.json").read_text())
    names = {f["name"]: f for f in figs["figures"]}
    assert {"linear_probe", "zero_shot", "pretrain_loss"} <= set(names)
    assert all(f["caption"] for f in names.values())
    # the data contract, on the files the pipeline wrote
    data = root / "data" / "processed" / "smoke" / "dbeta"
    pre = np.load(data / "pretrain.npz")
    reports = json.loads((data / "pretrain_reports.json").read_text())
    prompts = json.loads((data / "labels.json").read_text())["prompts"]
    assert not any(p in r for p in prompts for r in reports)
    flat = {x.tobytes() for x in pre["x"]}
    for split in ("down_train", "down_test", "shift_test"):
        z = np.load(data / f"{split}.npz")
        assert not set(z["ids"]) & set(pre["ids"])
        assert not any(x.tobytes() in flat for x in z["x"])
    rec = json.loads((root / "results" / "smoke" / "dbeta" / "supervised" / "seed0" / "metrics.json").read_text())
    assert {r["setting"] for r in rec["metrics"] if r["metric"] == "auc"} == {"lp1"}   # supervised: 1% labels only


def _wfdb_site(site, rng):
    import pandas as pd
    import wfdb

    mimic, ptb = site / "mimic", site / "ptbxl"
    recs = []
    for i in range(3):
        rel = f"files/p100/s{i}/{i}"
        (mimic / rel).parent.mkdir(parents=True, exist_ok=True)
        wfdb.wrsamp(f"{i}", fs=500, units=["mV"] * 12, sig_name=[f"l{j}" for j in range(12)],
                    p_signal=rng.standard_normal((1000, 12)), fmt=["16"] * 12, write_dir=str((mimic / rel).parent))
        recs.append(rel)
    pd.DataFrame({"subject_id": [1, 1, 2], "study_id": [10, 11, 12], "path": recs}).to_csv(mimic / "record_list.csv", index=False)
    pd.DataFrame({"study_id": [10, 11, 12], "report_0": ["Sinus rhythm", "Atrial fibrillation", "Sinus rhythm"],
                  "report_1": ["Normal ECG", None, "Low QRS voltages"]}).to_csv(mimic / "machine_measurements.csv", index=False)
    rows = []
    for i in range(4):
        rel = f"records500/00000/{i:05d}_hr"
        (ptb / rel).parent.mkdir(parents=True, exist_ok=True)
        wfdb.wrsamp(f"{i:05d}_hr", fs=500, units=["mV"] * 12, sig_name=[f"l{j}" for j in range(12)],
                    p_signal=rng.standard_normal((1000, 12)), fmt=["16"] * 12, write_dir=str((ptb / rel).parent))
        rows.append({"filename_hr": rel, "scp_codes": repr({"NORM": 100.0} if i % 2 else {"AFIB": 100.0, "LVOLT": 0.0}),
                     "strat_fold": 10 if i == 3 else 1})
    pd.DataFrame(rows).to_csv(ptb / "ptbxl_database.csv", index=False)
    (ptb / "scp_statements.csv").write_text("code\nNORM\n")


def test_full_scale_physionet_loaders_on_local_records(tmp_path, file_server):
    pytest.importorskip("wfdb")
    from icml25.core import config
    from conftest import REPO
    from icml25.studies.dbeta import data as D

    site = tmp_path / "site"
    _wfdb_site(site, np.random.default_rng(0))
    url = file_server(site)
    cfg = config.effective(config.load_study(REPO, "dbeta"), "full")
    cfg["data"]["datasets"]["mimic_iv_ecg"]["base"] = f"{url}/mimic"
    cfg["data"]["datasets"]["ptbxl"]["base"] = f"{url}/ptbxl"
    cfg["data"]["seconds"], cfg["data"]["fs"] = 2, 100
    cfg["data"]["labels"], cfg["data"]["prompts"] = ["NORM", "AFIB"], {"NORM": "normal", "AFIB": "atrial fibrillation"}
    cfg["data"]["text"] = {"build_local": True, "init_seed": 0, "d_model": 16, "d_ff": 16, "layers": 1, "heads": 2, "max_len": 32}
    cfg["data"]["n3s"] = {"k": 2}
    raw, out = tmp_path / "raw", tmp_path / "out"
    D.download(cfg, raw)
    assert (raw / "mimic_iv_ecg" / "files/p100/s1/1.dat").exists() and (raw / "ptbxl" / "records500/00000/00003_hr.hea").exists()
    D.preprocess(cfg, raw, out)
    pre = np.load(out / "pretrain.npz")
    assert pre["x"].shape == (3, 12, 200)                          # 2 s at 500 Hz resampled to 100 Hz
    import wfdb

    sig, _ = wfdb.rdsamp(str(raw / "mimic_iv_ecg" / "files/p100/s0/0"))
    assert np.corrcoef(pre["x"][0, 0, :50], sig[:250:5, 0])[0, 1] > 0.5   # the same record, downsampled
    reports = json.loads((out / "pretrain_reports.json").read_text())
    assert reports == ["sinus rhythm. normal ecg", "atrial fibrillation", "sinus rhythm. low qrs voltages"]
    tr, te = np.load(out / "down_train.npz"), np.load(out / "down_test.npz")
    assert len(tr["y"]) == 3 and len(te["y"]) == 1                 # fold 10 is the test fold
    assert tr["y"].tolist() == [[0, 1], [1, 0], [0, 1]] and te["y"].tolist() == [[1, 0]]
    assert (out / "text" / "config.json").exists() and np.load(out / "n3s.npz")["candidates"].shape[1] == 2
    (raw / "ptbxl" / "records500/00000/00001_hr.hea").unlink()
    from icml25.core.errors import UserError

    with pytest.raises(UserError, match="download"):
        D.preprocess(cfg, raw, out)
