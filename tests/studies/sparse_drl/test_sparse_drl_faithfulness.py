"""Faithfulness of sparse_drl: masks that never regrow, ERK densities, s=0 == dense, diagnostics."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from icml25.studies.sparse_drl import diagnostics as D  # noqa: E402
from icml25.studies.sparse_drl.nets import build_simba  # noqa: E402
from icml25.studies.sparse_drl.sparse import (Masker, count_params, erk_densities, masked_step,  # noqa: E402
                                              simba_param_counts)

torch.set_num_threads(1)

AGENT = dict(lr=1e-3, weight_decay=1e-2, gamma=0.99, target_tau=0.005, replay_ratio=2, batch_size=16, expansion=1,
             eval_episodes=1, diag_batch=32, interference_samples=4, dormant_tau=0.1, srank_delta=0.01,
             probe_steps=3, probe_lr=1e-3)
DQN = dict(AGENT, algo="dqn", env="CartPole-v1", num_blocks=1, total_steps=160, learning_starts=60, eps_start=1.0,
           eps_end=0.05, eps_decay_steps=100, eval_every=80)
SAC = dict(AGENT, algo="sac", env="Pendulum-v1", actor_width=8, actor_blocks=1, critic_blocks=1, use_cdq=True,
           temp_init=0.01, temp_lr=1e-4, target_entropy_coef=-0.5, total_steps=120, learning_starts=60, eval_every=120)
DDPG = dict(SAC, algo="ddpg", explore_std=0.1)


def _train(net, masker, steps=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=1e-2, fused=True)
    for _ in range(steps):
        x = torch.randn(32, 6, generator=g)
        loss = ((net(x) - torch.sin(3 * x[:, :3])) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        if masker is None:
            opt.step()
        else:
            masked_step(opt, [masker])
    return opt


def test_pruned_weights_stay_zero_and_mask_never_changes():
    torch.manual_seed(0)
    net = build_simba(6, 64, 3, num_blocks=2, expansion=2)
    mk = Masker(net, 0.9, seed=1)
    initial = {n: m.clone() for n, m in mk.masks.items()}
    opt = _train(net, mk)
    params = dict(net.named_parameters())
    for n, m in mk.masks.items():
        assert torch.equal(m, initial[n])  # bit-identical mask
        p = params[n].detach()
        assert torch.all(p[m == 0] == 0)  # exactly zero, not small
        assert torch.all(p[m == 1] != 0)  # the active pattern is exactly the mask (nothing died, nothing grew)
        st = opt.state[params[n]]
        assert torch.all(st["exp_avg"][m == 0] == 0) and torch.all(st["exp_avg_sq"][m == 0] == 0)


def test_masking_only_at_init_regrows_weights():
    """The control: masks applied only at init (forbidden) let AdamW regrow pruned weights."""
    torch.manual_seed(0)
    net = build_simba(6, 64, 3, num_blocks=2, expansion=2)
    mk = Masker(net, 0.9, seed=1)
    _train(net, None, steps=20)
    p = dict(net.named_parameters())["blocks.0.fc1.weight"].detach()
    assert torch.count_nonzero(p[mk.masks["blocks.0.fc1.weight"] == 0]) > 0


@pytest.mark.parametrize("sparsity", [0.5, 0.8, 0.9])
def test_realised_densities_follow_erk(sparsity):
    torch.manual_seed(0)
    net = build_simba(17, 256, 6, num_blocks=2, expansion=4)
    mk = Masker(net, sparsity, seed=3)
    shapes = {n: tuple(p.shape) for n, p in net.named_parameters() if p.ndim > 1}
    assert set(mk.masks) == set(shapes)  # every weight matrix, no bias / LayerNorm
    realised = {n: float(m.mean()) for n, m in mk.masks.items()}
    er = {n: (s[0] + s[1]) / (s[0] * s[1]) for n, s in shapes.items()}
    free = [n for n in shapes if realised[n] < 1.0]
    eps = [realised[n] / er[n] for n in free]
    assert len(free) >= 3 and max(eps) / min(eps) == pytest.approx(1.0, abs=0.01)  # density ∝ (n_in+n_out)/(n_in n_out)
    for n in shapes:
        if realised[n] == 1.0:  # capped layers are exactly those whose ERK density would exceed 1
            assert np.mean(eps) * er[n] >= 1.0 - 1e-6
    total = sum(math.prod(s) for s in shapes.values())
    kept = sum(float(m.sum()) for m in mk.masks.values())
    assert kept / total == pytest.approx(1 - sparsity, rel=0.01)


def test_erk_caps_small_layers_and_is_not_uniform():
    d = erk_densities({"inp": (256, 4), "hid": (256, 256), "head": (2, 256)}, 0.8)
    assert d["inp"] == 1.0 and d["head"] == 1.0 and d["hid"] < 0.2


def test_param_counts_match_built_nets():
    torch.manual_seed(0)
    for (i, h, o, b, e, s) in [(4, 64, 2, 1, 1, 0.8), (17, 96, 1, 2, 4, 0.9), (5, 32, 2, 1, 1, None)]:
        net = build_simba(i, h, o, b, e)
        active, total = simba_param_counts(i, h, o, b, e, s)
        assert total == count_params(net)
        assert active == (Masker(net, s, 0).active_params() if s is not None else total)


@pytest.mark.parametrize("algo", ["dqn", "sac", "ddpg"])
def test_zero_sparsity_reproduces_dense_exactly(algo):
    from icml25.studies.sparse_drl.agents import ALGOS

    cfg = {"dqn": DQN, "sac": SAC, "ddpg": DDPG}[algo]
    dense = ALGOS[algo](cfg, 16, None, 3)
    sparse0 = ALGOS[algo](cfg, 16, 0.0, 3)
    assert len(dense["losses"]) > 50
    assert dense["losses"] == sparse0["losses"]
    for (n, p), (_, q) in zip(dense["net"].named_parameters(), sparse0["net"].named_parameters()):
        assert torch.equal(p, q), n
    # and a real sparsity changes the run
    sparse = ALGOS[algo](cfg, 16, 0.8, 3)
    assert sparse["losses"] != dense["losses"]


@pytest.mark.parametrize("algo", ["sac", "ddpg"])
def test_agent_keeps_masks_through_rl_training(algo):
    from icml25.studies.sparse_drl.agents import ALGOS

    res = ALGOS[algo](SAC if algo == "sac" else DDPG, 32, 0.8, 0)
    for mk in res["maskers"]:  # critic and actor
        params = dict(mk.module.named_parameters())
        for n, m in mk.masks.items():
            assert torch.all(params[n].detach()[m == 0] == 0)
        assert abs(mk.global_density() - 0.2) < 0.02  # tiny nets: per-layer rounding (1% holds at real widths)
    assert res["metrics"]["active_params"] < res["metrics"]["total_params"]


def test_ddpg_actor_is_deterministic_and_differs_from_sac():
    """DDPG's actor has |A| outputs (a tanh mean, no log-std head) and its run differs from SAC's on the
    same seed; SAC's actor has 2|A|."""
    from icml25.studies.sparse_drl.agents import run_ddpg, run_sac

    d, s_ = run_ddpg(DDPG, 16, None, 1), run_sac(SAC, 16, None, 1)
    assert d["actor"].head.out_features == 1 and s_["actor"].head.out_features == 2
    assert d["losses"] != s_["losses"]


