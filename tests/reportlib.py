"""Shared by test_report.py and test_browser.py: build `snakemake --report` once on the smoke tree, parse it."""
from __future__ import annotations

import base64
import html
import json
import re
import shutil
import time
from pathlib import Path


from conftest import REPO, snakemake

ARTIFACTS = REPO / "test-artifacts"  # gitignored; screenshots and the report land here
SCALE = "smoke"
_BUILT: dict[str, Path] = {}


def landed_studies() -> list[str]:
    """The studies of the shared smoke tree the report is built from."""
    from conftest import SMOKE_TREE_STUDIES

    return list(SMOKE_TREE_STUDIES)


def build_report(tree: Path) -> Path:
    """`snakemake all --report report.html` on a finished smoke tree (once per session); records its
    size and build time in test-artifacts/report_metrics.json and keeps a copy of the report there."""
    key = str(tree)
    if key in _BUILT:
        return _BUILT[key]
    if not (tree / "report").exists():  # the captions; conftest's WORKFLOW_FILES predates report/
        shutil.copytree(REPO / "report", tree / "report")
    out = tree / "report.html"
    t0 = time.time()
    snakemake(tree, "all", "--config", f"scale={SCALE}", "--report", str(out))
    seconds = time.time() - t0
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy2(out, ARTIFACTS / "report.html")
    metrics = {"report_bytes": out.stat().st_size, "build_seconds": round(seconds, 2)}
    (ARTIFACTS / "report_metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(f"snakemake --report: {metrics['report_bytes'] / 1e6:.2f} MB in {seconds:.1f} s")
    _BUILT[key] = out
    return out


def _js_object(text: str, var: str):
    # the report's data are JSON literals in `var <name> = ...;` lines of the template (the bundled JS
    # libraries use the same names for other things, so take the JSON one)
    for m in re.finditer(rf"^\s*var {var} = (?=[{{\"])", text, flags=re.M):
        try:
            return json.JSONDecoder().raw_decode(text, m.end())[0]
        except json.JSONDecodeError:
            continue
    raise AssertionError(f"report has no JSON `var {var}`")


def parse_report(path: Path) -> dict:
    """{'results': path -> entry (caption, mime_type, data_uri, labels), 'categories': cat -> subcat -> [paths],
    'description': the workflow description (HTML)}."""
    text = Path(path).read_text()
    return {"results": _js_object(text, "results"), "categories": _js_object(text, "categories"),
            "description": _js_object(text, "workflow_desc")}


def data_bytes(uri: str) -> bytes:
    head, payload = uri.split(",", 1)
    assert head.endswith(";base64"), head[:80]
    return base64.b64decode(payload)


def plain(html_text: str) -> str:
    """Visible text of an HTML fragment, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", html_text)).split())
