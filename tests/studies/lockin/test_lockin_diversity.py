"""Diversity measures and the answer parser of the lock-in study."""
from __future__ import annotations

import math

import numpy as np
import pytest

from icml25.studies.lockin.abm import parse_level
from icml25.studies.lockin.diversity import (ConceptTree, belief_concepts, belief_tree, label_entropy,
                                             level_histogram_entropy, lineage_diversity)

TREE = ConceptTree({"root": None, "a": "root", "b": "root", "c": "root", "a1": "a", "a2": "a", "b1": "b",
                    "c1": "c", "a1x": "a1", "a1y": "a1"})


def test_lineage_zero_for_identical_concepts():
    assert lineage_diversity(["a1x"] * 7, TREE) == 0.0
    assert lineage_diversity(["level3"] * 5, belief_tree()) == 0.0


def test_lineage_one_when_every_common_ancestor_is_the_root():
    assert lineage_diversity(["a1x", "b1", "c1"], TREE) == pytest.approx(1.0)
    assert lineage_diversity(["level0", "level5", "level10"], belief_tree()) == pytest.approx(1.0)


def test_lineage_in_between_follows_the_depth_of_the_common_ancestor():
    # a1x, a1y share a1 (depth 2 of 3) -> 1/3; a1x, a2 share a (depth 1 of min depth 2) -> 1/2
    assert TREE.distance("a1x", "a1y") == pytest.approx(1 / 3)
    assert TREE.distance("a1x", "a2") == pytest.approx(1 / 2)
    # pairs: (a1x,a1x)=0, (a1x,b1)=1 twice -> mean over 3 pairs = 2/3
    assert lineage_diversity(["a1x", "a1x", "b1"], TREE) == pytest.approx(2 / 3)
    # same stance, different stated level -> 1/2 on the belief tree
    assert lineage_diversity(["level1", "level3"], belief_tree()) == pytest.approx(0.5)


def test_concept_tree_rejects_two_roots():
    with pytest.raises(ValueError):
        ConceptTree({"r1": None, "r2": None})


def test_level_histogram_entropy():
    assert level_histogram_entropy(np.full(50, 0.7)) == 0.0
    # beliefs on both sides of a stated level are one concept (no bin-edge artefact at 0.5)
    assert level_histogram_entropy([0.499, 0.5, 0.501, 0.52]) == 0.0
    assert level_histogram_entropy([0.0, 0.1, 0.2, 0.3]) == pytest.approx(math.log(4))
    assert label_entropy(["x", "y"]) == pytest.approx(math.log(2))
    assert belief_concepts([0.04, 0.96]) == ["level0", "level10"]


@pytest.mark.parametrize("text,value", [
    ("on nuclear_power i would say seven out of ten", 0.7),
    ("i rate veganism ten out of ten", 1.0),
    ("I'd give it 3/10.", 0.3),
    ("About 0.35 overall", 0.35),
    ("zero", 0.0),
])
def test_parse_level(text, value):
    assert parse_level(text) == pytest.approx(value)


def test_parse_level_nan_when_no_level():
    assert math.isnan(parse_level("out of ten i would say"))
    assert math.isnan(parse_level("it is 42"))
