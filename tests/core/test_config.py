from pathlib import Path

import pytest

from icml25.core import config
from icml25.core.errors import UserError

REPO = Path(__file__).resolve().parents[2]


def test_repo_configs_validate():
    main = config.load_main(REPO)
    for study in main["studies"]:
        raw = config.load_study(REPO, study)
        for scale in config.SCALES:
            cfg = config.effective(raw, scale)
            assert cfg["scale"] == scale and cfg["seeds"]


def test_malformed_yaml_names_file_and_line(workflow_copy):
    (workflow_copy / "config" / "config.yaml").write_text("scale: mini\nstudies: [sand\n")
    with pytest.raises(UserError, match=r"config\.yaml: malformed YAML at line \d+"):
        config.load_main(workflow_copy)


@pytest.mark.parametrize("line, where", [
    ("scale: huge", "scale"),
    ("threads: 0", "threads"),
    ("threads: two", "threads"),
])
def test_bad_main_values_are_named(workflow_copy, line, where):
    path = workflow_copy / "config" / "config.yaml"
    key = line.split(":")[0]
    text = "\n".join(l if not l.startswith(key + ":") else line for l in path.read_text().splitlines())
    path.write_text(text)
    with pytest.raises(UserError, match=rf"invalid value at '{where}'"):
        config.load_main(workflow_copy)


def test_negative_seed_rejected(workflow_copy):
    path = workflow_copy / "config" / "studies" / "sand.yaml"
    path.write_text(path.read_text().replace("seeds: [0]", "seeds: [-1]", 1))
    with pytest.raises(UserError, match=r"invalid value at 'scales\.smoke\.seeds\.0'.*minimum"):
        config.load_study(workflow_copy, "sand")


def test_unknown_study_lists_known():
    with pytest.raises(UserError, match="unknown study 'nope'.*known studies: .*sand"):
        config.load_study(REPO, "nope")


def test_effective_merges_common_and_scale():
    raw = {"study": "x", "methods": ["a"], "common": {"hp": {"lr": 1, "epochs": 5}, "k": 3},
           "scales": {"smoke": {"seeds": [0], "hp": {"epochs": 1}}, "mini": {}, "full": {}}}
    cfg = config.effective(raw, "smoke")
    assert cfg["hp"] == {"lr": 1, "epochs": 1} and cfg["k"] == 3
    assert raw["common"]["hp"]["epochs"] == 5  # the raw config is not mutated
    with pytest.raises(UserError, match="unknown scale 'huge'"):
        config.effective(raw, "huge")


def test_a_scale_may_run_its_own_methods():
    raw = {"study": "x", "methods": ["a", "b"], "common": {},
           "scales": {"smoke": {}, "mini": {}, "full": {"methods": ["a", "b", "c"]}}}
    assert config.effective(raw, "mini")["methods"] == ["a", "b"]
    assert config.effective(raw, "full")["methods"] == ["a", "b", "c"]


def test_unknown_method_of_one_scale_is_named(workflow_copy, capsys):
    from icml25 import cli

    path = workflow_copy / "config" / "studies" / "sand.yaml"
    path.write_text(path.read_text().replace("  full:\n", "  full:\n    methods: [sand, nope]\n", 1))
    assert cli.main(["table", "--root", str(workflow_copy), "--scale", "mini", "--study", "sand"]) == 2
    assert "unknown method(s) ['nope']" in capsys.readouterr().err


def test_config_hash_is_order_independent_and_sensitive():
    a = {"x": 1, "y": {"z": [1, 2]}}
    b = {"y": {"z": [1, 2]}, "x": 1}
    assert config.config_hash(a) == config.config_hash(b)
    assert config.config_hash(a) != config.config_hash({"x": 2, "y": {"z": [1, 2]}})


def test_flatten():
    assert config.flatten({"a": {"b": 1, "c": [1, 2]}, "d": "x"}) == {"a.b": 1, "a.c": "[1, 2]", "d": "x"}
