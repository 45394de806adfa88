"""Bad input fails fast with one clear line naming the problem (exit code 2, no traceback)."""
import subprocess
import sys
from pathlib import Path

import pytest

ICML25 = str(Path(sys.executable).with_name("icml25"))


def cli(root, *args):
    proc = subprocess.run([ICML25, *args, "--root", str(root)], capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr.strip()


def one_line(err):
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("icml25: error: ")
    return lines[0]


def test_unknown_study(workflow_copy):
    rc, err = cli(workflow_copy, "download", "--study", "nosuch", "--scale", "smoke")
    assert rc == 2
    assert "unknown study 'nosuch'; known studies: " in one_line(err)


def test_unknown_method(workflow_copy):
    rc, err = cli(workflow_copy, "train", "--study", "sand", "--method", "lasso", "--seed", "0", "--scale", "smoke")
    assert rc == 2
    assert "unknown method 'lasso' for study 'sand'; known: sand, stg" in one_line(err)


def test_malformed_config_value(workflow_copy):
    path = workflow_copy / "config" / "studies" / "sand.yaml"
    path.write_text(path.read_text().replace("seeds: [0]", "seeds: [zero]", 1))
    rc, err = cli(workflow_copy, "download", "--study", "sand", "--scale", "smoke")
    assert rc == 2
    assert "config/studies/sand.yaml: invalid value at 'scales.smoke.seeds.0': 'zero' is not of type 'integer'" in one_line(err)


def test_k_larger_than_n(workflow_copy):
    path = workflow_copy / "config" / "studies" / "sand.yaml"
    path.write_text(path.read_text().replace("breast_cancer: 5,", "breast_cancer: 50,", 1))
    rc, err = cli(workflow_copy, "download", "--study", "sand", "--scale", "smoke")
    assert rc == 2
    assert "k=50 for 'breast_cancer' exceeds its 30 features" in one_line(err)


def test_unknown_scale(workflow_copy):
    rc, err = cli(workflow_copy, "download", "--study", "sand", "--scale", "huge")
    assert rc == 2
    assert "unknown scale 'huge'" in one_line(err)


def test_missing_data_file(workflow_copy):
    assert cli(workflow_copy, "download", "--study", "sand", "--scale", "smoke")[0] == 0
    assert cli(workflow_copy, "preprocess", "--study", "sand", "--scale", "smoke")[0] == 0
    (workflow_copy / "data" / "processed" / "smoke" / "sand" / "digits.npz").unlink()
    rc, err = cli(workflow_copy, "train", "--study", "sand", "--method", "anova", "--seed", "0", "--scale", "smoke")
    assert rc == 2
    assert "missing data file" in one_line(err) and "digits.npz" in err and "dvc pull" in err
    assert not (workflow_copy / "results" / "smoke" / "sand" / "anova" / "seed0" / "train.json").exists()


def test_missing_stage_input(workflow_copy):
    rc, err = cli(workflow_copy, "preprocess", "--study", "sand", "--scale", "smoke")
    assert rc == 2
    assert "missing data: " in one_line(err) and "icml25 download --study sand --scale smoke" in err


def test_unreachable_tracking_server(workflow_copy, tmp_path):
    # a finished run is needed before `track`; fake nothing: build one real smoke run
    for stage in (["download"], ["preprocess"], ["train", "--method", "anova", "--seed", "0"],
                  ["evaluate", "--method", "anova", "--seed", "0"]):
        assert cli(workflow_copy, stage[0], "--study", "sand", "--scale", "smoke", *stage[1:])[0] == 0
    path = workflow_copy / "config" / "studies" / "sand.yaml"
    path.write_text(path.read_text().replace("methods: [sand, stg, stg_paper, lassonet, anova, random, all]", "methods: [anova]"))
    rc, err = cli(workflow_copy, "track", "--study", "sand", "--scale", "smoke",
                  "--tracking-uri", "http://127.0.0.1:9")
    assert rc == 2
    assert "cannot reach the MLflow tracking store http://127.0.0.1:9" in one_line(err)
