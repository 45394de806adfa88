"""The DRUNet baseline (full scale only: deepinv's pretrained weights) through the study's own stages on tiny
local stand-ins: a randomly initialised deepinv DRUNet's weights served over HTTP in place of the published
file, tiny PNGs in place of Train400 / BSD68 / Set12, the full config with small sizes."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from deal_deepinv import deepinv  # noqa: F401  (the fixture)
from full_stand_in import full_cfg, staged


def _full_cfg(url: str) -> dict:
    cfg = full_cfg(url)
    assert "drunet" in cfg["methods"] and cfg["drunet"]["url"].startswith("https://huggingface.co/deepinv/drunet/")
    cfg["methods"] = [m for m in cfg["methods"] if m != "wcrr"]  # WCRR-NN's own test serves its checkpoint
    # the published file's name and query string, served from the local stand-in
    cfg["drunet"]["url"] = f"{url}/drunet/{cfg['drunet']['file']}?download=true"
    cfg["eval"]["sigmas"] = [15]
    cfg["deblur"].update(drunet_sigmas=[5, 25], pnp_iters=2)
    cfg["inverse"]["enabled"] = False  # DRUNet is not run on CT / MRI (the paper's data: test_deal_paper_data.py)
    return cfg


@pytest.fixture(scope="module")
def site(tmp_path_factory, deepinv):
    from PIL import Image

    site = tmp_path_factory.mktemp("site")
    rng = np.random.default_rng(0)
    for sub, name in (("train", "test_001.png"), ("train", "test_400.png"), ("bsd", "test001.png"), ("set12", "01.png")):
        (site / sub).mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (40, 48), dtype=np.uint8)).save(site / sub / name)
    torch.manual_seed(0)
    net = deepinv.models.DRUNet(in_channels=1, out_channels=1, pretrained=None)
    (site / "drunet").mkdir()
    torch.save(net.state_dict(), site / "drunet" / "drunet_deepinv_gray_finetune_26k.pth")
    return site, net


def test_drunet_baseline_through_the_stages(site, file_server, tmp_path):
    from icml25.core.io import read_json
    from icml25.studies.deal import data as D
    from icml25.studies.deal import evaluation as E
    from icml25.studies.deal import study as S

    root, net = site
    cfg = _full_cfg(file_server(root))
    raw, data, run = staged(cfg, tmp_path)
    out = S.train(cfg, "drunet", 0, data, None, run)
    n = sum(p.numel() for p in net.parameters())
    assert {"setting": "train", "metric": "n_params", "value": n} in out["metrics"]
    # the served weights are the ones loaded (strictly)
    loaded = S._load_model(cfg, "drunet", run, data)
    for k, v in net.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), k
    tuned = read_json(run / "tuned.json")
    assert tuned["deblur"] in (5.0, 25.0) and len(tuned["deblur_val_psnr"]) == 2
    rows = S.evaluate(cfg, "drunet", 0, data, None, run)
    got = {(r["setting"], r["metric"]): r["value"] for r in rows}
    assert {("denoise/s15", "psnr"), ("deblur", "psnr"), ("deblur", "ssim")} <= set(got)
    # denoising is DRUNet told the test noise level in deepinv's [0, 1] units
    (_, clean), = D.load_images(data / "test.npz")
    y = D.noisy(clean, 15, 0, 0)
    with torch.no_grad():
        want = net(torch.as_tensor(y)[None, None], 15 / 255)[0, 0].numpy()
    assert got[("denoise/s15", "psnr")] == pytest.approx(E.O.psnr(want, clean), abs=1e-6)


def test_drunet_pnp_passes_its_noise_level_and_the_dpir_penalty(monkeypatch):
    """The deblurring path is the study's HQS, with DRUNet at sigma_d / 255 and mu = (noise / sigma_d)^2."""
    from icml25.studies.deal import evaluation as E

    seen = {}

    def fake_hqs(y, blur, denoiser, mu, iters):
        seen.update(mu=mu, iters=iters, out=denoiser(torch.zeros(1, 1, 8, 8)))
        return y

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x, sigma):
            seen["sigma"] = sigma
            return x

    monkeypatch.setattr(E.B, "pnp_hqs", fake_hqs)
    cfg = {"deblur": {"noise": 2.55, "pnp_iters": 7, "kernel": 9, "blur_sigma": 1.6}}
    f = E.deblurrer("drunet", Net(), cfg)
    f(np.zeros((16, 16), np.float32), E.blur_of(cfg, (16, 16)), 10.0)
    assert seen["sigma"] == pytest.approx(10 / 255) and seen["iters"] == 7
    assert seen["mu"] == pytest.approx((2.55 / 10) ** 2)


def test_drunet_weights_of_another_architecture_fail(tmp_path, deepinv):
    from icml25.studies.deal import drunet

    net = deepinv.models.DRUNet(in_channels=1, out_channels=1, pretrained=None, nb=1)
    torch.save(net.state_dict(), tmp_path / "w.pth")
    with pytest.raises(RuntimeError, match="state_dict"):
        drunet.load(tmp_path / "w.pth")
