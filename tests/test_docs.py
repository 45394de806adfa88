"""The docs stay true to the code: every registered study has its page beside its code, the page names
each of its claims by the id the code uses, every file path a page names exists, and the README's
studies table has one row per registered study, linked to its page."""
import re

import pytest

from conftest import REPO
from icml25.core import measured_lines, registry

STUDIES = registry.available()
SECTIONS = ["## Paper", "## What is implemented, and where", "## Our reading", "## Stand-ins",
            "## Results at mini", "## Claims", "## Cost", "## Full scale", "## Not built"]
# a path into the repository (run outputs such as results/... and dataset ids such as org/name are not),
# or a bare module name of the study (`layer.py`)
REPO_DIRS = ("src/", "config/", "tests/", "rules/", "scripts/", "reference/", "profiles/", "envs/", "report/")
PATH = re.compile(r"`((?:%s)[\w.\-/]*|[\w\-]+\.py)`" % "|".join(re.escape(d) for d in REPO_DIRS))


def page(name):
    return (REPO / "src" / "icml25" / "studies" / name / "README.md").read_text()


@pytest.mark.parametrize("name", STUDIES)
def test_study_page_has_every_section(name):
    text = page(name)
    assert text.startswith(f"# {name}: "), f"{name}/README.md must start with '# {name}: <title>'"
    missing = [s for s in SECTIONS if s not in text]
    assert not missing, f"src/icml25/studies/{name}/README.md lacks sections {missing}"


@pytest.mark.parametrize("name", STUDIES)
def test_study_page_names_its_claims(name):
    text = page(name)
    claims = text[text.index("## Claims"):]
    missing = [c.id for c in registry.get_study(name).claims if f"`{c.id}`" not in claims]
    assert not missing, f"the Claims section of {name}'s page does not name claims {missing}"


@pytest.mark.parametrize("name", STUDIES)
def test_study_page_paths_exist(name):
    here = REPO / "src" / "icml25" / "studies" / name
    bad = []
    for p in PATH.findall(page(name)):
        if any(ch in p for ch in "<>{}*"):
            continue
        if not any((base / p).exists() for base in (REPO, here, REPO / "src" / "icml25")):
            bad.append(p)
    assert not bad, f"{name}'s page names paths that do not exist: {bad}"


def test_readme_table_has_a_row_per_study():
    readme = (REPO / "README.md").read_text()
    rows = [l for l in readme.splitlines() if l.startswith("| [`")]
    linked = {m.group(1) for l in rows for m in [re.match(r"\| \[`(\w+)`\]\(src/icml25/studies/\1/README\.md\)", l)] if m}
    assert set(STUDIES) <= linked, f"README studies table lacks rows for {sorted(set(STUDIES) - linked)}"


@pytest.mark.parametrize("name", STUDIES)
def test_study_page_measured_lines_match_the_records(name):
    """The page's cost and verify lines are those reference/mini/benchmark.csv and verify.md give."""
    stale = measured_lines.sync(REPO, [name], "mini", write=False)
    assert not stale, f"{stale[0]}: its measured lines differ from reference/mini/; rewrite them: icml25 docs --studies {name}"


def test_measured_lines_are_written_from_the_records(tmp_path):
    study = "toy"
    page_path = tmp_path / "src" / "icml25" / "studies" / study / "README.md"
    page_path.parent.mkdir(parents=True)
    page_path.write_text("# toy: T\n\n## Results at mini\n\nTable.\n\n## Cost\n\nBy hand: 10 s.\n")
    ref = tmp_path / "reference" / "mini"
    ref.mkdir(parents=True)
    cols = "study,jobs,cpu_s,cpu_s_fit_base,cpu_s_train,cpu_s_evaluate,critical_path_s,peak_rss_mb"
    (ref / "benchmark.csv").write_text(f"{cols}\ntoy,9,1234.5,0,1000,200,90,512\n")
    (ref / "verify.md").write_text("| study | a | b | c | d | e | f |\n|---|---|---|---|---|---|---|\n"
                                   "| toy | Some CPU (another CPU), abc | 40 | 3 | 0.01 | `c1` holds -> fails | verdicts differ |\n")
    assert measured_lines.sync(tmp_path, [study], write=False) == [str(page_path.relative_to(tmp_path))]
    measured_lines.sync(tmp_path, [study])
    text = page_path.read_text()
    assert "**1,234 CPU-s** in 9 jobs (train 1,000, evaluate 200, the rest 34)" in text and "By hand: 10 s." in text
    assert "**verdicts differ** (3 of 40 numbers differ" in text and "`c1` holds -> fails" in text
    assert text.index("## Results at mini") < text.index("verify.md -->") < text.index("Table.")
    assert measured_lines.sync(tmp_path, [study], write=False) == []  # written once, in sync
    (ref / "benchmark.csv").write_text(f"{cols}\ntoy,9,999,0,900,50,90,512\n")  # a new run's figures
    assert measured_lines.sync(tmp_path, [study], write=False) != []
    measured_lines.sync(tmp_path, [study])
    assert "**999 CPU-s**" in page_path.read_text() and page_path.read_text().count("benchmark.csv -->") == 1
    # a verify run that did not compare the study: its page says so instead of keeping an older run's words
    (ref / "verify.md").write_text("| study | a | b | c | d | e | f |\n|---|---|---|---|---|---|---|\n"
                                   "| other | Some CPU, abc | 40 | 0 | – | none | identical |\n")
    measured_lines.sync(tmp_path, [study])
    text = page_path.read_text()
    assert "**not in the last verify run**" in text and "verdicts differ" not in text and text.count("verify.md -->") == 1