# ---- diagnostics ---------------------------------------------------------------------------------

def test_dormant_ratio_on_hand_built_activations():
    n = 1000
    a = np.ones((n, 4))
    a[:, 3] = 0.05  # score 0.05 / mean(1, 1, 1, 0.05) = 0.066 <= 0.1: dormant
    b = np.ones((n, 2))
    b[:, 1] = 0.2   # 0.2 / 0.6 = 0.33: active
    assert D.dormant_ratio([a], 0.1) == 0.25
    assert D.dormant_ratio([a, b], 0.1) == pytest.approx(1 / 6)
    assert D.dormant_ratio([np.zeros((5, 3)) + [1, 0, 0]], 0.1) == pytest.approx(2 / 3)


@pytest.mark.parametrize("r", [1, 3, 7])
def test_srank_of_rank_r_matrix(r):
    rng = np.random.default_rng(r)
    u, _ = np.linalg.qr(rng.normal(size=(50, r)))
    v, _ = np.linalg.qr(rng.normal(size=(20, r)))
    assert D.srank(u @ v.T, 0.01) == r
    # unequal spectrum: 1% of the mass in the tail is cut
    s = np.array([100.0, 10.0, 0.5, 0.4])
    assert D.srank(np.diag(s), 0.01) == 2


def test_interference_zero_for_orthogonal_one_for_identical():
    assert D.interference(np.eye(5) * 3.0) == pytest.approx(0.0)
    g = np.tile(np.array([[1.0, -2.0, 0.5]]), (4, 1))
    assert D.interference(g) == pytest.approx(1.0)
    assert D.interference(np.array([[1.0, 0.0], [-1.0, 0.0]])) == pytest.approx(-1.0)


