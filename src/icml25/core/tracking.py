"""MLflow as the index over the run files (the files stay the source of truth).

One experiment per `{scale}/{study}`, one run per (method, seed). Training jobs never touch MLflow:
a single writer per study ingests the finished runs with batched calls. With the SQLite default the
writer also holds an exclusive file lock, so two studies ingesting at once never race on schema
creation or hit `database is locked`; transient errors are retried and a run that still cannot be
logged is an error, never skipped.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
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


def _check_server(uri: str) -> None:
    """Fail in seconds, not minutes: MLflow's own HTTP client retries an unreachable server for ~2 min."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=10).close()
    except urllib.error.HTTPError:
        pass  # the server answered: reachable
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UserError(
            f"cannot reach the MLflow tracking store {uri} ({reason}); start the server "
            f"(see README, 'MLflow') or fix tracking_uri in config/config.yaml (or set tracking: false)"
        ) from None


def client(uri: str, root: Path):
    import logging
    import os

    if uri.startswith("http"):
        _check_server(uri)
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
                 figures_dir: Path | None = None) -> dict[str, str]:
    """Log each finished run dir (metrics.json, curves.parquet, train.json) as one MLflow run.

    Re-ingesting a (method, seed) replaces its previous run (soft-deleted), so the experiment holds
    exactly one active run per (method, seed). Returns {"method/seedN": run_id}.

    `figures_dir` (results/<scale>/figures/<study>/): the study's figures (PNGs, their captions and
    figures.json) are logged as artifacts under `figures/` of every run of the study, since each
    figure aggregates all of them; open any run of the experiment to see them.
    """
    with store_lock(uri, root):
        c = client(uri, root)
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
            out.update(_ingest_run(c, exp_id, Path(run_dir), figures_dir))
        return out


def _ingest_run(c, exp_id: str, run_dir: Path, figures_dir: Path | None = None) -> dict[str, str]:
    import pandas as pd
    from mlflow.entities import Metric, Param, RunTag

    rec = json.loads((run_dir / "metrics.json").read_text())
    method, seed = rec["method"], rec["seed"]
    old = retry(lambda: c.search_runs(
        [exp_id], filter_string=f"tags.method = '{method}' and tags.seed = '{seed}'"))
    for run in old:
        retry(lambda: c.delete_run(run.info.run_id))
    tags = {
        "study": rec["study"], "method": method, "seed": str(seed), "scale": rec["scale"],
        "git_commit": rec["git_commit"], "config_hash": rec["config_hash"],
        "code_hash": rec["code_hash"], "data_hash": rec["data_hash"],
        "paper_method": str(rec.get("paper_method", False)).lower(),
        "mlflow.runName": f"{method}/seed{seed}",
    }
    run = retry(lambda: c.create_run(exp_id, tags=tags))
    rid = run.info.run_id
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
    return {f"{method}/seed{seed}": rid}
