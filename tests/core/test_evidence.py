"""Margins, seed intervals and the four verdicts (icml25.core.evidence, ClaimResult.of)."""
import math

import pytest

from icml25.core import evidence
from icml25.core.registry import ClaimResult


def test_t_interval_against_hand_example():
    # samples 1, 2, 3, 4, 5: mean 3, s = sqrt(2.5), t(4, 0.975) = 2.776445 (table value)
    low, high = evidence.t_interval([1, 2, 3, 4, 5])
    half = 2.776445 * math.sqrt(2.5) / math.sqrt(5)
    assert low == pytest.approx(3 - half, abs=1e-5) and high == pytest.approx(3 + half, abs=1e-5)
    assert evidence.t_quantile(9) == pytest.approx(2.262157, abs=1e-6)


def test_one_seed_has_no_interval():
    assert evidence.t_interval([0.3]) is None
    r = ClaimResult.of("x", per_seed=[0.3])
    assert r.verdict == "holds" and r.interval is None and r.n_seeds == 1


def test_four_verdicts_from_the_evidence():
    assert ClaimResult.of("x", per_seed=[0.5, 0.6, 0.55]).verdict == "holds"
    assert ClaimResult.of("x", per_seed=[-0.5, -0.6, -0.55]).verdict == "fails"
    r = ClaimResult.of("x", per_seed=[-0.004, 0.003, -0.009, 0.001, -0.005])  # mean -0.0028, s 0.0048
    assert r.verdict == "inconclusive" and r.interval[0] < 0 < r.interval[1] and r.margin < 0
    assert ClaimResult.of("x", margin=-0.1).verdict == "fails"
    assert ClaimResult.of("x", margin=0.0).verdict == "fails"  # a claim needs a positive margin to hold
    assert ClaimResult.of("x").verdict == "n.a."


def test_typed_verdict_must_agree_with_evidence():
    with pytest.raises(ValueError):
        ClaimResult("holds", "x", margin=-0.2)
    with pytest.raises(ValueError):
        ClaimResult("holds", "x", margin=0.2, interval=(-0.1, 0.5))  # covers 0: inconclusive
    with pytest.raises(ValueError):
        ClaimResult("inconclusive", "x")  # never typed in without the interval that makes it so
    assert ClaimResult("fails", "x", margin=-0.2, interval=(-0.3, -0.1)).verdict == "fails"


def test_pairing_and_worst_case_combination():
    a, b = {0: 0.9, 1: 0.8, 2: 0.7}, {1: 0.5, 2: 0.6, 3: 0.1}
    assert evidence.paired(a, b) == pytest.approx([0.3, 0.1])
    worst = evidence.combine([{0: 0.2, 1: -0.1}, {0: 0.1, 1: 0.3}], min)
    assert worst == {0: 0.1, 1: -0.1}
    with pytest.raises(KeyError):
        ClaimResult.of("x", per_seed=[])
