import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# the studies of the shared smoke tree (workflow, report, reliability, DVC, sweep, verify tests)
SMOKE_TREE_STUDIES = ("sand", "lockin")
# What a copy of the workflow needs (the package itself is installed in the venv).
WORKFLOW_FILES = ["Snakefile", "rules", "config", "profiles", "envs", "report"]

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


def copy_workflow(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / name)
    return dest


def smoke_tree_workflow(dest: Path) -> Path:
    """A copy of the workflow whose config enables only the shared smoke tree's studies."""
    root = copy_workflow(dest)
    cfg = root / "config" / "config.yaml"
    cfg.write_text(re.sub(r"(?m)^studies: \[[^\]]*\]", f"studies: [{', '.join(SMOKE_TREE_STUDIES)}]", cfg.read_text()))
    return root


def git_init(path: Path) -> None:
    run = lambda *a: subprocess.run(["git", *a], cwd=path, check=True, capture_output=True)
    run("init", "-q")
    run("-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    run("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "fixture")


def snakemake(cwd: Path, *args: str, check: bool = True, timeout: int = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("snakemake")
    proc = subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def cluster_plugins() -> Path | None:
    """Where the cluster executor plugins are: None when they are importable already (installed in this
    venv, e.g. by `make install-cluster`), else the side directory `make install` fills
    (scripts/cluster/plugins.py: $ICML25_CLUSTER_PLUGINS or <venv>/cluster-plugins). Raises pytest's skip
    when neither has them."""
    import importlib.util

    side = Path(os.environ.get("ICML25_CLUSTER_PLUGINS", Path(sys.prefix) / "cluster-plugins"))
    if str(side) in sys.path:  # an earlier cluster_env() put it there: still the side directory
        return side
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None:
        return None
    if not (side / "snakemake_executor_plugin_slurm").is_dir():
        pytest.skip(f"no cluster executor plugins in this venv or in {side} (`make install` puts them there)",
                    allow_module_level=True)
    return side


def cluster_env() -> dict:
    """os.environ plus the cluster plugins on PYTHONPATH (for the Snakemake runs of the cluster tests, and
    through sbatch's exported environment for their SLURM jobs); also importable in this process. Only
    these runs see the plugins: the default venv has none, so other Snakemake calls never run scontrol."""
    env = dict(os.environ)
    side = cluster_plugins()
    if side is not None:
        if str(side) not in sys.path:
            sys.path.insert(0, str(side))
        env["PYTHONPATH"] = os.pathsep.join([str(side)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


@pytest.fixture
def workflow_copy(tmp_path) -> Path:
    return copy_workflow(tmp_path / "wf")


def _smoke_studies(session) -> dict[str, list[str] | None]:
    """The studies this pytest session's tests ask `study_smoke` for (the study folder a test lives in,
    tests/studies/<study>/), each with the methods its module's SMOKE_METHODS names (None: all of them)."""
    out: dict[str, list[str] | None] = {}
    for item in session.items:
        if "study_smoke" not in getattr(item, "fixturenames", ()):
            continue
        parts = Path(str(item.path)).parts
        if "studies" in parts[:-1]:
            out[parts[parts.index("studies") + 1]] = getattr(item.module, "SMOKE_METHODS", None)
    return out


def _limit_methods(root: Path, studies: dict[str, list[str] | None]) -> None:
    import yaml

    for name, methods in studies.items():
        path = root / "config" / "studies" / f"{name}.yaml"
        if methods and path.exists():
            raw = yaml.safe_load(path.read_text())
            raw["methods"] = list(methods)
            path.write_text(yaml.safe_dump(raw, sort_keys=False))


def _study_failure(root: Path, name: str, proc) -> str:
    logs = sorted((root / "logs").glob(f"*/smoke/{name}*")) + sorted((root / "logs").glob(f"*/smoke/{name}/**/*.log"))
    tails = [f"--- {p.relative_to(root)}\n{p.read_text()[-1500:]}" for p in logs if p.is_file() and p.stat().st_size]
    errors = [l for l in proc.stdout.splitlines() + proc.stderr.splitlines() if "Error in rule" in l or name in l and "rror" in l]
    return f"study {name}: its smoke jobs did not all finish (snakemake rc {proc.returncode})\n" + "\n".join(errors[-20:] + tails[-4:])


@pytest.fixture(scope="session")
def study_smoke(request, tmp_path_factory):
    """study_smoke(name) -> root of ONE real `snakemake all` run at smoke scale over every study whose own
    tests ask for it (--keep-going: a broken study fails only its own tests), each with its test module's
    SMOKE_METHODS. It replaces one snakemake run per study: one DAG keeps both cores busy and pays Snakemake's
    start-up once. A test that changes files copies its study out first (copy_study_tree)."""
    state: dict = {}

    def get(name: str) -> Path:
        if "root" not in state:
            studies = _smoke_studies(request.session)
            studies.setdefault(name, None)
            state["names"] = sorted(studies)
            state["root"] = root = copy_workflow(tmp_path_factory.mktemp("study_smoke") / "wf")
            _limit_methods(root, studies)
            git_init(root)
            state["proc"] = snakemake(root, "all", "--config", "scale=smoke", f"studies=[{','.join(state['names'])}]",
                                      "--cores", "2", "--keep-going", check=False, timeout=5400)
        root = state["root"]
        if name not in state["names"]:  # asked for by a test the collection did not see
            state["names"].append(name)
            state.setdefault("late", {})[name] = snakemake(root, "all", "--config", "scale=smoke", f"studies=[{name}]",
                                                           "--cores", "2", check=False, timeout=3600)
        done = root / "results" / "smoke" / "tables" / f"{name}.claims.json"
        if not done.exists() or not (root / "results" / "smoke" / "figures" / name / "figures.json").exists():
            pytest.fail(_study_failure(root, name, state.get("late", {}).get(name, state["proc"])))  # its own run
        return root

    return get


def copy_study_tree(root: Path, name: str, dest: Path) -> Path:
    """A workflow copy holding one study's smoke data and results out of `root` (a study_smoke tree), for a
    test that changes files: the shared tree stays as the run left it."""
    dest = copy_workflow(dest)
    for sub in ("data/raw/smoke", "data/processed/smoke", "results/smoke", "results/smoke/figures"):
        if (root / sub / name).exists():
            shutil.copytree(root / sub / name, dest / sub / name)
    (dest / "results" / "smoke" / "tables").mkdir(parents=True, exist_ok=True)
    for f in (root / "results" / "smoke" / "tables").glob(f"{name}.*"):
        shutil.copy2(f, dest / "results" / "smoke" / "tables" / f.name)
    cfg = root / "config" / "studies" / f"{name}.yaml"
    shutil.copy2(cfg, dest / "config" / "studies" / f"{name}.yaml")  # with the run's SMOKE_METHODS
    return dest


@pytest.fixture(scope="session")
def smoke_tree(tmp_path_factory) -> Path:
    """The whole DAG at smoke scale, run once through the real snakemake CLI (shared by tests), on the
    two studies the shared-machinery tests use (each study's own smoke run is in its own tests and the
    contract suite: CI time must not grow with every study here)."""
    root = smoke_tree_workflow(tmp_path_factory.mktemp("smoke") / "wf")
    git_init(root)
    snakemake(root, "all", "--config", "scale=smoke", "--cores", "2")
    return root


class _QuietFiles(__import__("http.server").server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


@pytest.fixture(scope="session")
def file_server():
    """serve(directory) -> base URL of a real HTTP server over that directory (the full-scale download
    path fetched from local stand-ins of the real files); every server stops at teardown."""
    import http.server
    import threading
    from functools import partial

    servers = []

    def serve(directory) -> str:
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietFiles, directory=str(directory)))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield serve
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def auth_mlflow_server(tmp_path_factory):
    """An `mlflow server` with MLflow's login (`--auth`, what any non-loopback bind turns on) and HTTPS
    (a self-signed certificate), started once by scripts/cluster/mlflow_server.sh on 127.0.0.1 only.
    Yields url, state, cert, the logins {section: (user, password)} and the output of `start`."""
    import configparser
    import time
    from types import SimpleNamespace

    pytest.importorskip("flask_wtf", reason="the login needs mlflow's auth extra: pip install 'mlflow[auth]'")
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed for the test certificate")
    state = tmp_path_factory.mktemp("mlflow_auth_server")
    cert, key = state.parent / "auth_cert.pem", state.parent / "auth_key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    port = free_port()
    env = {**os.environ, "ICML25_MLFLOW_PYTHON_BIN": str(Path(sys.executable).parent)}
    script = REPO / "scripts" / "cluster" / "mlflow_server.sh"
    # 2 workers: the start-up of each costs CPU-seconds on a small test machine
    args = [str(script), "start", "--auth", "--state", str(state), "--host", "127.0.0.1", "--port", str(port),
            "--workers", "2", "--tls-cert", str(cert), "--tls-key", str(key)]
    t0 = time.time()
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    try:
        assert proc.returncode == 0, proc.stderr
        url = proc.stdout.strip().splitlines()[-1]
        assert url == f"https://127.0.0.1:{port}"
        cp = configparser.ConfigParser(interpolation=None)
        cp.read(state / "credentials")
        creds = {s: (cp[s]["mlflow_tracking_username"], cp[s]["mlflow_tracking_password"]) for s in ("mlflow", "admin", "reader")}
        print(f"\nauthenticated mlflow server up in {time.time() - t0:.0f} s at {url}")
        yield SimpleNamespace(url=url, state=state, cert=cert, creds=creds, start_output=proc.stdout + proc.stderr,
                              credentials=state / "credentials", start_seconds=time.time() - t0)
    finally:
        subprocess.run([str(script), "stop", "--state", str(state)], capture_output=True, env=env, timeout=60)
