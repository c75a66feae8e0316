"""MANIFEST.json at the destination and its row in the registry: the evidence the teardown gate reads.

Public API for the gate:
    latest_manifest(store, job_id=..., host=...) -> ManifestRecord | None
    stale_reason(record, current_newest) -> str | None          (pure)
    await is_stale(app, job_id=..., host=...) -> Staleness      (one stat-only probe of the remote)
A manifest is stale when the remote now holds a checkpoint-like file newer than the newest one it saw.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from mcp_gpu.artifacts.listing import Newest, Refused, list_remote
from mcp_gpu.artifacts.pull import fsync_dir
from mcp_gpu.errors import ConfigError, NotFoundError
from mcp_gpu.models import iso
from mcp_gpu.store import Store
from mcp_gpu.transport import Transport

SCHEMA = "mcp-gpu/artifacts-manifest/v1"
MANIFEST_NAME = "MANIFEST.json"

Result = Literal["ok", "corrupt", "invalid", "failed", "mismatch", "not_pulled"]


class FileEntry(BaseModel):
    file: str = Field(description="path under dest (POSIX)")
    remote: str
    bytes: int
    remote_sha256: str
    local_sha256: str | None = None
    kind: str = "other"
    check: str = ""
    result: Result
    detail: str = ""
    flags: list[str] = Field(default_factory=list)
    checked: bool = False
    remote_check: str | None = None
    time: str = Field(default_factory=iso)

    @property
    def verified(self) -> bool:
        return self.result == "ok" and self.local_sha256 == self.remote_sha256


class Manifest(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    schema_: str = Field(default=SCHEMA, alias="schema")
    job: str | None
    host: str
    at: str = Field(default_factory=iso)
    dest: str
    paths: list[str]
    all_ok: bool
    checked: bool = Field(description="load checks ran (verify); False for a plain pull")
    counts: dict[str, int]
    bytes_total: int
    newest_remote_checkpoint: Newest | None = None
    files: list[FileEntry]
    refused: list[Refused] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)


class ManifestRecord(BaseModel):
    id: int
    job_id: str | None
    host: str
    at: str
    dest: str
    all_ok: bool
    newest_remote_ckpt: str | None
    newest_remote_mtime: float | None
    manifest: Manifest


class Staleness(BaseModel):
    stale: bool
    reason: str
    manifest_id: int | None = None
    recorded: Newest | None = None
    current: Newest | None = None


def manifest_path(dest: Path) -> Path:
    return dest / MANIFEST_NAME


def read_manifest(dest: Path) -> Manifest | None:
    """The manifest at dest, or None when there is none or it cannot be trusted (unparsable, other schema)."""
    try:
        data = json.loads(manifest_path(dest).read_text(encoding="utf-8"))
        m = Manifest.model_validate(data)
    except (OSError, ValueError):
        return None
    return m if m.schema_ == SCHEMA else None


def write_manifest(dest: Path, manifest: Manifest) -> Path:
    """Write MANIFEST.json atomically (tmp + fsync + rename + dir fsync); the tmp file never outlives a failure."""
    dest.mkdir(parents=True, exist_ok=True)
    final = manifest_path(dest)
    tmp = final.with_name(f".{MANIFEST_NAME}.tmp.{os.getpid()}")
    data = manifest.model_dump_json(indent=2, by_alias=True).encode()
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(dest)
    return final


def record_manifest(store: Store, manifest: Manifest) -> int:
    """The same manifest as a registry row (table `manifests`); returns its id."""
    newest = manifest.newest_remote_checkpoint
    return store.execute(
        "INSERT INTO manifests(job_id, host, at, dest, all_ok, newest_remote_ckpt, newest_remote_mtime, manifest_json)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (manifest.job, manifest.host, manifest.at, manifest.dest, int(manifest.all_ok),
         newest.name if newest else None, newest.mtime if newest else None,
         manifest.model_dump_json(by_alias=True)))


def latest_manifest(store: Store, *, job_id: str | None = None, host: str | None = None) -> ManifestRecord | None:
    """The newest manifest recorded for a job (or, with host only, for that host). None when there is none."""
    if job_id:
        rows = store.query("SELECT * FROM manifests WHERE job_id = ? ORDER BY id DESC LIMIT 1", (job_id,))
    elif host:
        rows = store.query("SELECT * FROM manifests WHERE host = ? ORDER BY id DESC LIMIT 1", (host,))
    else:
        raise ConfigError("latest_manifest needs job_id or host")
    if not rows:
        return None
    r = rows[0]
    return ManifestRecord(id=r["id"], job_id=r["job_id"], host=r["host"], at=r["at"], dest=r["dest"],
                          all_ok=bool(r["all_ok"]), newest_remote_ckpt=r["newest_remote_ckpt"],
                          newest_remote_mtime=r["newest_remote_mtime"],
                          manifest=Manifest.model_validate(json.loads(r["manifest_json"])))


def stale_reason(record: ManifestRecord, current: Newest | None) -> str | None:
    """Why `record` no longer covers the remote (a newer or different newest checkpoint), or None if it does."""
    if current is None:
        return None
    if record.newest_remote_ckpt is None or record.newest_remote_mtime is None:
        return f"the remote now has checkpoint {current.name} (mtime {current.mtime:.0f}); the manifest saw none"
    if current.mtime > record.newest_remote_mtime + 1e-6:
        return (f"the remote has a newer checkpoint {current.name} (mtime {current.mtime:.0f}) than the one the "
                f"manifest saw, {record.newest_remote_ckpt} (mtime {record.newest_remote_mtime:.0f})")
    if current.name != record.newest_remote_ckpt and current.mtime >= record.newest_remote_mtime:
        return f"the newest remote checkpoint is now {current.name}, not {record.newest_remote_ckpt}"
    return None


class _AppLike(Protocol):
    store: Store

    async def transport(self, host: str) -> Transport: ...


async def is_stale(app: _AppLike, *, job_id: str | None = None, host: str | None = None,
                   record: ManifestRecord | None = None) -> Staleness:
    """Probe the remote (stat only, no hashing) for its newest checkpoint and compare with the latest manifest.
    Raises NotFoundError when there is no manifest, TransportError when the host cannot be reached."""
    rec = record or latest_manifest(app.store, job_id=job_id, host=host)
    if rec is None:
        raise NotFoundError(f"no artifacts manifest for {job_id or host}",
                            hint="run verify_artifacts first: without it there is no evidence the results are safe")
    transport = await app.transport(rec.host)
    listing = await list_remote(transport, rec.manifest.paths, hashes=False, timeout=300)
    current = listing.newest_checkpoint
    recorded = rec.manifest.newest_remote_checkpoint
    why = stale_reason(rec, current)
    return Staleness(stale=why is not None, reason=why or "no checkpoint newer than the manifest's on the remote",
                     manifest_id=rec.id, recorded=recorded, current=current)


def summary(manifest: Manifest) -> dict[str, Any]:
    """A compact view for tool output."""
    return {"all_ok": manifest.all_ok, "counts": manifest.counts, "at": manifest.at, "dest": manifest.dest}
