#!/bin/bash
# mcp-gpu Slurm batch script (written to the run dir and submitted with sbatch).
# Static. Args: RUN_DIR RUN_SCRIPT WORKDIR [SANDBOX-PREFIX...]. Runs the shared wrapper (wrapper.py: pid, pgid, heartbeat and
# `exit_code` written atomically, exactly as under tmux/nohup) in its own process group, and forwards the
# checkpoint signal that `--signal=B:SIG@N` delivers to this batch shell only (without B: Slurm signals the job
# steps, and a job run by the batch script itself has none). The option `signal` the user chose travels as USR1
# (USR2 as itself) and MCP_GPU_SLURM_SIGNAL names what the job gets: a TERM this shell receives is scancel's or the
# time limit's, which Slurm sends to every process of the job directly, so the job gets each TERM once (a second
# TERM in the middle of a checkpoint save could cut it). USR1/USR2 start ignored in the job: one that installs a
# handler (signal.signal) gets them; one that does not is not killed by them. The wrapper outlives the job.
rd=$1 script=$2 wd=$3
shift 3  # the rest: the sandbox a job on the server's own machine starts in (LaunchSpec.sandbox), or nothing
fwd=${MCP_GPU_SLURM_SIGNAL:-USR1}
unset MCP_GPU_SLURM_SIGNAL
case $fwd in USR1|USR2|TERM|INT|HUP) ;; *) fwd=USR1;; esac
echo "mcp-gpu: slurm job ${SLURM_JOB_ID:-?} (restart ${SLURM_RESTART_COUNT:-0}) on $(hostname -s) at $(date -u +%FT%TZ)"
( trap '' USR1 USR2; exec setsid ${1+"$@"} bash "$rd/wrapper.sh" "$rd" "$script" "$wd" - 15 ) </dev/null &
w=$!
# shellcheck disable=SC2317  # called by the traps below
forward() {
  local pg; pg=$(cat "$rd/pgid" 2>/dev/null)
  echo "mcp-gpu: SIG$1 from Slurm (--signal), forwarded to the job"
  case $pg in ''|*[!0-9]*) kill -s "$1" "$w" 2>/dev/null;; *) kill -s "$1" -- "-$pg" 2>/dev/null;; esac
}
trap 'forward "$fwd"' USR1
trap 'forward USR2' USR2
trap 'echo "mcp-gpu: SIGTERM from Slurm (the job gets it directly)"' TERM
trap 'echo "mcp-gpu: SIGINT from Slurm"' INT
trap 'echo "mcp-gpu: SIGHUP from Slurm"' HUP
while :; do wait "$w"; rc=$?; kill -0 "$w" 2>/dev/null || break; done
wait "$w" 2>/dev/null; r=$?; [ "$r" -ne 127 ] && rc=$r
exit "$rc"
