"""One numeric path on every x86-64 CPU (core/numeric_pin.py): `import icml25` pins torch's kernels, its MKL and
oneDNN, and numpy's OpenBLAS; every job runs the pinned kernels (read back from the libraries inside the job);
and two runs of one study give the same numbers."""
import json
import subprocess
import sys

import pandas as pd
import pytest

from conftest import REPO, SMOKE_TREE_STUDIES, copy_workflow, git_init, snakemake
from icml25.core import numeric_pin, reference

x86 = pytest.mark.skipif(reference.cpu_isa() not in ("avx2", "avx512"), reason="needs an x86-64 CPU with AVX2")
_READ = "import icml25, json, numpy, torch; from icml25.core import numeric_pin as p; print(json.dumps(p.read_back()))"


def _only(env_over: dict, monkeypatch) -> None:
    """No pin variable in the environment but those of `env_over` (so `import icml25` sets the rest)."""
    for var in numeric_pin.PINS:
        monkeypatch.delenv(var, raising=False)
    for k, v in env_over.items():
        monkeypatch.setenv(k, v)


def _read_back(env_over: dict, monkeypatch) -> dict:
    _only(env_over, monkeypatch)
    out = subprocess.run([sys.executable, "-c", _READ], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@x86
def test_import_pins_every_library_and_a_chosen_value_wins(monkeypatch):
    """AVX-512 and AVX2 kernels round differently (chameleon's mini proxy: 0.983 vs 0.631 on one domain): the
    libraries themselves must report the pinned path (MKL's AVX2 branch on Intel, AUTO elsewhere)."""
    read = _read_back({}, monkeypatch)
    assert read["aten_cpu_capability"] == "AVX2" and read["mkl_cnr"] == numeric_pin.expected_mkl_cnr("AVX2"), read
    assert read["openblas_core"] == "Haswell" and "avx512" not in read["onednn_conv"], read
    assert read["numpy_simd"] not in numeric_pin.NPY_WIDE, read
    assert numeric_pin.mismatches(read) == []
    chosen = _read_back({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}, monkeypatch)
    assert chosen["aten_cpu_capability"] == "DEFAULT" and chosen["mkl_cnr"] == "COMPATIBLE", chosen
    assert {m.split(":")[0] for m in numeric_pin.mismatches(chosen)} == {"aten_cpu_capability", "mkl_cnr"}


@x86
def test_the_pin_changes_the_bits_it_is_meant_to(monkeypatch):
    """The MKL variables reach MKL (COMPATIBLE changes a float32 matmul's bits), and a job's default is the pin
    itself: the same bits as the pins spelt out (so the read-back test cannot pass on a path nobody pinned)."""
    code = ("import icml25, hashlib, torch; g = torch.Generator().manual_seed(0); "
            "a, b = torch.randn(257, 129, generator=g), torch.randn(129, 263, generator=g); "
            "print(hashlib.sha256((a @ b).numpy().tobytes()).hexdigest())")
    def bits(env):
        _only(env, monkeypatch)
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    pinned = bits({})
    assert pinned == bits(dict(numeric_pin.PINS)) != bits({"MKL_CBWR": "COMPATIBLE"})


@x86
def test_numpy_dispatch_pin_reaches_numpy(monkeypatch):
    """numpy's own SIMD loops: with the pin its widest target is AVX2's X86_V3 or narrower; on a CPU with AVX-512
    the unpinned process dispatches wider, and np.exp's bits and np.argsort's order of ties differ from the
    pinned ones (measured on an AVX-512 Xeon), so the pin is what makes them the AVX2-only CPU's."""
    code = ("import icml25, hashlib, json, numpy as np; from icml25.core import numeric_pin as p; "
            "r = np.random.default_rng(0); a, x = r.integers(0, 20, 5000), r.standard_normal(100003); "
            "h = lambda t: hashlib.sha256(np.ascontiguousarray(t).tobytes()).hexdigest(); "
            "print(json.dumps([p.numpy_simd(), h(np.exp(x)), h(np.argsort(a))]))")
    def run(env):
        _only(env, monkeypatch)
        return json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                         check=True).stdout.strip().splitlines()[-1])
    pinned, unpinned = run({}), run({"NPY_DISABLE_CPU_FEATURES": ""})
    assert pinned[0] not in numeric_pin.NPY_WIDE, pinned
    if reference.cpu_isa() == "avx512":
        assert unpinned[0] in numeric_pin.NPY_WIDE and pinned[1:] != unpinned[1:], (pinned, unpinned)
    else:  # an AVX2-only CPU runs the pinned path either way
        assert pinned == unpinned