def test_per_sample_grads_match_manual_gradients():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1)
    x = torch.randn(4, 3)
    rows = D.per_sample_grads(net, lambda i: net(x[i:i + 1]).sum(), 4)
    expect = np.concatenate([x.numpy(), np.ones((4, 1))], 1)  # d/dW = x, d/db = 1
    assert np.allclose(rows, expect, atol=1e-6)
    with torch.no_grad():
        expect_norm = float(torch.sqrt((net.weight ** 2).sum() + (net.bias ** 2).sum()))
    assert D.param_norm(net) == pytest.approx(expect_norm)


def test_gram_path_equals_direct_interference():
    """The memory-light Gram path (used in training, on GPU at full scale) gives the direct cosine mean."""
    torch.manual_seed(1)
    net = build_simba(5, 16, 2, 1, 1)
    x, y = torch.randn(6, 5), torch.randn(6, 2)
    loss = lambda i: ((net(x[i:i + 1]) - y[i:i + 1]) ** 2).sum()  # noqa: E731
    rows = D.per_sample_grads(net, loss, 6)
    gram = D.per_sample_gram(net, loss, 6)
    assert np.allclose(gram, rows.astype(np.float64) @ rows.T.astype(np.float64), rtol=1e-5, atol=1e-8)
    assert D.interference_from_gram(gram) == pytest.approx(D.interference(rows), abs=1e-6)


def test_device_option_defaults_to_cpu():
    from icml25.studies.sparse_drl.agents import _device

    assert _device({}).type == "cpu" and _device({"device": "cpu"}).type == "cpu"
    assert _device({"device": "auto"}).type == ("cuda" if torch.cuda.is_available() else "cpu")


# ---- the official diagnostic definitions (issue 32) -------------------------------------------------

DIAG_C = dict(dormant_tau=0.1, srank_delta=0.01)


def _hand_net():
    """SimBa (in 2, hidden 2, 1 block, expansion 1) with hand-set weights: input linear = identity; fc1 unit 1 is
    always at -5 (dead after the ReLU, large before it); fc2 unit 1 is tiny."""
    net = build_simba(2, 2, 1, 1, 1)
    b = net.blocks[0]
    with torch.no_grad():
        net.inp.weight.copy_(torch.eye(2))
        net.inp.bias.zero_()
        b.fc1.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
        b.fc1.bias.copy_(torch.tensor([0.0, -5.0]))
        b.fc2.weight.copy_(torch.tensor([[1.0, 0.0], [0.01, 0.0]]))
        b.fc2.bias.zero_()
    return net


def test_dormant_ratio_over_pre_activations_of_every_encoder_layer():
    """Hand computation on x = [[1, -1], [-1, 1]] (LN keeps it at about +-1):
    input linear |h| scores (1, 1) -> none dormant; fc1 pre-activations [[1, -5], [-1, -5]]: scores (1, 5), /3 =
    (0.33, 1.67) -> none; fc2 outputs [[1, .01], [0, 0]]: scores (.5, .005), /.2525 = (1.98, .0198) -> one.
    Official (pre-activation, every encoder layer): 1 of 6. The old post-ReLU-only reading: relu(fc1) scores
    (0.5, 0) -> 1 of 2."""
    from icml25.studies.sparse_drl.agents import _diagnose

    net = _hand_net()
    x = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])
    rec = []
    net.features(x, rec)
    assert len(rec) == 3 and torch.allclose(rec[1], torch.tensor([[1.0, -5.0], [-1.0, -5.0]]), atol=1e-4)
    out = _diagnose(net, None, x, lambda i: net(x[i:i + 1]).sum(), 2, None, 0, DIAG_C, None, probe=False)
    assert out["dormant_ratio"] == pytest.approx(1 / 6)
    post_relu = D.dormant_ratio([torch.relu(rec[1]).detach().numpy()], 0.1)
    assert post_relu == pytest.approx(1 / 2) and out["dormant_ratio"] != pytest.approx(post_relu)


