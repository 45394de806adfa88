"""The download stage refuses, with one line naming the gap, a stand-in source that is missing or empty
(Debian's split stdlib: test/, idlelib/, turtledemo/ are separate packages), instead of writing an
empty domain that breaks fit_base much later."""
import shutil
import sys
import zipfile

import pytest

from icml25.core.errors import UserError
from icml25.core.provenance import file_digest
from icml25.studies.chameleon import data_sources as S

SMOKE = ["py_code", "py_docs", "py_legal", "py_docstrings", "py_news", "py_tests", "py_turtle"]
V = f"{sys.version_info.major}.{sys.version_info.minor}"
# what the smoke domains read from the stdlib: copied into a fake stdlib dir
NEEDED = ["json", "email", "logging", "test/test_json", "test/test_email/test_utils.py", "turtledemo",
          "idlelib/NEWS2x.txt", "LICENSE.txt", "pydoc_data/topics.py"]


@pytest.fixture
def fake_stdlib(tmp_path, monkeypatch):
    real, root = S.stdlib_dir(), tmp_path / "stdlib"
    for rel in NEEDED:
        src, dst = real / rel, root / rel
        if not src.exists():
            pytest.skip(f"this Python's stdlib lacks {rel}")
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    monkeypatch.setattr(S, "stdlib_dir", lambda: root)
    return root


def _one_line_error(domains, raw):
    with pytest.raises(UserError) as exc:
        S.download(domains, raw)
    msg = str(exc.value)
    assert "\n" not in msg
    assert not (raw / "stdlib").exists() and not (raw / "sources.json").exists()  # refused before writing
    return msg


def test_complete_copy_gives_the_same_text(fake_stdlib, tmp_path, monkeypatch):
    S.download(SMOKE, tmp_path / "fake")
    monkeypatch.undo()
    S.download(SMOKE, tmp_path / "real")
    for d in SMOKE:
        fake, real = (tmp_path / w / "stdlib" / f"{d}.txt" for w in ("fake", "real"))
        assert fake.read_bytes() == real.read_bytes() and fake.stat().st_size > 0, d


@pytest.mark.parametrize("remove, pattern, domain, package", [
    ("turtledemo", "turtledemo/*.py", "py_turtle", f"python{V}-examples"),
    ("idlelib", "idlelib/NEWS2x.txt", "py_news", f"idle-python{V}"),
    ("test", "test/test_json/*.py", "py_tests", f"libpython{V}-testsuite"),
    ("LICENSE.txt", "LICENSE.txt", "py_legal", f"libpython{V}-stdlib"),
])
def test_missing_stdlib_source_is_named(fake_stdlib, tmp_path, remove, pattern, domain, package):
    p = fake_stdlib / remove
    shutil.rmtree(p) if p.is_dir() else p.unlink()
    msg = _one_line_error(SMOKE, tmp_path / "raw")
    assert f"'{domain}'" in msg and f"needs stdlib files {pattern} " in msg and "missing" in msg
    assert f"apt-get install {package}" in msg and "python.org/uv/pyenv CPython" in msg
    # a scale without that domain is not affected
    S.download([d for d in SMOKE if d != domain], tmp_path / "ok")


def test_empty_stdlib_source_is_named(fake_stdlib, tmp_path):
    (fake_stdlib / "idlelib" / "NEWS2x.txt").write_bytes(b"")
    msg = _one_line_error(SMOKE, tmp_path / "raw")
    assert "'py_news'" in msg and "idlelib/NEWS2x.txt" in msg and "empty" in msg and f"idle-python{V}" in msg


def test_mini_legal_domain_needs_the_stdlib_licence(fake_stdlib, tmp_path):
    (fake_stdlib / "LICENSE.txt").unlink()
    msg = _one_line_error(["legal"], tmp_path / "raw")  # checked before any network fetch
    assert "'legal'" in msg and "LICENSE.txt" in msg


def test_pinned_package_without_a_needed_member_is_named(fake_stdlib, tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    whl = raw / "pypi" / "fake-1.0-py3-none-any.whl"
    whl.parent.mkdir(parents=True)
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr(S.WIKI_MEMBER, b"x")
        z.writestr("fake-1.0.dist-info/licenses/", b"")  # a licence dir with no licence in it
    monkeypatch.setitem(S.PYPI, "gensim", ("fake==1.0", [], whl.name, file_digest(whl)))  # present: no pip
    with pytest.raises(UserError) as exc:
        S.download(["legal"], raw)
    msg = str(exc.value)
    assert "\n" not in msg and "legal/wikipedia" not in msg and "legal" in msg
    assert "*/licenses/*" in msg and whl.name in msg
    with zipfile.ZipFile(whl, "a") as z:
        z.writestr("fake-1.0.dist-info/licenses/LICENSE", b"MIT")
    monkeypatch.setitem(S.PYPI, "gensim", ("fake==1.0", [], whl.name, file_digest(whl)))
    assert S.download(["legal"], raw)["pypi"]["gensim"]["file"] == whl.name


def test_member_tables_cover_every_pinned_file():
    assert set(S.DEB_MEMBERS) == set(S.DEBS) and set(S.PYPI_MEMBERS) == set(S.PYPI)
    with pytest.raises(UserError, match=r"domain kjv needs /usr/bin/bible inside x\.deb"):
        S._check_members(S.Path("x.deb"), {"/usr/bin/bible": 0, "/usr/lib/bible.data": 5}, ["/usr/bin/bible"], ["kjv"])
