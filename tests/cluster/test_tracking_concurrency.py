"""Many writers at once: 8 processes ingest runs into (a) an `mlflow server` started with
scripts/cluster/mlflow_server.sh, open (loopback default) and with its login and HTTPS (conftest's
auth_mlflow_server; the writers log in as the pipeline user from its credentials file), and (b) the
SQLite-file default, through icml25.core.tracking (the code the `track` rule runs). Every run must come back through MlflowClient with all its params, metrics,
curve points and artifacts; the number of retries each store needed is reported.

Run as a script (`python test_tracking_concurrency.py worker SPEC.json`) it is one writer process.
"""
import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

N_PROCS = 8
RUNS_PER_PROC = 4
SETTINGS = [f"set{i}" for i in range(5)]
METRICS = [f"m{i}" for i in range(8)]
CURVE_STEPS = 25
N_PARAMS = 30
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _value(study: str, run: int, setting: str, metric: str) -> float:
    return round(zlib.crc32(f"{study}/{run}/{setting}/{metric}".encode()) / 2**32, 6)


def make_runs(base: Path, study: str) -> list[Path]:
    """Run dirs shaped like the pipeline's (metrics.json, train.json, curves.parquet)."""
    import pandas as pd

    dirs = []
    for r in range(RUNS_PER_PROC):
        d = base / study / f"method{r}" / "seed0"
        d.mkdir(parents=True)
        rows = [{"setting": s, "metric": m, "value": _value(study, r, s, m)} for s in SETTINGS for m in METRICS]
        (d / "metrics.json").write_text(json.dumps({
            "study": study, "scale": "smoke", "method": f"method{r}", "seed": 0, "paper_method": r == 0,
            "git_commit": "0" * 40, "config_hash": "a" * 12, "code_hash": "b" * 12, "data_hash": "c" * 12,
            "params": {f"p{i}": i * r for i in range(N_PARAMS)}, "metrics": rows,
        }))
        (d / "train.json").write_text(json.dumps({"metrics": [], "wall_seconds": 1.0}))
        pd.DataFrame([{"setting": s, "metric": "train_loss", "step": st, "value": 1.0 / (st + 1)}
                      for s in SETTINGS[:2] for st in range(CURVE_STEPS)]).to_parquet(d / "curves.parquet")
        dirs.append(d)
    return dirs


def worker(spec_path: str) -> int:
    """One writer: ingest one study's runs when the go-file appears; report retries and errors."""
    spec = json.loads(Path(spec_path).read_text())
    from icml25.core import tracking as T

    counts = {"calls": 0, "attempts": 0, "errors": []}
    orig = T.retry

    def counting_retry(fn, *a, **k):
        counts["calls"] += 1

        def attempt():
            counts["attempts"] += 1
            try:
                return fn()
            except Exception as exc:
                counts["errors"].append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
                raise

        return orig(attempt, *a, **k)

    T.retry = counting_retry
    import mlflow  # noqa: F401  import before the barrier, so that all writers start together

    go = Path(spec["go"])
    while not go.exists():
        time.sleep(0.02)
    t0 = time.time()
    status, runs = "ok", {}
    try:
        runs = T.ingest_study(spec["uri"], Path(spec["root"]), "smoke", spec["study"], [Path(d) for d in spec["runs"]],
                              credentials_file=spec.get("creds"))
    except Exception as exc:  # reported, and the exit code says so: a lost run is never silent
        status = f"{type(exc).__name__}: {exc}"
    out = {"status": status, "runs": runs, "seconds": time.time() - t0, "start": t0, **counts,
           "retries": counts["attempts"] - counts["calls"]}
    Path(spec["out"]).write_text(json.dumps(out))
    return 0 if status == "ok" else 1


