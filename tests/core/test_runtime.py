"""core.runtime: threads pinned per stage, and independent tasks spread over a stage's cores."""
import os

from icml25.core import runtime


def test_run_tasks_keeps_call_order_serial_and_parallel():
    calls = [(divmod, (i, 3)) for i in range(9)]
    want = [divmod(i, 3) for i in range(9)]
    assert runtime.run_tasks(calls, 1) == want
    assert runtime.run_tasks(calls, 2) == want


def test_run_tasks_workers_are_other_processes_with_one_thread():
    out = runtime.run_tasks([(os.getpid, ()), (os.getpid, ()), (os.getenv, ("OMP_NUM_THREADS",))], 2)
    assert os.getpid() not in out[:2]
    assert out[2] == "1"  # each worker pinned to one thread, whatever the parent has
    # one worker runs in this process
    assert runtime.run_tasks([(os.getpid, ())], 4) == [os.getpid()]


def test_threads_reports_what_was_set():
    before = runtime.threads()
    try:
        runtime.set_threads(3)
        assert runtime.threads() == 3 and os.environ["OMP_NUM_THREADS"] == "3"
    finally:
        runtime.set_threads(before)


def test_device_setting_resolves_and_refuses(monkeypatch):
    import pytest
    import torch

    from icml25.core.errors import UserError

    assert runtime.device_of({}) == torch.device("cpu")
    assert runtime.device_of({"device": "cpu"}) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime.device_of({"device": "auto"}) == torch.device("cpu")
    with pytest.raises(UserError, match="mpq: device: cuda.*no CUDA device"):
        runtime.device_of({"study": "mpq", "device": "cuda"})
    with pytest.raises(UserError, match="bood: device must be one of cpu, cuda, auto"):
        runtime.device_of({"study": "bood", "device": "gpu"})
    with pytest.raises(UserError, match="cpu, cuda, auto"):
        runtime.check_device({"device": "tpu"})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.device_of({"device": "auto"}) == torch.device("cuda")
    assert runtime.device_of({"device": "cuda"}) == torch.device("cuda")


def test_host_state_is_detached_on_the_host_and_keeps_module_versions():
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    sd = runtime.host_state(net)
    assert list(sd) == list(net.state_dict())
    assert all(v.device.type == "cpu" and not v.requires_grad for v in sd.values())
    assert all(torch.equal(sd[k], v) for k, v in net.state_dict().items())
    assert sd._metadata == net.state_dict()._metadata  # BatchNorm's version, read by load_state_dict
    fresh = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    fresh.load_state_dict(sd)
    assert torch.equal(fresh[0].weight, net[0].weight)
