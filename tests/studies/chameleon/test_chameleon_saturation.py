"""Issue 31: the spectrum of the domain affinity and the scores are logged from the kernel the weights come
from, and the table marks a mixture exactly when one domain's weight is above 0.9."""
import json

import numpy as np
import pandas as pd
import pytest

from icml25.studies.chameleon import krls
from icml25.studies.chameleon.study import SATURATED_ABOVE, make_table, saturation_mark
from icml25.tables import aggregate

torch = pytest.importorskip("torch")

from icml25.studies.chameleon import data_prep, mixing, study  # noqa: E402

TINY = {"d_model": 32, "n_layer": 2, "n_head": 2, "ctx": 32}


def test_spectrum_is_of_the_scored_kernel_and_rebuilds_the_scores():
    X = np.random.default_rng(3).normal(size=(5, 12))
    for normalise in (True, False):
        r = krls.chameleon(X, 0.1, normalise)
        om = krls.affinity(X, normalise)
        np.testing.assert_allclose(r["eig"], np.sort(np.linalg.eigvalsh(om))[::-1], atol=1e-12)
        assert np.all(np.diff(r["eig"]) <= 1e-12)  # largest first
        # the scores are the spectrum filtered by the ridge: sum_j U_ij^2 s_j / (s_j + lambda k)
        raw = krls.krls_from_spectrum(om, 0.1)
        np.testing.assert_allclose(raw, krls.krls_raw(om, 0.1), atol=1e-10)
        np.testing.assert_allclose(raw / raw.sum(), r["S"], atol=1e-10)
        assert raw.sum() == pytest.approx(np.sum(r["eig"] / (r["eig"] + 0.1 * 5)))  # effective dimension
    # trace-normalised: eigenvalues sum to k; the raw Gram (uncentred) has another spectrum
    assert krls.chameleon(X, 0.1)["eig"].sum() == pytest.approx(5)
    assert not np.allclose(krls.chameleon(X, 0.1, False)["eig"], np.sort(np.linalg.eigvalsh(X @ X.T))[::-1])


def test_saturated_is_strictly_above_the_threshold():
    assert SATURATED_ABOVE == 0.9
    assert krls.saturated([0.95, 0.05])
    assert not krls.saturated([0.9, 0.1])
    assert not krls.saturated([0.5, 0.5])
    assert saturation_mark({"a": 0.05, "b": 0.95}) == "yes: b 0.950"
    assert saturation_mark({"a": 0.9, "b": 0.1}).startswith("no")
    assert saturation_mark({}) == ""


def _agg(weights: dict[str, list[float]], sweep: dict[float, list[float]], P):
    rows = []
    for m, w in weights.items():
        for seed in (0, 1):
            rows += [{"study": "chameleon", "scale": "mini", "method": m, "seed": seed, "setting": d,
                      "metric": "weight", "value": v} for d, v in zip(P, w)]
            for lam, sw in sweep.items():
                if m == "chameleon":
                    rows += [{"study": "chameleon", "scale": "mini", "method": m, "seed": seed,
                              "setting": f"{d}@{lam}", "metric": metric, "value": v}
                             for d, v in zip(P, sw) for metric in ("sweep_weight", "sweep_krls")]
            if m == "chameleon":
                rows += [{"study": "chameleon", "scale": "mini", "method": m, "seed": seed, "setting": f"eig{i + 1}",
                          "metric": "omega_eig", "value": v} for i, v in enumerate([2.0, 0.7, 0.3])]
    return aggregate(pd.DataFrame(rows))


def test_table_marks_exactly_the_mixtures_above_0_9():
    P = ["a", "b", "c"]
    weights = {"uniform": [1 / 3] * 3, "doremi": [0.9, 0.05, 0.05], "regmix": [0.02, 0.97, 0.01],
               "chameleon": [0.01, 0.01, 0.98]}
    sweep = {0.01: [0.2, 0.3, 0.5], 0.1: [0.01, 0.01, 0.98]}
    cfg = {"methods": list(weights), "data": {"pretrain_domains": P, "vocab_size": 4096},
           "finetune": {"domains": []}, "chameleon": {"lambda": 0.1, "lambda_sweep": list(sweep)}}
    t = make_table(_agg(weights, sweep, P), cfg).set_index("method")
    col = f"saturated (w > {SATURATED_ABOVE})"
    marked = {m for m, v in t[col].items() if str(v).startswith("yes")}
    assert marked == {"weights: RegMix-lite", "weights: Chameleon", "Chameleon weights at λ=0.1 (the runs' λ)"}
    assert t.loc["weights: Chameleon", col] == "yes: c 0.980"
    assert t.loc["weights: DoReMi", col].startswith("no")  # 0.9 is not above 0.9
    assert t.loc["Chameleon weights at λ=0.01", col].startswith("no")
    assert t.loc["Chameleon KRLS at λ=0.01", "c"] == "0.500"
    eig_row = [m for m in t.index if m.startswith("Ω eigenvalues")]
    assert len(eig_row) == 1 and [t.loc[eig_row[0], d] for d in P] == ["2", "0.7", "0.3"]


