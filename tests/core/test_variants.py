"""Scale variants: `<scale>-<name>` merges scales.<scale>.variants.<name> over the scale (another model or
dataset at full scale), with its own results tree, and leaves the plain scale's config and hash alone."""
import copy
from pathlib import Path

import pytest

from icml25.core import config
from icml25.core.errors import UserError

REPO = Path(__file__).resolve().parents[2]

RAW = {
    "study": "toy", "methods": ["a", "b"],
    "common": {"model": {"name": "small", "dim": 8}, "seeds": [0]},
    "scales": {"mini": {"seeds": [0, 1], "sweep": {"knobs": ["model.dim"], "factors": [1, 3]}},
               "full": {"model": {"name": "big"},
                        "variants": {"other": {"model": {"name": "other"}, "stand_in": "another model",
                                               "resources": {"train": {"gpu": 2}}}}}},
}


def test_variant_merges_over_its_scale():
    cfg = config.effective(RAW, "full-other")
    assert cfg["model"] == {"name": "other", "dim": 8}
    assert cfg["scale"] == "full" and cfg["variant"] == "other" and cfg["stand_in"] == "another model"
    assert cfg["resources"]["train"]["gpu"] == 2 and "variants" not in cfg and "budget_factor" not in cfg


def test_declaring_a_variant_changes_nothing_of_the_plain_scale():
    plain = copy.deepcopy(RAW)
    del plain["scales"]["full"]["variants"]
    a, b = config.effective(RAW, "full"), config.effective(plain, "full")
    assert a == b and config.config_hash(config.result_config(a)) == config.config_hash(config.result_config(b))


def test_unknown_variant_is_named():
    with pytest.raises(UserError, match="declares no variant 'nope' of scale 'full' \\(known: other\\)"):
        config.effective(RAW, "full-nope")
    with pytest.raises(UserError, match="known: none"):
        config.effective(RAW, "mini-other")


def test_sweep_scales_are_not_variants():
    assert config.variant_of("mini-x3") is None and config.variant_of("full-other") == "other"
    assert config.effective(RAW, "mini-x3")["model"]["dim"] == 24
    with pytest.raises(UserError, match="unknown scale"):
        config.parse_scale("huge-other")


def test_repo_variants_validate():
    for study in config.load_main(REPO)["studies"]:
        raw = config.load_study(REPO, study)
        for base, sc in raw["scales"].items():
            for name in (sc or {}).get("variants", {}):
                cfg = config.effective(raw, f"{base}-{name}")
                assert cfg["scale"] == base and cfg["variant"] == name


def test_unknown_method_of_a_variant_is_named(workflow_copy, capsys):
    from icml25 import cli

    path = workflow_copy / "config" / "studies" / "sand.yaml"
    path.write_text(path.read_text().replace("  full:\n", "  full:\n    variants:\n      other: {methods: [sand, nope]}\n", 1))
    assert cli.main(["table", "--root", str(workflow_copy), "--scale", "mini", "--study", "sand"]) == 2
    assert "unknown method(s) ['nope']" in capsys.readouterr().err
