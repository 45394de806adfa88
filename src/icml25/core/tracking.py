"""MLflow as the index over the run files (the files stay the source of truth).

One experiment per `{scale}/{study}`, one run per (method, seed). Training jobs never touch MLflow:
a single writer per study ingests the finished runs with batched calls. With the SQLite default the
writer also holds an exclusive file lock, so two studies ingesting at once never race on schema
creation or hit `database is locked`; transient errors are retried and a run that still cannot be
logged is an error, never skipped.

A tracking server with a login (scripts/cluster/mlflow_server.sh) is reached the way MLflow clients do
it: MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD, else a credentials file in MLflow's format
(`tracking_credentials` in the config, else ~/.mlflow/credentials); TLS through
MLFLOW_TRACKING_SERVER_CERT_PATH / MLFLOW_TRACKING_INSECURE_TLS. The login is checked before anything
is written, and no secret is ever put in a message, a param or a file.
"""
from __future__ import annotations

import configparser
import contextlib
import fcntl
import json
import os
import re
import time
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from .errors import UserError

T = TypeVar("T")
_KEY_OK = re.compile(r"[^A-Za-z0-9_\-./ ]")
_MAX_PARAM = 6000


def metric_key(*parts: str) -> str:
    return "/".join(_KEY_OK.sub("_", p) for p in parts if p)


def retry(fn: Callable[[], T], attempts: int = 6, backoff: float = 0.5) -> T:
    """Retry transient tracking failures (locked SQLite, a restarting server) with backoff."""
    for i in range(attempts):
        try:
            return fn()
        except Exception as exc:  # mlflow wraps sqlite/http errors in several exception types
            text = f"{type(exc).__name__}: {exc}"
            transient = any(s in text for s in (
                "database is locked", "Connection", "Timeout", "timed out", "503", "502", "429", "temporarily",
            ))
            if not transient or i == attempts - 1:
                raise
            time.sleep(backoff * 2**i)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def store_lock(uri: str, root: Path) -> Iterator[None]:
    """Exclusive lock around a SQLite store (no-op for a tracking server)."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    db = _sqlite_path(uri, root)
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _sqlite_path(uri: str, root: Path) -> Path:
    path = Path(uri[len("sqlite:///"):])
    return path if path.is_absolute() else root / path


def resolve_uri(uri: str, root: Path) -> str:
    """Relative SQLite paths are relative to the repo root, not to the caller's cwd."""
    if uri.startswith("sqlite:///"):
        return "sqlite:///" + str(_sqlite_path(uri, root))
    return uri


USER_VAR, PASS_VAR = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"
CRED_HINT = (f"export {USER_VAR} and {PASS_VAR}, or set tracking_credentials (config/config.yaml or "
             f"--config) to the credentials file that `scripts/cluster/mlflow_server.sh start` printed")


def _tls_context():
    """The TLS settings MLflow's own client honours, applied to our urllib probes too."""
    import ssl

    if os.environ.get("MLFLOW_TRACKING_INSECURE_TLS", "").strip().lower() in ("true", "1"):
        return ssl._create_unverified_context()
    cert = os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH")
    return ssl.create_default_context(cafile=cert) if cert else None


def _check_uri_has_no_secret(uri: str) -> None:
    from urllib.parse import urlsplit

    if urlsplit(uri).password is not None:
        # never echo the URI: it holds the secret
        raise UserError(f"tracking_uri carries a password (it would show in argv, logs and mlflow_runs.json); "
                        f"remove 'user:password@' from it and {CRED_HINT}")


def _read_creds_file(path: Path) -> tuple[str | None, str | None]:
    cp = configparser.ConfigParser(interpolation=None)
    try:
        cp.read(path)
    except configparser.Error:
        raise UserError(f"{path} is not an MLflow credentials file ([mlflow] with mlflow_tracking_username "
                        f"and mlflow_tracking_password)") from None
    sec = cp["mlflow"] if "mlflow" in cp else {}
    return sec.get(USER_VAR.lower()) or None, sec.get(PASS_VAR.lower()) or None


def credentials(creds_file: str | Path | None, root: Path) -> tuple[str | None, str | None, str]:
    """(username, password, where they came from), in MLflow's order: its environment variables, then
    a credentials file (`tracking_credentials`, else MLflow's default ~/.mlflow/credentials)."""
    env_user, env_pw = os.environ.get(USER_VAR) or None, os.environ.get(PASS_VAR) or None
    if creds_file:
        path = Path(creds_file).expanduser()
        path = path if path.is_absolute() else root / path
        if not path.is_file():
            raise UserError(f"tracking_credentials names {path}, which is not a file; {CRED_HINT}")
        source = str(path)
    else:
        path, source = Path.home() / ".mlflow" / "credentials", "~/.mlflow/credentials"
    file_user, file_pw = _read_creds_file(path) if path.is_file() else (None, None)
    user, pw = env_user or file_user, env_pw or file_pw
    if env_user and env_pw:
        source = f"{USER_VAR}/{PASS_VAR}"
    return user, pw, source


