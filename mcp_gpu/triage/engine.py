"""The triage engine: log text plus what the caller knows about the process → findings, root cause first.

    triage(lines, exit_code=137, oom_kill_delta=1, seen=previous.fingerprints) -> TriageResult
    triage_text(pasted_log) -> TriageReport

How a verdict is reached:
0. A pasted log is first read as the program printed it (`paste.normalise`: quote marks, a decoration every line
   shares, a code block's indent and hard wraps undone).
1. One pass finds the lines that hold a rule's needle (`scan.needle_lines`); each is cleaned (ANSI colours,
   `[rank0]:` / srun `0: ` prefixes, tqdm's carriage-return redraws) and judged by `rules.RULES`, first match wins.
   A Python traceback is walked to its final exception line (the first line back at column 0): frames are code
   text and are not judged; an exception no rule explains is an unclassified `traceback`.
2. Recovery (`recovery.py`): a line followed by more training progress, with no fatal sign in between, was survived
   (a caught and logged traceback, a retried download, an overflow skipped at warm-up), and so is a line that says
   how the program copes with it ("..., skipping", "falling back to"). It is reported as `info`, never as the cause.
   A fatal sign (`Rule.fatal`: a segfault, `Killed`, a non-zero worker exit, ChildFailedError) is never
   survived, so a log that holds one is never `healthy`.
3. Trends: fp16 overflow lines are judged as a series: the loss scale falling below 1 (or pinned at 1) is
   `nan_inf`; a few halvings at warm-up followed by training are not.
4. The caller's facts (exit code or signal, cgroup OOM-kill delta, scheduler state, free bytes and inodes) add
   their own evidence. SIGTERM is preemption evidence only when nothing crashed.
5. One finding per class. The primary is the most root-like class among what was not survived (`PRIORITY`):
   collective timeouts, launcher reports and unclassified tracebacks next to a known cause become `info` cascades
   of it, across ranks and restarts. A fatal sign with no known cause is a `traceback` with its evidence.
6. Lines are fingerprinted (class + the line with every number blanked): a finding whose lines were all in `seen`
   is not returned again, only named in `repeated`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from mcp_gpu.models import SEVERITY_RANK, Finding, Severity
from mcp_gpu.triage.log_scan import _Hit, _Scan, _trim
from mcp_gpu.triage.paste import normalise
from mcp_gpu.triage.recovery import (
    after_done,
    anomaly_explained,
    coping,
    eval_nan_explained,
    grad_norm_recovered,
    mark_survived,
    named_loss_recovered,
    nan_from_fault,
    retries_pile_up,
    write_interrupted,
)
from mcp_gpu.triage.rules import (
    GENERIC_TRACEBACK,
    LOG_ERROR,
    NCCL_TRACE,
    NCCL_TRACE_LINE,
    SCALE_COLLAPSE,
    SIGNALS,
)
from mcp_gpu.triage.scan import ANSI, ProgressFinder, clean_segments

# Most root-like first: a full disk explains a corrupt checkpoint; an OOM explains the NCCL timeout of the ranks
# left waiting; an unclassified traceback on one rank explains the others' collective timeout.
PRIORITY: tuple[str, ...] = (
    "inode_exhausted", "disk_full", "cuda_oom", "host_oom_killed", "nan_inf", "cuda_device_error", "dataloader_error",
    "checkpoint_corrupt", "import_or_config_error", "time_limit", "preempted", "cancelled", "ssh_disconnect",
    "network_stall", "traceback", "nccl_timeout",
)
_CASCADE_CLASSES = frozenset({"traceback", "nccl_timeout"})
_BARE_EXIT = frozenset({"signal.exit", "sched.state_failed"})
_NOT_A_CRASH = frozenset({"ssh_disconnect", "preempted"})

EVIDENCE_LINES = 3
DISK_LOW_BYTES = 2 * 1024**3
DISK_OUT_BYTES = 256 * 1024**2
INODES_LOW = 10_000
ROOT_WINDOW = 8_000  # characters before a fatal sign in which a survived-looking cause still explains it
DF_ROOM_PERCENT = 90  # every real filesystem in a pasted df below this: bytes were not what ran out
OVERFLOW_PINNED = 3  # overflow lines at a loss scale <= 1 that make a collapse

_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SPACE = re.compile(r"\s+")
_SIGNUM = {"9": "KILL", "15": "TERM", "2": "INT", "11": "SEGV", "6": "ABRT", "7": "BUS", "1": "HUP"}
_SIGNAL_RULE = {"KILL": "sigkill", "TERM": "sigterm", "INT": "sigint", "SEGV": "segv", "ABRT": "segv", "BUS": "sigbus"}
_SCHEDULER_RULE = {
    "OUT_OF_MEMORY": "sched_oom", "OOMKILLED": "sched_oom", "PREEMPTED": "sched_preempted", "EVICTED": "sched_preempted",
    "NODE_FAIL": "sched_node_fail", "BOOT_FAIL": "sched_node_fail", "TIMEOUT": "sched_timeout", "DEADLINE": "sched_timeout",
    "DEADLINEEXCEEDED": "sched_timeout", "CANCELLED": "sched_cancelled", "FAILED": "sched_failed",
    "BACKOFFLIMITEXCEEDED": "sched_failed",
}


class TriageFinding(Finding):
    """A triage finding: a `Finding` plus how sure the engine is that it explains the log."""

    confidence: float = Field(default=0.5, ge=0, le=1,
                              description="0-1: how sure the engine is (a rule on the line that ended the run is "
                                          "high, a survived or cascade line low)")


def tfinding(cls: str, severity: Severity, title: str, *, confidence: float, gotcha: str | None = None,
             evidence: list[str] | None = None, remedy: str = "") -> TriageFinding:
    return TriageFinding.model_validate({"class": cls, "severity": severity, "title": title, "gotcha": gotcha,
                                         "evidence": evidence or [], "remedy": remedy,
                                         "confidence": round(min(0.99, max(0.0, confidence)), 2)})


class TriageResult(BaseModel):
    """What triage found in one batch of lines."""

    primary: str = Field(description="the root-cause class, or 'healthy'")
    findings: list[Finding] = Field(default_factory=list, description="new findings, primary first")
    repeated: list[str] = Field(default_factory=list, description="classes found again whose lines were all in `seen`")
    fingerprints: list[str] = Field(default_factory=list,
                                    description="`seen` plus this batch's line fingerprints (those last): pass it back "
                                                "next time")


@dataclass
class _Group:
    cls: str
    hits: list[_Hit]
    best: _Hit
    severity: Severity
    cascade: bool
    title: str = ""
    confidence: float = 0.5
    fingerprints: set[str] = field(default_factory=set)


def clean_line(raw: str) -> list[str]:
    """One raw log line → the lines worth judging (see `scan.clean_segments`)."""
    return clean_segments(raw)


def fingerprint(cls: str, line: str) -> str:
    """Class + the line with numbers (steps, pids, sizes, times) blanked: the same failure reads the same next time."""
    return f"{cls}:" + _SPACE.sub(" ", _NUMBER.sub("#", line.lower())).strip()[:160]


def _overflow_collapse(series: list[tuple[int, float | None]]) -> bool:
    """fp16 overflow lines as a trend: the loss scale fell below 1 or stayed pinned at 1 — not a warm-up search."""
    scales = [s for _, s in series if s is not None]
    if not scales:
        return False
    if min(scales) < 1:
        return True
    return sum(s <= 1 for s in scales) >= OVERFLOW_PINNED


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
    for h in hits:
        if h.role == "sigterm":
            h.role = "cascade" if explained else "cause"


# srun's report of the tasks it killed itself (`srun: error: node: tasks 0-38,40-63: Killed`), the step cancellation
# it logs when it tears a step down, and srun's report of one task failing first (a rule's hit: only judged lines
# are looked at)
_SRUN_KILLED = re.compile(r"\btasks? [\d,-]+: Killed\b")
_STEP_CANCELLED = re.compile(r"\*\*\* STEP \S+ ON \S+ CANCELLED AT \S+ \*\*\*\s*$")
_TASK_FAILED = re.compile(r"srun: error: \S+: tasks? [\d,-]+: (?:Exited with exit code [1-9]|Segmentation fault|"
                          r"Aborted|Bus error|Floating point exception|Illegal instruction)")
_STOPPED = frozenset({"time_limit", "cancelled", "preempted"})


def _launcher_kills(hits: list[_Hit]) -> list[_Hit]:
    """What a scheduler or srun kills after the job already ended is not the OOM killer: a SIGKILL after a time limit,
    a cancellation or a preemption is that stop's; srun killing the other tasks after one task failed is a
    consequence of that failure, and so is the bare step cancellation srun logs then.
    Those kills are dropped (they are no event of their own); the cancellation becomes a cascade."""
    stop = failed = None
    kept = []
    for h in hits:
        if failed is None and _TASK_FAILED.search(h.line):
            failed = h.index
        if h.rule.id == "host_oom.sigkill" and h.role == "cause" and (
                stop is not None or (failed is not None and _SRUN_KILLED.search(h.line))):
            continue
        if h.cls in _STOPPED and h.role in ("cause", "sigterm"):
            if failed is not None and _STEP_CANCELLED.search(h.line):
                h.role = "cascade"  # srun ended the step because a task had failed: no one cancelled the job
            elif stop is None:
                stop = h.index
        kept.append(h)
    return kept


def _confidence(best: _Hit, cascade: bool) -> float:
    """How sure: a named rule on the line that ended the run is surest; a warning-level line, an unclassified
    exception, a launcher's report or an error-level line no rule knows, less and less."""
    if best.rule is GENERIC_TRACEBACK:
        return 0.6
    if best.rule is LOG_ERROR:
        return 0.4
    if cascade:
        return 0.5
    conf = best.rule.confidence
    if best.final or best.fatal:
        conf += 0.1
    if best.severity == "warn":
        conf -= 0.25
    return conf


