"""Slurm: `sbatch --parsable` a static batch script that runs the shared wrapper; observe with squeue/sacct.

The wrapper records pid, heartbeat and exit status in the run directory exactly as under tmux/nohup, so the
outcome survives Slurm purging the job record (MinJobAge) and accounting being off.

Secrets: the submit script reads NUL-terminated NAME=value records from stdin, `export`s them into its own
environment and `exec`s `sbatch --export=ALL`, so Slurm carries them to the job the way it carries every
environment variable (through slurmctld's private state, 0600, root/SlurmUser only). They are never in an
argv (visible to every user in /proc), never in the batch script, and never in a file in the run directory:
on a cluster the run directory is usually a shared filesystem, and a 0600 file read-and-deleted by the job
would sit there for as long as the job pends, which can be hours.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from mcp_gpu.backends import LaunchSpec, Observation, RunLayout
from mcp_gpu.backends._env import exit_signal_of, nul_records, signal_name
from mcp_gpu.backends.wrapper import WRAPPER, parse_exit
from mcp_gpu.errors import CommandFailed, ConfigError
from mcp_gpu.models import JobHandle, JobState, check_name
from mcp_gpu.probes import load
from mcp_gpu.transport import Transport

# The batch script (probes/slurm_batch.sh) runs the shared wrapper in its own process group and forwards the
# checkpoint signal `--signal=B:SIG@N` delivers to the batch shell only; see the file for the details.
BATCH = load("slurm_batch.sh")

# Writes the batch script and wrapper, exports env/secrets read from stdin, execs sbatch (probes/slurm_submit.sh).
SUBMIT = load("slurm_submit.sh")


LIVE = {"PENDING": JobState.launching, "CONFIGURING": JobState.launching, "REQUEUED": JobState.launching,
        "REQUEUE_HOLD": JobState.launching, "REQUEUE_FED": JobState.launching, "RESV_DEL_HOLD": JobState.launching,
        "RUNNING": JobState.running, "COMPLETING": JobState.running, "SUSPENDED": JobState.running,
        "STOPPED": JobState.running, "SIGNALING": JobState.running, "STAGE_OUT": JobState.running,
        "RESIZING": JobState.running}
DONE = {"COMPLETED": JobState.succeeded, "FAILED": JobState.failed, "TIMEOUT": JobState.failed,
        "OUT_OF_MEMORY": JobState.failed, "DEADLINE": JobState.failed, "BOOT_FAIL": JobState.failed,
        "CANCELLED": JobState.cancelled, "PREEMPTED": JobState.preempted, "NODE_FAIL": JobState.preempted,
        "REVOKED": JobState.cancelled, "SPECIAL_EXIT": JobState.failed}
DETAIL = {"TIMEOUT": "hit its time limit (Slurm TIMEOUT)",
          "OUT_OF_MEMORY": "killed by Slurm for memory (request about MaxRSS x 1.2 with --mem)",
          "NODE_FAIL": "its node failed", "PREEMPTED": "preempted by the scheduler",
          "DEADLINE": "missed its --deadline", "BOOT_FAIL": "its node failed to boot",
          "PENDING": "queued, waiting for resources"}

_TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:,@+-]{0,127}$")
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^\d+-\d+$")
_SIGNALS = ("USR1", "USR2", "TERM", "INT", "HUP")


def _token(options: dict[str, Any], key: str) -> str | None:
    value = options.get(key)
    if value is None or value == "":
        return None
    text = str(value)
    if not _TOKEN.fullmatch(text):
        raise ConfigError(f"slurm option {key}={text!r} is not a plain Slurm value",
                          hint="letters, digits and _ . : , @ + - only, not starting with '-'")
    return text


def _int(options: dict[str, Any], key: str, *, minimum: int = 0) -> int | None:
    value = options.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit() or int(value) < minimum:
        raise ConfigError(f"slurm option {key}={value!r} must be a whole number >= {minimum}")
    return int(value)


def format_time(seconds: int) -> str:
    """Seconds as Slurm's D-HH:MM:SS, rounded up to whole minutes (Slurm's own granularity)."""
    minutes = max(1, math.ceil(seconds / 60))
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"


@dataclass(frozen=True)
class SlurmOptions:
    """What `spec.options` may say to Slurm. Every value is checked; each becomes one argv element."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gpus: int | None = None
    gpu_type: str | None = None
    gpu_flag: str = "gres"  # "gres" → --gres=gpu[:type]:N ; "gpus" → --gpus=[type:]N
    time: str | None = None
    signal: str = "USR1"
    signal_before_s: int | None = None
    requeue: bool = False
    cpus_per_task: int | None = None
    mem: str | None = None

    @classmethod
    def parse(cls, options: dict[str, Any]) -> SlurmOptions:
        time_text: str | None = None
        limit = _int(options, "time_limit_s", minimum=1)
        if limit is not None:
            time_text = format_time(limit)
        elif options.get("time") not in (None, ""):
            time_text = str(options["time"])
            if not _TIME.fullmatch(time_text):
                raise ConfigError(f"slurm time {time_text!r} is not a Slurm time",
                                  hint="minutes, MM:SS, HH:MM:SS or D-HH:MM:SS; or give time_limit_s")
        sig = str(options.get("signal", "USR1")).upper().removeprefix("SIG")
        if sig not in _SIGNALS:
            raise ConfigError(f"slurm signal {sig!r} is not one of {', '.join(_SIGNALS)}")
        flag = str(options.get("gpu_flag", "gres"))
        if flag not in ("gres", "gpus"):
            raise ConfigError(f"gpu_flag {flag!r} must be 'gres' or 'gpus'")
        return cls(partition=_token(options, "partition"), account=_token(options, "account"),
                   qos=_token(options, "qos"), gpus=_int(options, "gpus"), gpu_type=_token(options, "gpu_type"),
                   gpu_flag=flag, time=time_text, signal=sig,
                   signal_before_s=_int(options, "signal_before_s", minimum=1),
                   requeue=bool(options.get("requeue", False)), cpus_per_task=_int(options, "cpus_per_task", minimum=1),
                   mem=_token(options, "mem"))


