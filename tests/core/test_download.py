"""The shared download function against a real local HTTP server (http.server in a thread)."""
import hashlib
import http.server
import threading

import pytest

from icml25.core import download
from icml25.core.errors import UserError

PAYLOAD = bytes(range(256)) * 400  # 100 kB
SHA = hashlib.sha256(PAYLOAD).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    hits: dict = {}

    def log_message(self, *a):
        pass

    def do_GET(self):
        n = Handler.hits[self.path] = Handler.hits.get(self.path, 0) + 1
        if self.path == "/flaky" and n <= 2:
            self.send_error(503)
            return
        if self.path == "/missing":
            self.send_error(404)
            return
        body = PAYLOAD if self.path != "/corrupt" else PAYLOAD[:-1] + b"x"
        start = 0
        rng = self.headers.get("Range")
        if rng and self.path == "/cut":
            start = int(rng.split("=")[1].split("-")[0])
        if self.path == "/cut" and n == 1:
            # announce the whole body, send half, drop the connection
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        self.wfile.write(body[start:])


@pytest.fixture(scope="module")
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_good_file(server, tmp_path):
    out = download.fetch(server + "/good", tmp_path / "f.bin", SHA, backoff=0.01)
    assert out.read_bytes() == PAYLOAD


def test_corrupt_file_clear_error_nothing_left(server, tmp_path):
    with pytest.raises(UserError, match="checksum mismatch for .*/corrupt: expected sha256"):
        download.fetch(server + "/corrupt", tmp_path / "f.bin", SHA, backoff=0.01)
    assert list(tmp_path.iterdir()) == []


def test_fails_twice_then_succeeds(server, tmp_path):
    out = download.fetch(server + "/flaky", tmp_path / "f.bin", SHA, backoff=0.01)
    assert out.read_bytes() == PAYLOAD and Handler.hits["/flaky"] == 3


def test_cut_transfer_resumes_with_range(server, tmp_path):
    out = download.fetch(server + "/cut", tmp_path / "f.bin", SHA, backoff=0.01)
    assert out.read_bytes() == PAYLOAD and Handler.hits["/cut"] == 2


def test_404_fails_fast(server, tmp_path):
    with pytest.raises(UserError, match="HTTP 404"):
        download.fetch(server + "/missing", tmp_path / "f.bin", SHA, backoff=0.01)
    assert Handler.hits["/missing"] == 1


def test_unreachable_gives_up_with_message(tmp_path):
    with pytest.raises(UserError, match="failed after 2 attempts"):
        download.fetch("http://127.0.0.1:9/x", tmp_path / "f.bin", SHA, retries=2, backoff=0.01, timeout=2)
