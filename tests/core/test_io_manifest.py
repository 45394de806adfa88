import os

import pytest

from icml25.core import io, manifest, provenance
from icml25.core.errors import UserError


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    dest = tmp_path / "out.json"
    io.write_json(dest, {"a": 1})
    with pytest.raises(RuntimeError):
        with io.atomic_path(dest) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert io.read_json(dest) == {"a": 1}  # the old file is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temp file left


def test_atomic_write_replaces(tmp_path):
    dest = tmp_path / "sub" / "x.txt"
    io.write_text(dest, "one")
    io.write_text(dest, "two")
    assert dest.read_text() == "two"


def test_manifest_detects_missing_truncated_and_corrupt(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"0123456789")
    (tmp_path / "b.bin").write_bytes(b"abc")
    manifest.write(tmp_path, stage="t")
    assert set(manifest.verify(tmp_path, "x")["files"]) == {"a.bin", "b.bin"}
    (tmp_path / "a.bin").write_bytes(b"01234")
    with pytest.raises(UserError, match=r"truncated or altered data file .*a\.bin \(5 bytes, manifest says 10\)"):
        manifest.verify(tmp_path, "x")
    (tmp_path / "a.bin").write_bytes(b"0123456780")
    with pytest.raises(UserError, match=r"corrupt data file .*a\.bin"):
        manifest.verify(tmp_path, "x")
    os.remove(tmp_path / "a.bin")
    with pytest.raises(UserError, match=r"missing data file .*a\.bin.*dvc pull"):
        manifest.verify(tmp_path, "x")


def test_manifest_absent(tmp_path):
    with pytest.raises(UserError, match="missing data: .*MANIFEST.json does not exist; build it first with HINT"):
        manifest.verify(tmp_path, "HINT")


def test_tree_hash_depends_on_names_and_contents(tmp_path):
    (tmp_path / "a").write_text("1")
    h1 = provenance.data_hash(tmp_path)
    (tmp_path / "a").write_text("2")
    h2 = provenance.data_hash(tmp_path)
    (tmp_path / "a").rename(tmp_path / "b")
    h3 = provenance.data_hash(tmp_path)
    assert len({h1, h2, h3}) == 3


def test_code_hash_is_per_study():
    assert provenance.code_hash("sand") == provenance.code_hash("sand")
    assert len(provenance.code_hash("sand")) == 12
