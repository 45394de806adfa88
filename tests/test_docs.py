"""The docs stay true to the code: every registered study has its page beside its code, the page names
each of its claims by the id the code uses, every file path a page names exists, and the README's
studies table has one row per registered study, linked to its page."""
import re

import pytest

from conftest import REPO
from icml25.core import registry

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