def test_actor_gradient_interference_is_the_hand_cosine():
    """A linear actor a = w.s + b under the per-sample loss -2 a(s_i): gradients -2 (s_i, 1). For s = (1,0),
    (0,1), (1,1): rows (1,0,1), (0,1,1), (1,1,1); cosines 1/2, 2/sqrt(6), 2/sqrt(6); mean off-diagonal
    (1/2 + 4/sqrt(6)) / 3. The critic's TD interference is a separate column, from the critic's gradients."""
    from icml25.studies.sparse_drl.agents import _diagnose

    torch.manual_seed(0)
    critic = build_simba(2, 8, 1, 1, 1)
    actor = torch.nn.Linear(2, 1)
    s = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y = torch.tensor([[0.3], [-1.0], [2.0]])
    td = lambda i: ((critic(s[i:i + 1]) - y[i:i + 1]) ** 2).sum()  # noqa: E731
    out = _diagnose(critic, None, s, td, 3, None, 0, DIAG_C, None, actor=actor,
                    actor_loss_i=lambda i: -2.0 * actor(s[i:i + 1]).sum(), probe=False)
    assert out["grad_interference"] == pytest.approx((0.5 + 4 / math.sqrt(6)) / 3, abs=1e-6)
    assert out["td_interference"] == pytest.approx(D.interference(D.per_sample_grads(critic, td, 3)), abs=1e-6)
    assert out["td_interference"] != pytest.approx(out["grad_interference"], abs=1e-3)


def test_grad_norm_is_the_global_norm_of_the_masked_gradient():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    mk = Masker(net, 0.5, 0)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    net(torch.randn(4, 6)).pow(2).sum().backward()
    dense = math.sqrt(sum(float((p.grad ** 2).sum()) for p in net.parameters()))
    masked_step(opt, [mk])
    expect = math.sqrt(sum(float((p.grad ** 2).sum()) for p in net.parameters()))
    assert D.grad_norm(net) == pytest.approx(expect, rel=1e-6) and expect < dense


@pytest.mark.parametrize("algo", ["dqn", "sac", "ddpg"])
def test_diagnostics_sampled_at_the_configured_steps_and_training_unchanged(algo):
    """diag_every: points at every multiple once learning has started, plus the end (whose values are the
    metrics); the in-training points leave training exactly as without them."""
    from icml25.studies.sparse_drl.agents import ALGOS, DIAG_CURVES

    cfg = {"dqn": DQN, "sac": SAC, "ddpg": DDPG}[algo]
    every = 40 if algo == "dqn" else 30
    want = [80, 120, 160] if algo == "dqn" else [60, 90, 120]
    with_d = ALGOS[algo](dict(cfg, diag_every=every), 16, 0.8, 0)
    without = ALGOS[algo](dict(cfg, diag_every=0), 16, 0.8, 0)
    for k in DIAG_CURVES:
        pts = [(s, v) for m, s, v in with_d["curves"] if m == k]
        assert [s for s, _ in pts] == want, k
        assert pts[-1][1] == pytest.approx(with_d["metrics"][k], nan_ok=True)
        assert all(np.isfinite(v) for _, v in pts)
    assert [s for m, s, _ in without["curves"] if m == "dormant_ratio"] == [want[-1]]
    assert with_d["losses"] == without["losses"]
    ret = lambda r: [(s, v) for m, s, v in r["curves"] if m == "eval_return"]  # noqa: E731
    assert ret(with_d) == ret(without)
    assert with_d["metrics"]["grad_norm"] > 0
    if algo != "dqn":  # actor-gradient interference is its own quantity, not the TD one
        assert with_d["metrics"]["grad_interference"] != with_d["metrics"]["td_interference"]
