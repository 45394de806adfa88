"""A small ResNet (ResNet-8-mini: stem, three BasicBlocks, FC) in three forms that share one parameter layout:
full precision (the FP model), super-net (searchable MixConv layers) and fixed policy (QConv layers).

The first conv and the classifier stay at 8 bits (as GMPQ / EdMIPS keep first and last layers at high
precision); every other conv (two per block and the 1x1 downsampling shortcuts) is searchable, each with
its own weight and activation bits (GMPQ's mixres shortcuts are MixActivConv2d layers too). The stem is
3x3 stride 2 at mini (28x28 inputs); at full scale `stem_kernel`/`stem_stride` and `blocks` give ResNet-18
([2, 2, 2, 2] BasicBlocks, 64..512 channels; the ImageNet max-pool is not built, see the README).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .quant import MixConv, QConv, conv_macs

FIXED_BITS = 8


def block_names(blocks: list[int]) -> list[tuple[str, int, int]]:
    """(block name, stage, index in stage) of every BasicBlock."""
    return [(f"b{i}" if n == 1 else f"b{i}_{j}", i, j) for i, n in enumerate(blocks) for j in range(n)]


def layer_specs(width: list[int], image: int = 28, stem_stride: int = 2, blocks=None, in_ch: int = 1,
                classes: int = 10, stem_kernel: int = 3) -> list[dict]:
    """The conv layers in order: name, cin, cout, kernel, stride, padding, output size, MACs, searchable."""
    blocks = list(blocks or [1] * len(width))
    specs, hw = [], image
    pad = stem_kernel // 2
    hw = (hw + 2 * pad - stem_kernel) // stem_stride + 1
    specs.append(dict(name="stem", cin=in_ch, cout=width[0], k=stem_kernel, s=stem_stride, p=pad, hw=hw,
                      searchable=False))
    cin = width[0]
    for name, i, j in block_names(blocks):
        cout = width[i]
        s = 2 if (i > 0 and j == 0) else 1
        hw_out = (hw + 2 - 3) // s + 1
        specs.append(dict(name=f"{name}.conv1", cin=cin, cout=cout, k=3, s=s, p=1, hw=hw_out, searchable=True))
        specs.append(dict(name=f"{name}.conv2", cin=cout, cout=cout, k=3, s=1, p=1, hw=hw_out, searchable=True))
        if s != 1 or cin != cout:
            specs.append(dict(name=f"{name}.short", cin=cin, cout=cout, k=1, s=s, p=0, hw=hw_out, searchable=True))
        cin, hw = cout, hw_out
    specs.append(dict(name="fc", cin=cin, cout=classes, k=1, s=1, p=0, hw=1, searchable=False))
    for L in specs:
        L["macs"] = conv_macs(L["cin"], L["cout"], L["k"], L["hw"])
        L["wbits"] = L["abits"] = FIXED_BITS
    return specs


class Net(nn.Module):
    """mode: 'fp' (no quantisation), 'search' (MixConv super-net), 'fixed' (QConv at `policy` bits)."""

    def __init__(self, width, bits=(2, 3, 4, 6), mode="fp", policy=None, image=28, stem_stride=2, blocks=None,
                 in_ch=1, classes=10, stem_kernel=3):
        super().__init__()
        self.specs = layer_specs(width, image, stem_stride, blocks, in_ch, classes, stem_kernel)
        self.block_list = block_names(list(blocks or [1] * len(width)))
        self.mode = mode
        layers, bns = {}, {}
        for L in self.specs:
            key = L["name"].replace(".", "_")
            if L["name"] == "fc":
                continue
            if mode == "search" and L["searchable"]:
                layers[key] = MixConv(L["cin"], L["cout"], L["k"], L["s"], L["p"], bits)
            else:
                if mode == "fp":
                    wb = ab = None
                elif L["searchable"]:
                    wb, ab = (policy or {})[L["name"]]
                else:
                    wb = ab = FIXED_BITS
                layers[key] = QConv(L["cin"], L["cout"], L["k"], L["s"], L["p"], wb, ab,
                                    init_range=1.0 if L["name"] == "stem" else 6.0)
            bns[key] = nn.BatchNorm2d(L["cout"])
        self.layers = nn.ModuleDict(layers)
        self.bns = nn.ModuleDict(bns)
        fb = None if mode == "fp" else FIXED_BITS
        self.fc = QConv(width[-1], classes, 1, wbits=fb, abits=fb)
        self.fc_bias = nn.Parameter(torch.zeros(classes))

    def _cb(self, name, x):
        k = name.replace(".", "_")
        return self.bns[k](self.layers[k](x))

    def features(self, x):
        x = F.relu(self._cb("stem", x))
        for name, _, _ in self.block_list:
            out = F.relu(self._cb(f"{name}.conv1", x))
            out = self._cb(f"{name}.conv2", out)
            sc = self._cb(f"{name}.short", x) if f"{name}_short" in self.layers else x
            x = F.relu(out + sc)
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
        total = torch.zeros(())
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
