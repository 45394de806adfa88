"""Reference results (reference/mini/): stamps match the code, and `icml25 reference` / `verify` work.

The stamp test is what keeps documented numbers true: a change to a study's code or config lands only
with its refreshed reference (`make reference STUDY=<study>`).
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, copy_workflow, snakemake
from icml25.core import reference, registry

STUDIES = registry.available()


@pytest.mark.parametrize("name", STUDIES)
def test_reference_stamp_matches_code(name):
    if not (REPO / "reference" / "mini" / f"{name}.stamp.json").exists():
        pytest.skip(f"{name} has no reference results yet (make reference STUDY={name})")
    why = reference.stale(REPO, name, "mini")
    assert why is None, why


def _derived_refs():
    return [(sc, p.name.removesuffix(".stamp.json")) for sc in reference.derived_scales(REPO, "mini")
            for p in sorted((REPO / "reference" / sc).glob("*.stamp.json"))]


@pytest.mark.parametrize("scale,name", _derived_refs())
def test_derived_reference_stamp_matches_code(scale, name):
    """reference/mini-x3/ (a budget-sweep scale's references, beside the mini's in the summary) is kept current
    like the mini's: its stamp names the hashes of the derived config."""
    why = reference.stale(REPO, name, scale)
    assert why is None, why


def test_summary_shows_a_derived_scale_beside_the_mini(tmp_path):
    from icml25.core import measured_lines

    root = copy_workflow(tmp_path / "wf")
    _fake_tables(root, "sand", "mini", 0.45, "inconclusive")
    reference.write(root, "sand", "mini")
    assert "verdict at" not in (root / "reference" / "mini" / "summary.md").read_text()
    _fake_tables(root, "sand", "mini-x3", 0.9, "holds")
    reference.write(root, "sand", "mini-x3")  # also rewrites the mini summary, whose column reads it
    assert reference.derived_scales(root, "mini") == ["mini-x3"]
    assert reference.stale(root, "sand", "mini-x3") is None and reference.stale(root, "sand", "mini") is None
    md = (root / "reference" / "mini" / "summary.md").read_text()
    head = next(ln for ln in md.splitlines() if ln.startswith("| study |"))
    row = next(ln for ln in md.splitlines() if ln.startswith("| sand |"))
    assert head.rstrip(" |").endswith("verdict at mini-x3")
    assert row.endswith("| inconclusive | – | holds: +0.4 acc, 1 pooled |"), row
    assert ("1 holds, 0 fails, 0 inconclusive, 0 n.a. (floor), 0 n.a. over the 1 claims of sand; the same claims "
            "at mini: 0 holds, 0 fails, 1 inconclusive") in md
    line = measured_lines.counts_line(root, "mini")
    assert "At mini-x3 (the budget knobs times 3, `reference/mini-x3/`), the 1 claims of sand (1 seed): **1 holds" in line


def _fake_tables(root: Path, study: str, scale: str, mean: float, verdict: str) -> None:
    t = root / "results" / scale / "tables"
    t.mkdir(parents=True, exist_ok=True)
    (t / f"{study}.csv").write_text(
        "study,scale,method,setting,metric,mean,std,n,seeds\n"
        f"{study},{scale},a,d1,acc,{mean},0.0,1,[0]\n{study},{scale},a,d1,train_seconds,{mean * 7},0.0,1,[0]\n")
    (t / f"{study}.md").write_text(f"# {study}\n\n| acc |\n|---|\n| {mean} |\n")
    (t / f"{study}.claims.json").write_text(json.dumps({"study": study, "scale": scale, "title": "T", "claims": [
        {"id": "c1", "claim": "a is good", "paper": "p", "ours": f"{mean}", "verdict": verdict,
         "margin": mean - 0.5, "unit": "acc", "interval": None, "n_seeds": 1}]}))


