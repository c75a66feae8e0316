"""Phase 5a, `verify_artifacts`: list once, pull what is new (resumable, hashed), load-check it, record the verdict.

A second run over unchanged files costs one probe: files the MANIFEST at dest already holds as verified,
with the same size and remote SHA-256 and still present locally, are neither pulled nor checked again.
The manifest (file and registry row) is what the teardown gate reads; `all_ok` is true only when every
listed file arrived whole, matched its remote hash, and (for verify) passed its load check.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel, Field

from mcp_gpu import log
from mcp_gpu.app import App
from mcp_gpu.artifacts.checks import CHECKPOINT_KINDS, CheckResult, check_file, kind_of
from mcp_gpu.artifacts.listing import Listing, Newest, RemoteFile, check_roots, is_checkpoint_like, list_remote
from mcp_gpu.artifacts.manifest import FileEntry, Manifest, read_manifest, record_manifest, write_manifest
from mcp_gpu.artifacts.pull import PullOutcome, local_path, pull_files
from mcp_gpu.artifacts.remote_check import RemoteCheck, remote_checks
from mcp_gpu.errors import ConfigError
from mcp_gpu.models import Finding, JobRecord, finding, iso
from mcp_gpu.store import jobs

_log = log.get("mcp_gpu.verify")
ProgressCb = Callable[[int, int, str], Awaitable[None]]
Action = Literal["pulled", "resumed", "skipped", "checked", "failed", "not_pulled"]
MAX_FILES_SHOWN = 200


class FileReport(BaseModel):
    file: str
    bytes: int
    action: Action
    result: str
    kind: str
    check: str = ""
    detail: str = ""


class VerifyReport(BaseModel):
    all_ok: bool
    job: str | None
    host: str
    dest: str
    manifest: str
    counts: dict[str, int] = Field(description="listed, pulled, skipped, failed, refused, corrupt")
    bytes_moved: int
    bytes_total: int
    seconds: float
    newest_remote_checkpoint: Newest | None
    files: list[FileReport]
    findings: list[Finding]
    summary: str


class _Progress:
    """Byte deltas from the transfers (sync) → the async callback, at most every 2% of the total."""

    def __init__(self, total: int, cb: ProgressCb | None) -> None:
        self.total, self.done, self.cb = max(total, 1), 0, cb
        self._sent = -1
        self._wake = asyncio.Event()

    def add(self, n: int) -> None:
        self.done = min(self.total, self.done + n)
        if self.done - self._sent >= self.total / 50 or self.done == self.total:
            self._wake.set()

    async def pump(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.emit()

    async def emit(self, msg: str | None = None) -> None:
        if self.cb is not None and self.done != self._sent:
            self._sent = self.done
            await self.cb(self.done, self.total, msg or f"pulled {self.done / 2**20:.1f} of {self.total / 2**20:.1f} MiB")


def required_outputs(rec: JobRecord) -> list[str]:
    """The outputs a job must have verified before its machine may go, fixed at launch (`spec.outputs`: the
    declared ones, or `<workdir>/checkpoints` by default), relative ones taken from the workdir."""
    outs = [str(p) for p in (rec.spec.get("outputs") or [])]
    if not outs and not rec.spec.get("outputs_declared"):
        outs = ["checkpoints"]
    wd = rec.workdir.rstrip("/")
    return [p if p.startswith(("/", "~")) else f"{wd}/{p}" for p in outs]


def _target(app: App, job_id: str | None, host: str | None,
            paths: list[str] | None) -> tuple[str | None, str, list[str], list[str]]:
    """(job id, host, remote paths, the paths whose absence is no error: outputs nobody declared). For a job,
    `paths` can ADD to its required outputs, never replace them: a decoy cannot stand in for a corrupt checkpoint."""
    if job_id:
        rec = jobs.resolve(app.store, job_id, host)
        required = required_outputs(rec)
        declared = bool(rec.spec.get("outputs_declared", bool(rec.spec.get("outputs"))))
        extra = [p for p in (paths or []) if p not in required]
        optional = [] if declared else required + ([rec.run_dir] if rec.run_dir else [])
        roots = required + extra + ([rec.run_dir] if not declared and not extra and rec.run_dir else [])
        return rec.id, rec.host, list(dict.fromkeys(roots)), optional
    if not host:
        raise ConfigError("verify_artifacts needs a job_id, or a host and paths", hint="pass job_id='job_…'")
    if not paths:
        raise ConfigError(f"no paths to pull from {host}", hint="pass the remote output/checkpoint directories")
    return None, host, paths, []


def default_dest(app: App, job_id: str | None, host: str) -> Path:
    label = job_id or re.sub(r"[^A-Za-z0-9._-]", "_", host)
    return app.settings.artifacts_dir / label


def check_dest(app: App, dest: Path) -> None:
    """Pulled files never land in the server's state dir (outside its artifacts folder) or over a provider key
    file: a remote folder named like the state dir, pulled into its parent, would replace the TOTP secret, the HTTP
    token or the audit head with what the agent chose. Paths are compared resolved (symlinks, `..`)."""
    real = Path(os.path.realpath(dest))
    if real.is_relative_to(os.path.realpath(app.settings.artifacts_dir)):
        return
    for guard in _guards(app):
        if real.is_relative_to(guard) or guard.is_relative_to(real):
            raise ConfigError(f"dest {str(dest)!r} overlaps the server's state dir or a provider key file ({guard}): "
                              "pulled files may not land there",
                              hint=f"omit dest (default: under {app.settings.artifacts_dir}) or pick a folder of "
                                   "your project")


def _guards(app: App) -> list[Path]:
    from mcp_gpu.lifecycle.smoke import guarded_paths

    return [Path(os.path.realpath(g.expanduser())) for g in (app.settings.home, *guarded_paths())]


def check_local_sources(app: App, roots: list[str]) -> None:
    """Pulling from this machine must not copy the state dir or a key file out of hiding (to a dest a smoke or a
    job can read: the TOTP secret gives codes, the HTTP token the server). Resolved: symlinks, `~`."""
    for r in roots:
        real = Path(os.path.realpath(Path(os.path.expanduser("~")) / r if not r.startswith("/") else r))
        for guard in _guards(app):
            # a folder inside the state dir may be pulled (the demo works there); the state dir itself, what holds
            # it, and its own files (registry, keys, token, audit head) may not
            inside = real != guard and real.is_relative_to(guard)
            if guard.is_relative_to(real) or (inside and not (guard / real.relative_to(guard).parts[0]).is_dir()):
                raise ConfigError(f"refused path {r!r}: it is, holds or lies in the server's state dir or a provider "
                                  f"key file ({guard})", hint="pull the job's own output directories",
                                  data={"class": "path_refused"})


DEFER_HASH_BYTES = 64 << 20
MAX_FINDINGS = 50


def _reusable(prior: Manifest | None, dest: Path, f: RemoteFile, need_check: bool) -> FileEntry | None:
    if prior is None:
        return None
    for e in prior.files:
        if (e.file == f.local_rel and e.bytes == f.size and e.remote_sha256 == f.sha256 and e.verified
                and (e.checked or not need_check)):
            try:
                if local_path(dest, f.local_rel).stat().st_size == f.size:
                    return e
            except (OSError, ConfigError):
                return None
    return None


def _entry(f: RemoteFile, out: PullOutcome | None, chk: CheckResult | None, *, checked: bool) -> FileEntry:
    kind = chk.kind if chk else kind_of(f.rel)
    if out is not None and not out.ok:
        result = "mismatch" if out.error_kind == "mismatch" else "failed"
        return FileEntry(file=f.local_rel, remote=f.remote, bytes=f.size, remote_sha256=f.sha256 or "",
                         local_sha256=out.local_sha256 if result == "mismatch" else None, kind=kind,
                         result=result, detail=out.error or "")  # type: ignore[arg-type]
    res = "ok" if chk is None or chk.ok else ("corrupt" if chk.corrupt else "invalid")
    return FileEntry(file=f.local_rel, remote=f.remote, bytes=f.size, remote_sha256=f.sha256 or "",
                     local_sha256=out.local_sha256 if out else f.sha256, kind=kind,
                     check=chk.check if chk else "hash only (pull)", result=res,  # type: ignore[arg-type]
                     detail=chk.detail if chk else "", flags=chk.flags if chk else [], checked=checked)


def _findings(entries: list[FileEntry], listing: Listing, missing_severity: str) -> list[Finding]:
    out: list[Finding] = []
    for e in entries:
        if e.result == "corrupt":
            out.append(finding("checkpoint_corrupt", "error", f"{e.file}: {e.detail}"[:200], evidence=[e.check, e.detail],
                               remedy="do not tear down: re-save or re-sync this checkpoint from the run, or fall "
                                      "back to an earlier one, then verify again"))
        elif e.result == "invalid":
            out.append(finding("artifact_invalid", "error", f"{e.file}: {e.detail}"[:200], evidence=[e.check, e.detail],
                               remedy="inspect the file; it arrived whole (hash matches) but does not load"))
        elif e.result == "mismatch":
            out.append(finding("hash_mismatch", "error", f"{e.file}: local hash differs from the remote's",
                               evidence=[e.detail], remedy="the file may still be written; run verify again later"))
        elif e.result == "failed":
            cls = "ssh_disconnect" if "interrupted" in e.detail or "connection" in e.detail.lower() else "transfer_failed"
            out.append(finding(cls, "error", f"{e.file}: not pulled: {e.detail}"[:200], evidence=[e.detail],
                               remedy="run verify_artifacts again: partial files resume where they stopped"))
        elif e.result == "not_pulled":
            out.append(finding("artifact_not_pulled", "warn", f"{e.file}: left on the remote ({e.detail})",
                               evidence=[e.remote_check or ""], remedy="pull it (raise max_pull_bytes) before teardown"))
        for flag in e.flags:
            if "outside torch" in flag or "weights_only" in flag:
                out.append(finding("checkpoint_unsafe", "warn", f"{e.file}: {flag}"[:200], evidence=[flag],
                                   remedy="load it only with weights_only=True, or re-save as a plain state_dict"))
    for r in listing.refused:
        out.append(finding("path_refused", "error", f"refused {r.path}: {r.reason}"[:200], evidence=[r.reason],
                           remedy="copy the real file into the output directory, or request its directory directly"))
    for r in listing.errors:
        out.append(finding("artifact_unreadable", "error", f"{r.path}: {r.reason}", remedy="check its permissions"))
    for m in listing.missing:
        out.append(finding("artifact_missing", missing_severity, f"{m} does not exist on the remote",  # type: ignore[arg-type]
                           remedy="check the path (a relative path is taken from the remote home)"))
    return out


async def verify_artifacts(app: App, job_id: str | None = None, host: str | None = None, paths: list[str] | None = None,
                           dest: str | Path | None = None, remote_check: bool = False, progress: ProgressCb | None = None,
                           *, load_checks: bool = True, parallel: int = 4,
                           max_pull_bytes: int | None = None) -> VerifyReport:
    """Pull (resumable, hashed), load-check, and record a manifest. See the module docstring."""
    t0 = anyio.current_time()
    job, host, roots, optional = _target(app, job_id, host, paths)
    dest_p = Path(dest).expanduser() if dest else default_dest(app, job, host)
    check_dest(app, dest_p)
    transport = await app.transport(host)
    if transport.kind == "local":
        check_local_sources(app, roots)
    prior = read_manifest(dest_p)
    # First pull into this dest: big files are hashed on the remote while they travel (overlapped). With a
    # manifest already there, hash everything in the one probe so unchanged files cost nothing more.
    listing = await list_remote(transport, roots, hash_max_bytes=0 if prior is not None else DEFER_HASH_BYTES)
    keep: dict[str, FileEntry] = {}
    todo: list[RemoteFile] = []
    left: list[RemoteFile] = []
    for f in listing.files:
        e = _reusable(prior, dest_p, f, load_checks)
        if e is not None:
            keep[f.local_rel] = e
        elif max_pull_bytes is not None and f.size > max_pull_bytes:
            left.append(f)
        else:
            todo.append(f)
    prog = _Progress(sum(f.size for f in todo), progress)
    pump = asyncio.ensure_future(prog.pump())
    try:
        outcomes = {o.local_rel: o for o in await pull_files(transport, todo, dest_p, parallel=parallel,
                                                              on_progress=prog.add)}
    finally:
        pump.cancel()
    await prog.emit("transfer done; load-checking" if load_checks else "transfer done")
    limiter = anyio.CapacityLimiter(2)
    checks: dict[str, CheckResult] = {}

    async def run_check(f: RemoteFile) -> None:
        p = local_path(dest_p, f.local_rel)
        checks[f.local_rel] = await anyio.to_thread.run_sync(check_file, p, limiter=limiter)

    if load_checks:
        async with anyio.create_task_group() as tg:
            for f in todo:
                if outcomes.get(f.local_rel) is not None and outcomes[f.local_rel].ok:
                    tg.start_soon(run_check, f)
    remote: dict[str, RemoteCheck] = {}
    if remote_check:
        targets = [f.remote for f in listing.files if is_checkpoint_like(f.rel) or kind_of(f.rel) in CHECKPOINT_KINDS]
        remote = await remote_checks(transport, targets)
    entries: list[FileEntry] = []
    actions: dict[str, Action] = {}
    for f in listing.files:
        act: Action
        if f.local_rel in keep:
            e, act = keep[f.local_rel], "skipped"
        elif f in left:
            e = FileEntry(file=f.local_rel, remote=f.remote, bytes=f.size, remote_sha256=f.sha256 or "",
                          kind=kind_of(f.rel), result="not_pulled", detail=f"larger than max_pull_bytes={max_pull_bytes}")
            act = "not_pulled"
        else:
            o = outcomes.get(f.local_rel)
            e = _entry(f, o, checks.get(f.local_rel), checked=load_checks)
            act = "failed" if o is None or not o.ok else ("resumed" if o.resumed_from else "pulled")
        rc = remote.get(f.remote)
        if rc is not None:
            e = e.model_copy(update={"remote_check": f"{rc.check}: {'ok' if rc.ok else 'FAILED'} {rc.detail}".strip()})
            if not rc.ok and e.result == "not_pulled":
                e = e.model_copy(update={"result": "corrupt", "detail": f"remote check: {rc.detail}"})
        entries.append(e)
        actions[f.local_rel] = act
    counts = {
        "listed": len(listing.files),
        "pulled": sum(a in ("pulled", "resumed") for a in actions.values()),
        "skipped": sum(a == "skipped" for a in actions.values()),
        "failed": sum(e.result in ("failed", "mismatch") for e in entries),
        "refused": len(listing.refused),
        "corrupt": sum(e.result == "corrupt" for e in entries),
        "invalid": sum(e.result == "invalid" for e in entries),
        "not_pulled": sum(e.result == "not_pulled" for e in entries),
    }
    try:
        may_lack = set(check_roots(optional))
    except ConfigError:
        may_lack = set()
    hard_missing = [m for m in listing.missing if m not in may_lack]
    findings = _findings(entries, listing, "error" if hard_missing else "info")
    if len(findings) > MAX_FINDINGS:  # a bounded answer: the first findings, and how many more (the manifest has all)
        more = len(findings) - MAX_FINDINGS
        rest = finding("more_findings", "info", f"{more} more findings not shown",
                       evidence=[f"{len(entries)} files in the manifest"],
                       remedy="fix the ones above and run again; the manifest lists every file")
        findings = [*findings[:MAX_FINDINGS], rest]
    all_ok = bool(entries) and all(e.result == "ok" for e in entries) and not listing.refused \
        and not listing.errors and not hard_missing
    if not entries:
        findings.append(finding("artifact_missing", "error", "no files found under the requested paths",
                                evidence=roots, remedy="check the paths; nothing was verified"))
    manifest = Manifest(job=job, host=host, dest=str(dest_p), paths=roots, all_ok=all_ok, checked=load_checks,
                        counts=counts, bytes_total=listing.total_bytes, newest_remote_checkpoint=listing.newest_checkpoint,
                        files=entries, refused=listing.refused, missing=listing.missing)
    mpath = write_manifest(dest_p, manifest)
    record_manifest(app.store, manifest)
    moved = sum(o.moved for o in outcomes.values())
    shown = [FileReport(file=e.file, bytes=e.bytes, action=actions[e.file], result=e.result, kind=e.kind, check=e.check,
                        detail=e.detail[:160]) for e in entries]
    if len(shown) > MAX_FILES_SHOWN:
        shown = [s for s in shown if s.result != "ok"][:MAX_FILES_SHOWN] or shown[:MAX_FILES_SHOWN]
    secs = anyio.current_time() - t0
    summary = (f"{'ALL OK' if all_ok else 'NOT OK'}: {counts['listed']} files, {counts['pulled']} pulled, "
               f"{counts['skipped']} already verified, {counts['failed']} failed, {counts['corrupt']} corrupt, "
               f"{counts['refused']} refused; {moved / 2**20:.1f} MiB moved in {secs:.1f}s")
    _log.info("verify_done", host=host, job=job, all_ok=all_ok, moved=moved)
    return VerifyReport(all_ok=all_ok, job=job, host=host, dest=str(dest_p), manifest=str(mpath), counts=counts,
                        bytes_moved=moved, bytes_total=listing.total_bytes, seconds=round(secs, 2),
                        newest_remote_checkpoint=listing.newest_checkpoint, files=shown, findings=findings,
                        summary=summary)


__all__ = ["FileReport", "VerifyReport", "default_dest", "iso", "required_outputs", "verify_artifacts"]
