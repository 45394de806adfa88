"""The warm fork server (core/forkserver.py): a job it forks runs the stage as a fresh interpreter would (same
output streams, exit code, CPU record), a job whose import-time environment differs runs fresh instead, and a
job whose recorder is killed or signalled ends with it."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from icml25.core import forkserver

ICML25 = str(Path(sys.executable).with_name("icml25"))


@pytest.fixture
def server(tmp_path, monkeypatch):
    def make(target=None):
        h = forkserver.start(tmp_path / "forkserver.log", target)
        assert h.wait(), (tmp_path / "forkserver.log").read_text()
        handles.append(h)
        return h

    handles = []
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    yield make
    for h in handles:
        h.stop()
    assert forkserver.SOCKET_VAR not in os.environ


def _job(args, rec, env=None, **kw):
    return subprocess.run([ICML25, *args, "--cpu-record", str(rec)], capture_output=True, text=True,
                          env=env or dict(os.environ), **kw)


def test_forked_job_writes_what_a_fresh_one_does(server, tmp_path):
    args = ["list", "--scale", "smoke", "--root", str(REPO)]
    fresh = _job(args, tmp_path / "fresh.json")
    h = server()
    forked = _job(args, tmp_path / "forked.json")
    assert forked.returncode == fresh.returncode == 0, forked.stderr
    assert forked.stdout == fresh.stdout and "sand:" in forked.stdout  # the child wrote to the recorder's stdout
    a, b = json.loads((tmp_path / "fresh.json").read_text()), json.loads((tmp_path / "forked.json").read_text())
    assert a["forked"] is False and b["forked"] is True
    assert b["cpu_s"] > 0 and abs(b["user_s"] + b["system_s"] - b["cpu_s"]) < 1e-6 and b["max_rss_mb"] > 10
    # a failing stage: its exit code and its stderr line come back, no record
    bad = _job(["table", "--study", "nosuch", "--scale", "smoke", "--root", str(REPO)], tmp_path / "bad.json")
    assert bad.returncode == 2 and "unknown study 'nosuch'" in bad.stderr and not (tmp_path / "bad.json").exists()
    h.stop()
    assert "2 jobs forked" in (tmp_path / "forkserver.log").read_text()


def test_other_import_environment_runs_fresh(server, tmp_path):
    server()
    env = {**os.environ, "MKL_CBWR": "COMPATIBLE"}  # read when MKL loads: the warm interpreter's MKL has another
    job = _job(["list", "--scale", "smoke", "--root", str(REPO)], tmp_path / "r.json", env=env)
    assert job.returncode == 0 and json.loads((tmp_path / "r.json").read_text())["forked"] is False
    assert "environment differs in MKL_CBWR" in (tmp_path / "forkserver.log").read_text()
    # another host (a cluster job that inherited the variables) never connects
    env = {**os.environ, forkserver.HOST_VAR: "elsewhere"}
    job = _job(["list", "--scale", "smoke", "--root", str(REPO)], tmp_path / "r2.json", env=env)
    assert job.returncode == 0 and json.loads((tmp_path / "r2.json").read_text())["forked"] is False


SLEEPER = '''
import os, sys, time
from pathlib import Path

def main(argv):
    Path(argv[0]).write_text(str(os.getpid()))
    time.sleep(120)
    return 0
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_job_ends_with_its_recorder(server, tmp_path, how):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    server("sleeper:main")
    pidfile = tmp_path / "pid"
    client = subprocess.Popen([sys.executable, "-c", "import sys; from icml25.core import forkserver; "
                               "sys.exit(forkserver.run(sys.argv[1:])[0])", str(pidfile)])
    end = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < end:
        time.sleep(0.1)
    child = int(pidfile.read_text())
    assert child != client.pid and _alive(child)
    client.send_signal(how)  # SIGKILL: the socket closes; SIGTERM: the recorder passes it on
    client.wait(timeout=30)
    end = time.monotonic() + 10
    while _alive(child) and time.monotonic() < end:
        time.sleep(0.1)
    assert not _alive(child)
