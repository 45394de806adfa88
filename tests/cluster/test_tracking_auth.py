"""The cluster tracking server with MLflow's login: scripts/cluster/mlflow_server.sh start --auth (what any
non-loopback bind turns on), over HTTPS with a self-signed certificate. One server for the session
(conftest.auth_mlflow_server, shared with the 8-writer test), on 127.0.0.1 only: no test sends traffic
to any other address.

Checked: requests without a valid login get 401; the pipeline user logs runs, the reader only reads;
a smoke run of one study goes through the login, and neither `ps` (sampled during the run, arguments and
environments), nor any file under logs/ (nor anywhere in the workflow tree, the server log, the MLflow
params/tags or the Snakemake report) holds a password; a missing or wrong login fails the `track` job
with one line naming what to set, and leaves the experiment as it was.
"""
import base64
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO, copy_workflow, free_port, git_init, snakemake
from test_tracking_concurrency import make_runs

pytestmark = pytest.mark.slow
SCRIPT = REPO / "scripts" / "cluster" / "mlflow_server.sh"
STUDY = "sand"
LOGIN_VARS = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")


def _http(srv, method: str, path: str, login=None, body=None) -> int:
    """Status code of one request to the test server (verified against its certificate)."""
    req = urllib.request.Request(srv.url + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    if login:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{login[0]}:{login[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=120, context=ssl.create_default_context(cafile=str(srv.cert))) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _passwords(srv) -> list[str]:
    return [pw for _, pw in srv.creds.values()]


def _client_as(monkeypatch, srv, section: str):
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_SERVER_CERT_PATH", str(srv.cert))
    monkeypatch.setenv(LOGIN_VARS[0], srv.creds[section][0])
    monkeypatch.setenv(LOGIN_VARS[1], srv.creds[section][1])
    return MlflowClient(tracking_uri=srv.url)


def _all_runs(c, name: str) -> dict[str, tuple[str, str]]:
    """run id -> (status, lifecycle stage), deleted runs included: what a half-written ingest would change."""
    from mlflow.entities import ViewType

    exp = c.get_experiment_by_name(name)
    return {r.info.run_id: (r.info.status, r.info.lifecycle_stage)
            for r in c.search_runs([exp.experiment_id], run_view_type=ViewType.ALL, max_results=1000)}


def _track_env(srv, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in LOGIN_VARS}
    env["MLFLOW_TRACKING_SERVER_CERT_PATH"] = str(srv.cert)
    env.update(extra)
    return env


# ---- the server and its logins ------------------------------------------------------------------------------

def test_start_keeps_the_logins_private(auth_mlflow_server):
    srv = auth_mlflow_server
    assert (srv.credentials.stat().st_mode & 0o777) == 0o600
    assert (srv.state.stat().st_mode & 0o777) == 0o700  # the SQLite store and user database inside
    for name in ("basic_auth.ini", "flask_secret_key"):
        assert (srv.state / "auth" / name).stat().st_mode & 0o777 == 0o600, name
    assert {s: u for s, (u, _) in srv.creds.items()} == {"mlflow": "pipeline", "admin": "admin", "reader": "reader"}
    pws = _passwords(srv)
    assert len(set(pws)) == 3 and all(len(p) >= 24 for p in pws)
    assert str(srv.credentials) in srv.start_output  # where they are is printed, never what they are
    log = (srv.state / "server.log").read_text()
    for pw in pws:
        assert pw not in srv.start_output and pw not in log


def test_requests_without_a_valid_login_get_401(auth_mlflow_server):
    srv = auth_mlflow_server
    search = "/api/2.0/mlflow/experiments/search?max_results=5"
    assert _http(srv, "GET", search) == 401
    assert _http(srv, "POST", "/api/2.0/mlflow/runs/log-batch",
                 body={"run_id": "0" * 32, "metrics": [{"key": "m", "value": 1.0, "timestamp": 0, "step": 0}]}) == 401
    assert _http(srv, "POST", "/api/2.0/mlflow/experiments/create", body={"name": "intruder"}) == 401
    assert _http(srv, "GET", search, login=("pipeline", "wrong-password-123")) == 401
    assert _http(srv, "GET", search, login=("admin", srv.creds["mlflow"][1])) == 401
    assert _http(srv, "GET", search, login=srv.creds["mlflow"]) == 200
    assert _http(srv, "GET", "/health") == 200  # the only open route (besides static files)


def test_pipeline_user_logs_a_run_and_the_reader_only_reads(auth_mlflow_server, tmp_path, monkeypatch):
    from icml25.core import tracking

    srv = auth_mlflow_server
    for var in LOGIN_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.mlflow/credentials: the login comes from the file
    monkeypatch.setenv("MLFLOW_TRACKING_SERVER_CERT_PATH", str(srv.cert))
    dirs = make_runs(tmp_path / "runs", "authcheck")[:1]
    runs = tracking.ingest_study(srv.url, tmp_path, "smoke", "authcheck", dirs, credentials_file=srv.credentials)
    assert not any(v in os.environ for v in LOGIN_VARS)  # the login was lent to MLflow for the call only
    rid = runs["method0/seed0"]
    c = _client_as(monkeypatch, srv, "reader")
    run = c.get_run(rid)
    assert run.info.status == "FINISHED" and run.data.params["p3"] == "0" and run.data.tags["study"] == "authcheck"
    assert _http(srv, "POST", "/api/2.0/mlflow/runs/log-batch", login=srv.creds["reader"],
                 body={"run_id": rid, "metrics": [{"key": "m", "value": 1.0, "timestamp": 0, "step": 0}]}) == 403
    assert _http(srv, "POST", "/api/2.0/mlflow/runs/delete", login=srv.creds["reader"], body={"run_id": rid}) == 403
    assert c.get_run(rid).info.lifecycle_stage == "active"


def test_backend_password_on_the_command_line_is_refused(tmp_path):
    secret = "hunter2-on-argv"
    proc = subprocess.run([str(SCRIPT), "start", "--state", str(tmp_path), "--host", "127.0.0.1",
                           "--backend", f"postgresql://icml25:{secret}@127.0.0.1:1/mlflow"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--backend-password-file" in proc.stderr and secret not in proc.stderr + proc.stdout
    assert not (tmp_path / "server.pid").exists()


# ---- one study through the login ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def auth_smoke(auth_mlflow_server, tmp_path_factory):
    """`snakemake all` for one study at smoke scale, tracking through the authenticated server with the
    credentials file named in --config; `ps axwwe` (every process's arguments and environment) is sampled
    while it runs."""
    srv = auth_mlflow_server
    root = copy_workflow(tmp_path_factory.mktemp("auth_smoke") / "wf")
    git_init(root)
    cfg = ["--config", "scale=smoke", f"studies=[{STUDY}]", f"tracking_uri={srv.url}",
           f"tracking_credentials={srv.credentials}"]
    env = _track_env(srv)
    out = root.parent / "snakemake.out"
    samples = []
    t0 = time.time()
    with open(out, "w") as fh:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("snakemake")), "all", *cfg, "--cores", "2"],
                                cwd=root, env=env, stdout=fh, stderr=subprocess.STDOUT, text=True)
        while proc.poll() is None and time.time() - t0 < 1500:
            samples.append(subprocess.run(["ps", "axwwe"], capture_output=True, text=True).stdout)
            time.sleep(0.3)
        proc.wait(timeout=60)
    log = out.read_text()
    assert proc.returncode == 0, log[-4000:]
    print(f"\nsmoke run of {STUDY} through the authenticated server: {time.time() - t0:.0f} s, {len(samples)} ps samples")
    mapping = json.loads((root / "results" / "smoke" / STUDY / "mlflow_runs.json").read_text())
    return SimpleNamespace(root=root, cfg=cfg, env=env, ps=samples, log=log, mlflow_runs=mapping)


def test_smoke_study_is_tracked_through_the_login(auth_smoke, auth_mlflow_server, monkeypatch):
    srv = auth_mlflow_server
    c = _client_as(monkeypatch, srv, "reader")
    runs = _all_runs(c, f"smoke/{STUDY}")
    ids = set(auth_smoke.mlflow_runs["runs"].values())
    n_dirs = len(list((auth_smoke.root / "results" / "smoke" / STUDY).glob("*/seed*/metrics.json")))
    assert len(ids) == n_dirs > 0
    assert {r for r, (st, life) in runs.items() if life == "active"} == ids
    assert all(runs[r][0] == "FINISHED" for r in ids)
    assert auth_smoke.mlflow_runs["tracking_uri"] == srv.url


def test_no_password_in_ps_logs_files_params_or_report(auth_smoke, auth_mlflow_server, monkeypatch):
    srv = auth_mlflow_server
    pws = _passwords(srv)
    assert any("icml25 track" in s for s in auth_smoke.ps), "no ps sample caught the track job"
    for sample in auth_smoke.ps:
        for pw in pws:
            assert pw not in sample
    logs = [f for f in (auth_smoke.root / "logs").rglob("*") if f.is_file()]
    assert any("track" in str(f) for f in logs)
    # every file the run left (logs, results, .snakemake metadata, mlflow_runs.json) and the server log
    snakemake(auth_smoke.root, "all", *auth_smoke.cfg, "--report", "report.html")
    files = [f for f in auth_smoke.root.rglob("*") if f.is_file() and ".git" not in f.parts]
    assert auth_smoke.root / "report.html" in files
    for f in files + [srv.state / "server.log"]:
        data = f.read_bytes()
        for pw in pws:
            assert pw.encode() not in data, f"a password is in {f}"
    for pw in pws:
        assert pw not in auth_smoke.log
    c = _client_as(monkeypatch, srv, "reader")
    for rid in auth_smoke.mlflow_runs["runs"].values():
        run = c.get_run(rid)
        values = " ".join([*run.data.params.values(), *run.data.tags.values()])
        assert not any(pw in values for pw in pws)


def test_wrong_password_fails_the_track_job_and_writes_nothing(auth_smoke, auth_mlflow_server, tmp_path, monkeypatch):
    srv = auth_mlflow_server
    wrong = tmp_path / "credentials"
    wrong.write_text("[mlflow]\nmlflow_tracking_username = pipeline\nmlflow_tracking_password = not-the-password-42\n")
    c = _client_as(monkeypatch, srv, "reader")
    before = _all_runs(c, f"smoke/{STUDY}")
    cfg = [a for a in auth_smoke.cfg if not a.startswith("tracking_credentials=")] + [f"tracking_credentials={wrong}"]
    target = f"results/smoke/{STUDY}/mlflow_runs.json"
    proc = subprocess.run([str(Path(sys.executable).with_name("snakemake")), target, *cfg, "--cores", "1",
                           "--forcerun", "track"], cwd=auth_smoke.root, env=auth_smoke.env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    lines = (auth_smoke.root / "logs" / "track" / "smoke" / f"{STUDY}.log").read_text().strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"icml25: error: the MLflow tracking server {srv.url} refused the login of user 'pipeline'")
    assert "MLFLOW_TRACKING_PASSWORD" in lines[0] and "tracking_credentials" in lines[0]
    assert "not-the-password-42" not in proc.stdout + proc.stderr + lines[0]
    assert _all_runs(c, f"smoke/{STUDY}") == before  # no run created, deleted or left half-written


def test_missing_or_untrusted_login_fails_with_one_line(auth_smoke, auth_mlflow_server, tmp_path):
    srv = auth_mlflow_server
    icml25 = [str(Path(sys.executable).with_name("icml25")), "track", "--root", str(auth_smoke.root),
              "--scale", "smoke", "--study", STUDY]
    home = {"HOME": str(tmp_path)}  # no ~/.mlflow/credentials either

    def run(*args, env):
        proc = subprocess.run([*icml25, *args], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        return lines[0]

    line = run("--tracking-uri", srv.url, env=_track_env(srv, **home))
    assert "requires a login and none is set" in line and "MLFLOW_TRACKING_USERNAME" in line and "tracking_credentials" in line
    env = _track_env(srv, **home)
    env.pop("MLFLOW_TRACKING_SERVER_CERT_PATH")
    line = run("--tracking-uri", srv.url, "--tracking-credentials", str(srv.credentials), env=env)
    assert "not trusted" in line and "MLFLOW_TRACKING_SERVER_CERT_PATH" in line
    pw = srv.creds["mlflow"][1]
    line = run("--tracking-uri", srv.url.replace("https://", f"https://pipeline:{pw}@"), env=_track_env(srv, **home))
    assert "carries a password" in line and pw not in line


# ---- a PostgreSQL store whose password never reaches a command line -------------------------------------------

@pytest.fixture
def postgres(tmp_path):
    """A throwaway PostgreSQL on 127.0.0.1 (run as the `postgres` OS user: it refuses root) with a role
    `icml25` that logs in with a password over TCP; yields (port, password file)."""
    import pwd
    import secrets
    import shutil
    import tempfile

    pytest.importorskip("psycopg2", reason="pip install psycopg2-binary")
    pg_bin = Path("/usr/lib/postgresql")
    bins = sorted(pg_bin.glob("*/bin/initdb")) if pg_bin.is_dir() else []
    initdb = shutil.which("initdb") or (str(bins[-1]) if bins else None)
    if os.geteuid() != 0 or not initdb:
        pytest.skip("needs root and PostgreSQL's server binaries (initdb, pg_ctl)")
    try:
        pg = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no `postgres` OS user to run the test database as")
    bindir = Path(initdb).resolve().parent  # /usr/local/bin may hold only some of the links
    d = Path(tempfile.mkdtemp(prefix="icml25-pg-"))  # tmp_path is root-only; postgres must reach its dir
    os.chown(d, pg.pw_uid, pg.pw_gid)
    as_pg = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    password = secrets.token_urlsafe(18)
    pwfile = tmp_path / "dbpass"
    pwfile.write_text(password + "\n")
    pwfile.chmod(0o600)
    try:
        subprocess.run([*as_pg, str(bindir / "initdb"), "-D", f"{d}/data", "-U", "postgres", "--auth-local=trust",
                        "--auth-host=scram-sha-256"], check=True, capture_output=True, timeout=300)
        subprocess.run([*as_pg, str(bindir / "pg_ctl"), "-D", f"{d}/data", "-l", f"{d}/log", "-w", "-t", "120", "-o",
                        f"-p {port} -k {d} -c listen_addresses=127.0.0.1", "start"], check=True, capture_output=True,
                       timeout=180)
        # the SQL (with the password) on stdin, not on psql's command line
        subprocess.run([*as_pg, str(bindir / "psql"), "-h", str(d), "-p", str(port), "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-q"],
                       input=f"CREATE ROLE icml25 LOGIN PASSWORD '{password}';\nCREATE DATABASE mlflow OWNER icml25;\n",
                       text=True, check=True, capture_output=True, timeout=120)
        yield port, pwfile, password
    finally:
        subprocess.run([*as_pg, str(bindir / "pg_ctl"), "-D", f"{d}/data", "-m", "fast", "stop"], capture_output=True,
                       timeout=120)
        shutil.rmtree(d, ignore_errors=True)


def test_postgres_password_comes_from_a_file_not_argv(postgres, tmp_path, monkeypatch):
    from icml25.core import tracking

    port, pwfile, password = postgres
    state, srv_port = tmp_path / "state", free_port()
    env = {**os.environ, "ICML25_MLFLOW_PYTHON_BIN": str(Path(sys.executable).parent)}
    env.pop("PGPASSFILE", None)
    args = [str(SCRIPT), "start", "--state", str(state), "--host", "127.0.0.1", "--port", str(srv_port), "--workers", "1",
            "--backend", f"postgresql://icml25@127.0.0.1:{port}/mlflow", "--backend-password-file", str(pwfile)]
    samples = []
    try:
        with open(tmp_path / "start.out", "w") as fh:
            proc = subprocess.Popen(args, env=env, stdout=fh, stderr=subprocess.STDOUT, text=True)
            t0 = time.time()
            while proc.poll() is None and time.time() - t0 < 600:
                samples.append(subprocess.run(["ps", "axwwe"], capture_output=True, text=True).stdout)
                time.sleep(0.3)
            proc.wait(timeout=60)
        out = (tmp_path / "start.out").read_text()
        assert proc.returncode == 0, out[-3000:]
        url = out.strip().splitlines()[-1]
        assert any("mlflow" in s and "server" in s for s in samples)
        assert (state / "pgpass").stat().st_mode & 0o777 == 0o600
        # the store works: a run logged through the server lands in PostgreSQL
        monkeypatch.setenv("HOME", str(tmp_path))
        for var in LOGIN_VARS:
            monkeypatch.delenv(var, raising=False)
        runs = tracking.ingest_study(url, tmp_path, "smoke", "pgcheck", make_runs(tmp_path / "runs", "pgcheck")[:1])
        assert len(runs) == 1
        for text in samples + [out, (state / "server.log").read_text()]:
            assert password not in text
    finally:
        subprocess.run([str(SCRIPT), "stop", "--state", str(state)], capture_output=True, env=env, timeout=60)
