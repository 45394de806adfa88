"""code_review end to end at smoke scale through the real `snakemake` CLI (table, claims, figures), and
the full-scale BugsC++ loader on a tiny local archive in BugsC++'s layout through the same code path."""
from __future__ import annotations

import io
import json
import tarfile

STUDY = "code_review"


def test_snakemake_smoke_end_to_end(study_smoke):
    root = study_smoke(STUDY)  # the session's one smoke run through the snakemake CLI
    md = (root / "results" / "smoke" / "tables" / f"{STUDY}.md").read_text()
    assert "## Claims" in md and "LeftFlow" in md and "flag every changed line" in md
    claims = {c["id"]: c for c in json.loads((root / "results" / "smoke" / "tables" / f"{STUDY}.claims.json").read_text())["claims"]}
    assert claims["absolute_kbi"]["verdict"] == "n.a." and claims["two_x_standard_llm"]["verdict"] == "n.a."
    assert claims["stages_far_falls"]["verdict"] in ("holds", "fails", "inconclusive")
    rec = json.loads((root / "results" / "smoke" / STUDY / "all_added" / "seed0" / "metrics.json").read_text())
    kbi = {r["setting"]: r["value"] for r in rec["metrics"] if r["metric"] == "kbi"}
    assert kbi["final"] == 100.0   # flagging every changed line recalls every key bug (an added line or a deletion anchor)
    run = root / "results" / "smoke" / STUDY / "left_flow" / "seed0"
    comments = json.loads((run / "comments.json").read_text())
    assert {"all", "coarse", "topk", "n1|meta", "n3|validator", "none|all", "final"} <= set(next(iter(comments.values())))
    figs = json.loads((root / "results" / "smoke" / "figures" / STUDY / "figures.json").read_text())
    assert figs


PATCH = """From 0000 Mon Sep 17 00:00:00 2001
Subject: [PATCH] buggy

---
 lib.cpp | 3 +--
diff --git a/src/lib.cpp b/src/lib.cpp
index 1..2 100644
--- a/src/lib.cpp
+++ b/src/lib.cpp
@@ -10,5 +10,4 @@ int f(int a)
 int f(int a)
 {
-    if (a < 0) return 0;
-    return a;
+    return a + 1;
 }
--
2.25.1
"""
TWO_FILES = PATCH + PATCH.replace("src/lib.cpp", "src/other.cpp")


def test_bugscpp_loader_on_a_local_archive(tmp_path):
    from icml25.studies.code_review import data_bugscpp as B
    from icml25.studies.code_review import data_mrs as D
    from icml25.studies.code_review import pipeline as P

    raw, out = tmp_path / "raw", tmp_path / "out"
    raw.mkdir()
    with tarfile.open(raw / B.ARCHIVE["file"], "w:gz") as tar:
        for name, text in (("bugscpp-x/bugscpp/taxonomy/proj/patch/0001-buggy.patch", PATCH),
                           ("bugscpp-x/bugscpp/taxonomy/proj/patch/0002-buggy.patch", TWO_FILES),
                           ("bugscpp-x/bugscpp/taxonomy/proj/patch/0001-common.patch", PATCH)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    cfg = {"corpus": {"name": "bugscpp"}, "data_seed": 0, "data": {"test_percent": 100}}
    D.build(cfg, raw, out)
    (mr,) = D.load(out)
    assert mr["id"] == "proj-0001" and mr["file"] == "src/lib.cpp" and mr["split"] == "test"
    lines = mr["text"].split("\n")
    assert lines[11] == "    return a + 1;" and mr["key_line"] == 12 and mr["fd"].added == [12]
    assert [t for _, t in mr["fd"].deleted[12]] == ["    if (a < 0) return 0;", "    return a;"]
    snips = P.snippets(mr, "left_flow", "inline", len, 400)
    assert any("+12|    return a + 1;" in s.text and "-12|    if (a < 0) return 0;" in s.text for s in snips)
