"""Faithfulness of the mpq study: quantisers, the complexity (BitOPs) loss, the SAM / ASGA steps and the
adaptive radius, the budget projection, and that deployment reads only the serialised policy."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mpq_macs import hooked_macs

from icml25.studies.mpq import quant as Q
from icml25.studies.mpq import sharpness as SH
from icml25.studies.mpq import training as T
from icml25.studies.mpq.model import Net, layer_specs

WIDTH = [4, 8, 8]
CFG = {
    "model": {"width": WIDTH, "blocks": [1, 1, 1], "in_ch": 1, "classes": 10, "image": 28, "stem_kernel": 3,
              "stem_stride": 2, "bits": [2, 3, 4, 6]},
    "fp": {"lr": 0.05, "wd": 1e-4, "batch": 32},
    "search": {"epochs": 1, "batch": 32, "lr": 0.02, "lr_alpha": 0.1, "wd": 1e-4, "budget_bits": 3, "tol": 0.05,
               "lambda_c": 1.0, "rho": 0.05,
               "rho_max": 0.1, "alpha": 0.001, "aux_weight": 20, "pnorm": 3},
    "deploy": {"steps": 2, "batch": 16, "lr": 0.01, "wd": 4e-5},
    "eval": {"sharpness_n": 16, "sharpness_rho": 0.05},
}


@pytest.mark.parametrize("bits", [2, 3, 4, 6])
def test_quantisers_have_at_most_2_to_the_k_levels_and_identity_ste(bits):
    torch.manual_seed(bits)
    w = torch.randn(2000, requires_grad=True)
    qw = Q.quantize_weight(w, bits)
    assert torch.unique(qw.detach()).numel() <= 2 ** bits
    assert torch.unique(qw.detach()).numel() >= 2 ** bits - 1 - (bits == 6) * 8  # it really uses the levels
    qw.sum().backward()
    assert torch.equal(w.grad, torch.ones_like(w))  # the threshold is max|w|: all inside the clip range
    x = (torch.randn(3000) * 3).requires_grad_(True)
    rng = torch.tensor([2.0], requires_grad=True)
    qa = Q.quantize_activation(x, rng, bits)
    assert torch.unique(qa.detach()).numel() <= 2 ** bits
    assert float(qa.detach().min()) >= 0 and float(qa.detach().max()) <= 2.0 + 1e-6
    qa.sum().backward()
    inside = (x.detach() > 0) & (x.detach() < 2.0)
    assert torch.equal(x.grad[inside], torch.ones(int(inside.sum())))  # STE: identity inside the clip range
    assert torch.all(x.grad[~inside] == 0)
    assert float(rng.grad) == pytest.approx(float((x.detach() >= 2.0).sum()))  # PACT: the range gets the clipped part


def test_complexity_loss_at_one_hot_logits_equals_bitops_counted_independently():
    net = Net(WIDTH, mode="search")
    macs = hooked_macs(net, 28, channels=1)
    rng = np.random.default_rng(0)
    bits = [2, 3, 4, 6]
    policy = {name: [int(rng.choice(bits)), int(rng.choice(bits))] for name in net.mix_layers()}
    T.onehot_(net, policy)
    want = sum(macs[n] * (policy[n][0] * policy[n][1] if n in policy else 64) for n in macs)
    assert float(net.expected_bitops().detach()) == pytest.approx(want, rel=1e-6)
    assert Q.policy_bitops(net.specs, policy) == pytest.approx(want)
    assert net.argmax_policy() == policy
    # with soft logits it is the product of the expected bits per layer (GMPQ's complexity_loss)
    with torch.no_grad():
        for m in net.mix_layers().values():
            m.alpha_w.copy_(torch.randn(4))
            m.alpha_a.copy_(torch.randn(4))
    soft = 0.0
    for name in macs:
        if name in net.mix_layers():
            m = net.mix_layers()[name]
            b = torch.tensor(bits, dtype=torch.float32)
            soft += macs[name] * float((F.softmax(m.alpha_w, 0) * b).sum().detach()) * float((F.softmax(m.alpha_a, 0) * b).sum().detach())
        else:
            soft += macs[name] * 64
    assert float(net.expected_bitops().detach()) == pytest.approx(soft, rel=1e-5)


def _quadratic():
    torch.manual_seed(0)
    A = torch.randn(5, 5)
    A = A @ A.T + torch.eye(5)
    b = torch.randn(5)
    theta = torch.nn.Parameter(torch.randn(5))
    return A, b, theta, (lambda: 0.5 * theta @ A @ theta - b @ theta)


def test_asga_step_reduces_to_sgd_and_sam_on_a_quadratic():
    A, b, theta, loss = _quadratic()
    t0 = theta.detach().clone()
    g = A @ t0 - b
    # rho = alpha = 0: the plain gradient, exactly, for both steps
    for kind in ("sam", "asga"):
        SH.sharpness_aware_grads(loss, [theta], [], 0.0, 0.0, kind)
        assert torch.allclose(theta.grad, g, rtol=0, atol=1e-5)
        assert torch.equal(theta.detach(), t0)  # the perturbation is undone
    # reference SAM: gradient at theta + rho g/|g|
    rho = 0.3
    g_sam = A @ (t0 + rho * g / g.norm()) - b
    SH.sharpness_aware_grads(loss, [theta], [], rho, 0.0, "sam")
    assert torch.allclose(theta.grad, g_sam, atol=1e-5)
    assert not torch.allclose(theta.grad, g, atol=1e-3)  # SAM really ascends
    # ASGA with alpha = 0 and fixed rho: SAGM's average of the plain and the SAM gradient
    SH.sharpness_aware_grads(loss, [theta], [], rho, 0.0, "asga")
    assert torch.allclose(theta.grad, 0.5 * (g + g_sam), atol=1e-5)
    # alpha > 0: the perturbed point moves back along -alpha g (the implicit alignment term)
    alpha = 0.05
    g_p = A @ (t0 + rho * g / g.norm() - alpha * g) - b
    out = SH.sharpness_aware_grads(loss, [theta], [], rho, alpha, "asga")
    assert torch.allclose(theta.grad, 0.5 * (g + g_p), atol=1e-5)
    lp = float(0.5 * (t0 + rho * g / g.norm() - alpha * g) @ A @ (t0 + rho * g / g.norm() - alpha * g)
               - b @ (t0 + rho * g / g.norm() - alpha * g))
    assert out["gap"] == pytest.approx(lp - float(loss()), rel=1e-4)


def test_one_sgd_step_with_asga_at_zero_radius_equals_plain_sgd():
    A, b, theta, loss = _quadratic()
    theta2 = torch.nn.Parameter(theta.detach().clone())
    opt1, opt2 = torch.optim.SGD([theta], 0.1, momentum=0.9), torch.optim.SGD([theta2], 0.1, momentum=0.9)
    for _ in range(3):
        SH.sharpness_aware_grads(loss, [theta], [], 0.0, 0.0, "asga")
        opt1.step()
        opt2.zero_grad()
        (0.5 * theta2 @ A @ theta2 - b @ theta2).backward()
        opt2.step()
    assert torch.equal(theta.detach(), theta2.detach())  # exactly: (g + g) / 2 == g in floating point


def test_adaptive_radius_is_min_of_rho_max_and_log_one_plus_gap():
    for h in (0.0, 0.01, 0.05, 0.2, 3.0):
        assert SH.adaptive_rho(h, 0.1) == pytest.approx(min(0.1, math.log(1 + h)))
    assert SH.adaptive_rho(-0.2, 0.1) == 0.0
    # and the search feeds it the current step's gap: with a tiny rho_max it stays pinned to rho_max
    x, y = _toy_data(64)
    fp = Net(WIDTH, mode="fp").state_dict()
    cfg = json.loads(json.dumps(CFG))
    cfg["search"]["rho_max"] = 1e-9
    res = T.search(cfg, "asga", 0, x, y, fp)
    assert res["rho"] == pytest.approx(1e-9) or res["rho"] == 0.0


def test_budget_projection_lands_in_the_band_using_only_the_logits():
    specs = layer_specs(WIDTH)
    budget = Q.policy_bitops(specs, T.uniform_policy(specs, 3))
    names = [L["name"] for L in specs if L["searchable"]]
    rng = np.random.default_rng(1)
    logits = {n: [rng.normal(size=4).tolist(), rng.normal(size=4).tolist()] for n in names}
    for start in (6, 2):
        pol, moves = T.project_to_budget(T.uniform_policy(specs, start), logits, specs, [2, 3, 4, 6], budget, 0.05)
        assert moves > 0
        assert abs(Q.policy_bitops(specs, pol) / budget - 1) <= 0.05
    pol, moves = T.project_to_budget(T.uniform_policy(specs, 3), logits, specs, [2, 3, 4, 6], budget, 0.05)
    assert moves == 0 and pol == T.uniform_policy(specs, 3)
    # the move chosen is the cheapest in log-probability: make one layer's 2-bit weight the favourite
    fav = names[-1]
    logits[fav][0] = [9.0, 0.0, 0.0, 0.0]
    pol, _ = T.project_to_budget(T.uniform_policy(specs, 3) | {n: [3, 4] for n in names}, logits, specs,
                                 [2, 3, 4, 6], budget, 0.05)
    assert pol[fav][0] == 2


def _toy_data(n, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    x = (rng.random((n, 1, 28, 28)) * 60).astype(np.uint8)
    for i, c in enumerate(y):  # a class-dependent bright bar, so there is something to learn
        x[i, 0, 2 * c:2 * c + 3, :] = 250
    return x, y.astype(np.int64)


def test_search_outputs_a_policy_derived_from_its_logits_within_budget():
    x, y = _toy_data(96)
    fp = T.train_fp(CFG | {"fp": CFG["fp"]}, x, y, 1, 0)
    res = T.search(CFG, "asga", 0, x, y, fp, eval_x=x[:32], eval_y=y[:32])
    specs = layer_specs(WIDTH)
    proj, _ = T.project_to_budget(res["argmax_policy"], res["logits"], specs, [2, 3, 4, 6],
                                  T.budget_bitops(CFG, specs), 0.05)
    assert proj == res["policy"]
    assert res["argmax_policy"] == {n: [[2, 3, 4, 6][int(np.argmax(lw))], [2, 3, 4, 6][int(np.argmax(la))]]
                                    for n, (lw, la) in res["logits"].items()}
    assert res["steps"] == 3 and np.isfinite(res["sharpness_proxy"])


def test_deploy_reads_only_the_serialised_policy(tmp_path):
    """evaluate() runs with a data directory holding only the target files and a base directory holding
    only the target FP model: no proxy data, no proxy FP model, no search weights or logits exist."""
    from icml25.studies.mpq import data as D
    from icml25.studies.mpq import study as S

    x, y = _toy_data(64)
    data_dir, base_dir, run_dir = tmp_path / "data", tmp_path / "base", tmp_path / "run"
    for d in (data_dir, base_dir, run_dir):
        d.mkdir()
    D.write_npz(data_dir / "target_train.npz", x, y)
    D.write_npz(data_dir / "target_test.npz", x[:32], y[:32])
    torch.save(Net(WIDTH, mode="fp").state_dict(), base_dir / "fp_target.pt")
    specs = layer_specs(WIDTH)
    cfg = CFG | {"search_on": {"dmpq": ["mnist"]}}
    T.write_policy(run_dir / "policy_mnist.json", T.uniform_policy(specs, 2), {"method": "dmpq"})
    rows = {(r["setting"], r["metric"]): r["value"] for r in S.evaluate(cfg, "dmpq", 0, data_dir, base_dir, run_dir)}
    assert rows[("mnist", "bitops_m")] * 1e6 == pytest.approx(Q.policy_bitops(specs, T.uniform_policy(specs, 2)))
    # the deployed bits are the file's: rewrite the file, the BitOPs follow
    T.write_policy(run_dir / "policy_mnist.json", T.uniform_policy(specs, 6), {"method": "dmpq"})
    rows6 = {(r["setting"], r["metric"]): r["value"] for r in S.evaluate(cfg, "dmpq", 0, data_dir, base_dir, run_dir)}
    assert rows6[("mnist", "bitops_m")] > rows[("mnist", "bitops_m")]
    assert rows6[("mnist", "mean_wbits")] == 6
    shutil.rmtree(run_dir)
    run_dir.mkdir()
    with pytest.raises(FileNotFoundError):
        S.evaluate(cfg, "dmpq", 0, data_dir, base_dir, run_dir)
