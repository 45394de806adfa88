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
