"""Faithfulness tests of the bood study: BOOD's step counter and boundary selection, the push past the
boundary, Dream-OOD's latent sampler, the energy regulariser, pytorch-ood's VOS loss, the OOD metrics
(against a hand computation and sklearn, with the orientation checked) and the diffusion decoder's use
of its conditioning."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from icml25.studies.bood import metrics as M
from icml25.studies.bood import synthesis as S
from icml25.studies.bood.models import cosine_logits

TAU = 0.1


def _angles(theta):
    return np.stack([np.cos(theta), np.sin(theta)], 1).astype(np.float32)


def test_feature_on_the_boundary_needs_exactly_one_step():
    anchors = _angles(np.array([0.0, np.pi / 2]))
    # on the bisector of the two anchors, a hair on class 0's side: one step of any size crosses it
    z = _angles(np.array([np.pi / 4 - 1e-5]))
    steps, crossed = S.steps_to_boundary(z, np.array([0]), anchors, TAU, alpha=0.05, k_max=50)
    assert int(steps[0]) == 1
    assert int(cosine_logits(crossed, torch.from_numpy(anchors), TAU).argmax(1)[0]) == 1
    # a feature on its anchor needs about (pi/4) / alpha steps (the step is along the sphere's tangent)
    steps, _ = S.steps_to_boundary(_angles(np.array([0.0])), np.array([0]), anchors, TAU, alpha=0.05, k_max=50)
    assert 12 <= int(steps[0]) <= 18
    # already misclassified: 0 steps; never crossing within the cap: k_max + 1
    steps, _ = S.steps_to_boundary(_angles(np.array([np.pi / 2, 0.0])), np.array([0, 0]), anchors, TAU, 0.05, 3)
    assert steps.tolist() == [0, 4]


def test_step_counts_rank_with_the_angular_margin_and_selection_takes_the_closest():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    anchors = _angles(np.array([0.0, 2 * np.pi / 3, 4 * np.pi / 3]))
    y = rng.integers(0, 3, 300)
    theta = y * 2 * np.pi / 3 + rng.uniform(-np.pi / 3 + 0.02, np.pi / 3 - 0.02, 300)
    z = _angles(theta)
    steps, _ = S.steps_to_boundary(z, y, anchors, TAU, alpha=0.01, k_max=500)
    margin = np.pi / 3 - np.abs(np.angle(np.exp(1j * (theta - y * 2 * np.pi / 3))))  # angle to the boundary
    assert spearmanr(steps.numpy(), margin).statistic > 0.9
    sel = S.select_boundary(steps.numpy(), y, 0.1)
    for c in range(3):
        mine = sel[y[sel] == c]
        others = np.setdiff1d(np.flatnonzero(y == c), mine)
        assert len(mine) == round(0.1 * (y == c).sum())
        assert margin[mine].max() <= margin[others].min() + 0.011  # within one step's resolution


def test_boundary_selection_hand_example():
    steps = np.array([5, 1, 3, 2, 0, 4, 7, 2, 6, 1])
    y = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    # class 0: correctly classified (steps >= 1) are indices 0,1,2,3 -> half = 2 fewest: 1 (1 step), 3 (2 steps)
    # class 1: 5,6,7,8,9 -> round(2.5) = 2 fewest: 9 (1), 7 (2)
    assert sorted(S.select_boundary(steps, y, 0.5).tolist()) == [1, 3, 7, 9]
    rnd = S.select_boundary(steps, y, 0.5, np.random.default_rng(0), mode="random")
    assert len(rnd) == 4 and 4 not in rnd.tolist()  # random mode: same sizes, never the misclassified one


@pytest.mark.parametrize("c", [0, 2, 5])
def test_every_synthesised_feature_lies_across_the_boundary(c):
    rng = np.random.default_rng(1)
    anchors = F.normalize(torch.randn(4, 8, generator=torch.Generator().manual_seed(0)), dim=1).numpy()
    y = rng.integers(0, 4, 400)
    z = anchors[y] + 0.6 * rng.normal(size=(400, 8)).astype(np.float32)
    cfg = {"latent": {"tau": TAU}, "bood": {"alpha": 0.03, "k_max": 200, "r": 0.2, "c": c}}
    out = S.bood_features(z, y, anchors, cfg, rng)
    pred = cosine_logits(torch.from_numpy(out["z"]), torch.from_numpy(anchors), TAU).argmax(1).numpy()
    assert len(out["z"]) > 50 and (pred != out["y"]).all()
    np.testing.assert_allclose(np.linalg.norm(out["z"], axis=1), 1.0, atol=1e-5)
    # further steps push further: the original class's probability falls with c
    p = torch.softmax(cosine_logits(torch.from_numpy(out["z"]), torch.from_numpy(anchors), TAU), 1)
    p_src = p[torch.arange(len(p)), torch.from_numpy(out["y"])].mean()
    assert p_src < 0.5
    # the selected features are the closest to the boundary of their class
    st = out["steps"]
    assert st[out["selected"]].mean() < st[st >= 1].mean()


def test_dream_ood_sampler_returns_unit_outliers_away_from_the_class():
    rng = np.random.default_rng(0)
    z = np.concatenate([rng.normal(size=(100, 6)) * 0.2 + np.eye(6)[c] for c in range(3)]).astype(np.float32)
    y = np.repeat(np.arange(3), 100)
    cfg = {"dream_ood": {"k": 10, "select": 10, "pic_nums": 5, "n_noise": 50, "keep": 2, "sigma": 0.3}}
    out = S.dream_ood_features(z, y, cfg, rng, 60)
    assert out["z"].shape == (60, 6) and np.bincount(out["y"]).tolist() == [20, 20, 20]
    np.testing.assert_allclose(np.linalg.norm(out["z"], axis=1), 1.0, atol=1e-5)
    zn = F.normalize(torch.from_numpy(z), dim=1)
    kd_id = S._kth_dist(zn[:100], zn[:100], 11).median()
    kd_out = S._kth_dist(torch.from_numpy(out["z"][out["y"] == 0]), zn[:100], 10).median()
    assert kd_out > kd_id


def test_energy_regulariser_is_dream_oods_formula():
    from icml25.studies.bood.training import energy_reg

    torch.manual_seed(0)
    head = torch.nn.Linear(1, 2)
    li, lo = torch.randn(5, 4), torch.randn(3, 4) - 2
    e = torch.cat([torch.logsumexp(li, 1), torch.logsumexp(lo, 1)])
    logits = e[:, None] * head.weight[:, 0] + head.bias
    want = -(torch.log_softmax(logits, 1)[torch.arange(8), torch.tensor([1] * 5 + [0] * 3)]).mean()
    assert torch.allclose(energy_reg(li, lo, head), want)


def test_vos_loss_is_pytorch_oods_and_regularises_once_the_queues_are_full():
    from icml25.studies.bood.training import _vos_loss_class

    cls = _vos_loss_class()
    assert cls.__module__ == "pytorch_ood.loss.vos"
    torch.manual_seed(0)
    fc = torch.nn.Linear(4, 3)
    we = torch.nn.Linear(3, 1)
    torch.nn.init.uniform_(we.weight)
    loss = cls(torch.nn.Linear(1, 2), we, fc, alpha=0.1, sample_number=2, select=1, sample_from=20)
    f = torch.randn(6, 4)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    first = loss(fc(f), f, y)  # queues fill: plain CE
    assert torch.allclose(first, F.cross_entropy(fc(f), y))
    second = loss(fc(f), f, y)
    assert torch.isfinite(second) and not torch.allclose(second, F.cross_entropy(fc(f), y))


def test_fpr95_and_auroc_match_a_hand_computation_and_sklearn():
    from sklearn.metrics import roc_auc_score, roc_curve

    s_in = np.arange(1, 21, dtype=float)  # 20 ID scores 1..20: 95% TPR keeps scores >= 2
    s_out = np.array([0.5, 1.5, 2.0, 3.0, 25.0])
    assert M.fpr_at_95_tpr(s_in, s_out) == pytest.approx(60.0)  # 2.0, 3.0, 25.0 accepted
    # AUROC: pairs (ID > OOD) + ties / 2 over 100 pairs
    wins = sum((a > b) + 0.5 * (a == b) for a in s_in for b in s_out)
    assert M.auroc(s_in, s_out) == pytest.approx(100 * wins / 100)
    rng = np.random.default_rng(0)
    a, b = rng.normal(1, 1, 500), rng.normal(0, 1, 400)
    lab = np.r_[np.ones(500), np.zeros(400)]
    assert M.auroc(a, b) == pytest.approx(100 * roc_auc_score(lab, np.r_[a, b]))
    fpr, tpr, _ = roc_curve(lab, np.r_[a, b])  # ID positive
    assert M.fpr_at_95_tpr(a, b) == pytest.approx(100 * fpr[np.searchsorted(tpr, 0.95, side="left")], abs=0.3)
    # orientation: higher score = more ID; a detector that ranks OOD above ID is near 100% FPR
    assert M.fpr_at_95_tpr(a, b) < 80 < M.fpr_at_95_tpr(-a, -b)
    assert M.auroc(-a, -b) == pytest.approx(100 - M.auroc(a, b))


def test_decoder_reconstructs_from_its_own_features_and_uses_the_condition():
    from icml25.studies.bood import decoder as Dec

    rng = np.random.default_rng(0)
    # four classes of 8x8 images (bars at different places) and features that say which one
    n = 256
    y = rng.integers(0, 4, n)
    x = np.zeros((n, 1, 8, 8), np.float32)
    for i, c in enumerate(y):
        x[i, 0, 2 * c:2 * c + 2, :] = 1.0
    x += 0.05 * rng.normal(size=x.shape).astype(np.float32)
    x = x.clip(0, 1)
    z = (np.eye(4)[y] + 0.05 * rng.normal(size=(n, 4))).astype(np.float32)
    cfg = {"width": 64, "depth": 2, "steps": 300, "batch": 64, "lr": 3e-3, "p_uncond": 0.1, "train_timesteps": 1000,
           "beta_schedule": "squaredcos_cap_v2", "prediction": "sample", "sample_steps": 4, "guidance": 1.0}
    model, curve = Dec.train_decoder(cfg, x, z, 0)
    assert curve[-1][1] < curve[0][1]
    dec = Dec.DiffusionDecoder(model, cfg, (1, 8, 8))
    rec = dec.decode(z[:64], seed=1)
    psnr = lambda a, b: float(np.mean(10 * np.log10(1 / ((a - b) ** 2).mean(axis=(1, 2, 3)))))  # noqa: E731
    wrong = dec.decode(z[:64][np.roll(np.arange(64), 1)][np.argsort(rng.random(64))], seed=1)
    assert psnr(rec, x[:64]) > 14.0
    assert psnr(rec, x[:64]) > psnr(wrong, x[:64]) + 3.0  # the condition, not a generic sample, decides
    assert dec.decode(z[:3], seed=5).shape == (3, 1, 8, 8)
    np.testing.assert_array_equal(dec.decode(z[:3], seed=5), dec.decode(z[:3], seed=5))


@pytest.mark.parametrize("prediction", ["sample", "epsilon"])
def test_our_ddim_step_is_diffusers_ddim_step(prediction):
    from icml25.studies.bood import decoder as Dec

    cfg = {"train_timesteps": 1000, "beta_schedule": "squaredcos_cap_v2", "prediction": prediction, "sample_steps": 4}
    schedule = Dec.ddim_schedule(cfg)
    _, sched = Dec.schedulers(cfg)
    sched.set_timesteps(4)
    assert schedule["timesteps"] == [int(t) for t in sched.timesteps]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 1, 4, 4, generator=g)
    for t in sched.timesteps:
        out = 1.5 * torch.randn(5, 1, 4, 4, generator=g)  # beyond [-1, 1]: the clipping counts
        want = sched.step(out, t, x).prev_sample
        got = Dec.ddim_step(schedule, out, int(t), x)
        assert torch.allclose(got, want, atol=1e-5)
        x = want
