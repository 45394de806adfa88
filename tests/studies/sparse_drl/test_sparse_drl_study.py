"""sparse_drl study level: claim checks on hand-built tables, the run plan, the DMC path, smoke end to end."""
import json

import pandas as pd
import pytest

from icml25.core.errors import UserError
from icml25.studies.sparse_drl import study as S


def _agg(vals):
    """vals: {(method, setting, metric): mean or [value of seed 0, 1, 2]} -> the aggregated frame the claims read."""
    import numpy as np

    rows = []
    for (m, s, k), v in vals.items():
        xs = [float(x) for x in v] if isinstance(v, list) else [float(v)] * 3
        rows.append({"method": m, "setting": s, "metric": k, "mean": float(np.mean(xs)),
                     "std": float(np.std(xs, ddof=1)), "n": 3, "values": xs, "seeds": [0, 1, 2]})
    return pd.DataFrame(rows)


CFG = {"tasks": {"cp": {"algo": "dqn", "env": "CartPole-v1", "widths": [16, 64, 256]}}, "agent": {},
       "claims": {"primary": "cp"}, "sparsity": 0.8}


def _table(dense_auc, sparse_auc, dense_diag=None, sparse_diag=None, matched=(112, 30000, 50.0)):
    vals = {}
    for m, aucs, act in (("dense", dense_auc, [700, 9000, 134000]), ("sparse", sparse_auc, [240, 2100, 28000])):
        for w, a, n in zip([16, 64, 256], aucs, act):
            vals[(m, f"cp_w{w}", "return_auc")] = a
            vals[(m, f"cp_w{w}", "final_return")] = a
            vals[(m, f"cp_w{w}", "active_params")] = n
            vals[(m, f"cp_w{w}", "width")] = w
    w, n, a = matched
    vals.update({("dense", f"cp_w{w}", "return_auc"): a, ("dense", f"cp_w{w}", "final_return"): a,
                 ("dense", f"cp_w{w}", "active_params"): n, ("dense", f"cp_w{w}", "width"): w})
    for m, d in (("dense", dense_diag or {}), ("sparse", sparse_diag or {})):
        for k, v in d.items():
            vals[(m, "cp_w256", k)] = v
    return _agg(vals)


def test_scaling_claim_holds_only_when_dense_saturates_and_sparse_improves():
    check = S.claim_scaling("primary")
    res = check(_table([100, 200, 150], [90, 180, 250]), CFG)
    # margin: the smallest of sparse's gain (70), sparse's minus dense's gain (70 + 50) and dense's best
    # narrower width minus its widest (200 - 150)
    assert res.verdict == "holds" and res.margin == pytest.approx(50.0) and res.n_seeds == 3
    assert check(_table([100, 200, 300], [90, 180, 250]), CFG).verdict == "fails"  # dense still scales
    assert check(_table([100, 200, 150], [90, 180, 170]), CFG).verdict == "fails"  # sparse degrades too


def test_matched_claim_compares_with_the_dense_net_of_equal_active_params():
    check = S.claim_matched("primary")
    # sparse w256 has 28000 active params: its match is the dense w112 (30000), not the dense w64
    res = check(_table([100, 200, 150], [90, 180, 250], matched=(112, 30000, 260.0)), CFG)
    assert res.verdict == "fails" and "dense w112" in res.ours
    assert check(_table([100, 200, 150], [90, 180, 250], matched=(112, 30000, 240.0)), CFG).verdict == "holds"


def test_return_claims_are_not_testable_when_no_agent_learned():
    cfg = {**CFG, "tasks": {"cp": {**CFG["tasks"]["cp"], "learned_return": 120}}}
    t = _table([100, 110, 90], [90, 105, 115], matched=(112, 30000, 100.0))  # best final return 115 < 120
    for check in (S.claim_scaling("primary"), S.claim_matched("primary")):
        res = check(t, cfg)
        assert res.verdict == "n.a." and "no agent learned" in res.ours
    assert S.claim_scaling("primary")(_table([100, 200, 150], [90, 180, 250]), cfg).verdict == "holds"


def test_pathology_claims_read_the_right_direction():
    good_s = {"dormant_ratio": 0.01, "srank": 90, "param_norm": 10, "grad_interference": 0.02}
    bad_d = {"dormant_ratio": 0.2, "srank": 40, "param_norm": 30, "grad_interference": 0.2}
    t = _table([1, 2, 3], [1, 2, 3], bad_d, good_s)
    assert S.claim_pathologies("primary")(t, CFG).verdict == "holds"
    assert S.claim_pathologies("primary")(_table([1, 2, 3], [1, 2, 3], good_s, bad_d), CFG).verdict == "fails"
    res = S.claim_pathologies("primary", "srank")(t, CFG)
    assert res.verdict == "holds" and res.margin == pytest.approx(50.0) and res.unit.startswith("srank")
    # four diagnostics in different units: the worst relative gap, here Srank's (90 - 40) / (90 + 40)
    assert S.claim_pathologies("primary")(t, CFG).margin == pytest.approx(min(0.19 / 0.21, 50 / 130, 20 / 40, 0.18 / 0.22))


def test_claims_pair_seeds_and_are_inconclusive_when_seeds_disagree():
    """Sparse beats dense by +20, +20, -10 AUC on seeds 0, 1, 2: the mean is above 0 but the paired t
    interval covers 0, so the matched claim is inconclusive, not holds."""
    t = _table([100, 200, 150], [90, 180, [250, 250, 220]], matched=(112, 30000, [230.0, 230.0, 230.0]))
    res = S.claim_matched("primary")(t, CFG)
    assert res.margin == pytest.approx(10.0) and res.interval[0] < 0 < res.interval[1]
    assert res.verdict == "inconclusive" and res.n_seeds == 3


