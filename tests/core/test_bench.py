"""icml25.bench on hand-written Snakemake benchmark files: the per-study sums and the critical path."""
import math
import os
import time

from icml25 import bench

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _tsv(path, wall, cpu, rss=100.0):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{wall}\t0:00:01\t{rss}\t1\t1\t1\t0.1\t0.1\t50\t{cpu}\n")


def test_rows_sums_and_critical_path(tmp_path):
    b = tmp_path / "benchmarks" / "smoke"
    # study a: a base, two runs; the slower run (m2: 4 + 3 s) is on the critical path
    for rule, wall, cpu in [("download", 1, 0.5), ("preprocess", 2, 1.0), ("fit_base", 5, 4.0), ("table", 1, 0.5),
                            ("figures", 9, 2.0), ("track", 9, 3.0)]:
        _tsv(b / rule / "a.tsv", wall, cpu)
    for m, tr, ev in [("m1", 3, 1), ("m2", 4, 3)]:
        _tsv(b / "train" / "a" / m / "seed0.tsv", tr, tr * 0.9, rss=300.0 if m == "m2" else 100.0)
        _tsv(b / "evaluate" / "a" / m / "seed0.tsv", ev, ev * 0.5)
    # study b: no base, one run; a job faster than Snakemake's first sample reads NA
    for rule in ("download", "preprocess", "table"):
        _tsv(b / rule / "b.tsv", 1, 0.2)
    _tsv(b / "train" / "b" / "m1" / "seed0.tsv", 2, 1.0)
    (b / "evaluate" / "b" / "m1").mkdir(parents=True)
    (b / "evaluate" / "b" / "m1" / "seed0.tsv").write_text(HEADER + "0.1\t0:00:00\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\n")
    _tsv(b / "summary.tsv", 1, 0.7)
    # the job's own CPU record wins over Snakemake's sample; one left by an earlier run does not
    (b / "train" / "a" / "m1" / "seed0.cpu.json").write_text('{"cpu_s": 2.9}')
    # a job the fork server forked: Snakemake sampled only its small recorder, so the record gives the RSS too
    (b / "evaluate" / "a" / "m2" / "seed0.cpu.json").write_text('{"cpu_s": 1.5, "max_rss_mb": 450.0, "forked": true}')
    stale = b / "train" / "b" / "m1" / "seed0.cpu.json"
    stale.write_text('{"cpu_s": 99.0}')
    os.utime(stale, (time.time() - 3600,) * 2)

    jobs = bench.read(b)
    assert len(jobs) == 16 and jobs.study.isna().sum() == 1  # the summary job belongs to no study
    table = bench.summarise(jobs, {"a": 0.5, "b": 0.4}).set_index("study")
    assert list(table.index) == ["a", "b"]
    a, bb = table.loc["a"], table.loc["b"]
    assert a.jobs == 10 and bb.jobs == 5
    assert a.critical_path_s == 1 + 2 + 5 + (4 + 3) + 1
    assert bb.critical_path_s == 1 + 1 + 2 + 0.1 + 1
    assert math.isclose(a.cpu_s, 0.5 + 1 + 4 + 0.5 + 2 + 3 + 2.9 + 3.6 + 0.5 + 1.5)
    assert math.isclose(a.cpu_s_sampled, a.cpu_s - 2.9 + 2.7) and bb.exact_jobs == 0
    assert math.isclose(a.cpu_s_train, 2.9 + 3.6) and a.cpu_s_fit_base == 4.0 and bb.cpu_s_fit_base == 0
    assert math.isclose(bb.cpu_s_train, 1.0)
    assert a.peak_rss_mb == 450.0 and a.exact_jobs == 2
    assert math.isclose(a.startup_share, round(0.5 * 10 / a.cpu_s, 4))
    md = bench.markdown(table.reset_index(), jobs, "smoke", torch_cpu=2.5)
    assert "| a | 10 |" in md and "| b | 5 |" in md and "summary job: 1.0 s wall, 0.7 CPU s" in md
    assert "**Fork server**: 1 of 16 jobs ran in children" in md