def run_writers(uri: str, root: Path, creds: Path | None = None) -> list[dict]:
    """N_PROCS processes, each ingesting its own study's runs, released at the same instant; `creds`:
    the credentials file of a server with a login."""
    go = root / "go"
    procs, outs = [], []
    for i in range(N_PROCS):
        study = f"conc{i}"
        spec = {"uri": uri, "root": str(root), "study": study, "go": str(go), "out": str(root / f"{study}.out.json"),
                "runs": [str(d) for d in make_runs(root / "runs", study)], "creds": str(creds) if creds else None}
        (root / f"{study}.spec.json").write_text(json.dumps(spec))
        outs.append(Path(spec["out"]))
        procs.append(subprocess.Popen([sys.executable, __file__, "worker", str(root / f"{study}.spec.json")],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    time.sleep(1.0)
    deadline = time.time() + 240  # wait until every writer has imported mlflow (or give up waiting)
    while time.time() < deadline and any(p.poll() is None for p in procs):
        # a writer is ready when it sleeps on the go-file; importing mlflow takes a few CPU-seconds each
        if all(_cpu_idle(p.pid) for p in procs if p.poll() is None):
            break
        time.sleep(0.5)
    go.touch()
    logs = [p.communicate(timeout=600)[0] for p in procs]
    results = []
    for p, out, log in zip(procs, outs, logs):
        assert out.exists(), f"writer crashed (rc {p.returncode}):\n{log[-3000:]}"
        res = json.loads(out.read_text())
        res["rc"] = p.returncode
        results.append(res)
    return results


def _cpu_idle(pid: int) -> bool:
    """True when the process sleeps (state S) rather than runs (R): it waits on the go-file."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "S"
    except (OSError, IndexError):
        return True


def check_store(uri: str, results: list[dict]) -> dict:
    """Every run of every writer read back with MlflowClient: tags, params, metrics, curves, artifacts."""
    from mlflow.tracking import MlflowClient

    c = MlflowClient(tracking_uri=uri)
    n_runs = n_metrics = 0
    for i, res in enumerate(results):
        study = f"conc{i}"
        assert res["status"] == "ok" and res["rc"] == 0, f"{study}: {res['status']} {res['errors'][-3:]}"
        exp = c.get_experiment_by_name(f"smoke/{study}")
        runs = c.search_runs([exp.experiment_id])
        assert len(runs) == RUNS_PER_PROC, f"{study}: {len(runs)} runs recorded, {RUNS_PER_PROC} logged"
        assert {r.info.run_id for r in runs} == set(res["runs"].values())
        for run in runs:
            r = int(run.data.tags["method"].removeprefix("method"))
            assert run.info.status == "FINISHED"
            assert run.data.tags["study"] == study and run.data.tags["seed"] == "0"
            assert run.data.params == {f"p{k}": str(k * r) for k in range(N_PARAMS)}
            want = {f"{s}/{m}": _value(study, r, s, m) for s in SETTINGS for m in METRICS}
            want.update({f"curve/{s}/train_loss": 1.0 / CURVE_STEPS for s in SETTINGS[:2]})
            assert run.data.metrics == want, f"{study}/method{r}: metrics differ"
            for s in SETTINGS[:2]:
                hist = c.get_metric_history(run.info.run_id, f"curve/{s}/train_loss")
                assert sorted(m.step for m in hist) == list(range(CURVE_STEPS))
            assert {a.path for a in c.list_artifacts(run.info.run_id)} == {"metrics.json", "train.json", "curves.parquet"}
            n_runs += 1
            n_metrics += len(want) + CURVE_STEPS * 2 - 2
    starts = [r["start"] for r in results]
    return {"writers": len(results), "runs": n_runs, "metric_points": n_metrics, "lost": 0,
            "retries": sum(r["retries"] for r in results),
            "retried_errors": sorted({e for r in results for e in r["errors"]})[:5],
            "start_spread_s": round(max(starts) - min(starts), 2),
            "slowest_writer_s": round(max(r["seconds"] for r in results), 1)}


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    state = tmp_path_factory.mktemp("mlflow_server")
    from conftest import free_port  # here: run as a writer script, this file has no conftest on its path

    port = free_port()
    env = {**os.environ, "ICML25_MLFLOW_PYTHON_BIN": str(Path(sys.executable).parent)}
    script = REPO / "scripts" / "cluster" / "mlflow_server.sh"
    args = [str(script), "start", "--state", str(state), "--host", "127.0.0.1", "--port", str(port),
            "--artifacts", str(state / "shared" / "artifacts"), "--backend", f"sqlite:///{state}/shared/mlflow.db"]
    t0 = time.time()
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=400)
    try:
        assert proc.returncode == 0, proc.stderr
        url = proc.stdout.strip().splitlines()[-1]
        assert url == f"http://127.0.0.1:{port}"
        print(f"\nmlflow server up in {time.time() - t0:.0f} s at {url}")
        yield url
    finally:
        subprocess.run([str(script), "stop", "--state", str(state)], capture_output=True, env=env, timeout=60)


def test_concurrent_writers_to_mlflow_server(mlflow_server, tmp_path):
    import urllib.request

    # a loopback bind keeps the open server of a single machine: no login asked
    urllib.request.urlopen(f"{mlflow_server}/api/2.0/mlflow/experiments/search?max_results=1", timeout=30).close()
    results = run_writers(mlflow_server, tmp_path)
    report = check_store(mlflow_server, results)
    print(f"\nmlflow server, {N_PROCS} concurrent writers: {json.dumps(report)}")
    assert report["runs"] == N_PROCS * RUNS_PER_PROC


def test_concurrent_writers_to_authenticated_mlflow_server(auth_mlflow_server, tmp_path, monkeypatch):
    srv = auth_mlflow_server
    # the writers inherit the certificate setting; the login they read from the credentials file
    monkeypatch.setenv("MLFLOW_TRACKING_SERVER_CERT_PATH", str(srv.cert))
    results = run_writers(srv.url, tmp_path, creds=srv.credentials)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", srv.creds["mlflow"][0])
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", srv.creds["mlflow"][1])
    report = check_store(srv.url, results)
    print(f"\nauthenticated mlflow server (HTTPS), {N_PROCS} concurrent writers: {json.dumps(report)}")
    assert report["runs"] == N_PROCS * RUNS_PER_PROC


def test_concurrent_writers_to_sqlite_default(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # fresh file: the schema-creation race is part of the test
    results = run_writers(uri, tmp_path)
    report = check_store(uri, results)
    print(f"\nSQLite default, {N_PROCS} concurrent writers: {json.dumps(report)}")
    assert report["runs"] == N_PROCS * RUNS_PER_PROC


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "worker":
    sys.exit(worker(sys.argv[2]))
