"""The one observation path: one probe per host for all its jobs, one parser, one verdict.

`observe_host` runs `probes/observe.sh` once with every job of the host on stdin and gets back NUL-ended
`KEY=VALUE` records (see `probes/lib/frame.sh`): keys are the probe's own, values are shell variables or paths
(neither can hold a NUL) or base64, so no file name, log line or tool output on the host can forge a record, and
a record of job N can only come from the probe's N-th loop turn. Every remote read is bounded (log bytes per job,
nvidia-smi, kubectl, the checkpoint listing, the whole answer). `parse` makes one typed `HostObservation`; a
value that does not parse is noted on that job (`errors`) and never breaks another job's record or the host's.

`verdict` is the only place that decides whether a job runs, exited (with its code), was cancelled, is gone, or
cannot be told. Patrol, job refresh, job_cancel, launch's first-minute probe and the teardown gate all call it.
Its rules, decided once:
- a live process in the job's process group (or its pid) means RUNNING, whatever files say: an `exit_code`
  written while the group lives proves nothing;
- a scheduler (Slurm, Kubernetes) that still holds the job decides running/pending; once it has let go, its
  state table (PREEMPTED, TIMEOUT, Evicted, ...) decides the verdict, with the wrapper's exit code where known;
- with the group gone, a `cancelled` record made by our cancel (`TERM`, `KILL`, `session`) beats the exit code
  (the code is kept as evidence); a cancel that found the job already gone (`gone`) leaves the exit code in charge;
- no exit code, no cancel record, no process: GONE (the registry calls it `lost`);
- a host whose process table could not be read, or a job whose part of the answer was cut: UNKNOWN.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_gpu.backends import Observation
from mcp_gpu.models import JobHandle, JobRecord, JobState
from mcp_gpu.probes import load
from mcp_gpu.transport import Transport
from mcp_gpu.untrusted import clean_line

LOG_CAP = 256 * 1024  # new log bytes per job per observation; beyond that the newest bytes win
LOG_BUDGET = 8 * 1024 * 1024  # new log bytes per host per observation, shared by its jobs
LOG_FLOOR = 4096
TOTAL_CAP = 24 * 1024 * 1024  # the whole answer of one host
LIST_CAP = 200_000  # files listed under all outputs to find each one's newest checkpoint
SCHEDULED = ("slurm", "kubernetes")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_EXIT = re.compile(r"^(-?\d{1,4})(?: ([A-Z0-9]{1,12}))?$")

VerdictKind = Literal["running", "exited", "cancelled", "gone", "unknown"]


@dataclass(frozen=True)
class Target:
    """One job as the probe needs it. `sched`: Slurm → [job id]; Kubernetes → [Job name, *kubectl flags]."""

    key: str
    backend: str
    run_dir: str
    workdir: str = ""
    log_offset: int = 0
    tmux_socket: str = ""
    tmux_session: str = ""
    sched: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()


def target_of(rec: JobRecord) -> Target:
    """The target of a registry record: its handle, run dir, workdir (relative outputs resolve there), outputs."""
    base = target_for(rec.backend, rec.handle, rec.run_dir, key=rec.id)
    return Target(key=rec.id, backend=rec.backend, run_dir=rec.run_dir, workdir=rec.workdir,
                  log_offset=max(0, rec.log_offset), tmux_socket=base.tmux_socket, tmux_session=base.tmux_session,
                  sched=base.sched, outputs=tuple(rec.request.outputs))


def target_for(backend: str, handle: dict[str, Any], run_dir: str, *, key: str = "job") -> Target:
    """A target from a bare handle (a backend's own `observe`, which knows no registry record)."""
    h = JobHandle.of(handle)
    sched: tuple[str, ...] = ()
    if backend == "slurm" and h.slurm_job_id:
        sched = (str(h.slurm_job_id),)
    elif backend == "kubernetes" and h.k8s_job:
        from mcp_gpu.backends.kubernetes import KubernetesBackend

        sched = (str(h.k8s_job), *KubernetesBackend._base(h.to_json())[1:])
    return Target(key=key, backend=backend, run_dir=run_dir,
                  tmux_socket=(h.tmux_socket or "mcp-gpu") if backend == "tmux" else "",
                  tmux_session=h.tmux_session or "", sched=sched)


@dataclass
class FsFacts:
    """The filesystem an output (or the run dir) lives on: bytes and inodes, as statfs says."""

    exists: bool = True
    fstype: str = ""
    bytes_total: int = 0
    bytes_free: int = 0
    inodes_total: int = 0
    inodes_free: int = 0


@dataclass
class Checkpoint:
    output: str
    name: str  # relative to the output dir
    mtime: float
    size: int


@dataclass
class JobObservation:
    """Everything the probe saw of one job. Remote strings are kept raw here; `clean` them before showing."""

    key: str
    backend: str = ""
    complete: bool = False  # the job's `end` record arrived: its facts are whole
    proc_ok: bool = False
    run_dir: bool | None = None
    exit_raw: str | None = None
    exit_code: int | None = None
    exit_signal: str | None = None
    cancelled: str | None = None
    pid: int | None = None
    pgid: int | None = None
    pid_alive: bool = False
    wrapper_alive: bool = False
    group_alive: bool = False
    pids: list[int] = field(default_factory=list)
    session: bool | None = None
    scheduler: Observation | None = None
    log_size: int | None = None
    log_age: float | None = None
    log_from: int = 0
    new_bytes: bytes = b""
    hb_age: float | None = None
    run_fs: FsFacts | None = None
    outputs: list[tuple[str, FsFacts | None]] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The newest checkpoint across the job's outputs."""
        return max(self.checkpoints, key=lambda c: c.mtime, default=None)

    def fs_facts(self) -> list[FsFacts]:
        """The filesystems that matter for space: each output's and the run dir's (where the log grows)."""
        out = [f for _, f in self.outputs if f is not None]
        return out + ([self.run_fs] if self.run_fs else [])

    @property
    def bytes_free(self) -> int | None:
        """The least free bytes among the job's filesystems that are more than half used: a small filesystem
        that is mostly empty is not short of bytes whatever its size (a 64 MiB tmpfs out of inodes with all its
        bytes free is inode-exhausted, not full)."""
        vals = [f.bytes_free for f in self.fs_facts() if f.bytes_total > 0 and f.bytes_free * 2 < f.bytes_total]
        if vals:
            return min(vals)
        sized = [f.bytes_free for f in self.fs_facts() if f.bytes_total > 0]
        return max(sized) if sized else None

    @property
    def inodes_free(self) -> int | None:
        vals = [f.inodes_free for f in self.fs_facts() if f.inodes_total > 0]  # 0 total: no inode limit (btrfs)
        return min(vals) if vals else None


@dataclass
class HostObservation:
    host: str
    complete: bool = False
    now: float = 0.0
    oom_kill: int | None = None
    proc_ok: bool = False
    gpus: dict[str, tuple[int | None, int | None, int | None]] = field(default_factory=dict)  # uuid → util, used, total
    apps: list[tuple[int, str, int | None]] = field(default_factory=list)  # pid, gpu uuid, used MiB
    jobs: dict[str, JobObservation] = field(default_factory=dict)
    discovered: list[str] = field(default_factory=list)  # job ids of run dirs found under the run roots
    listing_cut: bool = False
    cpu_s: float | None = None  # the probe's own CPU time (user+sys, its children included)
    answer_bytes: int = 0
    errors: list[str] = field(default_factory=list)

    def gpu_use(self, job: JobObservation) -> tuple[int | None, int | None]:
        """(GPU MiB used by the job's processes, max utilisation of the GPUs they are on)."""
        mine = [a for a in self.apps if a[0] in set(job.pids)]
        if not mine:
            return None, None
        mem = sum(a[2] or 0 for a in mine)
        utils = [u for u in (self.gpus.get(a[1], (None, None, None))[0] for a in mine) if u is not None]
        return mem, (max(utils) if utils else None)


@dataclass(frozen=True)
class Verdict:
    """What a job is, and why."""

    kind: VerdictKind
    state: JobState | None  # the registry state it proves (None: cannot tell)
    exit_code: int | None = None
    exit_signal: str | None = None
    evidence: tuple[str, ...] = ()
    run_dir_missing: bool = False

    @property
    def alive(self) -> bool | None:
        return True if self.kind == "running" else None if self.kind == "unknown" else False


# ---------------------------------------------------------------------------------------------- request / run


def log_cap(n_jobs: int) -> int:
    return max(LOG_FLOOR, min(LOG_CAP, LOG_BUDGET // max(1, n_jobs)))


def request(targets: Sequence[Target], roots: Sequence[str] = ()) -> bytes:
    """The probe's stdin: NUL-separated fields (a path may hold any byte but NUL)."""
    fields: list[str] = []
    for r in roots:
        fields += ["R", r]
    for t in targets:
        fields += ["J", t.backend, t.run_dir, t.workdir, str(t.log_offset), t.tmux_socket, t.tmux_session,
                   str(len(t.sched)), *t.sched, str(len(t.outputs)), *t.outputs]
    for f in fields:
        if "\0" in f:
            raise ValueError("a probe field holds a NUL byte")
    return b"".join(f.encode("utf-8", "surrogateescape") + b"\0" for f in fields)


async def observe_host(t: Transport, targets: Sequence[Target], *, roots: Sequence[str] = (),
                       timeout: float = 120) -> HostObservation:
    """One round trip: the facts of every target on `t`'s host. A dropped link raises TransportError."""
    cap = log_cap(len(targets))
    res = await t.run_script(load("observe.sh"), [str(cap), str(TOTAL_CAP), str(LIST_CAP)],
                             stdin=request(targets, roots), timeout=timeout)
    host = parse(t.host, res.stdout, targets)
    if not host.complete:
        host.errors.append(f"the probe's answer ended early (exit {res.exit_status}): "
                           f"{clean_line(' | '.join(res.tail(2)), 200) or 'no output'}")
    return host


async def observe_one(t: Transport, target: Target, *, timeout: float = 60) -> tuple[JobObservation, Verdict]:
    host = await observe_host(t, [target], timeout=timeout)
    jo = host.jobs[target.key]
    return jo, verdict(jo)


# ---------------------------------------------------------------------------------------------- parse


def _int(v: str) -> int:
    if not re.fullmatch(r"-?\d{1,19}", v):
        raise ValueError(v)
    return int(v)


def _bool(v: str) -> bool:
    if v not in ("0", "1"):
        raise ValueError(v)
    return v == "1"


def _fs(parts: list[str]) -> FsFacts | None:
    """`BSIZE BLOCKS BAVAIL ITOTAL IFREE TYPE` (statfs) or `-` (not measured)."""
    if not parts or parts[0] == "-":
        return None
    bsize, blocks, bavail, itotal, ifree = (_int(x) for x in parts[:5])
    return FsFacts(fstype=clean_line(" ".join(parts[5:]), 40), bytes_total=bsize * blocks, bytes_free=bsize * bavail,
                   inodes_total=itotal, inodes_free=ifree)


def _k8s(v: str) -> tuple[int, str]:
    rc, _, text = v.partition(" ")
    return _int(rc), text


def parse(host_name: str, text: str, targets: Sequence[Target]) -> HostObservation:
    """The probe's records → one HostObservation. Never raises on remote content."""
    host = HostObservation(host=host_name, answer_bytes=len(text))
    by_index = [JobObservation(key=t.key, backend=t.backend) for t in targets]
    for jo in by_index:
        host.jobs.setdefault(jo.key, jo)
    k8s: dict[int, dict[str, tuple[int, str]]] = {}
    for record in text.split("\0"):
        key, sep, val = record.partition("=")
        if not sep:
            continue
        try:
            if key == "d":
                if _ID.match(val) and len(host.discovered) < 20000:
                    host.discovered.append(val)
            elif key.startswith("h."):
                _host_field(host, key[2:], val)
            elif key.startswith("j"):
                idx_text, _, name = key[1:].partition(".")
                idx = _int(idx_text)
                if not 0 <= idx < len(by_index):
                    continue
                jo = by_index[idx]
                if name in ("k8s_job", "k8s_pods"):
                    k8s.setdefault(idx, {})[name] = _k8s(val)
                else:
                    try:
                        _job_field(jo, name, val)
                    except (ValueError, IndexError, binascii.Error, KeyError) as err:
                        jo.errors.append(f"unreadable {name} ({clean_line(str(err), 80)})")
        except (ValueError, IndexError) as err:
            host.errors.append(f"unreadable record {clean_line(key, 40)} ({clean_line(str(err), 80)})")
    for jo in by_index:
        jo.proc_ok = host.proc_ok
    for idx, parts in k8s.items():
        _k8s_observation(by_index[idx], parts)
    return host


def _host_field(h: HostObservation, name: str, val: str) -> None:
    if name == "now":
        h.now = float(_int(val))
    elif name == "oom_kill":
        h.oom_kill = _int(val) if val else None
    elif name == "proc_ok":
        h.proc_ok = _bool(val)
    elif name == "list_cut":
        h.listing_cut = _bool(val)
    elif name == "end":
        h.complete = True
    elif name == "times":
        h.cpu_s = _times(val)
    elif name == "gpus":
        for line in val.splitlines()[:64]:
            f = [x.strip() for x in line.split(",")]
            if len(f) >= 4 and f[0]:
                h.gpus[clean_line(f[0], 80)] = (_opt_int(f[1]), _opt_int(f[2]), _opt_int(f[3]))
    elif name == "apps":
        for line in val.splitlines()[:4096]:
            f = [x.strip() for x in line.split(",")]
            if len(f) >= 3 and f[0].isdigit():
                h.apps.append((int(f[0]), clean_line(f[1], 80), _opt_int(f[2])))


def _opt_int(v: str) -> int | None:
    try:
        return int(float(v))
    except ValueError:
        return None


def _times(val: str) -> float | None:
    """bash `times`: `0m0.010s 0m0.020s 0m1.100s 0m0.300s` (shell user, sys, children user, sys)."""
    total = 0.0
    parts = re.findall(r"(\d+)m(\d+(?:[.,]\d+)?)s", val)
    if not parts:
        return None
    for m, s in parts:
        total += int(m) * 60 + float(s.replace(",", "."))
    return round(total, 3)


def _job_field(j: JobObservation, name: str, val: str) -> None:
    if name == "end":
        j.complete = True
    elif name == "rd":
        j.run_dir = _bool(val)
    elif name == "exit":
        j.exit_raw = val
        m = _EXIT.match(val.strip())
        if m:
            j.exit_code, j.exit_signal = int(m.group(1)), m.group(2)
    elif name == "cancelled":
        j.cancelled = val
    elif name == "pid":
        j.pid = _int(val) if val else None
    elif name == "pgid":
        j.pgid = _int(val) if val else None
    elif name == "pid_alive":
        j.pid_alive = _bool(val)
    elif name == "wrapper_alive":
        j.wrapper_alive = _bool(val)
    elif name == "group_alive":
        j.group_alive = _bool(val)
    elif name == "pids":
        j.pids = [_int(p) for p in val.split(",") if p][:100]
    elif name == "session":
        j.session = _bool(val)
    elif name == "slurm":
        from mcp_gpu.backends import slurm

        j.scheduler = slurm.parse_observation(val)
    elif name == "log":
        size, age = val.split(" ")
        j.log_size, j.log_age = _int(size), float(max(0, _int(age)))
    elif name == "log_new":
        frm, _, data = val.partition(" ")
        j.log_from = _int(frm)
        j.new_bytes = base64.b64decode(data, validate=True) if data else b""
    elif name == "hb_age":
        j.hb_age = float(max(0, _int(val)))
    elif name == "rdfs":
        j.run_fs = _fs(val.split(" "))
    elif name == "out":
        parts = val.split(" ")
        k, exists = _int(parts[0]), _bool(parts[1])
        fs = _fs(parts[2:])
        if fs is not None:
            fs.exists = exists
        j.outputs.append((str(k), fs))
    elif name == "ckpt":
        ki, mtime, size, rel = val.split(" ", 3)
        j.checkpoints.append(Checkpoint(output=str(_int(ki)), name=rel, mtime=float(_int(mtime)), size=_int(size)))


def _k8s_observation(j: JobObservation, parts: dict[str, tuple[int, str]]) -> None:
    from mcp_gpu.backends import kubernetes

    rc, text = parts.get("k8s_job", (1, ""))
    if rc != 0:
        if "NotFound" in text or "not found" in text:
            j.scheduler = kubernetes.parse_observation(None, {})
        else:
            j.scheduler = Observation(alive=None, detail=f"kubectl get job failed: {clean_line(text, 200)}")
        return
    try:
        job = json.loads(text)
    except ValueError:
        j.errors.append("kubectl get job printed no JSON")
        return
    prc, ptext = parts.get("k8s_pods", (1, ""))
    pods: dict[str, Any] = {}
    if prc == 0 and ptext.strip():
        try:
            loaded = json.loads(ptext)
            pods = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            j.errors.append("kubectl get pods printed no JSON")
    j.scheduler = kubernetes.parse_observation(job if isinstance(job, dict) else None, pods)


# ---------------------------------------------------------------------------------------------- verdict


def _how(cancelled: str) -> str:
    parts = cancelled.split()
    return parts[-1] if parts else ""


def verdict(o: JobObservation | None) -> Verdict:
    """Running / exited with code / cancelled / gone / unknown, with the evidence (module doc: the rules)."""
    if o is None or not o.complete:
        return Verdict("unknown", None, evidence=("the probe's answer for this job was missing or cut short",))
    ev = [f"unreadable fact: {e}" for e in o.errors[:3]]
    sched = o.scheduler
    if o.proc_ok and (o.group_alive or o.pid_alive):
        what = f"process group {o.pgid}" if o.group_alive else f"pid {o.pid}"
        ev.insert(0, f"{what} has live processes ({', '.join(map(str, o.pids[:5])) or o.pid})")
        if o.exit_raw is not None:
            ev.append(f"an exit_code file reads {clean_line(o.exit_raw, 40)!r} while the group lives: not trusted")
        if o.cancelled:
            ev.append("a cancel record exists but the group survived it")
        st = JobState.running
        if sched is not None and sched.scheduler_state:
            from mcp_gpu.backends.registry import scheduler_verdict

            if scheduler_verdict(o.backend, sched) is JobState.launching:
                st = JobState.launching
        return Verdict("running", st, evidence=tuple(ev))
    if o.backend in SCHEDULED and sched is not None and sched.scheduler_state:
        from mcp_gpu.backends.registry import scheduler_verdict

        said = scheduler_verdict(o.backend, sched)
        word = f"{o.backend} says {clean_line(sched.scheduler_state, 60)}" + (
            f" ({clean_line(sched.detail, 160)})" if sched.detail else "")
        if said in (JobState.launching, JobState.running):
            return Verdict("running", said, evidence=(word, *ev))
        if said is not None:
            kind: VerdictKind = "cancelled" if said is JobState.cancelled else "exited"
            return Verdict(kind, said, sched.exit_code, sched.exit_signal, evidence=(word, *ev))
    if o.backend == "kubernetes":
        why = sched.detail if sched is not None and sched.detail else "kubectl said nothing usable"
        return Verdict("unknown", None, evidence=(clean_line(why, 200), *ev))
    if not o.proc_ok:
        return Verdict("unknown", None, evidence=("the host's process table could not be read", *ev))
    if o.session and o.exit_raw is None:
        return Verdict("running", JobState.running,
                       evidence=("its tmux session is alive (the wrapper has not recorded its group yet)", *ev))
    if o.run_dir is False:
        if o.backend == "slurm" and sched is not None and sched.alive is None:
            return Verdict("unknown", None, evidence=("the run directory is gone and Slurm no longer knows the job",
                                                       *ev))
        return Verdict("gone", JobState.lost, evidence=("the run directory is gone", *ev), run_dir_missing=True)
    gone = f"no live process in group {o.pgid}" if o.pgid else "no process group recorded and no live pid"
    if o.exit_raw is None and o.wrapper_alive:
        # the group is gone but the wrapper has not written exit_code yet (it outlives the group to record it)
        return Verdict("running", JobState.running,
                       evidence=(f"{gone}; its wrapper is still alive, recording the end", *ev))
    if o.cancelled and _how(o.cancelled) != "gone":
        return Verdict("cancelled", JobState.cancelled, o.exit_code, o.exit_signal,
                       evidence=(f"cancel record: {clean_line(o.cancelled, 80)}", gone, *ev))
    if o.exit_raw is not None:
        if o.exit_code is None:
            return Verdict("unknown", None, evidence=(f"the exit_code file is unreadable: "
                                                      f"{clean_line(o.exit_raw, 40)!r}", gone, *ev))
        st = JobState.succeeded if o.exit_code == 0 else JobState.failed
        return Verdict("exited", st, o.exit_code, o.exit_signal,
                       evidence=(f"exit_code {o.exit_code}{' ' + o.exit_signal if o.exit_signal else ''}", gone, *ev))
    if o.cancelled:
        return Verdict("cancelled", JobState.cancelled, evidence=(f"cancel record: {clean_line(o.cancelled, 80)}",
                                                                  gone, *ev))
    return Verdict("gone", JobState.lost, evidence=(f"no exit_code file; {gone}", *ev))


def to_observation(o: JobObservation, v: Verdict) -> Observation:
    """The verdict in the backends' older `Observation` shape (launch's first-minute probe reads it)."""
    sched = o.scheduler
    state = sched.scheduler_state if sched is not None else (
        None if o.session is None else ("present" if o.session else "gone"))
    return Observation(alive=v.alive, exit_code=v.exit_code, exit_signal=v.exit_signal, scheduler_state=state,
                       detail="; ".join(v.evidence), heartbeat_age=o.hb_age if o.hb_age is not None else (
                           sched.heartbeat_age if sched is not None else None),
                       cancelled=o.cancelled or (sched.cancelled if sched is not None else None), state=v.state)
