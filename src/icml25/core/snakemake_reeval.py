"""One pending scheduler re-evaluation at a time, instead of one more every time a job finishes.

Snakemake 9's scheduler loop ends every pass that had ready jobs by starting a `threading.Timer` of the
job-rate limiter's timespan (1 s by default, and the limiter cannot be switched off) that wakes the loop
again. A pass woken by a job's end starts its own timer beside the ones already ticking, so while jobs
wait for cores the chains pile up: after n job ends, n timers fire each second and each runs a full pass
(open jobs, job selection) over the DAG. Measured on 200 one-second jobs on 2 cores: Snakemake's own
process 12.8 CPU-s unpatched, 4.9 with one pending timer (2.8 CPU-s of it the 200 shells); all 19 studies
at smoke: 130-206 CPU-s outside the jobs before, 30 after (docs/performance.md).

One pending timer is all the rate limiter needs (any pass re-checks every ready job and starts the next
timer if jobs are still waiting). The timer is a daemon thread, so a finished run does not wait out its
delay at exit. Applied from the Snakefile in the main Snakemake process; if a Snakemake release renames
the method, nothing is patched and Snakemake runs as it ships.
"""
from __future__ import annotations

import threading

_PATCHED = "_icml25_single_reeval"
_lock = threading.Lock()


def apply() -> bool:
    """Patch Snakemake's JobScheduler; True if patched (now or before)."""
    try:
        from snakemake.scheduling import job_scheduler
    except ImportError:
        return False
    cls = getattr(job_scheduler, "JobScheduler", None)
    if cls is None or not hasattr(cls, "_schedule_reevalutation"):
        return False
    if getattr(cls, _PATCHED, False):
        return True

    def schedule_reevaluation(self, delay) -> None:
        with _lock:
            if getattr(self, "_icml25_reeval_pending", False):
                return
            self._icml25_reeval_pending = True

        def fire() -> None:
            # cleared before the wake-up, so the pass it triggers can start the next timer
            with _lock:
                self._icml25_reeval_pending = False
            self._open_jobs.release()

        timer = threading.Timer(delay, fire)
        timer.daemon = True
        timer.start()

    cls._schedule_reevalutation = schedule_reevaluation
    setattr(cls, _PATCHED, True)
    return True
