"""Networks: the image encoder of the text-aligned latent space (stage 1) with its cosine classifier, and
the classifier trained from scratch in stage 3 (every method shares it).

At mini scale both are small CNNs on 16x16 gray images; at full scale the paper's ResNet-18/34 (the CIFAR
variant: a 3x3 stem without max-pooling, as in Dream-OOD's and BOOD's CIFAR-100 code) take their place
behind the same `features` / `forward` / `fc` interface. `make_net` picks one from a config block's `arch`;
`stem: imagenet` gives the torchvision ImageNet stem instead (7x7 stride-2 conv + 3x3 stride-2 max-pool).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ConvNet(nn.Module):
    """conv(w1)-pool-conv(w2)-pool-fc(hidden): `features(x)` is the penultimate representation."""

    def __init__(self, in_ch: int = 1, size: int = 16, widths=(32, 64), hidden: int = 128, out: int = 10):
        super().__init__()
        w1, w2 = widths
        self.body = nn.Sequential(
            nn.Conv2d(in_ch, w1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(w1, w2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(w2 * (size // 4) ** 2, hidden), nn.ReLU(),
        )
        self.fc = nn.Linear(hidden, out)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with an identity (or 1x1 conv-BN) shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + self.shortcut(x))


RESNET_BLOCKS = {"resnet18": (2, 2, 2, 2), "resnet34": (3, 4, 6, 3)}


STEMS = ("cifar", "imagenet")


class ResNet(nn.Module):
    """ResNet: a stem (64 channels), four stages of BasicBlocks (64, 128, 256, 512; stride 2 from the
    second), global average pooling; `features(x)` is the 512-d pooled representation.
    Stem `cifar` (default): 3x3 stride-1 conv, no pooling. `imagenet`: 7x7 stride-2 conv and a 3x3 stride-2
    max-pool (torchvision's layout), 4x4 fewer positions from the first stage on at 224 px."""

    def __init__(self, blocks=(2, 2, 2, 2), in_ch: int = 3, out: int = 10, stem: str = "cifar"):
        super().__init__()
        if stem == "cifar":
            layers = [nn.Conv2d(in_ch, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
        elif stem == "imagenet":
            layers = [nn.Conv2d(in_ch, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                      nn.MaxPool2d(3, 2, 1)]
        else:
            raise ValueError(f"bood: unknown ResNet stem '{stem}' ({', '.join(STEMS)})")
        c = 64
        for i, (n, w) in enumerate(zip(blocks, (64, 128, 256, 512))):
            for j in range(n):
                layers.append(BasicBlock(c, w, 2 if (i > 0 and j == 0) else 1))
                c = w
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(512, out)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def make_net(spec: dict, in_ch: int, size: int, out: int) -> nn.Module:
    """The network a config block names: `arch: convnet` (default; `widths`, `hidden`) or resnet18/34
    (`stem: cifar` default, or `imagenet`)."""
    arch = spec.get("arch", "convnet")
    if arch == "convnet":
        return ConvNet(in_ch, size, tuple(spec["widths"]), int(spec["hidden"]), out)
    if arch in RESNET_BLOCKS:
        return ResNet(RESNET_BLOCKS[arch], in_ch, out, spec.get("stem", "cifar"))
    raise ValueError(f"bood: unknown arch '{arch}' (convnet, {', '.join(RESNET_BLOCKS)})")


class Encoder(nn.Module):
    """x -> z in R^d (the latent the decoder is conditioned on); no classifier head of its own."""

    def __init__(self, spec: dict, in_ch: int = 1, size: int = 16, dim: int = 32):
        super().__init__()
        self.net = make_net(spec, in_ch, size, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def cosine_logits(z: torch.Tensor, anchors: torch.Tensor, tau: float) -> torch.Tensor:
    """logits_c = cos(z, anchor_c) / tau (Dream-OOD's pretrain_cifar100.py, tau = 0.1)."""
    return F.normalize(z, dim=-1) @ F.normalize(anchors, dim=-1).T / tau


def energy_score(logits: torch.Tensor) -> torch.Tensor:
    """logsumexp of the logits: higher = more ID (the negative free energy)."""
    return torch.logsumexp(logits, dim=1)


def msp_score(logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits, dim=1).max(dim=1).values
