"""Networks: the image encoder of the text-aligned latent space (stage 1) with its cosine classifier, and
the classifier trained from scratch in stage 3 (every method shares it).

At mini scale both are small CNNs on 16x16 gray images; at full scale the paper's ResNet-18/34 (not built
here, see the page) would take their place behind the same `features` / `forward` interface.
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


class Encoder(nn.Module):
    """x -> z in R^d (the latent the decoder is conditioned on); no classifier head of its own."""

    def __init__(self, in_ch: int = 1, size: int = 16, widths=(32, 64), hidden: int = 128, dim: int = 32):
        super().__init__()
        self.net = ConvNet(in_ch, size, widths, hidden, dim)

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
