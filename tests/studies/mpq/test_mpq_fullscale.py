"""The full-scale networks and loaders of mpq: ResNet-18/50 and MobileNet-V2 at their standard parameter counts,
the ImageNet stem's max-pool, the complexity loss at one-hot logits against MACs counted by forward hooks on each
architecture (depthwise convs per group), and the Flowers-102 / Food-101 / ImageNet-folder loaders on tiny local
stand-ins through the study's own preprocess (streamed into memmaps that the stages read lazily)."""
from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest
import torch

from mpq_macs import hooked_macs

from icml25.studies.mpq import data as D
from icml25.studies.mpq import quant as Q
from icml25.studies.mpq import study as S
from icml25.studies.mpq import training as T
from icml25.studies.mpq.model import Net

IMAGENET = dict(width=[64, 128, 256, 512], in_ch=3, classes=1000, stem_stride=2)
ARCHS = {
    "resnet18": dict(IMAGENET, blocks=[2, 2, 2, 2], stem_kernel=7, stem_pool=True, arch="resnet"),
    "resnet50": dict(IMAGENET, blocks=[3, 4, 6, 3], stem_kernel=7, stem_pool=True, arch="resnet_bottleneck"),
    "mobilenetv2": dict(IMAGENET, stem_kernel=3, arch="mobilenetv2"),
}
# torchvision's parameter counts (torchvision cannot be installed here, so they are constants)
TORCHVISION_PARAMS = {"resnet18": 11_689_512, "resnet50": 25_557_032, "mobilenetv2": 3_504_872}


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_fp_imagenet_models_have_the_standard_parameter_counts(name):
    torch.manual_seed(0)
    net = Net(mode="fp", image=224, **ARCHS[name])
    # conv, BN and classifier weights; the quantisers' clip ranges (act_range) are not model weights
    n = sum(p.numel() for k, p in net.named_parameters() if "act_range" not in k)
    assert n == TORCHVISION_PARAMS[name]


@pytest.mark.parametrize("name", ["resnet18", "resnet50"])
def test_imagenet_stem_max_pool_halves_the_map(name):
    kw = dict(ARCHS[name], width=[8, 8, 8, 8])
    with torch.no_grad():
        pooled = Net(mode="fp", image=64, **kw).eval().features(torch.rand(1, 3, 64, 64))
        plain = Net(mode="fp", image=64, **dict(kw, stem_pool=False)).eval().features(torch.rand(1, 3, 64, 64))
    assert pooled.shape[-1] == 2 and plain.shape[-1] == 4  # 64 -> 32 (conv) -> 16 (pool) -> 8 -> 4 -> 2
    spec_hw = Net(mode="fp", image=224, **ARCHS[name]).specs[-2]["hw"]
    assert spec_hw == 7  # the BitOPs count sees the pooled 56x56 map at 224 px, ending at 7x7


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_complexity_at_one_hot_logits_equals_hooked_macs_times_bits(name):
    kw = dict(ARCHS[name])
    if name != "mobilenetv2":
        kw["width"] = [8, 16, 16, 32]  # same layout, fewer channels (keeps the test fast)
    net = Net(mode="search", image=32, **kw)
    macs = hooked_macs(net, 32, channels=3)
    assert set(macs) == {L["name"] for L in net.specs}  # every layer ran in the forward pass
    rng = np.random.default_rng(1)
    policy = {n: [int(rng.choice([2, 3, 4, 6])), int(rng.choice([2, 3, 4, 6]))] for n in net.mix_layers()}
    T.onehot_(net, policy)
    want = sum(m * (policy[n][0] * policy[n][1] if n in policy else 64) for n, m in macs.items())
    assert float(net.expected_bitops().detach()) == pytest.approx(want, rel=1e-6)
    assert Q.policy_bitops(net.specs, policy) == pytest.approx(want)
    assert set(policy) == {L["name"] for L in net.specs if L["name"] not in ("stem", "fc")}  # first/last fixed
    if name == "mobilenetv2":  # a depthwise conv costs C * 3 * 3 * H * W, not C^2 * 3 * 3 * H * W
        dw = next(L for L in net.specs if L["name"].endswith(".dw"))
        assert dw["groups"] == dw["cin"] and macs[dw["name"]] == dw["cout"] * 9 * dw["hw"] ** 2


