"""Where mpq's torch stages run: the `device` setting per scale, its resolution (auto -> CUDA when available,
cuda without CUDA -> a clear error), the networks and batches of every stage (FP pretraining, each search kind,
deployment, accuracy, sharpness, BN re-estimation) on the resolved device, and host-side checkpoints.

Only the CPU exists here, so placement is checked on torch's `meta` device: a stage told to run there must
build its networks and move its batches there (a stage that ignored the setting would run on the CPU and fail
these tests). The real CUDA run is `test_stages_run_on_cuda`, skipped without a GPU."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from icml25.core import config as C
from icml25.core.errors import UserError
from icml25.studies.mpq import data as D
from icml25.studies.mpq import study as S
from icml25.studies.mpq import training as T
from icml25.studies.mpq.model import Net, layer_specs

ROOT = Path(__file__).resolve().parents[3]
WIDTH = [4, 8, 8]
CFG = {
    "model": {"width": WIDTH, "blocks": [1, 1, 1], "in_ch": 1, "classes": 10, "image": 28, "stem_kernel": 3,
              "stem_stride": 2, "bits": [2, 3, 4, 6]},
    "fp": {"lr": 0.05, "wd": 1e-4, "batch": 16, "epochs": {"target": 1, "mnist": 1}},
    "search": {"epochs": 1, "batch": 16, "lr": 0.02, "lr_alpha": 0.1, "wd": 1e-4, "budget_bits": 3, "tol": 0.05,
               "lambda_c": 1.0, "rho": 0.05, "rho_max": 0.1, "alpha": 0.001, "aux_weight": 20, "pnorm": 3},
    "deploy": {"steps": 2, "batch": 16, "lr": 0.01, "wd": 4e-5},
    "eval": {"sharpness_n": 16, "sharpness_rho": 0.05, "bn_batches": 2},
    "active_proxies": ["mnist"], "search_on": {m: ["mnist"] for m in ("asga", "dmpq", "sam", "gmpq")},
    "base_seed": 0,
}
META = torch.device("meta")


def _data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 1, 28, 28), dtype=np.uint8), rng.integers(0, 10, n).astype(np.int64)


def _dirs(tmp_path):
    data_dir, base_dir, run_dir = tmp_path / "data", tmp_path / "base", tmp_path / "run"
    for d in (data_dir, base_dir, run_dir):
        d.mkdir()
    x, y = _data()
    for split in ("target_train", "target_test", "proxy_mnist_train", "proxy_mnist_test"):
        D.write_npz(data_dir / f"{split}.npz", x, y)
    return data_dir, base_dir, run_dir


class _Stop(Exception):
    pass


@pytest.fixture
def placements(monkeypatch):
    """Records (parameter device, input device) of every network forward; stops the stage after `stop_after`."""
    calls, state = [], {"stop_after": 1}
    real = Net.features

    def spy(self, x):
        calls.append((next(self.parameters()).device.type, x.device.type))
        if len(calls) >= state["stop_after"]:
            raise _Stop
        return real(self, x)

    monkeypatch.setattr(Net, "features", spy)
    return calls, state


def test_device_setting_per_scale():
    raw = C.load_study(ROOT, "mpq")
    assert C.effective(raw, "smoke")["device"] == C.effective(raw, "mini")["device"] == "cpu"
    for scale in ("full", "full-resnet50", "full-mobilenetv2", "full-flowers", "full-food"):
        assert C.effective(raw, scale)["device"] == "auto", scale


def test_validate_refuses_an_unknown_device():
    cfg = C.effective(C.load_study(ROOT, "mpq"), "mini")
    with pytest.raises(UserError, match="device"):
        S.validate(cfg | {"device": "tpu"})


def test_fp_pretraining_and_every_search_kind_run_on_the_configured_device(monkeypatch, placements):
    calls, state = placements
    monkeypatch.setattr(T, "device_of", lambda cfg: META)
    x, y = _data()
    fp = Net(WIDTH, mode="fp").state_dict()
    with pytest.raises(_Stop):
        T.train_fp(CFG, x, y, 1, 0)
    assert calls == [("meta", "meta")]
    for method in T.SEARCH_KINDS:  # dmpq, sam, asga, gmpq (FP teacher then super-net), oracle
        calls.clear()
        state["stop_after"] = 2 if method == "gmpq" else 1
        with pytest.raises(_Stop):
            T.search(CFG, method, 0, x, y, fp, fp_model_state=fp)
        assert calls == [("meta", "meta")] * state["stop_after"], method


def test_deployment_and_the_evaluation_helpers_follow_the_network(tmp_path, monkeypatch, placements):
    calls, _ = placements
    monkeypatch.setattr(T, "device_of", lambda cfg: META)
    x, y = _data()
    T.write_policy(tmp_path / "p.json", T.uniform_policy(layer_specs(WIDTH), 3), {})
    with pytest.raises(_Stop):
        T.deploy(CFG, tmp_path / "p.json", Net(WIDTH, mode="fp").state_dict(), (x, y), (x, y), 0)
    assert calls == [("meta", "meta")]
    net = Net(WIDTH, mode="search").to(META)
    for helper in (lambda: T.accuracy(net, x, y), lambda: T.loss_sharpness(net, x[:8], y[:8], 0.05),
                   lambda: T.recalibrate_bn(net, x, 1, 16, 0)):
        calls.clear()
        with pytest.raises(_Stop):
            helper()
        assert calls == [("meta", "meta")]


def test_study_stages_load_host_checkpoints_onto_the_device(tmp_path, monkeypatch):
    """fit_base writes host tensors that load with map_location cpu; train and evaluate load them onto the
    configured device; fit_base trains and checks accuracy there too."""
    data_dir, base_dir, run_dir = _dirs(tmp_path)
    S.fit_base(CFG | {"device": "cpu"}, data_dir, base_dir)  # a real (CPU) run: its checkpoints
    for name in ("target", "mnist"):
        state = torch.load(base_dir / f"fp_{name}.pt", map_location="cpu")
        assert all(v.device.type == "cpu" for v in state.values())
        Net(WIDTH, mode="fp").load_state_dict(state)  # strict: every key, every shape
    calls = []

    def spy(self, xb):
        calls.append((next(self.parameters()).device.type, xb.device.type))
        raise _Stop

    monkeypatch.setattr(Net, "features", spy)
    monkeypatch.setattr(T, "device_of", lambda cfg: META)
    T.write_policy(run_dir / "policy_mnist.json", T.uniform_policy(layer_specs(WIDTH), 3), {})
    (tmp_path / "base2").mkdir()
    stages = {"train": lambda: S.train(CFG, "dmpq", 0, data_dir, base_dir, run_dir),
              "evaluate": lambda: S.evaluate(CFG, "dmpq", 0, data_dir, base_dir, run_dir),
              "fit_base": lambda: S.fit_base(CFG, data_dir, tmp_path / "base2")}
    for name, stage in stages.items():
        calls.clear()
        with pytest.raises(_Stop):
            stage()
        assert calls == [("meta", "meta")], name
    # fit_base's accuracy network (built after training): training stubbed to return a host state
    monkeypatch.setattr(T, "train_fp", lambda cfg, x, y, epochs, seed: Net(WIDTH, mode="fp").state_dict())
    calls.clear()
    with pytest.raises(_Stop):
        S.fit_base(CFG, data_dir, tmp_path / "base2")
    assert calls == [("meta", "meta")]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_stages_run_on_cuda(tmp_path):
    cfg = CFG | {"device": "cuda"}
    x, y = _data()
    fp = T.train_fp(cfg, x, y, 1, 0)
    assert all(v.device.type == "cpu" for v in fp.values())  # host state: loads anywhere
    res = T.search(cfg, "asga", 0, x, y, fp, eval_x=x[:16], eval_y=y[:16])
    T.write_policy(tmp_path / "p.json", res["policy"], {})
    out = T.deploy(cfg, tmp_path / "p.json", fp, (x, y), (x, y), 0)
    assert 0 <= out["target_top1"] <= 1 and np.isfinite(out["sharpness_target"])