def _group(hits: list[_Hit]) -> list[_Group]:
    by_cls: dict[str, list[_Hit]] = {}
    for h in hits:
        by_cls.setdefault(h.cls, []).append(h)
    groups = []
    for cls, members in by_cls.items():
        causal = [h for h in members if h.role == "cause"]
        pool = causal or members
        # the most serious line; among equals the first (the root, before later ranks and restarts repeat it)
        best = max(pool, key=lambda h: (SEVERITY_RANK[h.severity], h.rule is not GENERIC_TRACEBACK, -h.index))
        groups.append(_Group(cls, members, best, best.severity, cascade=not causal, title=best.rule.title,
                             confidence=_confidence(best, not causal),
                             fingerprints={fingerprint(cls, h.line) for h in members}))
    return groups


def _prio(cls: str) -> int:
    return PRIORITY.index(cls) if cls in PRIORITY else len(PRIORITY)


def _rank(g: _Group) -> tuple[int, int]:
    return (-SEVERITY_RANK[g.severity], _prio(g.cls))


def _pick_primary(groups: list[_Group]) -> _Group | None:
    def tier(g: _Group) -> int | None:
        """0 a named cause; 1 a named warning nothing survived (the run died right after it); 2 an unclassified
        crash, a collective timeout, or the subsystem a cut-off traceback's frames were in (only when nothing named
        the cause); 3 their warnings; 4 a launcher's report that something failed."""
        serious = SEVERITY_RANK[g.severity] >= SEVERITY_RANK["error"]
        warn = g.severity == "warn"
        if not g.cascade and all(h.rule.id.startswith("hint.") for h in g.hits):
            return 2  # a guess from where the paste stopped: any line that names a cause is better evidence
        if not g.cascade:
            if g.cls in _CASCADE_CLASSES:
                return 2 if serious else (3 if warn else None)
            return 0 if serious else (1 if warn else None)
        return 4 if serious else None

    ranked = [(t, _prio(g.cls), g) for g in groups if (t := tier(g)) is not None]
    if not ranked:
        return None
    return min(ranked, key=lambda r: (r[0], r[1]))[2]