def test_stale_compare_and_tolerance(tmp_path):
    root = copy_workflow(tmp_path / "wf")
    study = "sand"
    _fake_tables(root, study, "mini", 0.9, "holds")
    reference.write(root, study, "mini")
    ref = root / "reference" / "mini"
    stamp = json.loads((ref / f"{study}.stamp.json").read_text())
    assert {"config_hash", "code_hash", "git_commit", "machine"} <= set(stamp)
    assert {"cpu", "cores", "torch", "numpy", "blas", "cpu_isa", "aten_cpu_capability", "numeric_pin"} <= set(stamp["machine"])
    assert stamp["machine"]["numeric_pin"]["MKL_CBWR"] == "AVX2" and stamp["machine"]["numeric_pin"]["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    assert "config hash" in (ref / f"{study}.md").read_text() and "| sand |" in (ref / "summary.md").read_text()
    assert reference.stale(root, study, "mini") is None
    assert reference.compare(root, study, "mini") == []
    # a different number and verdict are reported, each in one line
    _fake_tables(root, study, "mini", 0.4, "fails")
    diffs = reference.compare(root, study, "mini")
    assert any("a/d1/acc mean 0.9" in d and "expected identical" in d for d in diffs)
    assert any("claim c1 holds (reference) vs fails (new)" in d for d in diffs)
    assert not any("train_seconds" in d for d in diffs)  # a timing: the machine's, never compared
    # a declared ignore skips a metric; a tolerance accepts small differences
    cfg = root / "config" / "studies" / f"{study}.yaml"
    cfg.write_text(cfg.read_text() + "verify: {ignore: [n_units], tolerance: {acc: 0.6}}\n")
    _fake_tables(root, study, "mini", 0.4, "holds")
    assert reference.compare(root, study, "mini") == []
    # ... but the config changed, so the stamp is stale and says how to refresh it
    cfg.write_text(cfg.read_text().replace("seeds: [0, 1, 2, 3, 4]", "seeds: [0, 1, 2]", 1))
    why = reference.stale(root, study, "mini")
    assert why.startswith("sand: reference/mini is stale (config_hash") and "make reference STUDY=sand" in why


def test_timing_metrics_are_recognised_by_name():
    timing = ["cpu_seconds", "train_cpu_s", "train_seconds", "cpu_s_per_image", "search_wall_s", "seal_setup_s",
              "lat_seal_model_s", "step_time_ratio", "wall_ms_per_token", "lm_train_cpu_s"]
    method = ["acc", "seal_secure_128", "lat_units", "rmse", "n_params", "sops", "ms_ssim", "train_tokens",
              "final_train_loss", "search_steps"]
    assert [m for m in timing if not reference.is_timing(m)] == []
    assert [m for m in method if reference.is_timing(m)] == []


def test_verify_a_rerun_through_the_cli(smoke_tree, tmp_path):
    """A finished smoke tree's tables become the reference; the study is rerun from scratch through
    Snakemake and `icml25 verify` finds it identical (the study is deterministic at smoke)."""
    study = "lockin"
    root = tmp_path / "wf"
    shutil.copytree(smoke_tree, root, symlinks=True, ignore=shutil.ignore_patterns("mlflow.db*", "mlartifacts"))
    icml25 = [str(Path(sys.executable).with_name("icml25")), "--root", str(root)]
    subprocess.run([*icml25[:1], "reference", "--root", str(root), "--scale", "smoke", "--studies", study], check=True)
    snakemake(root, f"results/smoke/tables/{study}.md", "--forceall", "--cores", "2",
              "--config", "scale=smoke", "tracking=false", f"studies=[{study}]")
    proc = subprocess.run([icml25[0], "verify", "--root", str(root), "--scale", "smoke", "--studies", study],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{study}: identical to the reference" in proc.stdout
    report = (root / "results" / "smoke" / "verify.md").read_text()
    assert f"| {study} |" in report and "(same CPU)" in report and report.rstrip().endswith("| none | identical |")
    # a changed reference number is caught, with exit 1
    csv = root / "reference" / "smoke" / f"{study}.csv"
    lines = csv.read_text().splitlines()
    head, row = lines[0].split(","), lines[1].split(",")
    row[head.index("mean")] = "12345.0"
    csv.write_text("\n".join([lines[0], ",".join(row), *lines[2:]]) + "\n")
    proc = subprocess.run([icml25[0], "verify", "--root", str(root), "--scale", "smoke", "--studies", study],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "12345.0 (reference)" in proc.stdout
    row = (root / "results" / "smoke" / "verify.md").read_text().rstrip().splitlines()[-1]
    assert row.endswith("| none | numbers differ, same verdicts |") and "| 1 | 1 |" in row, row


def test_verify_names_a_kernel_mismatch(tmp_path):
    root = copy_workflow(tmp_path / "wf")
    _fake_tables(root, "sand", "mini", 0.9, "holds")
    reference.write(root, "sand", "mini")
    assert reference.kernel_mismatch(root, "sand", "mini") is None  # stamped on this machine, same kernels
    path = root / "reference" / "mini" / "sand.stamp.json"
    stamp = json.loads(path.read_text())
    # the same pins on another CPU model: nothing to name (the pin is what makes them comparable)
    path.write_text(json.dumps({**stamp, "machine": {**stamp["machine"], "cpu": "Some Other CPU"}}))
    assert reference.kernel_mismatch(root, "sand", "mini") is None
    # another BLAS branch than this run's: the pin is named
    pin = {**stamp["machine"]["numeric_pin"], "MKL_CBWR": "AUTO"}
    path.write_text(json.dumps({**stamp, "machine": {**stamp["machine"], "numeric_pin": pin}}))
    assert "MKL_CBWR AUTO (reference) vs AVX2" in reference.kernel_mismatch(root, "sand", "mini")
    # a stamp from before numpy's dispatch pin: the same path where its CPU had no AVX-512, not where it had
    pin = {k: v for k, v in stamp["machine"]["numeric_pin"].items() if k != "NPY_DISABLE_CPU_FEATURES"}
    for isa, named in (("avx2", False), ("avx512", True)):
        path.write_text(json.dumps({**stamp, "machine": {**stamp["machine"], "numeric_pin": pin, "cpu_isa": isa}}))
        assert ("NPY_DISABLE_CPU_FEATURES unset (reference)" in (reference.kernel_mismatch(root, "sand", "mini") or "")) == named
    # a stamp from before the BLAS pin on this CPU: the pins give its bits here (measured on an AMD Zen 2)
    del stamp["machine"]["numeric_pin"]
    path.write_text(json.dumps(stamp))
    assert reference.kernel_mismatch(root, "sand", "mini") is None
    path.write_text(json.dumps({**stamp, "machine": {**stamp["machine"], "cpu_isa": "AVX512"}}))
    assert "predates the BLAS pin and ran on another CPU" in reference.kernel_mismatch(root, "sand", "mini")
    path.write_text(json.dumps({**stamp, "machine": {**stamp["machine"], "cpu": "Some Other CPU"}}))
    assert "predates the BLAS pin and ran on another CPU (Some Other CPU" in reference.kernel_mismatch(root, "sand", "mini")
    del stamp["machine"]["cpu_isa"], stamp["machine"]["aten_cpu_capability"]  # a stamp from before the record
    path.write_text(json.dumps(stamp))
    assert "the reference ran torch's unrecorded CPU kernels" in reference.kernel_mismatch(root, "sand", "mini")
