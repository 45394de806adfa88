"""The reviewer LM's issue-57 changes: the fine-tuning step's loss on labelled positions only equals the
full causal-LM loss, and the copy prior lifts exactly the line markers the prompt shows (so a prompt
without line numbers gets no help naming a line)."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from icml25.studies.code_review import reviewer_lm as R  # noqa: E402

TEXT = "int f(int x) {\n    if (x > 0) {\n        return x;\n    }\n    return 0;\n}\n" * 20
MODEL = {"context": 128, "d_model": 32, "layers": 1, "heads": 2}


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return R.train_tokenizer([TEXT], 300, tmp_path_factory.mktemp("tok"), max_line=40)


def test_marker_mask_is_the_line_markers_only(tok):
    mask = R.marker_mask(tok)
    assert int(mask.sum()) == 80   # ` N|` and `+N|` for N = 1..40
    assert mask[tok.token_to_id("+7|")] and mask[tok.token_to_id(" 40|")]
    assert not mask[tok.token_to_id("<|out|>")] and not mask[tok.token_to_id("<|pad|>")]


def test_step_loss_on_labelled_positions_equals_the_full_lm_loss(tok):
    torch.manual_seed(0)
    model = R.build_model(tok, MODEL)
    x = tok.encode(R.review_prompt(" 3|    if (x > 0) {\n+4|        return 0;")).ids
    y = tok.encode("+4|logic|6 6 6\n<|end|>").ids
    seqs = [(x + y, [0] * len(x) + [1] * len(y)), (x[:-2] + y, [0] * (len(x) - 2) + [1] * len(y))]
    pad = tok.token_to_id("<|pad|>")
    n = max(len(s[0]) for s in seqs)
    ids = torch.full((2, n), pad)
    labels = torch.full((2, n), -100)
    att = torch.zeros((2, n), dtype=torch.long)
    for r, (s, m) in enumerate(seqs):
        ids[r, :len(s)] = torch.tensor(s)
        att[r, :len(s)] = 1
        labels[r, :len(s)] = torch.tensor([t if k else -100 for t, k in zip(s, m)])
    with torch.no_grad():
        full = float(model(input_ids=ids, attention_mask=att, labels=labels).loss)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)   # lr 0: the step only reports its loss
    assert R._step(model, opt, seqs, pad, 128) == pytest.approx(full, rel=1e-5)


def test_copy_prior_lifts_only_the_markers_shown(tok, tmp_path):
    torch.manual_seed(0)
    model = R.build_model(tok, MODEL)
    R.save(model, tmp_path, tmp_path, {"copy_bias": 50.0})
    (tmp_path / "tokenizer.json").write_text(json.dumps(json.loads(tok.to_str())))
    eng = R.Engine(tmp_path, max_new=1)
    shown = {"+12|", " 11|"}
    inline = R.review_prompt(" 11|    if (x > 0) {\n+12|        return 0;")
    first = eng.generate(inline, n=4, temperature=1.0, seed=0)
    assert all(o in shown for o in first), first   # an untrained LM, but the prior picks a shown marker
    # no marker in the prompt (the `none` format): no bias, so the output is the untrained LM's own
    none = R.review_prompt("     if (x > 0) {\n+        return 0;")
    eng0 = R.Engine(tmp_path, max_new=1)
    eng0.copy_bias = 0.0
    assert eng.generate(none, n=3, temperature=1.0, seed=1) == eng0.generate(none, n=3, temperature=1.0, seed=1)


def test_shift_lines_moves_every_number_by_one_offset_in_range():
    import random
    import re

    from icml25.studies.code_review import pipeline as P

    prompt = R.review_prompt(" 11|    if (x > 0) {\n-12|        return 1;\n+12|        return 0;\n...\n 20|}")
    target = "+12|logic|6 6 6\n<|end|>"
    cand = R.validate_prompt(" 11|    if (x > 0) {\n+12|        return 0;", 12, "logic")
    rng = random.Random(0)
    offs = set()
    for _ in range(50):
        p, t = P.shift_lines(prompt, target, rng, max_line=40)
        nums = [int(n) for n in re.findall(r"(?m)^[ +-](\d+)\|", p)]
        off = nums[0] - 11
        offs.add(off)
        assert nums == [11 + off, 12 + off, 12 + off, 20 + off] and 1 <= min(nums) and max(nums) <= 40
        assert t == f"+{12 + off}|logic|6 6 6\n<|end|>"   # the target names the same shown line
        assert p.replace(str(11 + off), "11", 1) != prompt or off == 0
        c, _ = P.shift_lines(cand, "6 6 6\n<|end|>", rng, max_line=40)
        a, b = re.findall(r"(?m)^[ +](\d+)\|", c)[1], re.search(r"<\|cand\|>\+(\d+)\|", c)[1]
        assert a == b   # the validator's candidate moves with its line
    assert len(offs) > 5 and min(offs) >= -10 and max(offs) <= 20