@contextlib.contextmanager
def login_env(creds_file: str | Path | None, root: Path) -> Iterator[tuple[str | None, str | None, str]]:
    """The login of `credentials`, put for the duration into MLflow's variables of this process (where
    its client reads it on every request); the previous values come back afterwards."""
    user, pw, source = credentials(creds_file, root)
    saved = {k: os.environ.get(k) for k in (USER_VAR, PASS_VAR)}
    if user and pw:
        os.environ[USER_VAR], os.environ[PASS_VAR] = user, pw
    try:
        yield user, pw, source
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _check_server(uri: str) -> None:
    """Fail in seconds, not minutes: MLflow's own HTTP client retries an unreachable server for ~2 min."""
    import ssl
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=10, context=_tls_context()).close()
    except urllib.error.HTTPError:
        pass  # the server answered: reachable
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ssl.SSLError):
            raise UserError(
                f"the TLS certificate of the MLflow tracking server {uri} is not trusted ({reason}); set "
                f"MLFLOW_TRACKING_SERVER_CERT_PATH to its certificate or CA bundle "
                f"(MLFLOW_TRACKING_INSECURE_TLS=true skips the check)") from None
        raise UserError(
            f"cannot reach the MLflow tracking store {uri} ({reason}); start the server "
            f"(see README, 'MLflow') or fix tracking_uri in config/config.yaml (or set tracking: false)"
        ) from None


def _check_login(uri: str, user: str | None, pw: str | None, source: str) -> None:
    """One read before any write, so a missing or wrong login fails the job with nothing half-written."""
    import base64
    import urllib.error
    import urllib.request

    req = urllib.request.Request(uri.rstrip("/") + "/api/2.0/mlflow/experiments/search?max_results=1")
    if user and pw:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode())
    try:
        urllib.request.urlopen(req, timeout=60, context=_tls_context()).close()
    except urllib.error.HTTPError as exc:
        if exc.code == 401 and not (user and pw):
            raise UserError(f"the MLflow tracking server {uri} requires a login and none is set: {CRED_HINT}") from None
        if exc.code == 401:
            raise UserError(f"the MLflow tracking server {uri} refused the login of user '{user}' (HTTP 401; "
                            f"login from {source}): {CRED_HINT}") from None
        if exc.code == 403:
            raise UserError(f"user '{user}' may not read experiments on {uri} (HTTP 403): log in as the pipeline "
                            f"user ({CRED_HINT})") from None
        # anything else is for MLflow's client to report (with its retries)
    except (urllib.error.URLError, OSError):
        pass  # reachable a moment ago (_check_server): a slow answer is for MLflow's retries too


def client(uri: str, root: Path, login: tuple[str | None, str | None, str] | None = None):
    """An MlflowClient on `uri`, checked to answer (and, for a server, to accept `login`, by default
    the one `credentials` finds) before the caller writes anything."""
    import logging

    if uri.startswith("http"):
        _check_uri_has_no_secret(uri)
        _check_server(uri)
        _check_login(uri, *(login or credentials(None, root)))
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "3")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")

    import mlflow  # noqa: F401  (heavy: only the ingesting rule pays for it)
    from mlflow.tracking import MlflowClient

    logging.getLogger("alembic").setLevel(logging.WARNING)
    uri = resolve_uri(uri, root)
    try:
        c = MlflowClient(tracking_uri=uri)
        retry(lambda: c.search_experiments(max_results=1))  # creates/upgrades the schema once
    except Exception as exc:
        raise UserError(
            f"cannot reach the MLflow tracking store {uri} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
            f"start the server or fix tracking_uri in config/config.yaml (or set tracking: false)"
        ) from None
    return c


