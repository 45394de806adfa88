import pytest

from icml25.core import registry
from icml25.core.errors import UserError


def test_every_study_package_registers_itself():
    names = registry.available()
    assert "sand" in names
    for name in names:
        study = registry.get_study(name)
        assert study.name == name
        assert sum(m.is_paper_method for m in study.methods.values()) >= 1  # e.g. Marg-IW and Marg-Var
        assert study.claims, f"{name} declares no claims"


def test_unknown_study_and_method():
    with pytest.raises(UserError, match="unknown study 'nope'; known studies: .*sand"):
        registry.get_study("nope")
    with pytest.raises(UserError, match="unknown method 'nope' for study 'sand'; known: sand"):
        registry.get_study("sand").check_method("nope")
