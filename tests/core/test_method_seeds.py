"""Per-method seed lists (`scales.<scale>.method_seeds`): more seeds for cheap methods than for an expensive
one. The DAG, the table and the figures enumerate `config.runs`; claims pair methods on the seeds they share."""
import copy
from pathlib import Path

import pytest

from icml25 import tables
from icml25.core import config, evidence
from icml25.core.errors import UserError
from runfiles import metric_files

REPO = Path(__file__).resolve().parents[2]

RAW = {
    "study": "toy", "methods": ["cheap", "costly"],
    "common": {"n": 4},
    "scales": {"mini": {"seeds": [0, 1], "method_seeds": {"cheap": [0, 1, 2, 3]},
                        "sweep": {"knobs": ["n"], "factors": [1, 3]}},
               "full": {"seeds": [0, 1, 2]}},
}


def test_seeds_of_runs_and_all_seeds():
    cfg = config.effective(RAW, "mini")
    assert config.seeds_of(cfg, "cheap") == [0, 1, 2, 3]
    assert config.seeds_of(cfg, "costly") == [0, 1] == cfg["seeds"]
    assert config.runs(cfg) == [("cheap", 0), ("cheap", 1), ("cheap", 2), ("cheap", 3), ("costly", 0), ("costly", 1)]
    assert config.all_seeds(cfg) == [0, 1, 2, 3]
    full = config.effective(RAW, "full")  # no override at this scale: every method runs the scale's seeds
    assert config.runs(full) == [(m, s) for m in ("cheap", "costly") for s in (0, 1, 2)]


def test_sweep_keeps_method_seeds_unless_it_names_its_own():
    assert config.seeds_of(config.effective(RAW, "mini-x3"), "cheap") == [0, 1, 2, 3]
    raw = copy.deepcopy(RAW)
    raw["scales"]["mini"]["sweep"]["seeds"] = [7]
    cfg = config.effective(raw, "mini-x3")
    assert config.runs(cfg) == [("cheap", 7), ("costly", 7)]


def test_unknown_method_is_named():
    raw = copy.deepcopy(RAW)
    raw["scales"]["mini"]["method_seeds"]["chaep"] = [0]
    with pytest.raises(UserError, match="method_seeds names chaep"):
        config.effective(raw, "mini")


@pytest.mark.parametrize("bad", [{"cheap": []}, {"cheap": [-1]}, {"cheap": [0, 0]}, {"Cheap": [0]}, {"cheap": 3}])
def test_schema_rejects_bad_method_seeds(bad):
    raw = config.load_study(REPO, "missing_sm")
    config.validate(raw, REPO / "config" / "study.schema.yaml", "missing_sm")  # the repo's own passes
    raw = copy.deepcopy(raw)
    raw["scales"]["mini"]["method_seeds"] = bad
    with pytest.raises(UserError, match="method_seeds"):
        config.validate(raw, REPO / "config" / "study.schema.yaml", "missing_sm")


def test_unequal_seed_counts_aggregate_and_pair_on_shared_seeds(tmp_path):
    vals = {("cheap", s): 0.1 * s for s in range(4)} | {("costly", 0): 1.0, ("costly", 1): 3.0}
    long = tables.collect(metric_files(tmp_path, vals, scale="mini", setting="d"))
    agg = tables.aggregate(long)
    assert tables.lookup(agg, "cheap", "d", "acc") == pytest.approx((0.15, 0.1290994, 4))
    assert tables.lookup(agg, "costly", "d", "acc") == pytest.approx((2.0, 1.4142136, 2))
    a, b = (evidence.seed_values(agg, m, "d", "acc") for m in ("costly", "cheap"))
    assert evidence.paired(a, b) == pytest.approx([1.0, 2.9])  # seeds 0 and 1 only
    assert evidence.combine([a, b], lambda v: v[0] - v[1]) == pytest.approx({0: 1.0, 1: 2.9})
    assert "cheap 4, costly 2" in tables.seed_counts_note(long)
    assert tables.seed_counts_note(long[long.seed < 2]) == ""
