"""The paper's real data (Sec. 5.2.4 S&P 100, Sec. 5.2.5 yeast eQTL; App. E.3.3): sources, download through
icml25.core.download.fetch, parsing, and the "ground truth" graphs from full-data score matching.

Sources (App. E.3.3 of the paper):
- S&P 100: daily closes 2013-2018 of the S&P 500 from Kaggle `camnugent/sandp500` (all_stocks_5yr.csv),
  restricted to the 100 constituents listed on Wikipedia's S&P 100 page at revision 666413597 (mid-period);
  we read the revision's wikitext (`action=raw`). Kaggle's download endpoint may ask for an API token
  (then place the zip at data/raw/full/missing_sm/sp100/sandp500.zip by hand: fetch keeps a file already there).
- Yeast: GEO series GSE1990 (Brem & Kruglyak 2005), the series matrix from NCBI's FTP over https; genes
  present in at least 95% of the samples are kept (the paper: 106 genes).
No checksum can be known here (no internet access beyond package registries while this was written): the
sha256 entries are None, and the data manifest records each file's digest on the first download.
"""
from __future__ import annotations

import gzip
import re
import zipfile
from pathlib import Path

import numpy as np

SOURCES = {
    "sp100": {
        "prices": {"file": "sandp500.zip", "sha256": None,
                   "url": "https://www.kaggle.com/api/v1/datasets/download/camnugent/sandp500"},
        "members": {"file": "sp100_rev666413597.wikitext", "sha256": None,
                    "url": "https://en.wikipedia.org/w/index.php?title=S%26P_100&oldid=666413597&action=raw"},
    },
    "yeast": {
        "matrix": {"file": "GSE1990_series_matrix.txt.gz", "sha256": None,
                   "url": "https://ftp.ncbi.nlm.nih.gov/geo/series/GSE1nnn/GSE1990/matrix/GSE1990_series_matrix.txt.gz"},
    },
}
DATASETS = tuple(SOURCES)


def download(name: str, raw_dir: Path) -> dict:
    """Fetch every file of one dataset into raw_dir/name/ (checksum-verified where known)."""
    from icml25.core.download import fetch

    out = {}
    for key, src in SOURCES[name].items():
        out[key] = fetch(src["url"], Path(raw_dir) / name / src["file"], src["sha256"])
    return out


# ---- parsers -----------------------------------------------------------------------------------

_TICKER = re.compile(r"^[A-Z]{1,5}(?:[.\-][A-Z])?$")


def _strip_wiki(cell: str) -> str:
    cell = re.sub(r"\[\[(?:[^|\]]*\|)?([^\]]*)\]\]", r"\1", cell)  # [[target|label]] -> label
    cell = re.sub(r"\{\{[^}]*\}\}", "", cell)
    cell = re.sub(r"<[^>]+>", "", cell)
    cell = re.sub(r"^\s*(?:[a-z\-]+=\"[^\"]*\"\s*)+\|", "", cell)  # cell attributes
    return cell.strip().strip("'").strip()


def parse_sp100_members(wikitext: str) -> list[str]:
    """Tickers of the constituents table of the S&P 100 wikitext: per table row, the first cell that is a
    ticker symbol (upper case, optional class suffix such as BRK.B)."""
    tickers, row = [], []
    in_table = False
    for line in wikitext.splitlines():
        t = line.strip()
        if t.startswith("{|"):
            in_table = True
            continue
        if not in_table:
            continue
        if t.startswith("|-") or t.startswith("|}"):
            for c in row:
                c = _strip_wiki(c)
                if _TICKER.match(c):
                    tickers.append(c)
                    break
            row = []
            if t.startswith("|}"):
                in_table = False
            continue
        if t.startswith("|") and not t.startswith("|+"):
            row += t[1:].split("||")
    seen = set()
    return [x for x in tickers if not (x in seen or seen.add(x))]


def parse_sandp500(zip_path: Path):
    """(dates, names, close matrix) from all_stocks_5yr.csv inside the Kaggle zip (date x ticker, NaN where
    a ticker has no quote)."""
    import pandas as pd

    with zipfile.ZipFile(zip_path) as zf:
        member = next((m for m in zf.namelist() if m.endswith("all_stocks_5yr.csv")), None)
        if member is None:
            raise ValueError(f"{zip_path} has no all_stocks_5yr.csv")
        df = pd.read_csv(zf.open(member))
    name_col = "Name" if "Name" in df.columns else "name"
    wide = df.pivot_table(index="date", columns=name_col, values="close", aggfunc="last").sort_index()
    return list(wide.index), list(wide.columns), wide.to_numpy(dtype=np.float64)


