"""Resumable, parallel, hash-checked pull of listed remote files into a destination folder.

Each file streams into `<name>.partial` (continuing from its current length when one exists), is hashed
while it streams, and is renamed to its final name only when the local SHA-256 equals the one computed on
the remote. Free space is checked before anything is written. A dropped link leaves only `.partial`
files, which the next call continues; nothing incomplete ever sits under a final name.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel

from mcp_gpu.artifacts.listing import RemoteFile, remote_sha256, unsafe_reason
from mcp_gpu.errors import ConfigError, GpuError, TransportError
from mcp_gpu.transport import Downloaded, ProgressFn, Transport

PARTIAL = ".partial"
SPACE_MARGIN = 16 * 1024 * 1024


class LocalDiskFull(GpuError):
    """The destination cannot hold what the pull needs (checked up front, or ENOSPC mid-write)."""

    code = "disk_full"


ErrorKind = Literal["transport", "mismatch", "missing", "remote", "local"]


class PullOutcome(BaseModel):
    local_rel: str
    remote: str
    size: int
    remote_sha256: str
    local_sha256: str | None = None
    moved: int = 0
    resumed_from: int = 0
    ok: bool = False
    error: str | None = None
    error_kind: ErrorKind | None = None


def local_path(dest: Path, local_rel: str) -> Path:
    """The final path of `local_rel` under dest; refuses anything that would land outside it."""
    why = unsafe_reason(local_rel)
    if why is not None:
        raise ConfigError(f"refused local name {local_rel!r}: {why}", data={"class": "path_refused"})
    root = Path(os.path.realpath(dest))
    target = root.joinpath(*local_rel.split("/"))
    parent = Path(os.path.realpath(target.parent))
    if parent != root and root not in parent.parents:
        raise ConfigError(f"refused local name {local_rel!r}: it resolves outside {dest}",
                          hint="a symlink inside the destination points elsewhere; remove it",
                          data={"class": "path_refused"})
    return target


def partial_of(final: Path) -> Path:
    return final.with_name(final.name + PARTIAL)


def resume_offset(final: Path, size: int) -> int:
    """How many bytes of `final`'s partial can be kept: only a plain, singly linked file is ever resumed (a
    planted symlink or hard link is never followed; `open_partial_fd` replaces it when the pull starts)."""
    try:
        st = partial_of(final).lstat()
    except FileNotFoundError:
        return 0
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        return 0
    return st.st_size if st.st_size <= size else 0


def _existing_dir(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def need_bytes(dest: Path, files: Sequence[RemoteFile]) -> int:
    return sum(f.size - resume_offset(local_path(dest, f.local_rel), f.size) for f in files)


def check_space(dest: Path, files: Sequence[RemoteFile]) -> None:
    """Raise LocalDiskFull before anything is written when dest's filesystem cannot take the pull."""
    need = need_bytes(dest, files)
    if not need:
        return
    free = shutil.disk_usage(_existing_dir(dest)).free
    if need + SPACE_MARGIN > free:
        raise LocalDiskFull(
            f"not enough space at {dest}: the pull needs {_mib(need)} (+{_mib(SPACE_MARGIN)} margin), "
            f"{_mib(free)} is free; nothing was written",
            hint="free space there or pass another dest; files already pulled and verified stay valid",
            data={"need_bytes": need, "free_bytes": free, "dest": str(dest)})


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable (best effort: some filesystems refuse to fsync a directory)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _finish(partial: Path, final: Path) -> None:
    fd = os.open(partial, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(partial, final)
    fsync_dir(final.parent)


async def pull_one(transport: Transport, f: RemoteFile, dest: Path, *,
                   on_progress: ProgressFn | None = None) -> PullOutcome:
    """Pull one file, resuming its `.partial`; one restart from zero when a resumed file fails its hash."""
    out = PullOutcome(local_rel=f.local_rel, remote=f.remote, size=f.size, remote_sha256=f.sha256 or "")
    final = local_path(dest, f.local_rel)
    partial = partial_of(final)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _raise_local(exc, dest)
    have = resume_offset(final, f.size)
    out.resumed_from = have

    def count(n: int) -> None:
        out.moved += n  # counts bytes that arrived even when the link drops later
        if on_progress is not None:
            on_progress(n)

    while True:
        try:
            if f.sha256 is None:
                got = await _download_hashing_remotely(transport, f, str(partial), have, count)
            else:
                got = await transport.download(f.remote, str(partial), offset=have, on_progress=count, size=f.size)
        except TransportError as exc:
            out.error, out.error_kind = exc.message, "transport"
            return out
        except FileNotFoundError:
            out.error, out.error_kind = "the file disappeared from the remote after the listing", "missing"
            return out
        except GpuError as exc:
            out.error, out.error_kind = exc.message, "remote"
            return out
        except OSError as exc:
            _raise_local(exc, dest)
        out.local_sha256 = got.sha256
        out.remote_sha256 = f.sha256 or ""
        if got.sha256 == f.sha256 and got.size == f.size:
            try:
                await anyio.to_thread.run_sync(_finish, partial, final)
            except OSError as exc:
                _raise_local(exc, dest)
            out.ok = True
            return out
        if have > 0:
            have = 0  # the kept prefix may be what is wrong: start over once
            continue
        with contextlib.suppress(OSError):
            partial.unlink()
        out.error = (f"SHA-256 mismatch: remote {f.sha256}, local {got.sha256} ({got.size} of {f.size} bytes);"
                     " the file changed during the pull or was damaged in transit")
        out.error_kind = "mismatch"
        return out


async def _download_hashing_remotely(transport: Transport, f: RemoteFile, partial: str, offset: int,
                                    count: ProgressFn) -> Downloaded:
    """A big file's remote SHA-256 is computed on the box while its bytes travel, not before."""
    box: dict[str, str] = {}
    got: list[Downloaded] = []
    errors: list[Exception] = []

    async def hash_remote() -> None:
        try:
            box.update(await remote_sha256(transport, [f.remote]))
        except Exception as exc:  # surfaced below, unwrapped, so callers see our own error types
            errors.append(exc)

    async def pull() -> None:
        try:
            got.append(await transport.download(f.remote, partial, offset=offset, on_progress=count, size=f.size))
        except Exception as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(hash_remote)
        tg.start_soon(pull)
    if errors:
        raise errors[0]
    if f.remote not in box:
        raise TransportError(f"could not compute the remote SHA-256 of {f.remote}",
                             hint="run again; the pulled bytes are kept and resume")
    f.sha256 = box[f.remote]
    return got[0]


def _raise_local(exc: OSError, dest: Path) -> None:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        raise LocalDiskFull(f"the disk at {dest} filled up during the pull: {exc.strerror}",
                            hint="free space there and run again: the .partial files resume; nothing "
                                 "incomplete was given a final name", data={"dest": str(dest)}) from exc
    raise ConfigError(f"cannot write under {dest}: {exc}", hint="check the destination's permissions") from exc


async def pull_files(transport: Transport, files: Sequence[RemoteFile], dest: Path, *, parallel: int = 4,
                     on_progress: ProgressFn | None = None) -> list[PullOutcome]:
    """Pull `files` into dest, `parallel` at a time, after checking free space. Per-file problems are
    outcomes; a full local disk raises LocalDiskFull once the other transfers have stopped."""
    check_space(dest, files)
    results: dict[str, PullOutcome] = {}
    fatal: list[GpuError] = []
    limiter = anyio.CapacityLimiter(max(1, parallel))

    async def one(f: RemoteFile) -> None:
        async with limiter:
            if fatal:
                return
            try:
                results[f.local_rel] = await pull_one(transport, f, dest, on_progress=on_progress)
            except (LocalDiskFull, ConfigError) as exc:
                fatal.append(exc)

    async with anyio.create_task_group() as tg:
        for f in sorted(files, key=lambda x: -x.size):  # big first: the long pole starts early
            tg.start_soon(one, f)
    if fatal:
        raise fatal[0]
    return [results[f.local_rel] for f in files if f.local_rel in results]