# ---- loaders on tiny local stand-ins --------------------------------------------------------------------

def _png_bytes(arr: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")  # lossless, under a .jpg name: PIL decodes by content
    return buf.getvalue()


def _add(tar, name, blob):
    info = tarfile.TarInfo(name)
    info.size = len(blob)
    tar.addfile(info, io.BytesIO(blob))


def _images(n, size=16, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def _cfg(proxy, source, n_train=0, n_test=0, target=None):
    return {"data_seed": 0, "target": {"source": "image_folder", "root": str(target)},
            "active_proxies": [proxy], "proxies": {proxy: {"source": source, "n_train": n_train, "n_test": n_test}},
            "model": {"image": 16}}


def _imagenet(root, seed=3):
    from PIL import Image

    imgs = _images(6, seed=seed)
    k = 0
    for split in ("train", "val"):
        for wnid in ("n01", "n02"):
            (root / split / wnid).mkdir(parents=True)
            for i in range(2 if split == "train" else 1):
                Image.fromarray(imgs[k]).save(root / split / wnid / f"{i}.png")
                k += 1
    return imgs


def test_flowers102_loader_streams_the_tgz_with_the_mat_splits(tmp_path):
    from scipy.io import savemat

    raw, out = tmp_path / "raw", tmp_path / "out"
    raw.mkdir()
    imgs = _images(8)
    labels = np.array([3, 1, 2, 1, 3, 2, 1, 2])  # 1-based, one per image_0000k.jpg
    with tarfile.open(raw / "102flowers.tgz", "w:gz") as tar:
        for i in [5, 0, 7, 2, 1, 6, 3, 4]:  # archive order differs from the split order
            _add(tar, f"jpg/image_{i + 1:05d}.jpg", _png_bytes(imgs[i]))
    savemat(raw / "imagelabels.mat", {"labels": labels[None, :]})
    savemat(raw / "setid.mat", {"trnid": np.array([[4, 1]]), "valid": np.array([[7]]), "tstid": np.array([[2, 3, 5, 6, 8]])})
    _imagenet(tmp_path / "imagenet")
    (raw / "sources.json").write_text(json.dumps({"target": str(tmp_path / "imagenet")}))
    S.preprocess(_cfg("flowers", "flowers102", target=tmp_path / "imagenet"), raw, out)
    x, y = D.read_split(out, "proxy_flowers_train")
    assert isinstance(x, np.memmap) and x.shape == (3, 3, 16, 16)
    # train = trnid sorted (1, 4) then valid (7); labels 0-based
    for row, img_no in enumerate([1, 4, 7]):
        np.testing.assert_array_equal(x[row], imgs[img_no - 1].transpose(2, 0, 1))
        assert y[row] == labels[img_no - 1] - 1
    qx, qy = D.read_split(out, "proxy_flowers_test")
    assert qx.shape[0] == 5 and qy.tolist() == (labels[[1, 2, 4, 5, 7]] - 1).tolist()
    # a batch as the stages take it (fancy index -> float tensor) is the decoded image
    batch = T.to_float(x[np.array([2, 0])])
    torch.testing.assert_close(batch[0], torch.as_tensor(imgs[6].transpose(2, 0, 1), dtype=torch.float32) / 255)


def test_food101_loader_reads_meta_then_streams_the_images(tmp_path):
    raw, out = tmp_path / "raw", tmp_path / "out"
    raw.mkdir()
    imgs = _images(6, seed=1)
    classes = ["apple_pie", "ramen"]
    files = {"apple_pie": ["11", "12", "13"], "ramen": ["21", "22", "23"]}
    train = {"apple_pie": ["apple_pie/11", "apple_pie/13"], "ramen": ["ramen/22", "ramen/23"]}
    test = {"apple_pie": ["apple_pie/12"], "ramen": ["ramen/21"]}
    with tarfile.open(raw / "food-101.tar.gz", "w:gz") as tar:
        k = 0
        for c in classes:
            for f in files[c]:
                _add(tar, f"food-101/images/{c}/{f}.jpg", _png_bytes(imgs[k]))
                k += 1
        # the meta files come after the images (as a stand-in for any archive order)
        _add(tar, "food-101/meta/classes.txt", "\n".join(classes).encode())
        _add(tar, "food-101/meta/train.json", json.dumps(train).encode())
        _add(tar, "food-101/meta/test.json", json.dumps(test).encode())
    _imagenet(tmp_path / "imagenet")
    (raw / "sources.json").write_text(json.dumps({"target": str(tmp_path / "imagenet")}))
    S.preprocess(_cfg("food", "food101", n_train=3, target=tmp_path / "imagenet"), raw, out)
    x, y = D.read_split(out, "proxy_food_train")
    assert isinstance(x, np.memmap) and x.shape == (3, 3, 16, 16)  # a seeded subset of n_train = 3 of the 4
    index = {"apple_pie/11": 0, "apple_pie/13": 2, "ramen/22": 4, "ramen/23": 5}
    names, labels = D.food_split(raw, "train")
    keep = D.subset(None, labels, 3, 0 + 5)
    for row, i in enumerate(keep):
        item = names[i][len("food-101/images/"):-len(".jpg")]
        np.testing.assert_array_equal(x[row], imgs[index[item]].transpose(2, 0, 1))
        assert y[row] == classes.index(item.split("/")[0])
    qx, qy = D.read_split(out, "proxy_food_test")
    np.testing.assert_array_equal(qx[1], imgs[3].transpose(2, 0, 1))
    assert qy.tolist() == [0, 1]


def test_imagenet_target_is_a_memmap_read_batch_by_batch(tmp_path):
    raw, out = tmp_path / "raw", tmp_path / "out"
    raw.mkdir()
    imgs = _imagenet(tmp_path / "imagenet")
    (raw / "sources.json").write_text(json.dumps({"target": str(tmp_path / "imagenet")}))
    cfg = _cfg("c", "cifar10", target=tmp_path / "imagenet")
    cfg["active_proxies"] = []
    S.preprocess(cfg, raw, out)
    x, y = D.read_split(out, "target_train")
    assert isinstance(x, np.memmap) and str(x.filename).endswith("target_train.x.npy") and x.mode == "r"
    assert not x.flags.writeable  # opened read-only, never loaded as a whole array
    assert y.tolist() == [0, 0, 1, 1]
    for row in range(4):
        np.testing.assert_array_equal(x[row], imgs[row].transpose(2, 0, 1))
    vx, vy = D.read_split(out, "target_test")
    np.testing.assert_array_equal(vx[1], imgs[5].transpose(2, 0, 1))
    # the FP model's accuracy loop and the deployment read it as they read the in-memory mini arrays
    net = Net(mode="fp", width=[4, 4, 4], in_ch=3, classes=2, image=16)
    assert 0.0 <= T.accuracy(net, x, y, batch=3) <= 1.0


def test_mobilenetv2_adds_the_shortcut_exactly_on_stride_1_same_width_blocks():
    torch.manual_seed(0)
    net = Net(mode="fp", image=32, **ARCHS["mobilenetv2"]).eval()
    first = {k: b["convs"][0] for k, b in enumerate(net.block_desc)}  # block k's first conv (its input)
    ins, projs = {}, {}
    hooks = [net.layers[c.replace(".", "_")].register_forward_pre_hook(
        lambda m, a, k=k: ins.__setitem__(k, a[0])) for k, c in first.items()]
    hooks += [net.bns[b["convs"][-1].replace(".", "_")].register_forward_hook(
        lambda m, a, o, k=k: projs.__setitem__(k, o)) for k, b in enumerate(net.block_desc) if b["kind"] == "inverted"]
    with torch.no_grad():
        net(torch.rand(2, 3, 32, 32))
    for h in hooks:
        h.remove()
    residual = [k for k, b in enumerate(net.block_desc) if b.get("residual")]
    assert len(residual) == 10  # torchvision: 1 + 2 + 3 + 2 + 2 repeated blocks at stride 1
    for k in projs:
        want = projs[k] + ins[k] if k in residual else projs[k]
        torch.testing.assert_close(ins[k + 1], want)