def test_missing_rows_make_claims_not_applicable():
    from icml25.tables import check_claims

    out = check_claims(S.STUDY, _agg({("dense", "cp_w16", "return_auc"): 1.0}), CFG)
    assert {c["verdict"] for c in out} == {"n.a."}


def test_run_plan_adds_the_param_matched_dense_width():
    from icml25.studies.sparse_drl.sparse import simba_param_counts

    cfg = {"sparsity": 0.8, "extra_sparsities": [0.5], "match_active_params": True, "agent": {"expansion": 1},
           "tasks": {"cp": {"algo": "dqn", "widths": [16, 64, 256], "num_blocks": 1}}}
    specs = {"cp": {"obs_dim": 4, "n_actions": 2, "act_dim": 0}}
    dense = S.run_plan(cfg, "dense", specs)
    widths = [w for _, w, s, _ in dense]
    assert len(widths) == 4 and all(s is None for _, _, s, _ in dense)
    (m,) = set(widths) - {16, 64, 256}
    target = simba_param_counts(4, 256, 2, 1, 1, 0.8)[0]
    assert abs(simba_param_counts(4, m, 2, 1, 1)[0] - target) <= abs(simba_param_counts(4, m + 1, 2, 1, 1)[0] - target)
    sparse = S.run_plan(cfg, "sparse", specs)
    assert [x[3] for x in sparse] == ["cp_w16", "cp_w64", "cp_w256", "cp_w16_s50", "cp_w64_s50", "cp_w256_s50"]


def test_validate_rejects_bad_config():
    from icml25.core import config
    from conftest import REPO

    cfg = config.effective(config.load_study(REPO, "sparse_drl"), "mini")
    S.validate(cfg)
    with pytest.raises(UserError, match="sparsity"):
        S.validate({**cfg, "sparsity": 1.0})
    with pytest.raises(UserError, match="algo"):
        S.validate({**cfg, "tasks": {"x": {**cfg["tasks"]["cartpole"], "algo": "ppo"}}})


def test_full_config_uses_dmc_and_declares_a_gpu():
    from icml25.core import config
    from conftest import REPO

    raw = config.load_study(REPO, "sparse_drl")
    cfg = config.effective(raw, "full")
    S.validate(cfg)
    ts = S.tasks(cfg)
    assert set(ts) == {"humanoid_run", "dog_run", "humanoid_run_ddpg"} and all(t["env"].startswith("dmc:") for t in ts.values())
    assert {t["algo"] for t in ts.values()} == {"sac", "ddpg"}
    assert all(t["action_repeat"] == 2 and t["total_steps"] * 2 == 1_000_000 for t in ts.values())
    assert max(max(t["widths"]) for t in ts.values()) == 4096 and cfg["extra_sparsities"] == [0.5, 0.9]
    assert raw["scales"]["full"]["resources"]["train"]["gpu"] == 1


def test_dmc_env_path_runs_sac_on_a_cheap_task():
    """The full scale's DMC code path (env construction, flattening, action repeat, SAC) on cartpole-swingup."""
    pytest.importorskip("dm_control")
    from icml25.studies.sparse_drl.agents import run_sac
    from icml25.studies.sparse_drl.envs import make_env

    env = make_env("dmc:cartpole-swingup", 0, action_repeat=2)
    assert env.spec.obs_dim == 5 and env.spec.act_dim == 1 and not env.spec.discrete
    o, n, done = env.reset(), 0, False
    while not done:
        o, r, term, trunc = env.step(env.spec.high)
        n += 1
        done = term or trunc
    assert n == 500 and not term  # 1000 physics steps at repeat 2; a time limit is a truncation
    cfg = dict(env="dmc:cartpole-swingup", action_repeat=2, lr=1e-4, weight_decay=1e-2, gamma=0.99, target_tau=0.005,
               replay_ratio=1, batch_size=8, expansion=1, eval_episodes=1, diag_batch=16, interference_samples=3,
               dormant_tau=0.1, srank_delta=0.01, probe_steps=2, probe_lr=1e-3, actor_width=8, actor_blocks=1,
               critic_blocks=2, use_cdq=False, temp_init=0.01, temp_lr=1e-4, target_entropy_coef=-0.5,
               total_steps=500, learning_starts=480, eval_every=500)
    res = run_sac(cfg, 16, 0.8, 0)
    assert res["metrics"]["active_params"] < res["metrics"]["total_params"] and len(res["losses"]) == 21


def test_smoke_end_to_end(tmp_path):
    from conftest import copy_workflow

    from icml25 import cli

    root = copy_workflow(tmp_path / "wf")
    base = ["--root", str(root), "--scale", "smoke", "--study", "sparse_drl"]
    assert cli.main(["download", *base]) == 0 and cli.main(["preprocess", *base]) == 0
    for m in ("sparse", "dense"):
        assert cli.main(["train", *base, "--method", m, "--seed", "0"]) == 0
        assert cli.main(["evaluate", *base, "--method", m, "--seed", "0"]) == 0
    assert cli.main(["table", *base]) == 0
    res = root / "results" / "smoke"
    rows = json.loads((res / "sparse_drl" / "sparse" / "seed0" / "metrics.json").read_text())["metrics"]
    sp = {r["metric"]: r["value"] for r in rows if r["setting"] == "cartpole_w16"}
    assert sp["sparsity"] == 0.8 and sp["active_params"] < sp["total_params"]
    claims = json.loads((res / "tables" / "sparse_drl.claims.json").read_text())["claims"]
    assert len(claims) == len(S.CLAIMS) and all(c["verdict"] in ("holds", "fails", "n.a.") for c in claims)
    assert "cartpole (DQN)" in (res / "tables" / "sparse_drl.md").read_text()