def _evidence(g: _Group) -> list[str]:
    pool = [h for h in g.hits if h.role == g.best.role] if not g.cascade else g.hits
    if g.best.rule is SCALE_COLLAPSE:  # a trend: where it started and where it ended up
        ordered = sorted(pool, key=lambda h: h.index)
        return [_trim(h.line) for h in (ordered[:1] + ordered[-(EVIDENCE_LINES - 1):] if len(ordered) >= EVIDENCE_LINES
                                        else ordered)]
    ordered = [g.best, *sorted((h for h in pool if h is not g.best), key=lambda h: h.index)]
    out: list[str] = []
    for h in ordered:
        text = _trim(h.line)
        if text not in out:
            out.append(text)
        if len(out) == EVIDENCE_LINES:
            break
    return out


def _root_before_fatal(survived: list[_Hit], live: list[_Hit]) -> list[_Hit]:
    """Causes that look survived but sit just before the first fatal sign: another rank printed progress while
    this one died. They are revived as the cause when nothing live names one."""
    fatal = [h.index for h in live if h.fatal]
    if not fatal:
        return []
    first = min(fatal)
    return [h for h in survived if h.role == "cause" and h.rule is not GENERIC_TRACEBACK and h.cls not in
            _CASCADE_CLASSES and SEVERITY_RANK[h.severity] >= SEVERITY_RANK["error"] and 0 <= first - h.index <= ROOT_WINDOW]


