"""adam.Adam (the training loops' optimiser) against torch.optim.Adam: bit for bit, and without torch._dynamo.

The loops use our copy of torch's CPU Adam update only to skip torch.optim's start-up cost (adam.py); these
tests hold it to exactly torch's numbers, so the mini results are the ones torch.optim.Adam would give."""
import subprocess
import sys

import numpy as np
import torch

from icml25.studies.missing_sm import fit as F
from icml25.studies.missing_sm import sm
from icml25.studies.missing_sm.adam import Adam


def _train(opt_cls, steps=60, lr=1e-2):
    gen = torch.Generator().manual_seed(0)
    net = sm.VarNet(2, 5, 16, gen=gen, diag=True)
    extra = torch.nn.Parameter(torch.ones(3))  # never gets a gradient: skipped, as torch skips it
    opt = opt_cls(list(net.parameters()) + [extra], lr=lr)
    X = torch.randn(2, 50, 5, generator=gen)
    M = torch.rand(2, 50, 5, generator=gen) > 0.4
    X = torch.where(M, X, torch.zeros_like(X))
    model = sm.Gaussian(torch.zeros(2, 5), 2 * torch.eye(5).repeat(2, 1, 1))
    for _ in range(steps):
        J = sm.var_phi_objective(net, model, X, M, "kl", 2, gen)
        opt.zero_grad()
        J.sum().backward()
        opt.step()
    return [p.detach().clone() for p in net.parameters()] + [extra.detach().clone()]


def test_adam_matches_torch_optim_adam_bit_for_bit():
    ours, ref = _train(Adam), _train(torch.optim.Adam)
    assert all(torch.equal(a, b) for a, b in zip(ours, ref))
    assert torch.equal(ours[-1], torch.ones(3))
    assert not torch.equal(ours[0], _train(Adam, steps=0)[0])  # it did move


def test_fit_gauss_adam_matches_torch_optim_adam(monkeypatch):
    """The parameter-estimation loop (Cholesky precision + Adam) gives the same estimates with either."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((1, 60, 4)).astype(np.float32)
    M = rng.random(X.shape) > 0.3
    hp = {"r": 3, "proposal_var": 16.0, "batch": 20, "adam_lr": 0.05}
    groups = {"gauss": {"X": X, "M": M, "kind": "adam", "checkpoints": [0, 15, 30]}}
    ours = F.fit("marg_iw", groups, hp, 0)["gauss"]["estimates"]
    monkeypatch.setattr(F, "Adam", lambda params, lr: torch.optim.Adam(params, lr=lr))
    ref = F.fit("marg_iw", groups, hp, 0)["gauss"]["estimates"]
    for t in (15, 30):
        assert np.array_equal(ours[t][0], ref[t][0]) and np.array_equal(ours[t][1], ref[t][1])
    assert not np.array_equal(ours[30][1], ours[0][1])


def test_training_imports_no_dynamo():
    """torch.optim's first use imports torch._dynamo (~1.5 CPU-s a job); the study's fit must not."""
    code = ("import sys, numpy as np\n"
            "from icml25.studies.missing_sm import fit as F\n"
            "X = np.random.default_rng(0).standard_normal((1, 40, 3)).astype(np.float32); M = X > -0.5\n"
            "hp = {'r': 2, 'proposal_var': 16.0, 'batch': 10, 'adam_lr': 0.05, 'var_hidden': 4, 'var_lr': 1e-3,\n"
            "      'var_steps': 1, 'var_objective': 'kl'}\n"
            "F.fit('marg_var', {'g': {'X': X, 'M': M, 'kind': 'adam', 'checkpoints': [0, 3]}}, hp, 0)\n"
            "assert 'torch._dynamo' not in sys.modules, 'torch._dynamo was imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)
