"""code_review's full-scale reviewer through an OpenAI-compatible endpoint (engines.ServedEngine), against a
local stand-in of vLLM's /v1/chat/completions: what the engine sends (the paper's role instructions, n samples,
the run's temperature and seed) and how it reads the reply."""
from __future__ import annotations

import json
import threading
from pathlib import Path
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from icml25.studies.code_review import engines


class _Tok:
    def encode(self, text):
        return text.split()


@pytest.fixture()
def server():
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, self.headers.get("Authorization"), body))
            # choices out of order: the engine must return them by index
            out = {"choices": [{"index": i, "message": {"content": f"+{i + 3}|logic|5 6 {body['seed'] % 7}"}}
                               for i in reversed(range(body["n"]))]}
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1", seen
    httpd.shutdown()


def test_reviewers_are_n_samples_of_one_request_with_the_papers_role(server, monkeypatch):
    url, seen = server
    monkeypatch.setenv("CR_KEY", "secret")
    eng = engines.ServedEngine({"base_url": url + "/", "model": "m", "api_key_env": "CR_KEY"}, tokenizer=_Tok())
    out = eng.generate("<|review|>+3|int x = y;<|out|>", n=3, temperature=0.8, seed=12)
    assert out == ["+3|logic|5 6 5", "+4|logic|5 6 5", "+5|logic|5 6 5"]
    path, auth, body = seen[0]
    assert path == "/v1/chat/completions" and auth == "Bearer secret"
    assert (body["model"], body["n"], body["temperature"], body["seed"]) == ("m", 3, 0.8, 12)
    system, user = body["messages"]
    assert system == {"role": "system", "content": engines.REVIEWER}
    assert user["role"] == "user" and "<|" not in user["content"] and user["content"].endswith("Answer:")


def test_validator_prompts_get_the_validator_role_and_batches_keep_their_order(server):
    url, seen = server
    eng = engines.ServedEngine({"base_url": url, "model": "m", "workers": 4}, tokenizer=_Tok())
    prompts = [f"<|validate|>+{i}|x<|cand|>+{i}|logic|5 5 5<|out|>" for i in range(6)]
    out = eng.generate_batch(prompts, n=1, temperature=0.0, seed=0)
    assert [len(o) for o in out] == [1] * 6
    users = {b["messages"][1]["content"] for _, _, b in seen}
    assert len(users) == 6 and all(b["messages"][0]["content"] == engines.VALIDATOR for _, _, b in seen)
    assert all("Candidate: " in u for u in users)
    assert eng.n_tokens("a b c") == 3


def test_full_scale_config_uses_the_served_engine_and_skips_training(tmp_path):
    from icml25.core import config as icfg
    from icml25.studies.code_review import study

    root = Path(__file__).resolve().parents[3]
    cfg = icfg.effective(icfg.load_study(root, "code_review"), "full")
    assert cfg["engine"]["kind"] == "openai" and cfg["engine"]["base_url"].endswith("/v1")
    study.fit_base(cfg, tmp_path, tmp_path)   # a served LLM: fit_base records it and trains nothing
    assert json.loads((tmp_path / "engine.json").read_text()) == cfg["engine"]
