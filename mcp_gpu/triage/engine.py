"""The triage engine: new log lines plus what the caller knows about the process → findings, root cause first.

    triage(lines, exit_code=137, oom_kill_delta=1, seen=previous.fingerprints) -> TriageResult

How a verdict is reached:
1. Lines are cleaned (ANSI colours, `[rank0]:` / srun `0: ` prefixes, tqdm's carriage-return redraws) and matched
   against `rules.RULES`, first match wins. Inside a Python traceback only the final exception line (the first
   line back at column 0) is judged; an exception no rule explains is an unclassified `traceback`.
2. The caller's facts (exit code or signal, cgroup OOM-kill delta, scheduler state, free bytes and inodes) add
   their own evidence.
3. SIGTERM is preemption evidence only when nothing crashed: the workers torchrun stops after one of them was
   OOM-killed are a cascade, not a preemption.
4. One finding per class. The primary is the most root-like class among real causes (`PRIORITY`); collective
   timeouts, launcher reports and unclassified tracebacks next to a known cause become `info` cascades of it.
5. Lines are fingerprinted (class + the line with every number blanked): a finding whose lines were all in `seen`
   is not returned again, only named in `repeated`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from mcp_gpu.models import SEVERITY_RANK, Finding, Severity, finding
from mcp_gpu.triage.rules import GENERIC_TRACEBACK, RULES, SIGNALS, Role, Rule

# Most root-like first: a full disk explains a corrupt checkpoint; an OOM explains the NCCL timeout of the ranks
# left waiting; an unclassified traceback on one rank explains the others' collective timeout.
PRIORITY: tuple[str, ...] = (
    "inode_exhausted", "disk_full", "cuda_oom", "host_oom_killed", "nan_inf", "cuda_device_error", "dataloader_error",
    "checkpoint_corrupt", "import_or_config_error", "time_limit", "preempted", "cancelled", "traceback", "nccl_timeout",
    "network_stall", "ssh_disconnect",
)
_CASCADE_CLASSES = frozenset({"traceback", "nccl_timeout"})
_BARE_EXIT = frozenset({"signal.exit", "sched.state_failed"})
_NOT_A_CRASH = frozenset({"ssh_disconnect", "preempted"})

EVIDENCE_LINES = 3
EVIDENCE_CHARS = 320
DISK_LOW_BYTES = 2 * 1024**3
DISK_OUT_BYTES = 256 * 1024**2
INODES_LOW = 10_000

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]:\s?|\d{1,4}: (?=\S)|\(\w+ pid=\d+[^)]*\)\s)")
_TB_HEADER = re.compile(r"^(?:Original )?Traceback \(most recent call last\):")
_EXC_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?::\s|$)")
_WORKER_EXIT = re.compile(r"exitcode\s*:\s*(-?\d+)")
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SPACE = re.compile(r"\s+")
_SIGNUM = {"9": "KILL", "15": "TERM", "2": "INT", "11": "SEGV", "6": "ABRT", "7": "BUS"}
_SIGNAL_RULE = {"KILL": "sigkill", "TERM": "sigterm", "INT": "sigint", "SEGV": "segv", "ABRT": "segv", "BUS": "sigbus"}
_SCHEDULER_RULE = {
    "OUT_OF_MEMORY": "sched_oom", "OOMKILLED": "sched_oom", "PREEMPTED": "sched_preempted", "EVICTED": "sched_preempted",
    "NODE_FAIL": "sched_node_fail", "BOOT_FAIL": "sched_node_fail", "TIMEOUT": "sched_timeout", "DEADLINE": "sched_timeout",
    "DEADLINEEXCEEDED": "sched_timeout", "CANCELLED": "sched_cancelled", "FAILED": "sched_failed",
    "BACKOFFLIMITEXCEEDED": "sched_failed",
}


class TriageResult(BaseModel):
    """What triage found in one batch of lines."""

    primary: str = Field(description="the root-cause class, or 'healthy'")
    findings: list[Finding] = Field(default_factory=list, description="new findings, primary first")
    repeated: list[str] = Field(default_factory=list, description="classes found again whose lines were all in `seen`")
    fingerprints: list[str] = Field(default_factory=list,
                                    description="`seen` plus this batch's line fingerprints (those last): pass it back "
                                                "next time")


@dataclass
class _Hit:
    rule: Rule
    index: int
    line: str
    severity: Severity
    role: Role

    @property
    def cls(self) -> str:
        return self.rule.cls


@dataclass
class _Group:
    cls: str
    hits: list[_Hit]
    best: _Hit
    severity: Severity
    cascade: bool
    title: str = ""
    fingerprints: set[str] = field(default_factory=set)


def clean_line(raw: str) -> list[str]:
    """One raw log line → the lines worth judging: colours and rank prefixes gone, tqdm redraws split apart.

    A carriage return followed by ':' or a quote is bash echoing a CRLF script, so it is kept as a visible `\\r`."""
    text = _ANSI.sub("", raw).rstrip("\r\n")
    if "\r" in text:
        parts = text.split("\r")
        if any(p[:1] in (":", "'", '"') for p in parts[1:]):
            segments = [text.replace("\r", "\\r")]
        else:
            segments = [p for p in parts if p.strip()]
    else:
        segments = [text]
    return [_PREFIX.sub("", s.rstrip(), count=1) for s in segments]


def fingerprint(cls: str, line: str) -> str:
    """Class + the line with numbers (steps, pids, sizes, times) blanked: the same failure reads the same next time."""
    return f"{cls}:" + _SPACE.sub(" ", _NUMBER.sub("#", line.lower())).strip()[:160]


def _index_needles() -> tuple[tuple[int, ...], tuple[tuple[str, tuple[int, ...]], ...]]:
    owners: dict[str, list[int]] = {}
    for i, rule in enumerate(RULES):
        for needle in rule.needles or ():
            owners.setdefault(needle, []).append(i)
    always = tuple(i for i, r in enumerate(RULES) if r.needles is None)
    return always, tuple((n, tuple(ix)) for n, ix in owners.items())


_ALWAYS, _BY_NEEDLE = _index_needles()


def _candidates(line: str) -> list[Rule]:
    """The rules that could match `line`, in table order: those whose needles it holds (or that have none)."""
    low = line.lower()
    hit: set[int] = set(_ALWAYS)
    for needle, owners in _BY_NEEDLE:
        if needle in low:
            hit.update(owners)
    return [RULES[i] for i in sorted(hit)]


def _match(line: str) -> Rule | None:
    for rule in _candidates(line):
        if rule.pattern.search(line):
            return rule
    return None


def _trim(line: str) -> str:
    line = line.strip()
    return line if len(line) <= EVIDENCE_CHARS else line[: EVIDENCE_CHARS - 1] + "…"


def _scan(lines: list[str], crashed: bool) -> tuple[list[_Hit], list[str], int]:
    """→ (hits, exit codes torchrun reports per worker, number of lines judged)."""
    hits: list[_Hit] = []
    worker_exits: list[str] = []
    in_traceback = False
    index = 0
    for raw in lines:
        for physical in raw.split("\n"):
            for line in clean_line(physical):
                index += 1
                if not line.strip():
                    continue
                if "exitcode" in line:
                    worker_exits += _WORKER_EXIT.findall(line)
                if _TB_HEADER.match(line):
                    in_traceback = True
                    continue
                final_exception = False
                if in_traceback:
                    if line[0] in " \t":
                        continue  # a frame or its source line: code text, not a message
                    in_traceback, final_exception = False, True
                rule = _match(line)
                if rule is None:
                    if final_exception or (crashed and _EXC_LINE.match(line)):
                        hits.append(_Hit(GENERIC_TRACEBACK, index, line, "error", "cause"))
                    continue
                if rule.role == "ignore":
                    continue
                severity = rule.severity
                if final_exception and rule.role == "cause" and SEVERITY_RANK[severity] < SEVERITY_RANK["error"]:
                    severity = "error"  # the exception that ended the run, not a logged warning
                hits.append(_Hit(rule, index, line, severity, rule.role))
    return hits, worker_exits, index


def _signal_name(exit_code: int | None, exit_signal: str | None) -> str | None:
    if exit_signal:
        name = exit_signal.strip().upper().removeprefix("SIG")
        name = _SIGNUM.get(name, name)
        return {"KILLED": "KILL", "TERMINATED": "TERM"}.get(name, name)
    if exit_code is None or exit_code == 0:
        return None
    if exit_code < 0:
        return _SIGNUM.get(str(-exit_code), "EXIT")
    if exit_code > 128:
        return _SIGNUM.get(str(exit_code - 128), "EXIT")
    return "EXIT"


def _fact_hits(start: int, exit_code: int | None, exit_signal: str | None, oom_kill_delta: int,
               scheduler_state: str | None, disk_free_bytes: int | None, inodes_free: int | None) -> list[_Hit]:
    facts: list[tuple[str, str]] = []
    sig = _signal_name(exit_code, exit_signal)
    if sig is not None:
        shown = f"exit_signal={exit_signal}" if exit_signal else f"exit_code={exit_code}"
        facts.append((_SIGNAL_RULE.get(sig, "exit"), shown))
    if oom_kill_delta > 0:
        facts.append(("oom_delta", f"oom_kill_delta={oom_kill_delta}"))
    if scheduler_state and scheduler_state.strip():
        key = _SCHEDULER_RULE.get(scheduler_state.split()[0].upper())
        if key:
            facts.append((key, f"scheduler_state={scheduler_state.strip()}"))
    if disk_free_bytes is not None and disk_free_bytes < DISK_LOW_BYTES:
        key = "disk_out" if disk_free_bytes <= DISK_OUT_BYTES else "disk_low"
        facts.append((key, f"disk_free_bytes={disk_free_bytes} ({disk_free_bytes / 1024**2:.0f} MiB)"))
    if inodes_free is not None and inodes_free < INODES_LOW:
        facts.append(("inodes_out" if inodes_free == 0 else "inodes_low", f"inodes_free={inodes_free}"))
    hits = []
    for offset, (key, text) in enumerate(facts, start=1):
        rule = SIGNALS[key]
        hits.append(_Hit(rule, start + offset, text, rule.severity, rule.role))
    return hits


def _inodes_explain_enospc(disk_free_bytes: int | None, inodes_free: int | None) -> bool:
    if inodes_free is not None:
        return inodes_free < INODES_LOW
    return disk_free_bytes is not None and disk_free_bytes >= DISK_LOW_BYTES


def _resolve_sigterm(hits: list[_Hit], worker_exits: list[str]) -> None:
    """SIGTERM counts as preemption only if nothing else explains the end of the run."""
    explained = any(
        h.role == "cause" and h.cls not in _NOT_A_CRASH
        and (SEVERITY_RANK[h.severity] >= SEVERITY_RANK["error"] or h.cls in ("time_limit", "cancelled"))
        for h in hits
    )
    # torchrun's report names each worker's exit code: one that failed on its own explains the SIGTERMs of the rest.
    explained = explained or any(code not in ("0", "-15", "15", "143") for code in worker_exits)
    if explained:
        for h in hits:
            if h.role == "sigterm":
                h.role = "cascade"
    else:
        for h in hits:
            if h.role == "sigterm":
                h.role = "cause"


def _group(hits: list[_Hit]) -> list[_Group]:
    by_cls: dict[str, list[_Hit]] = {}
    for h in hits:
        by_cls.setdefault(h.cls, []).append(h)
    groups = []
    for cls, members in by_cls.items():
        causal = [h for h in members if h.role == "cause"]
        pool = causal or members
        best = max(pool, key=lambda h: (SEVERITY_RANK[h.severity], -h.index))
        groups.append(_Group(cls, members, best, best.severity, cascade=not causal, title=best.rule.title,
                             fingerprints={fingerprint(cls, h.line) for h in members}))
    return groups


def _rank(g: _Group) -> tuple[int, int]:
    prio = PRIORITY.index(g.cls) if g.cls in PRIORITY else len(PRIORITY)
    return (-SEVERITY_RANK[g.severity], prio)


def _pick_primary(groups: list[_Group]) -> _Group | None:
    def tier(g: _Group) -> int | None:
        serious = SEVERITY_RANK[g.severity] >= SEVERITY_RANK["error"]
        if not g.cascade:
            return 0 if serious else (1 if g.severity == "warn" else None)
        return 2 if serious else None

    ranked = [(t, PRIORITY.index(g.cls) if g.cls in PRIORITY else len(PRIORITY), g)
              for g in groups if (t := tier(g)) is not None]
    if not ranked:
        return None
    return min(ranked, key=lambda r: (r[0], r[1]))[2]


def _evidence(g: _Group) -> list[str]:
    pool = [h for h in g.hits if h.role == g.best.role] if not g.cascade else g.hits
    ordered = [g.best, *sorted((h for h in pool if h is not g.best), key=lambda h: h.index)]
    out: list[str] = []
    for h in ordered:
        text = _trim(h.line)
        if text not in out:
            out.append(text)
        if len(out) == EVIDENCE_LINES:
            break
    return out


def triage(lines: list[str], *, exit_code: int | None = None, exit_signal: str | None = None, oom_kill_delta: int = 0,
           scheduler_state: str | None = None, disk_free_bytes: int | None = None, inodes_free: int | None = None,
           seen: set[str] | None = None) -> TriageResult:
    """Classify a batch of log lines (and what is known about the process) into findings, root cause first.

    Args:
        lines: new log lines (a line may hold tqdm redraws separated by carriage returns).
        exit_code: the process exit status if it ended (137 = SIGKILL, 143 = SIGTERM; negative = killed by -N).
        exit_signal: the signal that ended it, if known ("KILL", "SIGTERM", "9").
        oom_kill_delta: new cgroup OOM kills since the last look (memory.events oom_kill delta).
        scheduler_state: Slurm/k8s state (OUT_OF_MEMORY, PREEMPTED, TIMEOUT, CANCELLED, NODE_FAIL, Evicted, ...).
        disk_free_bytes / inodes_free: free space on the run mount, if probed.
        seen: fingerprints returned by the previous call for this job; lines already reported do not come back.
    """
    seen = seen or set()
    crashed = _signal_name(exit_code, exit_signal) is not None
    hits, worker_exits, count = _scan(lines, crashed)
    hits += _fact_hits(count, exit_code, exit_signal, oom_kill_delta, scheduler_state, disk_free_bytes,
                       inodes_free)
    if _inodes_explain_enospc(disk_free_bytes, inodes_free):
        for h in hits:
            if h.rule.id == "disk.enospc":
                h.rule = SIGNALS["enospc_inodes"]
    if oom_kill_delta <= 0 and any(h.role == "sigterm" for h in hits):
        # SIGKILL after the job logged SIGTERM and no OOM kill: the follow-up of a stop's grace, not the OOM killer
        for h in hits:
            if h.rule.id == "signal.sigkill":
                h.rule, h.role = SIGNALS["sigkill_after_term"], "sigterm"
    _resolve_sigterm(hits, worker_exits)

    groups = _group(hits)
    primary = _pick_primary(groups)
    if primary is not None and not primary.cascade:
        # a bare non-zero exit adds nothing once its cause is known
        groups = [g for g in groups if not (g.cascade and all(h.rule.id in _BARE_EXIT for h in g.hits))]
        for g in groups:
            if g is not primary and (g.cascade or g.cls in _CASCADE_CLASSES):
                g.severity = "info"
                g.title = f"{g.title} (cascade of {primary.cls})"
    ordered = sorted(groups, key=lambda g: (g is not primary, *_rank(g)))

    findings: list[Finding] = []
    repeated: list[str] = []
    every: set[str] = set(seen)
    batch: set[str] = set()
    for g in ordered:
        batch |= g.fingerprints
        every |= g.fingerprints
        if g.fingerprints <= seen:
            repeated.append(g.cls)
            continue
        demoted = g.severity == "info" and g is not primary
        findings.append(finding(g.cls, g.severity, g.title, gotcha=g.best.rule.gotcha, evidence=_evidence(g),
                                remedy="" if demoted else g.best.rule.remedy))
    return TriageResult(primary=primary.cls if primary else "healthy", findings=findings, repeated=repeated,
                        fingerprints=sorted(every - batch) + sorted(batch))



class TriageReport(BaseModel):
    """The answer for a pasted log: what `triage_log` and `mcp-gpu triage` return."""

    primary: str = Field(description="the root-cause class (cuda_oom, host_oom_killed, nan_inf, ...) or 'healthy'")
    findings: list[Finding] = Field(default_factory=list, description="root cause first; cascades of it are marked info")


MAX_TEXT_LINES = 20_000


def triage_text(text: str, exit_code: int | None = None) -> TriageReport:
    """Triage a whole pasted log (its last `MAX_TEXT_LINES` lines)."""
    result = triage(text.splitlines()[-MAX_TEXT_LINES:], exit_code=exit_code)
    return TriageReport(primary=result.primary, findings=result.findings)
