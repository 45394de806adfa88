"""Section 5 (WildChat-1M analysis): lineage diversity on a concept tree, the discontinuity/kink fit, and
the full-scale path (download -> concept extraction -> tree -> per-bin diversity -> fits -> table) on
tiny local WildChat-like parquet shards served over HTTP."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from icml25 import cli
from icml25.studies.lockin import data_concepts as C
from icml25.studies.lockin import wildchat as W
from icml25.studies.lockin.diversity import tree_lineage_diversity


def _flat_tree(n):
    return C.build_tree(np.eye(n), branching=n, depth=1)  # every concept a child of the root


def test_lineage_is_0_for_one_concept_and_1_when_all_pairs_meet_at_the_root():
    paths, sizes = _flat_tree(6)
    assert tree_lineage_diversity([2, 2, 2, 2], paths, sizes) == pytest.approx(0.0)
    assert tree_lineage_diversity([0, 1, 2, 3, 4, 5], paths, sizes) == pytest.approx(1.0)


def test_lineage_matches_the_closed_form_on_a_two_cluster_tree():
    """4 concepts in two clusters {0,1}, {2,3}: for the multiset {0,1,2,3} the 6 pairs are 2 within a
    cluster (|T_l| = 2) and 4 across (root, |T_l| = 4): E = (2*2 + 4*1)/6, D = (log 4 - log E)/log 4."""
    paths = np.array([[1, 3], [1, 4], [2, 5], [2, 6]])
    sizes = np.array([4, 2, 2, 1, 1, 1, 1])
    e = (2 * 2 + 4 * 1) / 6
    assert tree_lineage_diversity([0, 1, 2, 3], paths, sizes) == pytest.approx((np.log(4) - np.log(e)) / np.log(4))
    # sampled pairs estimate the same value
    rng = np.random.default_rng(0)
    est = tree_lineage_diversity([0, 1, 2, 3] * 50, paths, sizes, rng, max_pairs=20000)
    exact = tree_lineage_diversity([0, 1, 2, 3] * 50, paths, sizes)
    assert est == pytest.approx(exact, abs=0.02)


def test_hierarchical_kmeans_tree_sizes_add_up_and_separate_clusters():
    rng = np.random.default_rng(0)
    emb = np.concatenate([rng.normal(0, 0.05, (20, 4)) + np.eye(4)[k] * 3 for k in range(4)])
    paths, sizes = C.build_tree(emb, branching=4, depth=2, seed=0)
    assert sizes[0] == 80 and (sizes[paths[:, -1]] == 1).all()
    top = paths[:, 0]
    assert len(set(top)) == 4 and all(len(set(top[20 * k:20 * k + 20])) == 1 for k in range(4))
    assert sum(sizes[n] for n in set(top)) == 80


def test_discontinuity_fit_recovers_a_planted_drop_and_finds_none_without_it():
    rng = np.random.default_rng(3)
    x = np.arange(80.0)
    base = 0.6 + 0.001 * x + rng.normal(0, 0.004, x.size)
    fit = W.discontinuity_fit(x, base - 0.05 * (x >= 40) - 0.002 * (x - 40) * (x >= 40), 40, 30)
    assert fit["jump"] == pytest.approx(-0.05, abs=0.01) and fit["jump_p"] < 1e-3
    assert fit["kink"] == pytest.approx(-0.002, abs=0.001)
    null = W.discontinuity_fit(x, base, 40, 30)
    assert abs(null["jump"]) < 0.01 and null["jump_p"] > 0.01


def test_switches_are_first_majorities_of_new_versions():
    s = pd.DataFrame({"bin": [0, 1, 2, 3, 4], "majority": ["a", "a", "b", "a", "b"]})
    assert W.switches(s) == [(2, "b")]


def test_llm_extractor_runs_through_from_pretrained(tmp_path):
    pytest.importorskip("transformers")
    from icml25.studies.lockin import abm
    from icml25.studies.lockin import data as D

    ai = {"n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 64, "pretrain_steps": 2, "pretrain_lr": 0.003,
          "batch_size": 4}
    abm.create_base(ai, ["alpha"], D.pretrain_corpus(["alpha"], 20, np.random.default_rng(0)), tmp_path, seed=0)
    ext = {"kind": "llm", "model": str(tmp_path / "model"), "max_new_tokens": 5, "batch_size": 2, "max_chars": 40,
           "max_prompt_tokens": 60}
    a = C.extract_concepts(["what about alpha ?", "alpha", "question"], ext)
    assert len(a) == 3 and all(isinstance(c, str) for cs in a for c in cs)
    assert a == C.extract_concepts(["what about alpha ?", "alpha", "question"], ext)  # greedy: deterministic


def test_parse_concepts_normalises_and_dedupes():
    assert C.parse_concepts(" Climate change, climate change; Paris Agreement!\nfoo\n\nignored", 5) == \
        ["climate change", "paris agreement", "foo"]


# ---- the full-scale path on local stand-ins ---------------------------------------------------------

TOPICS = [f"subject{chr(97 + k // 26)}{chr(97 + k % 26)}" for k in range(40)]  # letters only: keywords split at digits


def _shard(rng, n, t0_days, days, switch_day):
    rows = []
    for _ in range(n):
        day = t0_days + rng.uniform(0, days)
        after = day >= switch_day
        fam = "gpt-4" if rng.random() < 0.5 else "gpt-3.5-turbo"
        model = {"gpt-4": ["gpt-4-0314", "gpt-4-1106-preview"], "gpt-3.5-turbo": ["gpt-3.5-turbo-0301"] * 2}[fam][int(after)]
        pool = TOPICS[:5] if (after and fam == "gpt-4") else TOPICS  # diversity drops after the GPT-4 switch
        words = rng.choice(pool, size=3, replace=False)
        rows.append({"conversation_hash": f"c{rng.integers(1 << 40)}", "model": model,
                     "timestamp": pd.Timestamp("2023-04-09", tz="UTC") + pd.Timedelta(days=float(day)),
                     "conversation": [{"role": "user", "content": "please explain " + " and ".join(words)},
                                      {"role": "assistant", "content": "sure"}],
                     "hashed_ip": f"ip{rng.integers(60)}", "language": "English"})
    return pd.DataFrame(rows)


def test_full_scale_wildchat_path_on_stand_in_shards(tmp_path, workflow_copy, file_server):
    rng = np.random.default_rng(0)
    www = tmp_path / "www"
    www.mkdir()
    for i, (t0, days) in enumerate([(0, 60), (60, 60)]):
        _shard(rng, 900, t0, days, 60).to_parquet(www / f"train-{i:05d}-of-00002.parquet")
    url = file_server(www)
    path = workflow_copy / "config" / "studies" / "lockin.yaml"
    raw = yaml.safe_load(path.read_text())
    full = raw["scales"]["full"]
    full["methods"], full["seeds"] = ["wildchat"], [0, 1]
    wc = full["data"]["wildchat"]
    wc.update(base_url=url, n_shards=2,
              extractor={"kind": "keywords", "max_concepts": 5}, embedder={"kind": "hashing"},
              tree={"branching": 4, "depth": 2, "seed": 0})
    full["data"].update(n_users=4, pretrain_items=10)
    full["wildchat_analysis"].update(min_conversations=20, bandwidth=15)
    path.write_text(yaml.safe_dump(raw))
    base = ["--root", str(workflow_copy), "--scale", "full", "--study", "lockin"]
    for stage in ("download", "preprocess", "fit-base"):
        assert cli.main([stage, *base]) == 0, stage
    for seed in ("0", "1"):
        assert cli.main(["train", *base, "--method", "wildchat", "--seed", seed]) == 0
        assert cli.main(["evaluate", *base, "--method", "wildchat", "--seed", seed]) == 0
    assert cli.main(["table", *base]) == 0
    assert cli.main(["figures", *base]) == 0

    claims = json.loads((workflow_copy / "results/full/tables/lockin.claims.json").read_text())["claims"]
    wc_claim = next(c for c in claims if c["id"] == "wildchat_drop")
    assert wc_claim["verdict"] == "holds", wc_claim
    assert "gpt-4@gpt-4-1106-preview" in wc_claim["ours"]
    rows = json.loads((workflow_copy / "results/full/lockin/wildchat/seed0/wildchat.json").read_text())["rows"]
    got = {(r["setting"], r["metric"]): r["value"] for r in rows}
    assert got[("gpt-4@gpt-4-1106-preview", "wc_jump")] < -0.05 and got[("gpt-4@gpt-4-1106-preview", "wc_jump_p")] < 0.01
    assert ("gpt-3.5-turbo@gpt-3.5-turbo-0301", "wc_jump") not in got  # no switch in the GPT-3.5 stand-in
    assert "C (Sec. 5)" in (workflow_copy / "results/full/tables/lockin.md").read_text()
    assert (workflow_copy / "results/full/figures/lockin/lockin_wildchat.png").stat().st_size > 10_000
