"""The full-scale code path of missing_sm (real data through icml25.core.download.fetch -> parse the real
formats -> ground truths -> train -> evaluate -> table), on tiny local stand-ins of the real files (a Kaggle
sandp500 zip, the S&P 100 wikitext, a GEO series matrix) served by a real HTTP server, plus the paper's
truncated set-ups and a d-sweep at toy size."""
from __future__ import annotations

import gzip
import io
import json
import zipfile

import numpy as np
import pytest
import yaml

from icml25 import cli
from icml25.studies.missing_sm import data_real as R

TICKERS = ["AAPL", "MSFT", "XOM", "BRK.B", "JPM", "GE"]

WIKITEXT = """The '''S&P 100''' index ...
== Components ==
{| class="wikitable sortable"
! Symbol !! Name
|-
| AAPL || [[Apple Inc.]]
|-
| MSFT || [[Microsoft|Microsoft Corporation]]
|-
| XOM || [[ExxonMobil|Exxon Mobil Corp]]
|-
| BRK.B || [[Berkshire Hathaway]]
|-
| JPM || [[JPMorgan Chase|JPMorgan Chase & Co]]
|-
| GE || [[General Electric]]
|-
| ZZZZ || [[Not In The Price File]]
|}
"""


def _stand_ins(rng):
    # prices: a 3-factor model so the "ground truth" graph is not empty; GE misses 40% of the days (dropped)
    days = [f"2014-{1 + i // 28:02d}-{1 + i % 28:02d}" for i in range(80)]
    F = rng.standard_normal((80, 2)).cumsum(0)
    rows = []
    for j, t in enumerate(TICKERS + ["IBM"]):
        close = 50 + F @ rng.standard_normal(2) + rng.standard_normal(80)
        for i, dday in enumerate(days):
            if t == "GE" and i % 5 < 2:
                continue
            rows.append(f"{dday},1,2,0.5,{close[i]:.4f},1000,{t}")
    csv = "date,open,high,low,close,volume,Name\n" + "\n".join(rows) + "\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("all_stocks_5yr.csv", csv)
    files = {"sp100/sandp500.zip": buf.getvalue(), "sp100/members.wikitext": WIKITEXT.encode()}
    # GEO series matrix: 9 genes x 30 samples, 2 genes with many nulls (dropped), 1 sample with a null in a kept gene
    V = rng.standard_normal((9, 30))
    V[3] += V[2]
    lines = ['!Series_title\t"Genetic dissection of transcriptional regulation in budding yeast"',
             '!series_matrix_table_begin', "\t".join(['"ID_REF"'] + [f'"GSM{1000 + i}"' for i in range(30)])]
    for g in range(9):
        cells = [f"{v:.4f}" for v in V[g]]
        if g in (7, 8):
            cells = [c if i % 3 else "null" for i, c in enumerate(cells)]
        if g == 0:
            cells[5] = ""
        lines.append("\t".join([f'"YAL00{g}W"'] + cells))
    lines.append("!series_matrix_table_end")
    files["yeast/GSE1990_series_matrix.txt.gz"] = gzip.compress(("\n".join(lines) + "\n").encode())
    return files


@pytest.fixture
def served(tmp_path, monkeypatch, file_server):
    files = _stand_ins(np.random.default_rng(0))
    www = tmp_path / "www"
    for rel, blob in files.items():
        (www / rel).parent.mkdir(parents=True, exist_ok=True)
        (www / rel).write_bytes(blob)
    base = file_server(www)
    src = {"sp100": {"prices": {**R.SOURCES["sp100"]["prices"], "url": f"{base}/sp100/sandp500.zip"},
                     "members": {**R.SOURCES["sp100"]["members"], "url": f"{base}/sp100/members.wikitext"}},
           "yeast": {"matrix": {**R.SOURCES["yeast"]["matrix"], "url": f"{base}/yeast/GSE1990_series_matrix.txt.gz"}}}
    for k, v in src.items():
        monkeypatch.setitem(R.SOURCES, k, v)
    return base


def test_real_urls_are_the_papers():
    assert R.SOURCES["yeast"]["matrix"]["url"].startswith("https://ftp.ncbi.nlm.nih.gov/geo/series/GSE1nnn/GSE1990/matrix/")
    assert "camnugent/sandp500" in R.SOURCES["sp100"]["prices"]["url"]
    assert "oldid=666413597" in R.SOURCES["sp100"]["members"]["url"]