def carrier_signal(signal: str) -> str:
    """What Slurm sends the batch shell for the option `signal`: USR2 as itself, any other as USR1 (never TERM, which
    the shell cannot tell from scancel's or the time limit's)."""
    return "USR2" if signal == "USR2" else "USR1"


def sbatch_argv(spec: LaunchSpec, layout: RunLayout, batch_path: str, script_path: str) -> list[str]:
    """The whole sbatch command line: options from checked values, then the batch wrapper and its two args."""
    o = SlurmOptions.parse(spec.options)
    argv = ["sbatch", "--parsable", f"--job-name={check_name(spec.name, 'job name')}",
            f"--output={layout.log}", "--open-mode=append", f"--chdir={spec.workdir}", "--export=ALL",
            f"--comment=mcp-gpu:{spec.job_id}"]
    if o.partition:
        argv.append(f"--partition={o.partition}")
    if o.account:
        argv.append(f"--account={o.account}")
    if o.qos:
        argv.append(f"--qos={o.qos}")
    if o.gpus:
        if o.gpu_flag == "gpus":
            argv.append(f"--gpus={o.gpu_type + ':' if o.gpu_type else ''}{o.gpus}")
        else:
            argv.append(f"--gres=gpu:{o.gpu_type + ':' if o.gpu_type else ''}{o.gpus}")
    if o.cpus_per_task:
        argv.append(f"--cpus-per-task={o.cpus_per_task}")
    if o.mem:
        argv.append(f"--mem={o.mem}")
    if o.time:
        argv.append(f"--time={o.time}")
    if o.signal_before_s:  # to the batch shell, which forwards `o.signal` to the job's group (see BATCH)
        argv.append(f"--signal=B:{carrier_signal(o.signal)}@{o.signal_before_s}")
    argv.append("--requeue" if o.requeue else "--no-requeue")
    return [*argv, batch_path, layout.run_dir, script_path, spec.workdir, *spec.sandbox]


def _exit_of(code: str) -> tuple[int | None, str | None]:
    """Slurm's `N:S` (exit status : signal) as (exit code, signal name); a signal death reads 128+S."""
    status, _, sig = code.partition(":")
    if sig.isdigit() and int(sig) > 0:
        return 128 + int(sig), signal_name(int(sig))
    if status.isdigit():
        return int(status), exit_signal_of(int(status))
    return None, None


