"""Secrets and users of the authenticated tracking server (called by mlflow_server.sh; stdlib only).

    mlflow_auth.py init STATE            first start: random passwords, credentials file, auth config
    mlflow_auth.py users STATE URL       create the pipeline and reader users (admin login, REST)
    mlflow_auth.py pgpass STATE PWFILE   a libpq password file for a PostgreSQL backend

Every secret is written to a file only its owner can read and is never printed, passed on a command
line or put in the environment: `ps` shows every user's arguments (and, to the owner and root, the
environment).
"""
from __future__ import annotations

import base64
import configparser
import json
import os
import secrets
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path

ADMIN, PIPELINE, READER = "admin", "pipeline", "reader"
# The [mlflow] section is MLflow's own credentials-file format (~/.mlflow/credentials), so the file
# works as-is for the pipeline (tracking_credentials) and for any MLflow client; the other sections
# are for the people running the server.
SECTIONS = {"mlflow": PIPELINE, "admin": ADMIN, "reader": READER}
KEY_USER, KEY_PASS = "mlflow_tracking_username", "mlflow_tracking_password"


def _write_private(path: Path, text: str) -> None:
    """Create `path` with mode 600 from the start (no window in which it is readable by others)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def paths(state: Path) -> dict[str, Path]:
    auth = state / "auth"
    return {"auth": auth, "credentials": state / "credentials", "ini": auth / "basic_auth.ini",
            "db": auth / "basic_auth.db", "secret_key": auth / "flask_secret_key"}


def read_credentials(path: Path) -> dict[str, tuple[str, str]]:
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(path)
    return {sec: (cp[sec][KEY_USER], cp[sec][KEY_PASS]) for sec in SECTIONS if sec in cp}


def init(state: Path) -> None:
    p = paths(state)
    p["auth"].mkdir(parents=True, exist_ok=True)
    os.chmod(p["auth"], 0o700)
    if not p["credentials"].exists():
        # token_urlsafe: no characters that need quoting in an ini file or a URL
        creds = {sec: (user, secrets.token_urlsafe(24)) for sec, user in SECTIONS.items()}
        lines = ["# MLflow tracking server logins, written by scripts/cluster/mlflow_server.sh on first start.",
                 "# [mlflow]: the pipeline user (may write; MLflow's credentials-file format: set",
                 "#   tracking_credentials to this file, or copy the section to ~/.mlflow/credentials).",
                 "# [admin]: manages users and permissions. [reader]: browses the UI (read-only).", ""]
        for sec, (user, pw) in creds.items():
            lines += [f"[{sec}]", f"{KEY_USER} = {user}", f"{KEY_PASS} = {pw}", ""]
        _write_private(p["credentials"], "\n".join(lines))
    admin_pw = read_credentials(p["credentials"])["admin"][1]
    # MLflow reads the admin password only to create the admin on an empty user database.
    _write_private(p["ini"], "\n".join([
        "[mlflow]",
        # every logged-in user may read every experiment; an experiment's creator (the pipeline user)
        # may also write and delete in it
        "default_permission = READ",
        f"database_uri = sqlite:///{p['db']}",
        f"admin_username = {ADMIN}",
        f"admin_password = {admin_pw}",
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth",
        # Each login check is a deliberately slow password hash (about 0.5 CPU-s): without the cache
        # every tracking call pays it. Cost: a changed password may still work for 60 s on other workers.
        "auth_cache_ttl_seconds = 60",
        "",
    ]))
    if not p["secret_key"].exists():
        _write_private(p["secret_key"], secrets.token_hex(32))


def _request(url: str, method: str, login: tuple[str, str], body: dict | None = None) -> tuple[int, dict]:
    token = base64.b64encode(f"{login[0]}:{login[1]}".encode()).decode()
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"})
    # Our own server on an address of this host, just started: a self-signed or CA certificate for
    # another name must not stop the setup.
    ctx = ssl._create_unverified_context() if url.startswith("https") else None
    try:
        with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except ValueError:
            return exc.code, {}


def users(state: Path, url: str) -> int:
    creds = read_credentials(paths(state)["credentials"])
    admin = creds["admin"]
    for sec in ("mlflow", "reader"):
        user, pw = creds[sec]
        code, out = _request(f"{url}/api/2.0/mlflow/users/create", "POST", admin, {"username": user, "password": pw})
        if code != 200 and out.get("error_code") != "RESOURCE_ALREADY_EXISTS":
            print(f"mlflow_auth: cannot create user '{user}' (HTTP {code} {out.get('error_code', '')}); "
                  f"is the admin password in {paths(state)['credentials']} still the server's?", file=sys.stderr)
            return 4
    code, _ = _request(f"{url}/api/2.0/mlflow/experiments/search?max_results=1", "GET", creds["mlflow"])
    if code != 200:
        print(f"mlflow_auth: the pipeline user cannot log in (HTTP {code})", file=sys.stderr)
        return 4
    return 0


def pgpass(state: Path, pwfile: Path) -> None:
    """libpq's password file (https://www.postgresql.org/docs/current/libpq-pgpass.html), used through
    PGPASSFILE: the backend URI then carries no password, so neither argv nor the environment does."""
    pw = pwfile.read_text().strip("\r\n")
    esc = pw.replace("\\", "\\\\").replace(":", "\\:")
    _write_private(state / "pgpass", f"*:*:*:*:{esc}\n")


if __name__ == "__main__":
    cmd, state = sys.argv[1], Path(sys.argv[2])
    if cmd == "init":
        init(state)
    elif cmd == "users":
        sys.exit(users(state, sys.argv[3].rstrip("/")))
    elif cmd == "pgpass":
        pgpass(state, Path(sys.argv[3]))
    else:
        sys.exit(f"mlflow_auth.py: unknown command {cmd}")
