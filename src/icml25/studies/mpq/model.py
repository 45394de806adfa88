"""The searchable networks, each in three forms that share one parameter layout: full precision (the FP
model), super-net (searchable MixConv layers) and fixed policy (QConv layers).

Architectures (`arch`): `resnet` (BasicBlocks: ResNet-8-mini at mini, ResNet-18 with `blocks: [2, 2, 2, 2]`),
`resnet_bottleneck` (ResNet-50: 1x1 -> 3x3 (stride here, torchvision's v1.5) -> 1x1 x4) and `mobilenetv2`
(inverted residuals with depthwise 3x3 convs, torchvision's layout at width 1.0). The first conv and the
classifier stay at 8 bits (as GMPQ / EdMIPS keep first and last layers at high precision); every other conv
(block convs, depthwise convs, 1x1 shortcuts, MobileNet-V2's last 1x1 conv) is searchable with its own weight
and activation bits (GMPQ's mixres shortcuts are MixActivConv2d layers too). The stem is 3x3 stride 2 at mini
(28x28 inputs); the ImageNet stem of the ResNets is 7x7 stride 2 plus a 3x3 stride-2 max-pool (`stem_pool`).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .quant import MixConv, QConv, conv_macs

FIXED_BITS = 8
ARCHS = ("resnet", "resnet_bottleneck", "mobilenetv2")
# MobileNet-V2 (Sandler et al. 2018, Table 2): expansion t, channels c, repeats n, first stride s
MBV2_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                 (6, 320, 1, 1)]
MBV2_STEM, MBV2_LAST = 32, 1280


def block_names(blocks: list[int]) -> list[tuple[str, int, int]]:
    """(block name, stage, index in stage) of every residual block."""
    return [(f"b{i}" if n == 1 else f"b{i}_{j}", i, j) for i, n in enumerate(blocks) for j in range(n)]


def _out(hw: int, k: int, s: int, p: int) -> int:
    return (hw + 2 * p - k) // s + 1


def _conv(name, cin, cout, k, s, hw, searchable=True, groups=1):
    return dict(name=name, cin=cin, cout=cout, k=k, s=s, p=k // 2, groups=groups, hw=_out(hw, k, s, k // 2),
                searchable=searchable)


def architecture(width: list[int], image: int = 28, stem_stride: int = 2, blocks=None, in_ch: int = 1,
                 classes: int = 10, stem_kernel: int = 3, arch: str = "resnet", stem_pool: bool = False):
    """(layer specs in construction order, block descriptions for the forward pass). A spec: name, cin, cout,
    kernel, stride, padding, groups, output size, MACs, searchable; a block: kind, its conv names, shortcut."""
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r} (known: {ARCHS})")
    specs, desc = [], []
    stem_out = MBV2_STEM if arch == "mobilenetv2" else width[0]
    specs.append(_conv("stem", in_ch, stem_out, stem_kernel, stem_stride, image, searchable=False))
    hw = specs[-1]["hw"]
    if stem_pool:  # the ImageNet ResNet stem: 3x3 stride-2 max-pool, padding 1
        hw = _out(hw, 3, 2, 1)
    cin = stem_out
    if arch == "mobilenetv2":
        k = 0
        for t, c, n, s0 in MBV2_SETTINGS:
            for j in range(n):
                s, hidden, name = (s0 if j == 0 else 1), cin * t, f"m{k}"
                convs = []
                if t != 1:
                    specs.append(_conv(f"{name}.expand", cin, hidden, 1, 1, hw))
                    convs.append(f"{name}.expand")
                specs.append(_conv(f"{name}.dw", hidden, hidden, 3, s, hw, groups=hidden))
                hw = specs[-1]["hw"]
                specs.append(_conv(f"{name}.project", hidden, c, 1, 1, hw))
                convs += [f"{name}.dw", f"{name}.project"]
                desc.append(dict(kind="inverted", convs=convs, residual=(s == 1 and cin == c)))
                cin, k = c, k + 1
        specs.append(_conv("last", cin, MBV2_LAST, 1, 1, hw))
        desc.append(dict(kind="conv", convs=["last"]))
        cin = MBV2_LAST
    else:
        expansion = 4 if arch == "resnet_bottleneck" else 1
        for name, i, j in block_names(list(blocks or [1] * len(width))):
            mid, cout = width[i], width[i] * expansion
            s = 2 if (i > 0 and j == 0) else 1
            if expansion == 1:
                specs.append(_conv(f"{name}.conv1", cin, cout, 3, s, hw))
                hw_out = specs[-1]["hw"]
                specs.append(_conv(f"{name}.conv2", cout, cout, 3, 1, hw_out))
                convs = [f"{name}.conv1", f"{name}.conv2"]
            else:
                specs.append(_conv(f"{name}.conv1", cin, mid, 1, 1, hw))
                specs.append(_conv(f"{name}.conv2", mid, mid, 3, s, hw))
                hw_out = specs[-1]["hw"]
                specs.append(_conv(f"{name}.conv3", mid, cout, 1, 1, hw_out))
                convs = [f"{name}.conv1", f"{name}.conv2", f"{name}.conv3"]
            short = None
            if s != 1 or cin != cout:
                specs.append(_conv(f"{name}.short", cin, cout, 1, s, hw))
                short = f"{name}.short"
            desc.append(dict(kind="residual", convs=convs, short=short))
            cin, hw = cout, hw_out
    specs.append(dict(name="fc", cin=cin, cout=classes, k=1, s=1, p=0, groups=1, hw=1, searchable=False))
    for L in specs:
        L["macs"] = conv_macs(L["cin"], L["cout"], L["k"], L["hw"], L["groups"])
        L["wbits"] = L["abits"] = FIXED_BITS
    return specs, desc


def layer_specs(width: list[int], image: int = 28, stem_stride: int = 2, blocks=None, in_ch: int = 1,
                classes: int = 10, stem_kernel: int = 3, arch: str = "resnet", stem_pool: bool = False) -> list[dict]:
    """The conv layers in order: name, cin, cout, kernel, stride, padding, groups, output size, MACs, searchable."""
    return architecture(width, image, stem_stride, blocks, in_ch, classes, stem_kernel, arch, stem_pool)[0]


class Net(nn.Module):
    """mode: 'fp' (no quantisation), 'search' (MixConv super-net), 'fixed' (QConv at `policy` bits)."""

    def __init__(self, width, bits=(2, 3, 4, 6), mode="fp", policy=None, image=28, stem_stride=2, blocks=None,
                 in_ch=1, classes=10, stem_kernel=3, arch="resnet", stem_pool=False):
        super().__init__()
        self.specs, self.block_desc = architecture(width, image, stem_stride, blocks, in_ch, classes, stem_kernel,
                                                   arch, stem_pool)
        self.mode, self.stem_pool = mode, bool(stem_pool)
        self.act = F.relu6 if arch == "mobilenetv2" else F.relu
        layers, bns = {}, {}
        for L in self.specs:
            key = L["name"].replace(".", "_")
            if L["name"] == "fc":
                continue
            if mode == "search" and L["searchable"]:
                layers[key] = MixConv(L["cin"], L["cout"], L["k"], L["s"], L["p"], bits, groups=L["groups"])
            else:
                if mode == "fp":
                    wb = ab = None
                elif L["searchable"]:
                    wb, ab = (policy or {})[L["name"]]
                else:
                    wb = ab = FIXED_BITS
                layers[key] = QConv(L["cin"], L["cout"], L["k"], L["s"], L["p"], wb, ab,
                                    init_range=1.0 if L["name"] == "stem" else 6.0, groups=L["groups"])
            bns[key] = nn.BatchNorm2d(L["cout"])
        self.layers = nn.ModuleDict(layers)
        self.bns = nn.ModuleDict(bns)
        fb = None if mode == "fp" else FIXED_BITS
        self.fc = QConv(self.specs[-1]["cin"], classes, 1, wbits=fb, abits=fb)
        self.fc_bias = nn.Parameter(torch.zeros(classes))

    def _cb(self, name, x):
        k = name.replace(".", "_")
        return self.bns[k](self.layers[k](x))

    def features(self, x):
        x = self.act(self._cb("stem", x))
        if self.stem_pool:
            x = F.max_pool2d(x, 3, 2, 1)
        for b in self.block_desc:
            if b["kind"] == "residual":  # Basic (2 convs) or Bottleneck (3 convs) block
                out = x
                for c in b["convs"][:-1]:
                    out = F.relu(self._cb(c, out))
                out = self._cb(b["convs"][-1], out)
                sc = self._cb(b["short"], x) if b["short"] else x
                x = F.relu(out + sc)
            elif b["kind"] == "inverted":  # expand (ReLU6), depthwise (ReLU6), linear projection
                out = x
                for c in b["convs"][:-1]:
                    out = F.relu6(self._cb(c, out))
                out = self._cb(b["convs"][-1], out)
                x = out + x if b["residual"] else out
            else:
                x = self.act(self._cb(b["convs"][0], x))
        return x

    def head(self, f):
        pooled = f.mean((2, 3), keepdim=True)
        return self.fc(pooled).flatten(1) + self.fc_bias

    def forward(self, x):
        return self.head(self.features(x))

    # ---- the searchable part ------------------------------------------------------------------
    def mix_layers(self) -> dict[str, MixConv]:
        return {L["name"]: self.layers[L["name"].replace(".", "_")] for L in self.specs
                if L["searchable"] and self.mode == "search"}

    def arch_parameters(self) -> list[nn.Parameter]:
        return [p for m in self.mix_layers().values() for p in (m.alpha_w, m.alpha_a)]

    def weight_parameters(self) -> list[nn.Parameter]:
        arch = {id(p) for p in self.arch_parameters()}
        return [p for p in self.parameters() if id(p) not in arch]

    def expected_bitops(self) -> torch.Tensor:
        """E[BitOPs] = fixed layers' MACs * 8 * 8 + sum_l MACs_l * E[b_w,l] * E[b_a,l] (GMPQ's complexity)."""
        mix = self.mix_layers()
        total = torch.zeros((), device=self.fc_bias.device)  # on the network's device (CPU or GPU)
        for L in self.specs:
            if L["name"] in mix:
                ew, ea = mix[L["name"]].expected_bits()
                total = total + L["macs"] * ew * ea
            else:
                total = total + L["macs"] * L["wbits"] * L["abits"]
        return total

    def argmax_policy(self) -> dict[str, list[int]]:
        return {name: list(m.best_bits()) for name, m in self.mix_layers().items()}


def load_fp_into(net: Net, fp_state: dict) -> None:
    """Copy FP weights (conv weights, BN, FC) into a super-net or a fixed-policy net of the same width."""
    own = net.state_dict()
    for k, v in fp_state.items():
        if k in own and own[k].shape == v.shape and "act_range" not in k:
            own[k] = v.clone()
    net.load_state_dict(own)
