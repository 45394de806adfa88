"""The full-scale code path (TOFU files + SatImp's importance annotations through icml25.core.download.fetch,
a causal LM given by path/Hub id loaded with from_pretrained and fine-tuned, unlearning, calibrated ES, the
table) on tiny local stand-ins served by a real HTTP server."""
import hashlib
import json

import pytest
import torch
import yaml

from icml25 import cli
from icml25.studies.satimp import data as D
from icml25.studies.satimp import lm

PER, AUTHORS = 4, 6
PROMPT = {"question_start": "Question: ", "question_end": " ", "answer_tag": "Answer:", "bos": False}


def _records():
    full, fq = [], []
    cities = ["lisbon", "kyoto", "oslo", "lima", "cairo", "hanoi"]
    for a in range(AUTHORS):
        name = f"author{a} surname{a}"
        for k, (q, ans) in enumerate([(f"Where was {name} born?", f"{name} was born in {cities[a]}."),
                                      (f"What does {name} write?", f"{name} writes poems about {cities[-a]} rivers."),
                                      (f"When was {name} born?", f"{name} was born in {1950 + a}."),
                                      (f"Who is the father of {name}?", f"The father of {name} is a baker.")]):
            full.append({"question": q, "answer": ans})
            if a == AUTHORS - 1:
                fq.append({"question": q, "answer": ans, "paraphrased_question": q.replace("Where", "In which city"),
                           "paraphrased_answer": ans, "perturbed_answer": [ans.replace("baker", "pilot")] * 3})
    world = [{"question": "What is the capital of France?", "answer": "Paris.", "perturbed_answer": ["Rome."]},
             {"question": "What is two plus two?", "answer": "Four.", "perturbed_answer": ["Five."]}]
    return full, fq, world


@pytest.fixture
def served(tmp_path, monkeypatch, file_server):
    full, fq, world = _records()
    www = tmp_path / "www"
    www.mkdir()
    jl = lambda recs: "\n".join(json.dumps(r) for r in recs) + "\n"  # noqa: E731  JSON lines, as the Hub
    (www / "full.json").write_text(jl(full))
    (www / "forget10_perturbed.json").write_text(jl(fq))
    (www / "world_facts_perturbed.json").write_text(jl(world))
    torch.save({i: crit for i, crit in enumerate(["hanoi", "poems kyoto rivers", "1955", "baker"])},
               www / "importance_forget10.pth")
    monkeypatch.setitem(D.IMPORTANCE_SHA256, "forget10",
                        hashlib.sha256((www / "importance_forget10.pth").read_bytes()).hexdigest())
    return file_server(www), full, fq, world


def _hub_model(path, texts):
    """A tiny 'pretrained' causal LM saved with save_pretrained: the stand-in of a Hub id."""
    tok = lm.build_word_tokenizer(texts)
    torch.manual_seed(0)
    lm.new_llama(tok, {"hidden": 16, "ffn": 32, "layers": 1, "heads": 2, "max_len": 64}).save_pretrained(path)
    tok.save_pretrained(path)


def _configure(root, url, model_path, methods):
    path = root / "config" / "studies" / "satimp.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["methods"] = methods
    full = raw["scales"]["full"]
    full["seeds"] = [0]
    full["data"].update(forget_splits=["forget10"], qas_per_author=PER, n_retain_eval=PER, n_retain_val=PER,
                        val_authors=1, tofu_url=url, importance_url=url)
    full["prompt"] = PROMPT
    full["model"].update(pretrained=str(model_path), dtype="float32", steps=4, batch_size=8, lr=1e-3, warmup=1)
    full["unlearn"].update(epochs=1, batch_size=2, lr_grid=[1e-3, 3e-3])
    full["variants"] = {}
    path.write_text(yaml.safe_dump(raw))


def test_full_scale_path_on_stand_ins(served, workflow_copy):
    url, full, fq, world = served
    texts = [r["question"] for r in full + fq + world] + [r["answer"] for r in full + fq + world]
    texts += [r["paraphrased_question"] for r in fq] + [a for r in fq + world for a in r["perturbed_answer"]]
    texts += [PROMPT["question_start"], PROMPT["answer_tag"]]
    _hub_model(workflow_copy / "hub_model", texts)
    methods = ["satimp", "impt", "npo_gd"]
    _configure(workflow_copy, url, workflow_copy / "hub_model", methods)
    base = ["--root", str(workflow_copy), "--scale", "full", "--study", "satimp"]
    assert cli.main(["download", *base]) == 0
    assert cli.main(["preprocess", *base]) == 0
    sizes = json.loads((workflow_copy / "data/processed/full/satimp/sizes.json").read_text())
    assert sizes == {"forget10": 4, "val_forget": 4, "retain_eval": 4, "retain_val": 4, "retain_train": 8,
                     "world": 2, "base_train": 24}
    splits = json.loads((workflow_copy / "data/processed/full/satimp/splits.json").read_text())
    assert splits["forget10"][1]["critical"] == "poems kyoto rivers"  # the official annotations, in order
    assert cli.main(["fit-base", *base]) == 0
    rec = json.loads((workflow_copy / "results/full/satimp/base/base.json").read_text())
    assert rec["model_path"] == "model" and rec["vocab"] > 20
    for m in methods:
        assert cli.main(["train", *base, "--method", m, "--seed", "0"]) == 0
        assert cli.main(["evaluate", *base, "--method", m, "--seed", "0"]) == 0
    res = json.loads((workflow_copy / "results/full/satimp/impt/seed0/results.json").read_text())["results"]
    assert 0 <= res["forget10"]["cal_alpha"] <= 1 and res["forget10"]["lr"] in (1e-3, 3e-3)
    assert len(res["forget10"]["val_cal_es"]) == 2  # one validation run per lr on the grid
    # ImpT's mask on TOFU comes from the annotation rule: annotated words of the answers are important
    from icml25.studies.satimp.lm import encode
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(workflow_copy / "results/full/satimp/base/model")
    enc = encode(tok, splits["forget10"], PROMPT)
    marked = tok.convert_ids_to_tokens(enc["input_ids"][enc["importance"] > 0].tolist())
    assert {"hanoi.", "poems", "kyoto", "rivers.", "1955.", "baker."} <= set(marked)
    assert "was" not in marked and "father" not in marked
    assert cli.main(["table", *base]) == 0
    md = (workflow_copy / "results/full/tables/satimp.md").read_text()
    assert "forget10" in md and "SatImp" in md and "NPO+GD" in md


def test_checksum_mismatch_of_annotations_fails_clearly(served, workflow_copy, monkeypatch, capsys):
    url = served[0]
    monkeypatch.setitem(D.IMPORTANCE_SHA256, "forget10", "0" * 64)
    _configure(workflow_copy, url, "unused", ["satimp"])
    rc = cli.main(["download", "--root", str(workflow_copy), "--scale", "full", "--study", "satimp"])
    assert rc == 2
    assert "checksum mismatch" in capsys.readouterr().err
    assert not (workflow_copy / "data/raw/full/satimp/importance_forget10.pth").exists()
