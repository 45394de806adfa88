"""The scheduler patch (issue 33): Snakemake's re-evaluation timers no longer pile up."""
import threading
import time

from snakemake.scheduling.job_scheduler import JobScheduler

from icml25.core import snakemake_reeval


class _Stub:
    """What JobScheduler._schedule_reevalutation touches: the semaphore that wakes the scheduler loop."""

    def __init__(self):
        self._open_jobs = threading.Semaphore(0)

    def wakeups(self, wait: float) -> int:
        time.sleep(wait)
        n = 0
        while self._open_jobs.acquire(blocking=False):
            n += 1
        return n


def test_the_installed_snakemake_is_patched():
    # a Snakemake release that renames the method would silently bring the timer pile-up back
    assert snakemake_reeval.apply()
    assert snakemake_reeval.apply()  # idempotent: the Snakefile may be parsed more than once
    assert getattr(JobScheduler, "_icml25_single_reeval")


def test_one_pending_wakeup_however_many_passes_ask():
    snakemake_reeval.apply()
    stub = _Stub()
    for _ in range(20):  # 20 passes (e.g. 20 job ends) while jobs wait for cores
        JobScheduler._schedule_reevalutation(stub, 0.05)
    assert stub.wakeups(0.3) == 1  # unpatched Snakemake: 20 timers, 20 wake-ups, and 20 chains after


def test_the_pass_a_timer_wakes_can_schedule_the_next():
    snakemake_reeval.apply()
    stub = _Stub()
    JobScheduler._schedule_reevalutation(stub, 0.02)
    assert stub.wakeups(0.2) == 1
    JobScheduler._schedule_reevalutation(stub, 0.02)  # a chain continues while jobs still wait
    assert stub.wakeups(0.2) == 1


def test_a_pending_timer_does_not_hold_the_process_at_exit():
    snakemake_reeval.apply()
    stub = _Stub()
    before = set(threading.enumerate())
    JobScheduler._schedule_reevalutation(stub, 5.0)
    timers = [t for t in threading.enumerate() if t not in before]
    assert timers and all(t.daemon for t in timers)