def test_fit_base_and_train_log_the_spectrum_the_scores_come_from(tmp_path):
    rng = np.random.default_rng(0)
    P, N = ["a", "b", "c"], ["d"]
    toks = {}
    for i, d in enumerate(P + N):
        lo = 10 + 60 * i
        toks[d] = {"train": rng.integers(lo, lo + 80, size=3000), "test": rng.integers(lo, lo + 80, size=400)}
    data = tmp_path / "data"
    data.mkdir()
    tok = data_prep.train_tokenizer(["hello world, some text to learn merges from " * 20], 300)
    tok.save(str(data / "tokenizer.json"))
    np.savez(data / "tokens.npz", **{f"{d}.{s}": v[s].astype(np.uint16) for d, v in toks.items() for s in v})
    meta = {"pretrain_domains": P, "new_domains": N, "vocab_size": 320,
            "domains": {d: {"natural_chars": 1000 * (i + 1)} for i, d in enumerate(P + N)}}
    (data / "domains.json").write_text(json.dumps(meta))
    cfg = {"base_seed": 0, "model": TINY, "train": {"ctx": 32, "batch": 4, "lr": 0.003, "wd": 0.1, "warmup": 0.1},
           "proxy_tokens": 512, "doremi_tokens": 512, "doremi": {"doremi_eta": 1.0, "doremi_smoothing": 1e-3},
           "embed": {"windows": 12, "ctx": 32},
           "chameleon": {"lambda": 0.1, "lambda_sweep": [0.01, 1.0], "normalise_omega": True,
                         "pt_temperature": 5.0, "ft_temperature": 0.2},
           "finetune": {"domains": ["d"], "tokens": 256, "hp": {"lr": 0.001, "warmup": 0.1}}, "base_tokens": 256}
    base = tmp_path / "base"
    base.mkdir()
    torch.set_num_threads(1)
    rec = mixing.fit_base(cfg, data, base, workers=1)
    X = np.load(base / "embeddings.npz")["pretrain"]
    om = krls.affinity(X, True)
    ch = rec["chameleon"]
    # the logged spectrum is the trace-normalised centred affinity's, the one the scores and weights come from
    np.testing.assert_allclose(ch["omega_eig"], krls.spectrum(om), atol=1e-10)
    np.testing.assert_allclose(ch["omega_eig"], krls.spectrum(np.array(ch["omega"])), atol=1e-10)
    assert sum(ch["omega_eig"]) == pytest.approx(len(P))
    assert not np.allclose(ch["omega_eig"], krls.spectrum(krls.affinity(X, False)))
    np.testing.assert_allclose(ch["S"], krls.krls(om, 0.1), atol=1e-12)
    assert ch["ridge"] == pytest.approx(0.1 * len(P))
    assert rec["sweep"]["0.01"]["ridge"] == pytest.approx(0.01 * len(P))
    assert np.isfinite(rec["proxy_loss"]) and rec["proxy_loss"] > 0
    # ...and the chameleon run logs exactly those numbers (they reach MLflow as the run's metrics)
    run = tmp_path / "run"
    run.mkdir()
    out = study.train(cfg, "chameleon", 0, data, base, run)
    got = {(r["setting"], r["metric"]): r["value"] for r in out["metrics"]}
    assert [got[(f"eig{i + 1}", "omega_eig")] for i in range(len(P))] == ch["omega_eig"]
    for lam in ("0.01", "1.0"):
        assert [got[(f"{d}@{lam}", "sweep_krls")] for d in P] == rec["sweep"][lam]["S"]
        assert [got[(f"{d}@{lam}", "sweep_weight")] for d in P] == rec["sweep"][lam]["weights"]
    assert got[("pretrain", "max_weight")] == max(ch["weights"])
    assert got[("proxy", "proxy_loss")] == rec["proxy_loss"]
    assert len(out["metrics"]) == len(got)  # no (setting, metric) logged twice
