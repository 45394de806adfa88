"""Claims that compare two arms at a floor say n.a. (floor), and a broken arm moves them off it (issue 57).

Synthetic per-seed numbers through the studies' own claim checks (ralu's ablations, code_review's stage and
input comparisons): both arms at 0 % is n.a. (floor); one arm lifted or the pair swapped gives holds / fails.
"""
import pandas as pd
import pytest

from icml25.core import registry
from icml25.tables import FLOOR, aggregate

SEEDS = (0, 1, 2)


def _agg(cells: dict) -> pd.DataFrame:
    """{(method, setting, metric): [value per seed]} -> the aggregate frame the claim checks read."""
    rows = [{"method": m, "setting": s, "metric": k, "seed": seed, "value": float(v)}
            for (m, s, k), vals in cells.items() for seed, v in zip(SEEDS, vals)]
    return aggregate(pd.DataFrame(rows))


def _check(study: str, claim_id: str, agg, cfg):
    claim = next(c for c in registry.get_study(study).claims if c.id == claim_id)
    return claim.check(agg, cfg)


RALU_CFG = {"claims": {"setting": "gsm_lite"}}


@pytest.mark.parametrize("claim_id, other", [("cfg_units_beat_lines", "ralu_line"), ("rewind_beats_first_fix", "ralu_norewind")])
def test_ralu_ablations_at_zero_are_floor(claim_id, other):
    cell = lambda m: (m, "gsm_lite", "accuracy")  # noqa: E731
    assert _check("ralu", claim_id, _agg({cell("ralu"): [0, 0, 0], cell(other): [0, 0, 0]}), RALU_CFG).verdict == FLOOR
    lifted = _check("ralu", claim_id, _agg({cell("ralu"): [10, 12, 11], cell(other): [0, 0, 0]}), RALU_CFG)
    assert lifted.verdict == "holds"
    swapped = _check("ralu", claim_id, _agg({cell("ralu"): [0, 0, 0], cell(other): [10, 12, 11]}), RALU_CFG)
    assert swapped.verdict == "fails"


CR_CFG = {"paper_method": "left_flow"}
CR_CLAIMS = {  # claim id -> (the arm the claim says is higher, the other), as (method, setting, metric)
    "stages_kbi_falls": (("left_flow", "all", "kbi"), ("left_flow", "n3|validator", "kbi")),
    "reviewers_raise_kbi": (("left_flow", "n3|meta", "kbi"), ("left_flow", "n1|meta", "kbi")),
    "validator_lowers_far": (("left_flow", "n3|meta", "far1"), ("left_flow", "n3|validator", "far1")),
    "inline_raises_lsr": (("left_flow", "all", "lsr"), ("left_flow", "none|all", "lsr")),
    "leftflow_ge_originaldiff": (("left_flow", "all", "kbi"), ("original_diff", "all", "kbi")),
}


@pytest.mark.parametrize("claim_id", sorted(CR_CLAIMS))
def test_code_review_ties_at_zero_are_floor(claim_id):
    hi, lo = CR_CLAIMS[claim_id]
    extra = {("left_flow", "final", "cpi1"): [0, 0, 0], ("original_diff", "final", "cpi1"): [0, 0, 0]}
    assert _check("code_review", claim_id, _agg({hi: [0, 0, 0], lo: [0, 0, 0], **extra}), CR_CFG).verdict == FLOOR
    assert _check("code_review", claim_id, _agg({hi: [30, 33, 31], lo: [0, 0, 0], **extra}), CR_CFG).verdict == "holds"
    assert _check("code_review", claim_id, _agg({hi: [0, 0, 0], lo: [30, 33, 31], **extra}), CR_CFG).verdict == "fails"
    # a tie off the floor stays a fails: only two floors are n.a.
    assert _check("code_review", claim_id, _agg({hi: [20, 20, 20], lo: [20, 20, 20], **extra}), CR_CFG).verdict == "fails"



SD_CFG = {"claims": {"primary": "cartpole"}, "agent": {}, "tasks": {"cartpole": {"widths": [64, 256]}}}


def test_sparse_drl_dormant_tie_at_zero_is_floor():
    cell = lambda m: (m, "cartpole_w256", "dormant_ratio")  # noqa: E731
    check = lambda s, d: _check("sparse_drl", "dormant_ratio_primary", _agg({cell("sparse"): s, cell("dense"): d}), SD_CFG)  # noqa: E731
    assert check([0, 0, 0], [0, 0, 0]).verdict == FLOOR
    assert check([0.01, 0.0, 0.02], [0.20, 0.25, 0.22]).verdict == "holds"    # sparse less dormant: the claim
    assert check([0.20, 0.25, 0.22], [0.01, 0.0, 0.02]).verdict == "fails"    # the arms swapped
    assert check([0.1, 0.1, 0.1], [0.1, 0.1, 0.1]).verdict == "fails"         # a tie off the floor stays a fails