def parse_observation(text: str) -> Observation:
    """The text of `probes/lib/slurm.sh`'s `slurm_observe` (key=value lines) as an Observation."""
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    live = fields.get("squeue", "").strip()
    state, code = "", ""
    if fields.get("sacct"):
        parts = fields["sacct"].split("|")
        if len(parts) >= 3:
            state, code = parts[1], parts[2]
    elif fields.get("scontrol"):
        found = dict(re.findall(r"(\w+)=(\S*)", fields["scontrol"]))
        state, code = found.get("JobState", ""), found.get("ExitCode", "")
    state = (live or state).split(" ")[0].rstrip("+")
    wrapper = fields.get("exit_code", "").strip()
    if not state:
        return Observation(alive=None, detail="Slurm knows no such job (purged from squeue, accounting off)")
    hb = fields.get("heartbeat_age", "").strip()
    age = float(hb) if hb.isdigit() else None
    if state in LIVE:
        return Observation(alive=True, scheduler_state=state, detail=DETAIL.get(state, ""), heartbeat_age=age)
    exit_code, exit_signal = _exit_of(code) if code else (None, None)
    if wrapper:
        code_w, sig_w = parse_exit(wrapper)
        if code_w is not None:
            exit_code, exit_signal = code_w, sig_w or exit_signal_of(code_w)
    cancelled = f"{state} (scancel or admin)" if state == "CANCELLED" else None
    return Observation(alive=False if state in DONE else None, exit_code=exit_code, exit_signal=exit_signal,
                       scheduler_state=state, detail=DETAIL.get(state, ""), heartbeat_age=age, cancelled=cancelled)


def job_state(obs: Observation) -> JobState | None:
    """The registry state a Slurm observation means (None: cannot tell, keep the previous one)."""
    s = obs.scheduler_state or ""
    if s in LIVE:
        return LIVE[s]
    if s == "COMPLETED":
        return JobState.succeeded if obs.exit_code in (0, None) else JobState.failed
    return DONE.get(s)


class SlurmBackend:
    name: ClassVar[str] = "slurm"
    batch_name: ClassVar[str] = "slurm-batch.sh"

    @staticmethod
    def state_of(obs: Observation) -> JobState | None:
        return job_state(obs)

    async def available(self, t: Transport) -> bool:
        res = await t.run(["sh", "-c", "command -v sbatch >/dev/null && sinfo -h -o %P >/dev/null"], timeout=30)
        return res.ok

    async def launch(self, t: Transport, spec: LaunchSpec, layout: RunLayout, script_path: str) -> dict[str, Any]:
        batch = f"{layout.run_dir}/{self.batch_name}"
        argv = sbatch_argv(spec, layout, batch, script_path)
        env = {"PYTHONUNBUFFERED": "1", **spec.env,
               "MCP_GPU_SLURM_SIGNAL": SlurmOptions.parse(spec.options).signal}  # read and unset by BATCH
        args = [batch, BATCH, f"{layout.run_dir}/wrapper.sh", WRAPPER, *argv[1:]]
        res = await t.run_script(SUBMIT, args, stdin=nul_records(env, spec.secrets), timeout=60)
        if not res.ok:
            raise CommandFailed(f"sbatch refused the job: {' | '.join(res.tail(3)) or 'no output'}",
                                hint="check partition, GPU count and time limit against `sinfo`",
                                data={"exit_status": res.exit_status, "stderr_tail": res.tail(5)})
        job_id, _, cluster = res.stdout.strip().splitlines()[-1].partition(";")
        if not job_id.isdigit():
            raise CommandFailed(f"sbatch printed no job id: {res.stdout.strip()[:200]!r}")
        handle: dict[str, Any] = {"slurm_job_id": job_id, "batch_script": batch, "sbatch_argv": argv}
        if cluster:
            handle["cluster"] = cluster
        return handle

    async def observe(self, t: Transport, handle: dict[str, Any], layout: RunLayout) -> Observation:
        from mcp_gpu.backends import observe

        _job_id(handle)
        jo, v = await observe.observe_one(t, observe.target_for(self.name, handle, layout.run_dir))
        return jo.scheduler if jo.scheduler is not None and v.kind == "unknown" else observe.to_observation(jo, v)

    async def cancel(self, t: Transport, handle: dict[str, Any], layout: RunLayout) -> None:
        """`scancel`: the job gets SIGTERM, then SIGKILL after the cluster's KillWait. Already gone is fine."""
        res = await t.run(["scancel", _job_id(handle)], timeout=60)
        if not res.ok and "already completing or completed" not in res.stderr and "Invalid job id" not in res.stderr:
            res.check()


def _job_id(handle: dict[str, Any]) -> str:
    job_id = str(JobHandle.of(handle).slurm_job_id or "")
    if not job_id.isdigit():
        raise ConfigError(f"job handle has no Slurm job id: {handle!r}")
    return job_id


BACKEND = SlurmBackend()  # found by backends.registry