def test_readme_verdict_counts_match_the_records():
    """The README's verdict-count line is the one reference/mini/*.claims.json gives."""
    assert measured_lines.COUNTS_MARK in (REPO / "README.md").read_text(), "README lacks its verdict-count line"
    stale = measured_lines.sync_readme(REPO, "mini", write=False)
    assert not stale, "README.md: its verdict counts differ from reference/mini/*.claims.json; rewrite them: icml25 docs"


def test_readme_verdict_counts_are_written_from_the_records(tmp_path):
    import json

    (tmp_path / "README.md").write_text("# x\n\nText.\n\n| study | paper | status | verdicts at mini |\n|---|---|---|---|\n"
                                        "| [`toy`](x) | Toy | done | typed by hand |\n| `gone` | G | - | kept |\n")
    ref = tmp_path / "reference" / "mini"
    ref.mkdir(parents=True)
    claims = lambda *vs: {"study": "toy", "claims": [{"id": f"c{i}", "verdict": v, "n_seeds": 3}
                                                     for i, v in enumerate(vs)]}
    (ref / "toy.claims.json").write_text(json.dumps(claims("holds", "n.a. (floor)", "n.a.")))
    (ref / "two.claims.json").write_text(json.dumps(claims("inconclusive")))
    assert measured_lines.sync_readme(tmp_path, write=False) == ["README.md"]
    measured_lines.sync_readme(tmp_path)
    text = (tmp_path / "README.md").read_text()
    assert "all 4 claims of the 2 studies" in text and "**1 holds, 0 fails, 1 inconclusive, 1 n.a. (floor), 1 n.a.**" in text
    assert text.index("Text.") < text.index("claims.json -->") < text.index("| study |")
    # the study's own cell comes from its claims.json; a row without one is left as typed
    assert "| [`toy`](x) | Toy | done | 1 holds, 1 n.a. (floor), 1 n.a. (3 seeds) |" in text and "| kept |" in text
    assert measured_lines.sync_readme(tmp_path, write=False) == []
    (ref / "two.claims.json").write_text(json.dumps(claims("fails")))  # a refreshed reference
    measured_lines.sync_readme(tmp_path)
    text = (tmp_path / "README.md").read_text()
    assert "**1 holds, 1 fails, 0 inconclusive" in text and text.count("claims.json -->") == 1


def test_readme_cost_cells_are_written_from_the_benchmark(tmp_path):
    import json

    (tmp_path / "README.md").write_text("| study | paper | status | verdicts at mini | mini cost, last all-studies run |\n"
                                        "|---|---|---|---|---|\n| [`toy`](x) | Toy | done | v | typed by hand |\n"
                                        "| `gone` | G | - | v | kept |\n")
    ref = tmp_path / "reference" / "mini"
    ref.mkdir(parents=True)
    (ref / "toy.claims.json").write_text(json.dumps({"study": "toy", "claims": [{"id": "c", "verdict": "holds"}]}))
    (ref / "benchmark.csv").write_text("study,jobs,cpu_s,critical_path_s\ntoy,4,1234.5,552.0\n")
    measured_lines.sync_readme(tmp_path)
    text = (tmp_path / "README.md").read_text()
    assert "| [`toy`](x) | Toy | done | 1 holds | 1,234 CPU-s, critical path 9.2 min |" in text  # from the records
    assert "| `gone` | G | - | v | kept |" in text  # a study without a benchmark row keeps its cell


def test_readme_pipeline_line_is_written_from_the_run_record(tmp_path):
    import json

    (tmp_path / "README.md").write_text("# x\n\n| study | paper | status |\n|---|---|---|\n\nold words "
                                        f"{measured_lines.PIPELINE_MARK}\n")
    ref = tmp_path / "reference" / "mini"
    ref.mkdir(parents=True)
    (ref / "a.claims.json").write_text(json.dumps({"study": "a", "claims": [{"id": "c", "verdict": "holds"}]}))
    run = {"studies": 19, "jobs": 1153, "span_s": 3725.4, "cpu_s": 7012.3, "busy": 0.941, "cores": 2,
           "forked_jobs": 1100, "critical_path_s": 402.6, "critical_path_study": "satimp", "machine": "Some CPU",
           "date": "2026-12-07", "commit": "abc1234"}
    (ref / "benchmark.run.json").write_text(json.dumps(run))
    measured_lines.sync_readme(tmp_path)
    text = (tmp_path / "README.md").read_text()
    assert "old words" not in text and text.count(measured_lines.PIPELINE_MARK) == 1
    assert "all 19 studies** (1,153 jobs with the summary)" in text and "**1 h 2 min 5 s**" in text
    assert "7,012 CPU-s kept the cores 94 % busy; 1,100 of the jobs ran in children" in text
    assert "2026-12-07, Some CPU, 2 cores, commit abc1234" in text and "403 s (satimp)" in text
