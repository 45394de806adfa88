"""The SpikeZIP-TF rate baseline (spikezip.py over spikingjelly's `SpikeZIPTFQANNRecipe`):

* the recipe converts every part of our QANN (no quantiser, float Linear or LayerNorm left; one ST-BIF neuron
  per quantiser);
* the SNN's logits summed over T steps converge to the QANN's (|diff| <= 1e-4 at T = 48, float32 arithmetic),
  and at T = 4 they are not the QANN's (the SNN is simulated, not the QANN relabelled);
* spikes are counted independently: a single-step replay reading each neuron's own state (ternary outputs,
  net count = the neuron's accumulated integer) gives the same totals as the counting hooks, the SOPs equal
  spikes x fan-outs written out by hand, and the multi-step run (the pipeline's) counts the same spikes up to
  a few flipped by float summation order (rel. 1e-3).
"""
from __future__ import annotations

import pytest
import torch

from icml25.studies.ttfs import data as D
from icml25.studies.ttfs import spikezip as Z
from icml25.studies.ttfs import vit

torch.set_num_threads(1)
SPEC = {"patch": 2, "dim": 16, "depth": 2, "heads": 2, "mlp_dim": 32, "mlp": "gelu"}


@pytest.fixture(scope="module")
def qann():
    tx, ty, vx, _ = D.digits(0, 1400)
    torch.manual_seed(0)
    ann = vit.build(SPEC, 8, 1, 10).eval()
    q, curve = Z.build_qann(ann, D.to_float(tx[:400]), torch.as_tensor(ty[:400]), level=16, steps=20, lr=1e-3,
                            batch=32, calib=64, seed=0)
    return q, D.to_float(vx[:40])


def test_recipe_converts_every_quantiser_linear_and_norm(qann):
    from spikingjelly.activation_based.neuron import STBIFNode

    q, _ = qann
    snn = Z.convert(q, 8)
    kinds = [type(m) for m in snn.modules()]
    assert not any(k in (Z.Quantizer, torch.nn.Linear, torch.nn.LayerNorm, torch.nn.ReLU, Z.QAttention)
                   for k in kinds), sorted({k.__name__ for k in kinds})
    n_quant = len(q.quantizers())
    assert n_quant == 10 * SPEC["depth"] + 1
    assert sum(k is STBIFNode for k in kinds) == n_quant


def test_snn_converges_to_the_qann_and_is_not_it_at_small_T(qann):
    q, x = qann
    with torch.no_grad():
        ref = q(x)
    big, _ = Z.run(q, x, 48)
    assert float((big - ref).abs().max()) <= 1e-4
    small, _ = Z.run(q, x, 4)
    assert float((small - ref).abs().max()) > 0.1


HAND_FANOUT = {  # d = 16, 17 tokens, head_dim 8, MLP 32, 10 classes
    "quan_norm1": 48, "q_if": 17, "k_if": 17, "v_if": 17, "attn_if": 8, "after_attn_if": 16, "proj_if": 1,
    "quan_norm2": 32, "quan_act": 16, "quan_fc2": 1}


def test_spikes_counted_independently_and_sops_by_hand(qann):
    from spikingjelly.activation_based import functional
    from spikingjelly.activation_based.neuron import STBIFNode

    q, x = qann
    T = 24
    _, st = Z.run(q, x, T, step_mode="s")
    _, st_m = Z.run(q, x, T)          # the pipeline's multi-step run: float summation order can flip a spike
    assert st_m["spikes"] == pytest.approx(st["spikes"], rel=1e-3)
    assert st_m["neurons"] == st["neurons"]
    # replay in single-step mode and read each neuron's state after every step (no hooks)
    snn = Z.convert(q, T)
    functional.set_step_mode(snn, "s")
    functional.reset_net(snn)
    nodes = [(n, m) for n, m in snn.named_modules() if isinstance(m, STBIFNode)]
    spikes, sops = 0.0, 0.0
    net = {n: 0 for n, _ in nodes}
    with torch.no_grad():
        for t in range(T):
            snn(x if t == 0 else torch.zeros_like(x))
            for n, m in nodes:
                c = m.cur_output
                assert set(c.unique().tolist()) <= {-1.0, 0.0, 1.0}          # at most one spike per step
                net[n] = net[n] + c
                c = c[:, :1] if n == "norm.1" else c                        # class token -> head only
                k = float(c.abs().sum())
                spikes += k
                sops += k * (10 if n == "norm.1" else HAND_FANOUT[n.rsplit(".", 1)[-1]])
    for n, m in nodes:
        assert torch.equal(net[n], m.acc_q), n                              # net spikes = accumulated integer
    assert spikes / len(x) == pytest.approx(st["spikes"], rel=1e-9)
    assert sops / len(x) == pytest.approx(st["sops"], rel=1e-9)
    assert st["spikes"] > 0 and st["sops"] > st["spikes"]
