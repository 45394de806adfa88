"""scripts/bench_seed_batching.py (issue 33, *Work*): the stacked k-seed update it times is the same update
as k separate ones, so its timing compares like with like."""
import copy
import importlib.util

import pytest

from conftest import REPO

torch = pytest.importorskip("torch")


def _script():
    spec = importlib.util.spec_from_file_location("bench_seed_batching", REPO / "scripts" / "bench_seed_batching.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_stacked_gradient_is_each_seeds_own():
    """A loss averaged over the seeds (gradients / k) or seeds mixed up by the vmap would fail here."""
    m = _script()
    torch.manual_seed(0)
    nets = m.seed_nets(width=8, k=3)
    batch = m.batches(3, 1)[0]
    params, tparams, bufs, base = m.stack(nets)
    m.stacked_loss(params, tparams, bufs, base, *batch).backward()
    for i, q in enumerate(nets):
        m.separate_loss(q, copy.deepcopy(q), i, *batch).backward()
        for name, p in q.named_parameters():
            assert torch.allclose(params[name].grad[i], p.grad, atol=1e-6, rtol=1e-5), (i, name)


def test_stacked_updates_equal_separate_updates():
    m = _script()
    torch.manual_seed(0)
    nets = m.seed_nets(width=8, k=3)
    data = m.batches(3, 5)
    sep = [copy.deepcopy(q) for q in nets]
    m.separate(sep, data)
    _, params = m.stacked([copy.deepcopy(q) for q in nets], data)
    for i, q in enumerate(sep):
        for name, p in q.named_parameters():
            assert torch.allclose(params[name][i].detach(), p.detach(), atol=1e-6), (i, name)
    assert not torch.allclose(params["head.weight"][0], params["head.weight"][1])  # the seeds stay distinct
