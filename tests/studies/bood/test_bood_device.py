"""The `device` setting of bood (resolved by core.runtime.device_of, tested in tests/core/test_runtime.py): which
scales use which, and that every torch stage (stage-1 encoder, encoding, the decoder's training and
sampling, BOOD's boundary search, Dream-OOD's sampler, stage-3 training with each regulariser, scoring, SD)
puts its models and batches on the resolved device. Only the CPU exists here, so the CUDA case runs with
`placement.place` watched: the test records where each model and batch is sent (and leaves them on the host)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from icml25.core.config import effective, load_study
from icml25.core.errors import UserError
from icml25.studies.bood import placement as P

ROOT = Path(__file__).resolve().parents[3]


def test_scales_declare_their_device():
    from icml25.studies.bood.study import validate

    raw = load_study(ROOT, "bood")
    want = {"smoke": "cpu", "mini": "cpu", "full": "auto", "full-imagenet100": "auto"}
    assert {s: effective(raw, s)["device"] for s in want} == want
    cfg = effective(raw, "mini")
    validate(cfg)
    with pytest.raises(UserError, match="device"):
        validate({**cfg, "device": "gpu"})


@pytest.fixture(scope="module")
def smoke_data(tmp_path_factory):
    from icml25.studies.bood import data as D

    cfg = effective(load_study(ROOT, "bood"), "smoke")
    raw, out = tmp_path_factory.mktemp("raw"), tmp_path_factory.mktemp("data")
    D.download(cfg, raw)
    D.preprocess(cfg, raw, out)
    return cfg, out


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_stage_places_models_and_batches_on_the_configured_device(device, smoke_data, tmp_path, monkeypatch):
    from icml25.studies.bood import decoder as Dec, study

    cfg, data_dir = smoke_data
    cfg = {**cfg, "device": device}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: device == "cuda")
    sent = []  # (what, device type) of every placement

    def watch(obj, dev):
        sent.append((type(obj).__name__, torch.device(dev).type))
        return obj.to(dev) if torch.device(dev).type == "cpu" else obj  # no CUDA here: left on the host

    monkeypatch.setattr(P, "place", watch)
    base = tmp_path / "base"
    base.mkdir()
    study.fit_base(cfg, data_dir, base)
    kinds = {k for k, _ in sent}
    # stage 1 (encoder), the judge and the decoder are built where the config says, and so are their batches
    assert {"Encoder", "ConvNet", "Linear", "Denoiser", "Tensor"} <= kinds, kinds
    for method in ("bood", "dream_ood", "vos", "npos", "energy"):
        run = tmp_path / method
        run.mkdir()
        n0 = len(sent)
        study.train(cfg, method, 0, data_dir, base, run)
        assert len(sent) > n0
        if method == "vos":
            assert "VirtualOutlierSynthesizingRegLoss" in {k for k, _ in sent[n0:]}
        # checkpoints are written from the host: they load anywhere
        assert all(v.device.type == "cpu" for v in torch.load(run / "model.pt", weights_only=True).values())
    n0 = len(sent)
    rows = study.evaluate(cfg, "energy", 0, data_dir, base, tmp_path / "energy")
    assert any(k == "ConvNet" for k, _ in sent[n0:]) and any(k == "Tensor" for k, _ in sent[n0:])
    assert np.isfinite([r["value"] for r in rows]).all()
    assert {d for _, d in sent} == {device}, [s for s in sent if s[1] != device][:5]  # nothing placed elsewhere

    # SD (full scale) is built on the same device
    got = {}
    monkeypatch.setattr(Dec, "StableDiffusionDecoder", lambda model, **kw: got.update(kw, model=model) or "sd")
    assert study.sd_decoder({"model": "sd-dir"}, P.device_of(cfg)) == "sd"
    assert got["device"] == torch.device(device)


def test_boundary_search_runs_where_it_is_told(monkeypatch):
    """The steps on the features go to the given device, the results come back to the host."""
    from icml25.studies.bood import synthesis as S

    sent = []
    monkeypatch.setattr(P, "place", lambda obj, dev: sent.append(torch.device(dev).type) or obj)
    anchors = np.eye(3, dtype=np.float32)
    z = np.array([[1.0, 0.2, 0.0], [0.1, 1.0, 0.3]], np.float32)
    steps, crossed = S.steps_to_boundary(z, np.array([0, 1]), anchors, 0.1, 0.1, 50, torch.device("cuda"))
    assert sent == ["cuda"] * 3 and steps.device.type == crossed.device.type == "cpu"
    S.push(crossed, np.array([0, 1]), anchors, 0.1, 0.1, 2, torch.device("cuda"))
    assert sent == ["cuda"] * 6