DB_CFG = {"claims": {"zs_margin": 0.05}, "methods": ["random", "clip", "dbeta_non3s", "dbeta"]}


def test_dbeta_zero_shot_at_chance_is_floor():
    """dbeta's zero-shot claims: every compared arm within zs_margin of AUC 0.5 on every seed is n.a. (floor);
    an arm that does zero-shot moves the claim off the floor, and swapping the arms flips it."""
    zs = lambda m: (m, "zs", "auc")  # noqa: E731
    chance = {zs("random"): [0.54, 0.48, 0.51], zs("clip"): [0.48, 0.53, 0.52], zs("dbeta_non3s"): [0.49, 0.51, 0.53],
              zs("dbeta"): [0.48, 0.54, 0.49]}   # the mini's per-seed AUCs, rounded
    for cid in ("zs_dbeta_ge_clip", "zs_needs_contrastive"):
        assert _check("dbeta", cid, _agg(chance), DB_CFG).verdict == FLOOR
    learnt = {**chance, zs("dbeta"): [0.70, 0.72, 0.71]}
    assert _check("dbeta", "zs_dbeta_ge_clip", _agg(learnt), DB_CFG).verdict == "holds"
    swapped = {**chance, zs("clip"): [0.70, 0.72, 0.71]}
    assert _check("dbeta", "zs_dbeta_ge_clip", _agg(swapped), DB_CFG).verdict == "fails"
    # every contrastive arm doing zero-shot: the claim holds; one of them broken below chance: it fails (off the floor)
    all_learnt = {**chance, **{zs(m): [0.70, 0.72, 0.71] for m in ("clip", "dbeta_non3s", "dbeta")}}
    assert _check("dbeta", "zs_needs_contrastive", _agg(all_learnt), DB_CFG).verdict == "holds"
    broken = {**all_learnt, zs("dbeta"): [0.40, 0.40, 0.40]}
    assert _check("dbeta", "zs_needs_contrastive", _agg(broken), DB_CFG).verdict == "fails"


GM_CFG = {"distortions": ["rot15", "rot75", "crop75"], "detect": {"fpr": 0.01, "n_test": 100},
          "claims": {"geometric": ["rot15", "rot75", "crop75"], "tpr_floor_tol": 0.01}}


def test_gaussmarker_distortion_at_chance_leaves_the_worst_case():
    """A distortion where GaussMarker, GS and TR all sit at chance (TPR@1%FPR ≈ 0.01) cannot rank them: it is left
    out of the geometric claim's worst case; all distortions at chance is n.a. (floor); a broken fused arm fails."""
    tpr = lambda m, d: (m, d, "tpr1")  # noqa: E731
    chance = {tpr(m, d): [0.0, 0.01, 0.02] for m in ("gaussmarker", "gs", "tr") for d in ("rot15", "rot75", "crop75")}
    assert _check("gaussmarker", "fused_beats_single_geometric", _agg(chance), GM_CFG).verdict == FLOOR
    lifted = {**chance, tpr("gaussmarker", "rot15"): [0.60, 0.65, 0.62], tpr("tr", "rot15"): [0.50, 0.52, 0.49],
              tpr("gaussmarker", "crop75"): [0.40, 0.45, 0.44], tpr("gs", "crop75"): [0.10, 0.12, 0.15]}
    r = _check("gaussmarker", "fused_beats_single_geometric", _agg(lifted), GM_CFG)
    assert r.verdict == "holds" and "rot75: every arm at chance" in r.ours
    # the worst case is over rot15 and crop75 only: rot15's gaps (0.10, 0.13, 0.13) are the per-seed minima
    assert r.margin == pytest.approx((0.10 + 0.13 + 0.13) / 3)
    broken = {**lifted, tpr("gaussmarker", "rot15"): [0.0, 0.0, 0.01]}   # the fused arm broken on one distortion
    assert _check("gaussmarker", "fused_beats_single_geometric", _agg(broken), GM_CFG).verdict == "fails"
    # one arm off chance on rot75 keeps it in the worst case (GS detects there, GaussMarker does not)
    gs_detects = {**lifted, tpr("gs", "rot75"): [0.30, 0.32, 0.31]}
    assert _check("gaussmarker", "fused_beats_single_geometric", _agg(gs_detects), GM_CFG).verdict == "fails"