def parse_series_matrix(path: Path):
    """(probe ids, sample ids, values genes x samples with NaN for missing) from a GEO series matrix."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    try:
        i0 = next(i for i, l in enumerate(lines) if l.startswith("!series_matrix_table_begin"))
        i1 = next(i for i, l in enumerate(lines) if l.startswith("!series_matrix_table_end"))
    except StopIteration:
        raise ValueError(f"{path} is not a GEO series matrix (no table markers)") from None
    head = [c.strip('"') for c in lines[i0 + 1].split("\t")]
    ids, vals = [], []
    for l in lines[i0 + 2:i1]:
        cells = l.split("\t")
        ids.append(cells[0].strip('"'))
        row = []
        for c in cells[1:len(head)]:
            c = c.strip().strip('"')
            try:
                row.append(float(c))
            except ValueError:
                row.append(np.nan)
        row += [np.nan] * (len(head) - 1 - len(row))
        vals.append(row)
    return ids, head[1:], np.asarray(vals, dtype=np.float64)


# ---- matrices the study fits ------------------------------------------------------------------

def _standardise(X: np.ndarray) -> np.ndarray:
    sd = X.std(0)
    return (X - X.mean(0)) / np.where(sd > 0, sd, 1.0)


def sp100_matrix(files: dict, max_missing: float = 0.05):
    """Days x S&P 100 stocks (closing prices, standardised per stock: our choice). Tickers of the list that
    are absent from the price file or miss more than `max_missing` of the days are dropped, then the days
    with any remaining gap."""
    members = parse_sp100_members(Path(files["members"]).read_text(encoding="utf-8", errors="replace"))
    dates, names, close = parse_sandp500(Path(files["prices"]))
    col = {n.upper(): i for i, n in enumerate(names)}
    keep = [t for t in members if t.upper() in col or t.upper().replace(".", "-") in col]
    idx = [col.get(t.upper(), col.get(t.upper().replace(".", "-"))) for t in keep]
    X = close[:, idx]
    ok = np.isnan(X).mean(0) <= max_missing
    X, keep = X[:, ok], [t for t, o in zip(keep, ok) if o]
    X = X[~np.isnan(X).any(1)]
    return _standardise(X), keep


def yeast_matrix(files: dict, min_present: float = 0.95):
    """Segregants x genes: the genes present in at least `min_present` of the samples (App. E.3.3), then the
    samples complete on them (our choice: the ground truth needs complete rows), standardised per gene."""
    ids, samples, V = parse_series_matrix(Path(files["matrix"]))
    present = (~np.isnan(V)).mean(1) >= min_present
    X = V[present].T
    X = X[~np.isnan(X).any(1)]
    return _standardise(X), [i for i, p in zip(ids, present) if p]


def load_matrix(name: str, files: dict, cfg_real: dict):
    if name == "sp100":
        return sp100_matrix(files, float(cfg_real.get("max_missing", 0.05)))
    if name == "yeast":
        return yeast_matrix(files, float(cfg_real.get("min_present", 0.95)))
    raise ValueError(f"unknown real dataset {name!r}")


def ground_truths(X: np.ndarray, hp: dict, densities, threshold: float, seed: int = 0):
    """App. E.3.3: graphs from standard score matching on the complete data along the L1 path, one per
    target edge density (the path snapshot whose density is closest). Returns (K, d, d) bool and the
    densities reached."""
    from . import fit as F

    d = X.shape[1]
    res = F.fit("full", {"g": {"X": X[None], "M": np.ones((1, *X.shape), bool), "kind": "path"}}, hp, seed)
    path = res["g"]["path"][0]
    iu = np.triu_indices(d, 1)
    dens = np.array([(np.abs(P[iu]) > threshold).mean() for P in path])
    gts, got = [], []
    for target in densities:
        k = int(np.argmin(np.abs(dens - float(target))))
        A = np.zeros((d, d), bool)
        A[iu] = np.abs(path[k][iu]) > threshold
        gts.append(A | A.T)
        got.append(float(dens[k]))
    return np.stack(gts), np.asarray(got)