def ingest_study(uri: str, root: Path, scale: str, study: str, runs: list[Path],
                 figures_dir: Path | None = None, credentials_file: str | Path | None = None) -> dict[str, str]:
    """Log each finished run dir (metrics.json, curves.parquet, train.json) as one MLflow run.

    Re-ingesting a (method, seed) replaces its previous run (soft-deleted), so the experiment holds
    exactly one active run per (method, seed). Returns {"method/seedN": run_id}.

    `figures_dir` (results/<scale>/figures/<study>/): the study's figures (PNGs, their captions and
    figures.json) are logged as artifacts under `figures/` of every run of the study, since each
    figure aggregates all of them; open any run of the experiment to see them.

    `credentials_file`: the login for a tracking server (see `credentials`).
    """
    server = uri.startswith("http")
    if server:
        _check_uri_has_no_secret(uri)  # before the URI appears in any message
    with store_lock(uri, root), (login_env(credentials_file, root) if server else contextlib.nullcontext()) as login:
        c = client(uri, root, login)
        exp_name = f"{scale}/{study}"
        exp = retry(lambda: c.get_experiment_by_name(exp_name))
        if exp is None:
            artifacts = (root / "mlartifacts" / scale / study).resolve()
            exp_id = retry(lambda: c.create_experiment(exp_name, artifact_location=artifacts.as_uri()))
        else:
            exp_id = exp.experiment_id
            if exp.lifecycle_stage == "deleted":
                retry(lambda: c.restore_experiment(exp_id))
        out = {}
        for run_dir in runs:
            try:
                out.update(_ingest_run(c, exp_id, Path(run_dir), figures_dir))
            except Exception as exc:
                if getattr(exc, "error_code", "") == "PERMISSION_DENIED" or "error code 403" in str(exc):
                    raise UserError(
                        f"user '{login[0] if login else None}' may not write experiment {exp_name} on {uri} (HTTP 403): "
                        f"log in as the user that created it (the pipeline user), or have the server's admin "
                        f"grant EDIT/MANAGE on it (README, 'Tracking on a cluster')") from None
                raise
        return out


def _ingest_run(c, exp_id: str, run_dir: Path, figures_dir: Path | None = None) -> dict[str, str]:
    rec = json.loads((run_dir / "metrics.json").read_text())
    method, seed = rec["method"], rec["seed"]
    old = retry(lambda: c.search_runs(
        [exp_id], filter_string=f"tags.method = '{method}' and tags.seed = '{seed}'"))
    tags = {
        "study": rec["study"], "method": method, "seed": str(seed), "scale": rec["scale"],
        "git_commit": rec["git_commit"], "config_hash": rec["config_hash"],
        "code_hash": rec["code_hash"], "data_hash": rec["data_hash"],
        "paper_method": str(rec.get("paper_method", False)).lower(),
        "mlflow.runName": f"{method}/seed{seed}",
    }
    run = retry(lambda: c.create_run(exp_id, tags=tags))
    rid = run.info.run_id
    try:
        _fill_run(c, rid, rec, run_dir, figures_dir)
    except BaseException:
        # a run that failed half-way is removed, so the experiment never shows a partial run; the
        # previous run of this (method, seed) is kept until its replacement is complete
        with contextlib.suppress(Exception):
            c.delete_run(rid)
        raise
    for prev in old:
        retry(lambda: c.delete_run(prev.info.run_id))
    return {f"{method}/seed{seed}": rid}


def _fill_run(c, rid: str, rec: dict, run_dir: Path, figures_dir: Path | None) -> None:
    import pandas as pd
    from mlflow.entities import Metric, Param

    now = int(time.time() * 1000)
    params = [Param(k, str(v)[:_MAX_PARAM]) for k, v in sorted(rec["params"].items())]
    metrics = [Metric(metric_key(r["setting"], r["metric"]), float(r["value"]), now, 0) for r in rec["metrics"]]
    curves = run_dir / "curves.parquet"
    if curves.exists():
        cf = pd.read_parquet(curves)
        metrics += [
            Metric(metric_key("curve", s, m), float(v), now, int(st))
            for s, m, st, v in cf[["setting", "metric", "step", "value"]].itertuples(index=False)
        ]
    for i in range(0, len(params), 100):
        retry(lambda: c.log_batch(rid, params=params[i:i + 100]))
    for i in range(0, len(metrics), 1000):
        retry(lambda: c.log_batch(rid, metrics=metrics[i:i + 1000]))
    for name in ("metrics.json", "train.json", "curves.parquet"):
        if (run_dir / name).exists():
            retry(lambda: c.log_artifact(rid, str(run_dir / name)))
    if figures_dir is not None:
        for f in sorted(Path(figures_dir).iterdir()):
            if f.is_file() and f.suffix in (".png", ".svg", ".pdf", ".json", ".rst"):
                retry(lambda: c.log_artifact(rid, str(f), artifact_path="figures"))
    retry(lambda: c.set_terminated(rid, "FINISHED"))
