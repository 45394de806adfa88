"""`icml25 <stage> --cpu-record PATH` (what the rules pass): the stage runs in a child process and, after
success, PATH holds its CPU s as measured from outside (icml25 bench reads it beside Snakemake's file)."""
import json
import resource
import subprocess
import sys
from pathlib import Path

from conftest import REPO

ICML25 = str(Path(sys.executable).with_name("icml25"))


def test_record_is_the_jobs_whole_cpu(tmp_path):
    rec = tmp_path / "sub" / "noop.cpu.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([ICML25, "noop", "--study", "sand", "--scale", "smoke", "--root", str(REPO),
                           "--cpu-record", str(rec)], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stderr
    outer = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    got = json.loads(rec.read_text())
    # all of the job but the parent's own exit: the stage's interpreter start, imports and exit included
    assert 0.6 * outer <= got["cpu_s"] <= outer + 0.01, (got, outer)
    assert abs(got["user_s"] + got["system_s"] - got["cpu_s"]) < 1e-6 and got["max_rss_mb"] > 10


def test_failed_stage_writes_no_record_and_keeps_its_exit_code(tmp_path):
    rec = tmp_path / "x.cpu.json"
    proc = subprocess.run([ICML25, "table", "--study", "nosuch", "--scale", "smoke", "--root", str(REPO),
                           "--cpu-record", str(rec)], capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown study 'nosuch'" in proc.stderr
    assert not rec.exists()
