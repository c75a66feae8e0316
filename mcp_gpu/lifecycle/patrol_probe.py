"""The patrol probe: build the arguments for all of a host's jobs, run it once, parse what it saw."""

from __future__ import annotations

import base64
import importlib.resources
import json
from dataclasses import dataclass, field
from typing import Any

from mcp_gpu.backends.wrapper import parse_exit
from mcp_gpu.models import JobRecord

LOG_CAP = 256 * 1024  # new log bytes read per job per patrol; beyond that the newest bytes win


def script() -> str:
    from mcp_gpu.backends import slurm

    body = importlib.resources.files("mcp_gpu.probes").joinpath("patrol.sh").read_text()
    # one definition of "what Slurm says about a job": the backend's observe script, as a function
    head, _, rest = body.partition("set -u\n")
    return head + "set -u\nslurm_observe() {\n" + slurm.OBSERVE + "\n}\n" + rest


def sched_id(job: JobRecord) -> str:
    """Slurm: the job id. Kubernetes: the Job name followed by the backend's kubectl flags (context, namespace)."""
    h = job.handle
    if job.backend == "kubernetes" and h.get("k8s_job"):
        from mcp_gpu.backends.kubernetes import KubernetesBackend

        return " ".join([str(h["k8s_job"]), *KubernetesBackend._base(h)[1:]])
    return str(h.get("slurm_job_id") or "")


def build_args(jobs: list[JobRecord], cap: int = LOG_CAP) -> list[str]:
    args = [str(cap)]
    for j in jobs:
        outs = [str(o) for o in j.spec.get("outputs") or []]
        args += ["JOB", j.id, j.backend, j.run_dir, str(max(0, j.log_offset)),
                 str(j.handle.get("tmux_socket") or j.handle.get("socket") or ""),
                 str(j.handle.get("tmux_session") or j.handle.get("session") or ""),
                 sched_id(j), str(len(outs)), *outs]
    return args


@dataclass
class HostFacts:
    now: float = 0.0
    oom_kill: int | None = None
    gpus: dict[str, tuple[int | None, int | None, int | None]] = field(default_factory=dict)  # uuid → util, used, total
    apps: list[tuple[int, str, int | None]] = field(default_factory=list)  # pid, uuid, used MiB


@dataclass
class JobFacts:
    job_id: str
    run_dir: bool = True
    exit_code: int | None = None
    exit_signal: str | None = None
    has_exit: bool = False
    cancelled: str | None = None
    pid_alive: bool = False
    group_alive: bool = False
    session: bool | None = None
    pids: list[int] = field(default_factory=list)
    slurm_text: str = ""  # the Slurm backend's observe output (parsed by backends.slurm)
    k8s_job: dict[str, Any] | None = None
    k8s_pods: dict[str, Any] = field(default_factory=dict)
    log_size: int | None = None
    log_age: float | None = None
    log_from: int = 0
    new_bytes: bytes = b""
    hb_age: float | None = None
    ckpt: tuple[float, int, str] | None = None  # mtime, size, path
    disk: tuple[str, int, int] | None = None  # mount, total, free
    inodes: tuple[int, int] | None = None  # total, free

    @property
    def alive(self) -> bool:
        return self.pid_alive or self.group_alive or bool(self.session)


def _int(v: str) -> int | None:
    try:
        return int(float(v))
    except ValueError:
        return None


def parse(text: str) -> tuple[HostFacts, dict[str, JobFacts]]:
    host = HostFacts()
    jobs: dict[str, JobFacts] = {}
    cur: JobFacts | None = None
    section = ""
    for line in text.splitlines():
        if line.startswith("@@"):
            section = line[2:]
            cur = None
            if section.startswith("job "):
                cur = JobFacts(job_id=section[4:].strip())
                jobs[cur.job_id] = cur
            continue
        key, sep, val = line.partition("=")
        if not sep:
            continue
        if section == "host":
            _host_line(host, key, val)
        elif section == "df" and key == "df":
            _df_line(jobs, val)
        elif cur is not None:
            _job_line(cur, key, val)
    return host, jobs


def _host_line(h: HostFacts, key: str, val: str) -> None:
    if key == "now":
        h.now = float(val or 0)
    elif key == "oom_kill":
        h.oom_kill = _int(val) if val else None
    elif key == "gpu":
        f = [x.strip() for x in val.split(",")]
        if len(f) >= 4:
            h.gpus[f[0]] = (_int(f[1]), _int(f[2]), _int(f[3]))
    elif key == "app":
        f = [x.strip() for x in val.split(",")]
        if len(f) >= 3 and f[0].isdigit():
            h.apps.append((int(f[0]), f[1], _int(f[2])))


def _df_line(jobs: dict[str, JobFacts], val: str) -> None:
    """`df=<job id> <mount> <bytes total> <bytes free> <inodes total> <inodes free>`."""
    parts = val.split()
    if len(parts) != 6 or parts[0] not in jobs:
        return
    j = jobs[parts[0]]
    if parts[2].isdigit() and parts[3].isdigit():
        j.disk = (parts[1], int(parts[2]), int(parts[3]))
    if parts[4].isdigit() and parts[5].isdigit():
        j.inodes = (int(parts[4]), int(parts[5]))


def _job_line(j: JobFacts, key: str, val: str) -> None:
    if key == "run_dir":
        j.run_dir = val == "1"
    elif key == "exit":
        j.has_exit = True
        j.exit_code, j.exit_signal = parse_exit(val)
    elif key == "cancelled":
        j.cancelled = val
    elif key == "pid_alive":
        j.pid_alive = val == "1"
    elif key == "group_alive":
        j.group_alive = val == "1"
    elif key == "session":
        j.session = val == "1"
    elif key == "pids":
        j.pids = [int(p) for p in val.split(",") if p.isdigit()]
    elif key.startswith("slurm."):
        j.slurm_text += f"{key[6:]}={val}\n"
    elif key in ("k8s_job_b64", "k8s_pods_b64"):
        try:
            doc = json.loads(base64.b64decode(val)) if val else None
        except (ValueError, json.JSONDecodeError):
            doc = None
        if key == "k8s_job_b64":
            j.k8s_job = doc
        else:
            j.k8s_pods = doc or {}
    elif key == "log_size":
        j.log_size = _int(val) if val != "-" else None
    elif key == "log_age":
        j.log_age = float(val) if val not in ("", "-") else None
    elif key == "log_from":
        j.log_from = _int(val) or 0
    elif key == "log_b64":
        j.new_bytes = base64.b64decode(val) if val else b""
    elif key == "hb_age":
        j.hb_age = float(val) if val not in ("", "-") else None
    elif key == "ckpt":
        parts = val.split(" ", 2)
        if len(parts) == 3:
            cand = (float(parts[0]), int(parts[1]), parts[2])
            if j.ckpt is None or cand[0] > j.ckpt[0]:
                j.ckpt = cand
    elif key == "disk":
        parts = val.split()
        if len(parts) == 3:
            j.disk = (parts[0], int(parts[1]), int(parts[2]))
    elif key == "inodes":
        parts = val.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            j.inodes = (int(parts[0]), int(parts[1]))


def job_gpu(host: HostFacts, job: JobFacts) -> tuple[int | None, int | None]:
    """(GPU memory MiB used by the job's processes, max utilisation of the GPUs they are on)."""
    mine = [a for a in host.apps if a[0] in set(job.pids)]
    if not mine:
        return None, None
    mem = sum(a[2] or 0 for a in mine)
    utils = [host.gpus.get(a[1], (None, None, None))[0] for a in mine]
    known = [u for u in utils if u is not None]
    return mem, (max(known) if known else None)