def test_parsers_on_stand_ins(tmp_path):
    files = _stand_ins(np.random.default_rng(1))
    assert R.parse_sp100_members(WIKITEXT) == TICKERS + ["ZZZZ"]
    (tmp_path / "m.txt.gz").write_bytes(files["yeast/GSE1990_series_matrix.txt.gz"])
    ids, samples, V = R.parse_series_matrix(tmp_path / "m.txt.gz")
    assert ids[0] == "YAL000W" and samples[0] == "GSM1000" and V.shape == (9, 30)
    assert np.isnan(V[0, 5]) and np.isnan(V[7, 0]) and not np.isnan(V[7, 1])


def test_full_scale_path_on_stand_ins(served, workflow_copy):
    path = workflow_copy / "config" / "studies" / "missing_sm.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["methods"] = ["marg_var", "marg_iw", "em", "zeroed", "full"]
    full = raw["scales"]["full"]
    full.update(seeds=[0, 1], gauss_checkpoints=[0, 5])
    full["data"].update(d=4, n=80, graphs=["star"], p_miss=[0.5], gauss=True, gauss_d=4, gauss_n=80, gauss_n_test=50,
                        gauss_reps=2, gauss_trunc_dims=2, d_sweep=[5], real=["sp100", "yeast"], real_p_miss=[0.3],
                        real_seeds=1)
    full["hp"] = {"var_hidden": 8, "var_steps": 1, "r": 4, "batch": 20,
                  "path": {"iters_first": 3, "iters_per_gamma": 1, "n_gammas": 5}}
    path.write_text(yaml.safe_dump(raw))
    base = ["--root", str(workflow_copy), "--scale", "full", "--study", "missing_sm"]
    assert cli.main(["download", *base]) == 0
    rawdir = workflow_copy / "data" / "raw" / "full" / "missing_sm"
    assert (rawdir / "sp100" / "sandp500.zip").exists() and (rawdir / "yeast" / "GSE1990_series_matrix.txt.gz").exists()
    assert cli.main(["preprocess", *base]) == 0
    proc = workflow_copy / "data" / "processed" / "full" / "missing_sm"
    sp = np.load(proc / "real_sp100.npz")
    # ZZZZ (no prices) and GE (40% of the days missing) dropped; days complete; standardised
    assert list(sp["columns"]) == ["AAPL", "MSFT", "XOM", "BRK.B", "JPM"] and sp["X"].shape == (80, 5)
    assert np.allclose(sp["X"].mean(0), 0, atol=1e-9) and np.allclose(sp["X"].std(0), 1)
    ye = np.load(proc / "real_yeast.npz")
    assert ye["X"].shape == (29, 7)  # 2 sparse genes dropped, the sample with a null dropped
    assert ye["gt"].shape == (5, 7, 7) and ye["gt"].dtype == bool
    z = np.load(proc / "seed0.npz")
    assert "sp100_M_p0.3" in z and "sp100_M_p0.3" not in np.load(proc / "seed1.npz")  # real_seeds = 1
    assert z["gauss_X"].shape == (2, 80, 4) and np.isfinite(z["gauss_lo"][:, :2]).all()
    assert (z["gauss_X"][:, :, :2] > z["gauss_lo"][:, None, :2]).all()  # the truncated Gaussian
    assert (z["star_X"] @ z["star_a"] <= z["star_b"]).all()  # the halfspace-truncated graph
    for m, s in [(m, 0) for m in raw["methods"]] + [("zeroed", 1)]:
        assert cli.main(["train", *base, "--method", m, "--seed", str(s)]) == 0
        assert cli.main(["evaluate", *base, "--method", m, "--seed", str(s)]) == 0
    rec1 = json.loads((workflow_copy / "results" / "full" / "missing_sm" / "zeroed" / "seed1" / "metrics.json").read_text())
    assert not any(r["setting"].startswith(("sp100", "yeast")) for r in rec1["metrics"])  # real_seeds = 1
    rec = json.loads((workflow_copy / "results" / "full" / "missing_sm" / "marg_var" / "seed0" / "metrics.json").read_text())
    got = {(r["setting"], r["metric"]): r["value"] for r in rec["metrics"]}
    for k in (("sp100_p0.3", "auc"), ("yeast_p0.3", "auc"), ("star_d5_p0.5", "auc"), ("star_p0.5", "auc")):
        assert 0 <= got[k] <= 1, k
    assert np.isfinite(got[("gauss_it5", "fisher_div")])
    full["seeds"] = [0]  # the table over the runs made (seed 1 only checked real_seeds above)
    path.write_text(yaml.safe_dump(raw))
    assert cli.main(["table", *base]) == 0
    md = (workflow_copy / "results" / "full" / "tables" / "missing_sm.md").read_text()
    assert "AUC sp100 p=0.3" in md and "AUC yeast p=0.3" in md and "AUC star d=5 p=0.5" in md