def test_mkl_branch_expected_per_vendor(monkeypatch):
    """MKL honours MKL_CBWR=AVX2 on Intel CPUs only; elsewhere it runs AUTO (measured on an AMD EPYC)."""
    monkeypatch.setattr(numeric_pin, "cpu_vendor", lambda: "GenuineIntel")
    assert numeric_pin.expected_mkl_cnr("AVX2") == "AVX2"
    monkeypatch.setattr(numeric_pin, "cpu_vendor", lambda: "AuthenticAMD")
    assert numeric_pin.expected_mkl_cnr("AVX2") == "AUTO" and numeric_pin.expected_mkl_cnr("AVX2,STRICT") == "AUTO,STRICT"
    assert numeric_pin.expected_mkl_cnr("COMPATIBLE") == "COMPATIBLE"
    assert numeric_pin.mismatches({"mkl_cnr": "AUTO"}) == []
    assert numeric_pin.mismatches({"mkl_cnr": "COMPATIBLE"}) != []


def test_mismatches_names_each_library_off_the_pin():
    read = {"aten_cpu_capability": "AVX512", "mkl_cnr": "OFF", "onednn_isa": "Intel AVX-512 with AVX512BW",
            "onednn_conv": "brg:avx512_core", "openblas_core": "SkylakeX", "numpy_simd": "AVX512_ICL"}
    assert [m.split(":")[0] for m in numeric_pin.mismatches(read)] == [
        "aten_cpu_capability", "mkl_cnr", "openblas_core", "onednn_isa", "onednn_conv", "numpy_simd"]
    assert numeric_pin.mismatches({}) == []  # a stage that loaded no library asks none


@x86
def test_every_job_ran_the_pinned_kernels(smoke_tree):
    """Read back inside each train job (train.json's `kernels`): torch's, MKL's, oneDNN's and OpenBLAS's own
    report, not the environment."""
    records = sorted((smoke_tree / "results" / "smoke").rglob("train.json"))
    assert records
    torch_jobs = 0
    for path in records:
        kernels = json.loads(path.read_text())["kernels"]
        assert numeric_pin.mismatches(kernels) == [], (path, kernels)
        torch_jobs += "mkl_cnr" in kernels
    assert torch_jobs, "no job loaded torch: the MKL read-back was never exercised"


def _non_timing(root, study):
    t = pd.read_csv(root / "results" / "smoke" / "tables" / f"{study}.csv")
    t = t[~t.metric.map(reference.is_timing)].sort_values(["method", "setting", "metric"]).reset_index(drop=True)
    return t.drop(columns=[c for c in t.columns if c not in ("method", "setting", "metric", "mean", "std", "n")])


def test_two_runs_give_identical_non_timing_numbers(smoke_tree, tmp_path):
    """A second, independent smoke run of one study (a fresh tree, its own download and training) gives every
    non-timing number of the first bit for bit, and the same verdicts. The first ran its jobs in children of
    the warm fork server (the default), the second each in a fresh interpreter (fork_server=false): the
    server changes no number."""
    study = "lockin"
    assert study in SMOKE_TREE_STUDIES
    root = copy_workflow(tmp_path / "wf")
    git_init(root)
    snakemake(root, f"results/smoke/tables/{study}.md", "--config", "scale=smoke", f"studies=[{study}]",
              "fork_server=false", "--cores", "2")
    records = lambda r: [json.loads(p.read_text())["forked"] for p in (r / "benchmarks").rglob("train/**/*.cpu.json")]
    assert records(root) and not any(records(root))
    assert any(records(smoke_tree))  # (a job that starts before the server listens runs fresh)
    a, b = _non_timing(smoke_tree, study), _non_timing(root, study)
    assert len(a) > 20
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    claims = lambda r: [(c["id"], c["verdict"]) for c in
                        json.loads((r / "results" / "smoke" / "tables" / f"{study}.claims.json").read_text())["claims"]]
    assert claims(smoke_tree) == claims(root)
