"""A warm interpreter that forks the pipeline's jobs, so that each job does not import torch and the other heavy
libraries again (issue 55: a job that builds a GPT-2 spends ≈ 4 CPU-s importing torch and transformers and ≈ 1 s
tearing its interpreter down, before and after any work).

Snakemake starts one server per local run (the Snakefile's `onstart`) and stops it at the end. The server
imports `icml25` (so the numeric pins are set as in a fresh job) and then PRELOAD, and does nothing else: no
tensor op runs in it, so no BLAS or OpenMP thread pool exists when it forks. A job's recorder
(`icml25 <stage> --cpu-record ...`, cli._run_recorded) sends its argv, cwd, environment and stdin/stdout/stderr
over a UNIX socket; the server forks; the child takes over those descriptors, cwd and environment and runs the
stage exactly as `python -m icml25.cli` would, then reports its exit code and its own CPU (getrusage of the
child, which starts at zero at fork) and exits without interpreter teardown, as multiprocessing's forked
children do. The study's code and every number it computes are the same as in a fresh interpreter
(tests/core/test_forkserver.py, and the smoke identity test runs one tree with the server and one without).

A recorder uses the server only where it is safe, else runs the stage in a fresh interpreter as before: no
socket named in the environment, another host (a cluster job), or an environment that differs from the
server's in a variable read when a library loads (the pins, thread counts, PYTHONPATH, ...).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path

SOCKET_VAR = "ICML25_FORK_SOCKET"
HOST_VAR = "ICML25_FORK_HOST"
# Imported once in the server; a child imports whatever else its stage needs. Third-party only: the project's
# own modules load fresh in every child, so a run sees the code as it is on disk.
PRELOAD = ("numpy", "scipy.stats", "scipy.optimize", "scipy.linalg", "pandas", "sklearn.linear_model", "torch",
           "torch.nn", "transformers", "transformers.modeling_utils", "transformers.models.gpt2.modeling_gpt2",
           "transformers.models.llama.modeling_llama", "transformers.tokenization_utils_fast", "tokenizers", "PIL.Image")
# Variables a library reads when it loads (or that decide what loads): a job whose value differs from the
# server's runs in a fresh interpreter instead.
IMPORT_VARS = ("MKL_", "OMP_", "KMP_", "OPENBLAS_", "GOTO", "ATEN_", "NPY_", "DNNL_", "ONEDNN_", "TORCH", "PYTORCH",
               "CUDA", "PYTHON", "HF_", "TRANSFORMERS", "TOKENIZERS", "LD_", "ICML25_")
_HEADER = struct.Struct("!I")


def import_env(env) -> dict:
    """The part of an environment that decides how the preloaded libraries were set up."""
    return {k: v for k, v in env.items() if k.startswith(IMPORT_VARS) and k not in (SOCKET_VAR, HOST_VAR)}


# ---- the client (a job's recorder) ----

def run(argv: list[str], env=None):
    """Run `icml25 <argv>` in a child of the server: (exit code, {user_s, system_s, max_rss_mb}), or None where
    no server may take it (the caller then runs the stage itself). Signals to this process go to the child."""
    env = dict(os.environ if env is None else env)
    path = env.get(SOCKET_VAR)
    if not path or env.get(HOST_VAR) != socket.gethostname() or not Path(path).exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        body = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": env, "python": _interpreter(),
                           "path": sys.path[1:]}).encode()
        socket.send_fds(sock, [_HEADER.pack(len(body))], [0, 1, 2])
        sock.sendall(body)
        reader = sock.makefile("r")
        first = json.loads(reader.readline() or "{}")
    except (OSError, ValueError):
        sock.close()
        return None
    if "pid" not in first:  # refused (first["refused"] says why): a fresh interpreter instead
        sock.close()
        return None
    pid = first["pid"]
    old = {s: signal.signal(s, lambda n, _f: _forward(pid, n)) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        line = reader.readline()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        sock.close()
    if not line:  # the child died without reporting (killed): its status is not ours to read
        print(f"icml25: the stage's process {pid} ended without an exit status (killed?)", file=sys.stderr)
        return 1, None
    done = json.loads(line)
    return int(done["rc"]), done["usage"]


def _interpreter() -> list[str]:
    """Which Python: `python` and `python3` of one venv (copies or links) are the same interpreter."""
    return [sys.prefix, sys.base_prefix, sys.version]


def _forward(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# ---- the server ----

def serve(path: Path, target: str = "icml25.cli:main") -> None:
    """Preload, then fork one child per request on the socket at `path` until SIGTERM or the parent's exit.
    Each child calls `target` (module:function, given the argv list; the CLI's main unless a test names another)."""
    import importlib

    die_with_parent(signal.SIGTERM)
    parent = os.getppid()
    # no BLAS / OpenMP pool may exist at fork; each child sets its own thread count (runtime.set_threads)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    start = time.process_time()
    import icml25  # noqa: F401  (the numeric pins, before any library loads)

    own = import_env(os.environ)  # as a job's recorder sees it after its own `import icml25`
    before = dict(os.environ)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    # what the libraries set while loading (e.g. KMP_INIT_AT_FORK): a fresh job would have it after its imports
    own_added = {k: v for k, v in os.environ.items() if k not in before}
    print(f"forkserver {os.getpid()}: preloaded {len(PRELOAD)} modules in {time.process_time() - start:.1f} CPU-s",
          flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    listener.settimeout(1.0)
    served = 0
    try:
        while os.getppid() == parent:
            _reap()
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            served += _handle(conn, listener, own, own_added, target)
    finally:
        listener.close()
        Path(path).unlink(missing_ok=True)
        try:
            Path(path).parent.rmdir()  # start()'s private directory (left alone if anything else is in it)
        except OSError:
            pass
        print(f"forkserver {os.getpid()}: {served} jobs forked, own CPU {time.process_time():.1f} s", flush=True)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _handle(conn: socket.socket, listener: socket.socket, own: dict, added: dict, target: str) -> int:
    """Read one request and fork its child; 1 if forked."""
    fds: list[int] = []
    try:
        conn.settimeout(30)
        head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
        (n,) = _HEADER.unpack(head)
        body = b""
        while len(body) < n:
            chunk = conn.recv(n - len(body))
            if not chunk:
                raise OSError("short request")
            body += chunk
        req = json.loads(body)
        why = _refusal(req, own, fds)
        if why:
            print(f"forkserver: refused {' '.join(req['argv'][:3])}: {why}", flush=True)
            conn.sendall((json.dumps({"refused": why}) + "\n").encode())
            return 0
        req["env"] = {**added, **req["env"]}
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(conn, listener, req, fds, target)  # never returns
        return 1
    except (OSError, ValueError, KeyError):
        return 0
    finally:
        for fd in fds:
            os.close(fd)
        conn.close()


def _refusal(req: dict, own: dict, fds: list[int]) -> str:
    if len(fds) != 3:
        return "no stdin/stdout/stderr"
    if req["python"] != _interpreter():
        return f"another interpreter ({req['python']})"
    if req["path"] != sys.path[1:]:
        return f"another sys.path ({os.pathsep.join(req['path'])})"
    theirs = import_env(req["env"])
    diff = sorted(k for k in set(own) | set(theirs) if own.get(k) != theirs.get(k))
    # a thread count is set again by the job itself (runtime.set_threads), as in a fresh interpreter
    diff = [k for k in diff if not k.endswith("_NUM_THREADS")]
    return f"environment differs in {', '.join(diff)}" if diff else ""


def _child(conn: socket.socket, listener: socket.socket, req: dict, fds: list[int], target: str) -> None:
    """The job: the recorder's descriptors, cwd and environment, then the stage as `python -m icml25.cli` runs it."""
    import atexit
    import threading
    import traceback

    rc = 1
    try:
        listener.close()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        fds.clear()
        os.chdir(req["cwd"])
        sys.path[0] = req["cwd"]  # as `python -m` puts it
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = [str(Path(__file__).parents[1] / "cli.py"), *req["argv"]]
        if "numpy" in sys.modules:  # numpy's legacy global generator: fresh entropy, as in a new interpreter
            sys.modules["numpy"].random.seed()
        _name(f"icml25:{req['argv'][0] if req['argv'] else ''}")  # what top shows for the job
        conn.settimeout(None)
        conn.sendall((json.dumps({"pid": os.getpid()}) + "\n").encode())
        # the recorder gone (its job cancelled, Snakemake killed): this job goes too
        threading.Thread(target=_exit_when_closed, args=(conn,), daemon=True).start()
        import importlib

        module, _, func = target.partition(":")
        rc = getattr(importlib.import_module(module), func)(req["argv"])
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        rc = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
        rc = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        import resource

        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        usage = {"user_s": me.ru_utime + kids.ru_utime, "system_s": me.ru_stime + kids.ru_stime,
                 "max_rss_mb": max(me.ru_maxrss, kids.ru_maxrss) / 1024}
        conn.sendall((json.dumps({"rc": int(rc or 0), "usage": usage}) + "\n").encode())
    finally:
        os._exit(int(rc or 0) & 0xFF)


def _exit_when_closed(conn: socket.socket) -> None:
    try:
        conn.recv(1)
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGKILL)


def _prctl(option: int, arg) -> None:
    """Linux prctl(2); a no-op where there is none."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, arg)
    except (OSError, AttributeError):
        pass


def _name(name: str) -> None:
    _prctl(15, name.encode()[:15])  # PR_SET_NAME


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Get `sig` when the parent dies (PR_SET_PDEATHSIG)."""
    _prctl(1, int(sig))


# ---- the Snakefile's side ----

class Handle:
    """A started server: its process and socket (stop() ends it)."""

    def __init__(self, proc, path: Path):
        self.proc, self.path = proc, path

    def wait(self, timeout: float = 60) -> bool:
        """Whether the server listens within `timeout` s (it preloads first: a few CPU-s)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.proc.poll() is None:
            if self.path.exists():
                return True
            time.sleep(0.1)
        return self.path.exists()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()
        self.path.unlink(missing_ok=True)
        try:
            self.path.parent.rmdir()
        except OSError:
            pass
        for var in (SOCKET_VAR, HOST_VAR):
            os.environ.pop(var, None)


def start(log: Path, target: str | None = None) -> Handle:
    """Start a server for this process's jobs and name it in os.environ (inherited by every job's shell). The
    socket lives in a fresh 0700 directory; jobs that start before it listens run in fresh interpreters."""
    import subprocess
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="icml25-fork-")) / "sock"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "icml25.core.forkserver", str(path), *([target] if target else [])],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    os.environ[SOCKET_VAR] = str(path)
    os.environ[HOST_VAR] = socket.gethostname()
    return Handle(proc, path)


if __name__ == "__main__":
    serve(Path(sys.argv[1]), *sys.argv[2:3])
