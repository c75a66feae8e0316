"""Bulk downloads through the system OpenSSH client, when it is installed.

SFTP through asyncssh decrypts in this Python process and tops out near 100 MiB/s on one core; OpenSSH does
the crypto in C. So for the bytes of a pull we stream `tail -c +N FILE` over `ssh` (same ssh_config, the same
known_hosts, StrictHostKeyChecking=yes, BatchMode) and write and hash them in order in a worker thread.
Control traffic (probes, listing, stat) stays on the pooled asyncssh connection. Set
MCP_GPU_PULL_ENGINE=sftp to always use SFTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import resource
import shlex
import shutil
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from mcp_gpu.errors import CommandFailed, HostKeyError, TransportError
from mcp_gpu.transport import Downloaded, LocalWriteError, ProgressFn, open_partial_fd

if TYPE_CHECKING:
    from mcp_gpu.transport.ssh import Target

CHUNK = 1 << 20


def argv_for(target: Target, config_paths: Sequence[str], remote_command: str, *, connect_timeout: float,
             keepalive: float) -> list[str] | None:
    """The `ssh` argv for one remote command, or None when this path does not apply."""
    if os.environ.get("MCP_GPU_PULL_ENGINE", "").lower() == "sftp":
        return None
    exe = shutil.which("ssh")
    if exe is None or len(config_paths) > 1:
        return None
    argv = [exe]
    if config_paths:
        argv += ["-F", config_paths[0]]
    argv += ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "ControlMaster=no",
             "-o", f"ConnectTimeout={max(1, int(connect_timeout))}",
             "-o", f"ServerAliveInterval={max(1, int(keepalive))}", "-o", "ServerAliveCountMax=3",
             "-o", "UserKnownHostsFile=" + " ".join(shlex.quote(k) for k in target.known_hosts),
             "-T", "-x", "-e", "none"]
    if target.in_config:
        dest = target.spec.rsplit("@", 1)[-1].split(":")[0]
        if "@" in target.spec:
            argv += ["-l", target.spec.split("@", 1)[0]]
    else:
        dest = target.host
        argv += ["-p", str(target.port)]
        if target.user:
            argv += ["-l", target.user]
    return [*argv, "--", dest, remote_command]


def _open_at(local: str, offset: int) -> int:
    try:
        return open_partial_fd(local, offset)
    except OSError as exc:
        raise LocalWriteError(exc) from exc


def _cap_file_size(limit: int) -> Callable[[], None]:
    """For the `ssh` child: the kernel refuses any write past `limit` bytes (RLIMIT_FSIZE, with SIGXFSZ
    ignored so the write fails with EFBIG instead of killing it) — the local bound holds even if the remote
    side ignored its own `head -c`."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def _follow_hash(local: str, done: threading.Event) -> tuple[str, int]:
    """Hash `local` from its first byte while `ssh` is still appending to it; stop at EOF once `done` is set."""
    digest = hashlib.sha256()
    size = 0
    with open(local, "rb") as f:
        while True:
            chunk = f.read(CHUNK * 4)
            if chunk:
                digest.update(chunk)
                size += len(chunk)
                continue
            if done.is_set():
                chunk = f.read()  # whatever landed between the last read and `done`
                digest.update(chunk)
                size += len(chunk)
                return digest.hexdigest(), size
            time.sleep(0.02)


async def download(argv: list[str], host: str, remote: str, local: str, offset: int,
                   on_progress: ProgressFn | None, *, limit: int | None = None) -> Downloaded:
    """`ssh` writes straight into the partial file (no Python in the byte path); we watch its size for
    progress and hash the file from its first byte in a thread that follows it as it grows. With `limit`
    (the listed size) the file can never grow past it."""
    try:
        fd = await asyncio.to_thread(_open_at, local, offset)
    except LocalWriteError as exc:
        raise exc.err from None
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=fd, stderr=asyncio.subprocess.PIPE,
            preexec_fn=_cap_file_size(limit) if limit is not None and limit > 0 else None)
    finally:
        os.close(fd)  # the child holds its own copy of the descriptor
    assert proc.stderr is not None
    err_task = asyncio.ensure_future(proc.stderr.read())
    done = threading.Event()
    hashing = asyncio.ensure_future(asyncio.to_thread(_follow_hash, local, done))
    seen = offset
    try:
        while True:
            try:
                rc = await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=0.1)
                break
            except TimeoutError:
                pass
            if on_progress is not None:
                now = os.stat(local).st_size
                if now > seen:
                    on_progress(now - seen)
                    seen = now
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        done.set()
        await asyncio.gather(hashing, return_exceptions=True)
        raise
    done.set()
    sha, size = await hashing
    err = (await err_task).decode("utf-8", "replace")
    size_now = os.stat(local).st_size
    if on_progress is not None and size_now > seen:
        on_progress(size_now - seen)
    moved = size_now - offset
    # with every listed byte here, an `ssh` that then failed (e.g. EFBIG from the size cap) lost nothing we need:
    # the hash decides whether those bytes are the listed file
    if rc == 0 or (limit is not None and size_now >= limit):
        return Downloaded(sha256=sha, size=size, moved=moved)
    if "No space left" in err or "Disk quota" in err:
        raise OSError(errno.ENOSPC, f"No space left on device while writing {local}")
    if "No such file" in err:
        raise FileNotFoundError(remote)
    if "Permission denied" in err and rc != 255:
        raise CommandFailed(f"{host}: permission denied reading {remote}",
                            hint="the remote user cannot read this file; fix its permissions")
    if "Host key verification failed" in err or "REMOTE HOST IDENTIFICATION HAS CHANGED" in err:
        raise HostKeyError(f"{host}: OpenSSH refused the host key while pulling {remote}",
                           hint="the key differs from known_hosts: verify the fingerprint before pinning it")
    raise TransportError(f"{host}: transfer of {remote} interrupted after {moved} bytes (ssh exit {rc}): "
                         f"{err.strip().splitlines()[-1] if err.strip() else 'no message'}",
                         hint="run the same call again: the pull resumes where it stopped")
