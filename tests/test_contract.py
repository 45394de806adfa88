"""One generic suite over every registered study (benchopt's idea): each new study is checked for free.

Config validates at every scale; every stage runs at smoke scale through the CLI; metrics follow
the declared schema; every claim evaluates to holds / fails / inconclusive / n.a. with numbers and a
signed margin whose sign and seed interval agree with the verdict.
"""
import json
import math

import pytest

from icml25 import cli
from icml25.core import config, registry

STUDIES = registry.available()


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory):
    """Each study's stages at smoke scale, in-process (one torch import for the whole suite), run
    lazily and once per study, so one broken study does not take the others down."""
    from conftest import copy_workflow

    root = copy_workflow(tmp_path_factory.mktemp("contract") / "wf")
    cache = {}

    def run(name):
        if name not in cache:
            raw = config.load_study(root, name)
            cfg = config.effective(raw, "smoke")
            base = ["--root", str(root), "--scale", "smoke", "--study", name]
            codes = [cli.main(["download", *base]), cli.main(["preprocess", *base])]
            if raw.get("has_base"):
                # a study with one base model per seed fits one for each seed it trains
                per_seed = [["--seed", str(s)] for s in cfg["seeds"]] if cfg.get("base_per_seed") else [[]]
                codes += [cli.main(["fit-base", *base, *extra]) for extra in per_seed]
            for m in cfg["methods"]:
                for s in cfg["seeds"]:
                    codes.append(cli.main(["train", *base, "--method", m, "--seed", str(s)]))
                    codes.append(cli.main(["evaluate", *base, "--method", m, "--seed", str(s)]))
            codes.append(cli.main(["table", *base]))
            cache[name] = (root, cfg, codes)
        return cache[name]

    return run


@pytest.mark.parametrize("name", STUDIES)
def test_config_validates_at_every_scale(name):
    from conftest import REPO

    study = registry.get_study(name)
    raw = config.load_study(REPO, name)
    assert set(raw["methods"]) <= set(study.methods)
    assert study.paper_method in raw["methods"]
    assert bool(raw.get("has_base")) == (study.fit_base is not None)
    for scale in config.SCALES:
        cfg = config.effective(raw, scale)
        if study.validate:
            study.validate(cfg)
        assert scale in study.stand_ins, f"{name} must name its stand-ins at scale {scale}"


@pytest.mark.parametrize("name", STUDIES)
def test_every_stage_runs_at_smoke(smoke_runs, name):
    root, cfg, codes = smoke_runs(name)
    assert codes and all(c == 0 for c in codes)


@pytest.mark.parametrize("name", STUDIES)
def test_metrics_follow_declared_schema(smoke_runs, name):
    root, cfg, _ = smoke_runs(name)
    study = registry.get_study(name)
    for m in cfg["methods"]:
        for s in cfg["seeds"]:
            rec = json.loads((root / "results" / "smoke" / name / m / f"seed{s}" / "metrics.json").read_text())
            assert rec["study"] == name and rec["method"] == m and rec["seed"] == s
            for key in ("git_commit", "config_hash", "code_hash", "data_hash", "params"):
                assert rec[key], key
            assert rec["metrics"], f"{m}/seed{s} has no metrics"
            for row in rec["metrics"]:
                assert row["metric"] in study.metrics
                assert isinstance(row["setting"], str)
                assert isinstance(row["value"], float) and not math.isinf(row["value"])


@pytest.mark.parametrize("name", STUDIES)
def test_claims_evaluate_with_numbers(smoke_runs, name):
    root, cfg, _ = smoke_runs(name)
    rec = json.loads((root / "results" / "smoke" / "tables" / f"{name}.claims.json").read_text())
    study = registry.get_study(name)
    assert [c["id"] for c in rec["claims"]] == [c.id for c in study.claims]
    scalar = {c.id: c.scalar for c in study.claims}
    for c in rec["claims"]:
        assert c["verdict"] in registry.VERDICTS
        if c["verdict"] in ("n.a.", registry.FLOOR):
            continue
        assert any(ch.isdigit() for ch in c["ours"]), c
        if scalar[c["id"]]:
            assert c["margin"] is not None and c["unit"], f"claim {c['id']} returns no margin / unit"
        _assert_evidence_agrees(c)
    md = (root / "results" / "smoke" / "tables" / f"{name}.md").read_text()
    assert study.paper.title in md and "## Claims" in md


def _assert_evidence_agrees(c):
    """The margin's sign agrees with the verdict, and the interval's position with holds / fails /
    inconclusive."""
    m, iv = c["margin"], c["interval"]
    if m is None:
        assert c["verdict"] in ("holds", "fails"), c
        return
    if iv is None:
        assert (m > 0) == (c["verdict"] == "holds"), c
        return
    assert iv[0] <= m <= iv[1] and c["n_seeds"] >= 2, c
    want = "holds" if iv[0] > 0 else "fails" if iv[1] <= 0 else "inconclusive"
    assert c["verdict"] == want, c


@pytest.mark.parametrize("name", STUDIES)
def test_claims_pair_seeds(smoke_runs, name):
    """Smoke has one seed, so no claim shows an interval there. Here the smoke runs gain two more seeds
    (deterministic perturbations of seed 0's numbers, same sign) and the claims are checked again: every
    interval a claim returns must contain its margin and agree with its verdict."""
    from icml25 import tables

    root, cfg, _ = smoke_runs(name)
    study = registry.get_study(name)
    files = [root / "results" / "smoke" / name / m / f"seed{s}" / "metrics.json"
             for m in cfg["methods"] for s in cfg["seeds"]]
    long = tables.collect(files)
    extra = []
    for k, factor in ((1, 1.01), (2, 0.985)):
        more = long[long.seed == long.seed.min()].copy()
        more["seed"] = long.seed.max() + k
        more["value"] = more["value"] * factor
        extra.append(more)
    import pandas as pd

    agg = tables.aggregate(pd.concat([long, *extra], ignore_index=True))
    for c in tables.check_claims(study, agg, cfg):
        if c["verdict"] == registry.FLOOR:
            # both arms sit on their floor: the margin is still inside its interval, the verdict says floor
            assert c["interval"] is None or c["interval"][0] <= c["margin"] <= c["interval"][1], c
        elif c["verdict"] != "n.a.":
            _assert_evidence_agrees(c)