def _nccl_trace(text: str, scan: _Scan) -> None:
    """The first line of NCCL's error trace, found by one search of the text (a literal-led pattern, at C speed)."""
    if "NCCL INFO" not in text or (m := NCCL_TRACE_LINE.search(text)) is None:
        return
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    if start in scan.hit_lines:
        return
    line = clean_segments(text[start:len(text) if end < 0 else end])[-1]
    scan.hits.append(_Hit(NCCL_TRACE, start, line, "error", "cause"))
    scan.hit_lines.add(start)


_BARE_CR = re.compile(r"\r(?![:'\"\n])")


def _one_line_per_event(text: str) -> str:
    """CRLF becomes LF, and a bare carriage return (a progress bar redrawing itself) a line break, so that a log
    of one endless tqdm line is scanned line by line. A CR before ':' or a quote is bash echoing a CRLF script: kept,
    so the CRLF rule still sees it."""
    if "\r" not in text:
        return text
    return _BARE_CR.sub("\n", text.replace("\r\n", "\n"))


def _join(lines: list[str]) -> str:
    return "\n".join(lines)


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
    return _triage_text(_join(lines), exit_code=exit_code, exit_signal=exit_signal, oom_kill_delta=oom_kill_delta,
                        scheduler_state=scheduler_state, disk_free_bytes=disk_free_bytes, inodes_free=inodes_free,
                        seen=seen)


