#!/usr/bin/env bash
# cluster-generic status command for SLURM: prints success | failed | running for one job id.
# squeue --states=all shows finished jobs for MinJobAge seconds (default 300); sacct covers the rest
# where an accounting store exists. A job neither knows about is reported failed, never "running"
# (a job that vanished must not hang the workflow).
jobid=${1%%;*}
state=$(squeue -h -j "$jobid" --states=all -o %T 2>/dev/null | head -1)
if [ -z "$state" ]; then
  state=$(sacct -n -X -P -j "$jobid" -o State 2>/dev/null | head -1 | cut -d' ' -f1)
fi
case "$state" in
  COMPLETED) echo success ;;
  PENDING|RUNNING|CONFIGURING|COMPLETING|SUSPENDED|REQUEUED|REQUEUE_HOLD|REQUEUE_FED|RESIZING|SIGNALING|STAGE_OUT|STOPPED|PREEMPTED)
    echo running ;;
  "") echo "slurm-status.sh: job $jobid unknown to squeue and sacct" >&2; echo failed ;;
  *) echo failed ;;   # FAILED CANCELLED TIMEOUT OUT_OF_MEMORY NODE_FAIL BOOT_FAIL DEADLINE ...
esac
