"""ralu at smoke scale through the real `snakemake` CLI (table, claims, figures), the leak tests on that
run (corrupting the gold answers leaves the outputs unchanged; without the judge RaLU is PoT), and the
full-scale paths on local stand-ins: GSM8K JSONL over HTTP, an OpenAI-compatible endpoint with logprobs."""
from __future__ import annotations

import http.server
import json
import math
import threading

from conftest import copy_study_tree


# this study's methods in the session's shared smoke run (conftest.study_smoke): fewer jobs, every stage runs
SMOKE_METHODS = ["ralu", "pot"]


def test_snakemake_smoke_then_leak_checks(study_smoke, tmp_path):
    from icml25 import cli
    from icml25.core import config, manifest
    from icml25.studies.ralu import data as D
    from icml25.studies.ralu import methods as M
    from icml25.studies.ralu.llm import LocalLM
    from icml25.studies.ralu.study import score

    # the session's one smoke run through the snakemake CLI, copied out: the leak test below changes its files
    root = copy_study_tree(study_smoke("ralu"), "ralu", tmp_path / "wf")
    tables = root / "results" / "smoke" / "tables"
    md = (tables / "ralu.md").read_text()
    assert "+1.22" in md and "## Claims" in md and "trained judge" in md
    claims = {c["id"]: c for c in json.loads((tables / "ralu.claims.json").read_text())["claims"]}
    assert claims["gsm8k_gain"]["verdict"] == "n.a."  # full-scale set: n.a. with its reason
    assert claims["cfg_units_beat_lines"]["verdict"] == "n.a."  # ablation not run here
    assert claims["ralu_beats_pot_and_refine"]["verdict"] == "n.a."  # self_refine not run here
    figs = json.loads((root / "results" / "smoke" / "figures" / "ralu" / "figures.json").read_text())
    assert {f["name"] for f in figs["figures"]} == {"accuracy", "tokens_vs_accuracy", "units_fix_rate"}
    assert all(f["caption"] for f in figs["figures"])

    # leak test: the methods never read the answers
    run = root / "results" / "smoke" / "ralu" / "ralu" / "seed0"
    before = (run / "outputs.jsonl").read_text()
    data = root / "data" / "processed" / "smoke" / "ralu"
    answers = D.read_jsonl(data / "answers.jsonl")
    (data / "answers.jsonl").write_text("".join(json.dumps({**a, "answer": "-999"}) + "\n" for a in answers))
    manifest.write(data, study="ralu", scale="smoke", stage="preprocess")  # a deliberate, re-stamped change
    base = ["--root", str(root), "--scale", "smoke", "--study", "ralu"]
    assert cli.main(["train", *base, "--method", "ralu", "--seed", "0"]) == 0
    assert (run / "outputs.jsonl").read_text() == before

    # with the judge disabled, RaLU is PoT for the same seed (same model, same sampling streams)
    cfg = config.effective(config.load_study(root, "ralu"), "smoke")
    lm = LocalLM(root / "results" / "smoke" / "ralu" / "base" / "seed0", 0.7, 0.3)
    qs = D.read_jsonl(data / "questions.jsonl")
    opt = M.Options(max_program_tokens=int(cfg["generation"]["max_program_tokens"]))
    off = M.drive([M.ralu(q["question"], 0, q["id"], M.Options(judge=False, max_program_tokens=opt.max_program_tokens))
                   for q in qs], lm)
    pot = M.drive([M.pot(q["question"], 0, q["id"], opt) for q in qs], lm)
    assert [r["programs"] for r in off] == [r["programs"] for r in pot]
    pot_run = D.read_jsonl(root / "results" / "smoke" / "ralu" / "pot" / "seed0" / "outputs.jsonl")
    assert [r["programs"] for r in pot_run] == [r["programs"] for r in pot]

    # the scorer: gold programs score 100 %, and the sandbox (not the pipeline) runs them
    rawd = root / "data" / "raw" / "smoke" / "ralu"
    gold = D.read_jsonl(rawd / "gsm_lite.jsonl")
    outs = [{"id": g["id"], "set": "gsm_lite", "programs": [g["program"]], "initial": "x = 0", "out_tokens": 1,
             "in_tokens": 1, "calls": 1, "units": 0, "fixed": 0, "judged": 0, "disagree": None} for g in gold]
    rows = {r["metric"]: r["value"] for r in score(cfg, outs, {g["id"]: g["answer"] for g in gold})}
    assert rows["accuracy"] == 100.0 and rows["initial_accuracy"] == 0.0


def test_full_scale_gsm8k_loader_on_a_local_jsonl(tmp_path, file_server):
    from icml25.studies.ralu import data as D

    site = tmp_path / "site"
    site.mkdir()
    rows = [{"question": "Ann has 3 pens and buys 4. How many?", "answer": "3 + 4 = 7\n#### 7"},
            {"question": "Big?", "answer": "so\n#### 1,234"}]
    (site / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    url = file_server(site)
    cfg = {"data": {"n_train": 0, "held_out_frac": 0.1, "template_seed": 0, "seed": 0, "sets": ["gsm8k"],
                    "eval_sets": {"gsm8k": {"source": "url_jsonl", "url": f"{url}/test.jsonl"}}}}
    raw, out = tmp_path / "raw", tmp_path / "out"
    D.download(cfg, raw)
    D.preprocess(cfg, raw, out)
    qs, ans = D.read_jsonl(out / "questions.jsonl"), D.read_jsonl(out / "answers.jsonl")
    assert [q["question"] for q in qs] == [r["question"] for r in rows]
    assert all("answer" not in q for q in qs)
    assert [a["answer"] for a in ans] == ["7", "1234"]


class _FakeChat(http.server.BaseHTTPRequestHandler):
    """A stand-in OpenAI-compatible server (test only): echoes a fixed reply with token logprobs."""
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeChat.seen.append(body)
        out = {"choices": [{"message": {"content": "OK\nAnalysis: fine"},
                            "logprobs": {"content": [{"token": "OK", "logprob": math.log(0.9)},
                                                     {"token": "fine", "logprob": math.log(0.5)}]}}],
               "usage": {"prompt_tokens": 11, "completion_tokens": 2}}
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


def test_openai_compatible_endpoint_gives_text_and_logprobs():
    from icml25.studies.ralu.llm import Request, confidence, load_llm

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeChat)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        cfg = {"llm": {"kind": "openai", "base_url": f"http://127.0.0.1:{srv.server_address[1]}/v1", "model": "m"},
               "generation": {"temperature": 0.7, "frequency_penalty": 0.3}, "lm": {}}
        llm = load_llm(cfg, None, 0)
        msgs = [{"role": "system", "content": "judge"}, {"role": "user", "content": "Unit 1: RUN `x = 1`"}]
        (rep,) = llm.generate([Request("judge", msgs, {}, "k", 16)])
        assert rep.text.startswith("OK") and rep.n_out == 2 and rep.n_prompt == 11
        assert abs(confidence(rep) - 70.0) < 1e-9
        body = _FakeChat.seen[-1]
        assert body["logprobs"] is True and body["messages"] == msgs  # the full dialogue state is sent
        assert body["temperature"] == 0.7 and body["frequency_penalty"] == 0.3
    finally:
        srv.shutdown()
        srv.server_close()