def _triage_text(text: str, *, exit_code: int | None = None, exit_signal: str | None = None, oom_kill_delta: int = 0,
                 scheduler_state: str | None = None, disk_free_bytes: int | None = None, inodes_free: int | None = None,
                 seen: set[str] | None = None, complete: bool = False) -> TriageResult:
    seen = seen or set()
    crashed = _signal_name(exit_code, exit_signal) is not None
    text = _one_line_per_event(text)
    scan = _Scan(text, crashed, complete)
    hits = scan.hits
    _nccl_trace(text, scan)
    mark_survived(hits, ProgressFinder(text, scan.hit_lines))
    named_loss_recovered(text, hits)
    after_done(text, hits)
    grad_norm_recovered(text, hits)
    anomaly_explained(hits)
    coping(hits)
    eval_nan_explained(text, hits)
    retries_pile_up(hits)
    write_interrupted(text, hits)
    nan_from_fault(hits)
    hits += _fact_hits(len(text), exit_code, exit_signal, oom_kill_delta, scheduler_state, disk_free_bytes,
                       inodes_free)
    # "No space left on device" while the pasted `df` shows room everywhere: the inodes ran out (df -i tells)
    df_has_room = scan.df_bytes_max is not None and scan.df_bytes_max < DF_ROOM_PERCENT
    df_inodes_nearly_out = scan.df_inodes_max is not None and scan.df_inodes_max >= DF_ROOM_PERCENT
    if _inodes_explain_enospc(disk_free_bytes, inodes_free) or df_has_room or df_inodes_nearly_out:
        for h in hits:
            if h.rule.id == "disk.enospc":
                h.rule = SIGNALS["enospc_inodes"]
    if oom_kill_delta <= 0 and any(h.role == "sigterm" for h in hits):
        # SIGKILL after the job logged SIGTERM and no OOM kill: the follow-up of a stop's grace, not the OOM killer
        for h in hits:
            if h.rule.id == "signal.sigkill":
                h.rule, h.role = SIGNALS["sigkill_after_term"], "sigterm"

    trend = [h for h in hits if h.role == "trend"]
    live = [h for h in hits if not h.survived and h.role != "trend"]
    survived = [h for h in hits if h.survived and h.role != "trend"]
    if trend and _overflow_collapse(scan.overflow):
        for h in trend:
            h.rule, h.role, h.severity = SCALE_COLLAPSE, "cause", "error"
        live += trend
    elif trend and any(not h.survived for h in trend) and any(h.fatal or h.final for h in live):
        for h in trend:  # a run that died while overflowing: the overflow is the likeliest cause named
            h.role, h.severity = "cause", "warn"
        live += [h for h in trend if not h.survived]
    live.sort(key=lambda h: h.index)
    live = _launcher_kills(live)
    _resolve_sigterm(live, scan.worker_exits)

    groups = _group(live)
    primary = _pick_primary(groups)
    if primary is None or (primary.cascade or primary.cls in _CASCADE_CLASSES):
        revived = _root_before_fatal(survived, live)
        if revived:
            for h in revived:
                h.survived = False
            survived = [h for h in survived if h.survived]
            groups = _group(live + revived)
            primary = _pick_primary(groups)
    if primary is not None and not primary.cascade:
        # a bare non-zero exit adds nothing once its cause is known
        groups = [g for g in groups if not (g.cascade and all(h.rule.id in _BARE_EXIT for h in g.hits))]
        for g in groups:
            if g is not primary and (g.cascade or g.cls in _CASCADE_CLASSES):
                g.severity = "info"
                g.title = f"{g.title} (cascade of {primary.cls})"
                g.confidence = min(g.confidence, 0.4)
    ordered = sorted(groups, key=lambda g: (g is not primary, *_rank(g)))
    for g in _group(survived):
        if g.cls in {x.cls for x in ordered}:
            continue
        g.severity, g.title, g.confidence = "info", f"{g.title} (survived: training went on)", 0.2
        ordered.append(g)

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
        findings.append(tfinding(g.cls, g.severity, g.title, confidence=g.confidence, gotcha=g.best.rule.gotcha,
                                 evidence=_evidence(g), remedy="" if demoted else g.best.rule.remedy))
    return TriageResult(primary=primary.cls if primary else "healthy", findings=findings, repeated=repeated,
                        fingerprints=sorted(every - batch) + sorted(batch))


class TriageReport(BaseModel):
    """The answer for a pasted log: what `triage_log` and `mcp-gpu triage` return."""

    primary: str = Field(description="the root-cause class (cuda_oom, host_oom_killed, nan_inf, ...) or 'healthy'")
    confidence: float = Field(default=0.0, description="the primary finding's confidence (0 when healthy)")
    findings: list[Finding] = Field(default_factory=list, description="root cause first; cascades of it are marked info")


def triage_text(text: str, exit_code: int | None = None) -> TriageReport:
    """Triage a whole pasted log, linear in its size."""
    if "\x1b" in text:
        text = ANSI.sub("", text)
    text = normalise(text.replace("\r\n", "\n") if "\r\n" in text else text)
    result = _triage_text(text, exit_code=exit_code, complete=True)
    conf = 0.0
    if result.primary != "healthy" and result.findings and isinstance(result.findings[0], TriageFinding):
        conf = result.findings[0].confidence
    return TriageReport(primary=result.primary, confidence=conf, findings=result.findings)
