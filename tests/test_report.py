"""Figures and the Snakemake report: built on the session's smoke tree, parsed, figures checked for content."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from reportlib import SCALE, build_report, data_bytes, landed_studies, parse_report, plain

STUDIES = landed_studies()


def _study_cfg(tree, name):
    from icml25.core import config, registry

    return registry.get_study(name), config.effective(config.load_study(tree, name), SCALE)


def _figures_json(tree, name):
    return json.loads((tree / "results" / SCALE / "figures" / name / "figures.json").read_text())


@pytest.fixture(scope="module")
def report(smoke_tree):
    return parse_report(build_report(smoke_tree))


# ---- the report ---------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", STUDIES)
def test_report_has_the_study_table_with_caption(smoke_tree, report, name):
    study, cfg = _study_cfg(smoke_tree, name)
    cats = report["categories"]
    assert name in cats, f"no report category for study {name}: {sorted(cats)}"
    path = f"results/{SCALE}/tables/{name}.html"
    assert cats[name].get("table") == [path]
    entry = report["results"][path]
    assert entry["mime_type"] == "text/html"
    page = data_bytes(entry["data_uri"]).decode()
    assert f'id="results-{name}"' in page and f'id="claims-{name}"' in page
    claims = json.loads((smoke_tree / "results" / SCALE / "tables" / f"{name}.claims.json").read_text())["claims"]
    assert claims, f"{name} has no claims"
    caption = plain(entry["caption"])
    # the caption states the paper, the stand-ins at this scale, every claim and its verdict
    assert study.paper.title in caption and study.paper.arxiv in caption
    assert "Stand-ins at this scale:" in caption and study.stand_ins.get(SCALE, "")[:40] in caption
    for c in claims:
        assert f"{c['verdict']}: {c['claim']}" in caption, c
        assert c["verdict"] in page and plain(c["claim"]) in plain(page)


@pytest.mark.slow
@pytest.mark.parametrize("name", STUDIES)
def test_report_has_every_figure_of_the_study(smoke_tree, report, name):
    study, _ = _study_cfg(smoke_tree, name)
    figs = [f for f in _figures_json(smoke_tree, name)["figures"] if f["file"].endswith(".png")]
    if study.figures is not None:
        assert figs, f"{name} has a figures hook but drew nothing"
    listed = report["categories"].get(name, {}).get("figures", [])
    assert sorted(listed) == sorted(f"results/{SCALE}/figures/{name}/{f['file']}" for f in figs)
    title = study.paper.title
    for f in figs:
        path = f"results/{SCALE}/figures/{name}/{f['file']}"
        entry = report["results"][path]
        assert entry["mime_type"] == "image/png" and entry["labels"] == {"study": name, "item": f["name"]}
        assert data_bytes(entry["data_uri"]) == (smoke_tree / path).read_bytes()
        caption = plain(entry["caption"])
        assert title in caption and "Verdicts" in caption
        if f["caption"]:
            assert " ".join(f["caption"].split())[:60] in caption


@pytest.mark.slow
def test_report_description_and_size(smoke_tree, report):
    desc = plain(report["description"])
    assert "smoke" in desc and all(s in desc for s in STUDIES)
    size = (smoke_tree / "report.html").stat().st_size
    assert size < 50e6, f"report is {size / 1e6:.1f} MB"


# ---- figure content -------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", STUDIES)
def test_figures_json_series_and_labels(smoke_tree, name):
    """figures.json (written from the Figure objects): axes labelled, one series per method drawn."""
    from matplotlib.image import imread

    from icml25.core import figures as F

    _, cfg = _study_cfg(smoke_tree, name)
    for f in _figures_json(smoke_tree, name)["figures"]:
        png = smoke_tree / "results" / SCALE / "figures" / name / f["file"]
        if png.suffix != ".png":
            continue
        img = imread(png)
        assert img.shape[0] > 200 and img.shape[1] > 200 and img[..., :3].std() > 0.02, f"{png} looks blank"
        if f["kind"] != "helper":
            continue
        assert not F.problems(f), F.problems(f)
        for ax in f["axes"]:
            assert ax["xlabel"] and ax["ylabel"], (f["name"], ax)
            if ax["kind"] in ("bars", "lines", "curves"):
                assert len(ax["series"]) == len(ax["methods"]) and set(ax["methods"]) <= set(cfg["methods"])


@pytest.mark.slow
def test_sand_figure_objects(smoke_tree):
    """The Figure objects SAND's hook returns, inspected directly (not through the helper's metadata):
    one bar group per method in every accuracy panel, one loss curve per method, the gains with k."""
    from matplotlib.container import BarContainer

    from icml25 import tables
    from icml25.core import figures as F

    study, cfg = _study_cfg(smoke_tree, "sand")
    res = smoke_tree / "results" / SCALE / "sand"
    run_dirs = {(m, s): res / m / f"seed{s}" for m in cfg["methods"] for s in cfg["seeds"]}
    long = tables.collect([d / "metrics.json" for d in run_dirs.values()])
    agg = tables.aggregate(long)
    ctx = F.FigureContext(study, cfg, agg, long, run_dirs)
    figs = {f.get_label(): f for f in F._call_hook(study.figures, agg, cfg, smoke_tree, ctx)}
    try:
        assert set(figs) == {"accuracy_by_method", "sand_gains", "train_loss"}
        labels = [study.methods[m].label for m in cfg["methods"]]
        datasets = cfg["data"]["datasets"]
        acc = [ax for ax in figs["accuracy_by_method"].axes if ax.get_visible()]
        assert len(acc) == len(datasets)
        for ax in acc:
            bars = [c for c in ax.containers if isinstance(c, BarContainer)]
            assert [b.get_label() for b in bars] == labels, ax.get_title()
            assert ax.get_xlabel() == "method" and ax.get_ylabel() in ("test accuracy", "test MAE, train-std units (lower better)")
        stars = [ln for ax in acc for ln in ax.lines if ln.get_gid() == F.REFERENCE]
        assert len(stars) == 5  # SAND on Fashion; SAND and STG (paper protocol) on both Madelon sets (the paper's numbers)
        for ax in figs["train_loss"].axes:
            series = [ln for ln in ax.lines if not ln.get_label().startswith("_")]
            assert [ln.get_label() for ln in series] == labels and ax.get_xlabel() == "epoch"
        for ax in figs["sand_gains"].axes:
            data = [ln for ln in ax.lines if ln.get_gid() != F.REFERENCE]
            ref = [ln for ln in ax.lines if ln.get_gid() == F.REFERENCE]
            assert len(data) == 1 and len(ref) == 1 and ax.get_ylabel() and ax.get_xlabel() == "feature rank"
    finally:
        import matplotlib.pyplot as plt

        plt.close("all")


@pytest.mark.slow
def test_figures_are_mlflow_artifacts_of_every_run(smoke_tree):
    from mlflow.tracking import MlflowClient

    c = MlflowClient(tracking_uri=f"sqlite:///{smoke_tree / 'mlflow.db'}")
    for name in STUDIES:
        pngs = {f["file"] for f in _figures_json(smoke_tree, name)["figures"] if f["file"].endswith(".png")}
        exp = c.get_experiment_by_name(f"{SCALE}/{name}")
        runs = c.search_runs([exp.experiment_id])
        assert runs
        for r in runs:
            arts = {a.path.split("/", 1)[1] for a in c.list_artifacts(r.info.run_id, "figures")}
            assert pngs | {"figures.json"} <= arts, (r.info.run_name, arts)


# ---- the helper, without a pipeline ------------------------------------------------------------------------

def _agg():
    import pandas as pd

    rows = []
    for m, vals in {"ours": [0.9, 0.8], "base": [0.6, 0.7], "ref": [0.95, 0.97]}.items():
        for s in ("a", "b"):
            rows += [{"method": m, "seed": i, "setting": s, "metric": "acc", "value": v} for i, v in enumerate(vals)]
    long = pd.DataFrame(rows)
    long = long[~((long.method == "base") & (long.setting == "b"))]  # one missing cell
    from icml25 import tables

    return tables.aggregate(long.assign(study="x", scale="smoke")[
        ["study", "scale", "method", "seed", "setting", "metric", "value"]])


def test_helper_draws_one_series_per_method_and_marks_the_paper():
    from icml25.core import figures as F

    agg = _agg()
    fig, (a, b) = F.panels(2, name="acc")
    F.bars(a, agg, ["ours", "base", "ref"], "a", "acc", paper={"ours": 0.92}, ylabel="accuracy")
    F.bars(b, agg, ["ours", "base", "ref"], "b", "acc", paper=0.9, ylabel="accuracy")
    meta = F.describe(fig)
    assert meta["axes"][0]["series"] == ["ours", "base", "ref"] and len(meta["axes"][0]["references"]) == 1
    assert meta["axes"][1]["series"] == ["ours", "ref"] and meta["axes"][1]["methods"] == ["ours", "ref"]
    assert F.problems(meta) == []
    fig2, (c,) = F.panels(1)
    c.plot([0, 1], [0, 1], label="x")
    assert any("axis label missing" in p for p in F.problems(F.describe(fig2)))
    F.lines(c, agg, ["ours", "ref"], "acc", x={"a": 1, "b": 2}, xlabel="width", ylabel="acc")
    assert F.series_labels(c) == ["x", "ours", "ref"]
    import matplotlib.pyplot as plt

    plt.close("all")


def test_render_study_without_hook_and_with_a_bad_figure(tmp_path):
    from icml25.core import figures as F

    agg = _agg()
    cfg = {"scale": "smoke", "methods": ["ours", "base", "ref"]}
    recs = F.render_study(SimpleNamespace(name="nofig", figures=None), cfg, agg, None, {}, [], tmp_path / "nofig")
    assert recs == [] and json.loads((tmp_path / "nofig" / "figures.json").read_text())["figures"] == []

    def good(agg, cfg, out_dir, ctx):
        fig, (ax,) = F.panels(1, name="acc")
        F.bars(ax, agg, cfg["methods"], "a", "acc", ylabel="accuracy")
        F.caption(fig, "Accuracy of *every* method_name.")
        (out_dir / "own.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
        return [fig, out_dir / "own.svg"]

    recs = F.render_study(SimpleNamespace(name="ok", figures=good), cfg, agg, None, {}, [], tmp_path / "ok")
    assert [r["file"] for r in recs] == ["acc.png", "own.svg"]
    assert (tmp_path / "ok" / "acc.rst").read_text() == "Accuracy of \\*every\\* method\\_name.\n"

    def bad(agg, cfg, out_dir):  # the old 3-argument hook signature still works
        fig, (ax,) = F.panels(1, name="bad")
        ax.plot([0, 1], [1, 2], label="ours")
        return [fig]

    with pytest.raises(RuntimeError, match="axis label missing"):
        F.render_study(SimpleNamespace(name="bad", figures=bad), cfg, agg, None, {}, [], tmp_path / "bad")
    assert not (tmp_path / "bad").exists() and not list(tmp_path.glob(".bad.tmp*"))
