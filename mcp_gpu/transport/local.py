"""`local`: this machine, through subprocess with no shell."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Literal

import anyio

from mcp_gpu.errors import CommandTimeout, ConnectError
from mcp_gpu.transport import (
    DEFAULT_DEADLINE,
    MAX_OUTPUT,
    Completed,
    Downloaded,
    LocalWriteError,
    ProgressFn,
    ScriptMixin,
    monotonic,
    open_partial,
    read_bounded,
)


def _killpg(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class LocalTransport(ScriptMixin):
    """Runs argv on this machine. Each command gets its own process group, so a timeout kills its children too."""

    kind: Literal["local", "ssh"] = "local"

    def __init__(self, host: str = "local", *, max_output: int = MAX_OUTPUT) -> None:
        self.host = host
        self.max_output = max_output

    async def run(self, argv: Sequence[str], *, stdin: bytes | str | None = None, timeout: float | None = None,
                  check: bool = False, max_output: int | None = None) -> Completed:
        argv = tuple(argv)
        data = stdin.encode() if isinstance(stdin, str) else stdin
        t0 = monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if data is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
            )
        except FileNotFoundError:
            res = Completed(argv, 127, None, "", f"{argv[0]}: command not found", monotonic() - t0)
            return res.check() if check else res
        except OSError as exc:
            raise ConnectError(f"could not start {argv[0]!r} locally: {exc}") from exc
        out, err = bytearray(), bytearray()
        cap = self.max_output if max_output is None else max_output
        deadline = DEFAULT_DEADLINE if timeout is None else timeout
        try:
            with anyio.fail_after(deadline):

                async def feed() -> None:  # alongside the readers: a command may print before it reads
                    if data is None or proc.stdin is None:
                        return
                    proc.stdin.write(data)
                    with contextlib.suppress(OSError):
                        await proc.stdin.drain()
                    proc.stdin.close()
                assert proc.stdout is not None and proc.stderr is not None
                pid = proc.pid

                async def take(stream: asyncio.StreamReader, sink: bytearray) -> bool:
                    cut = await read_bounded(stream, cap, sink)
                    if cut:  # stop the writer now: the other stream only ends when the process does
                        _killpg(pid)
                    return cut

                _, *cut = await asyncio.gather(feed(), take(proc.stdout, out), take(proc.stderr, err))
                if any(cut):
                    await proc.wait()
                    res = Completed(argv, None, None, out.decode("utf-8", "replace"),
                                    err.decode("utf-8", "replace"), monotonic() - t0, truncated=True)
                    return res.check() if check else res
                await proc.wait()
        except TimeoutError:
            _killpg(proc.pid)
            await proc.wait()
            raise CommandTimeout(f"local command ran past {deadline:g}s and was killed with its children",
                                 hint="raise the timeout if the command is legitimately slow") from None
        rc = proc.returncode
        sig = None
        if rc is not None and rc < 0:
            sig = signal.Signals(-rc).name.removeprefix("SIG")
        res = Completed(argv, rc if rc is not None and rc >= 0 else None, sig,
                        out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), monotonic() - t0)
        return res.check() if check else res

    async def iter_file(self, path: str, *, offset: int = 0, block: int = 256 * 1024) -> AsyncIterator[bytes]:
        async with await anyio.open_file(Path(path).expanduser(), "rb") as f:
            await f.seek(offset)
            while True:
                chunk = await f.read(block)
                if not chunk:
                    return
                yield chunk

    async def download(self, remote: str, local: str, *, offset: int = 0,
                       on_progress: ProgressFn | None = None, size: int | None = None) -> Downloaded:
        """Same contract as SSHTransport.download, for a file on this machine (1 MiB reads in a worker thread)."""
        digest = hashlib.sha256()
        moved = 0
        src = await anyio.open_file(Path(remote).expanduser(), "rb")
        try:
            lf = await anyio.to_thread.run_sync(open_partial, local, offset, digest)
            try:
                await src.seek(offset)
                left = None if size is None else max(0, size - offset)
                while left is None or left > 0:
                    chunk = await src.read(1 << 20 if left is None else min(1 << 20, left))
                    if not chunk:
                        break
                    if left is not None:
                        left -= len(chunk)
                    try:
                        lf.write(chunk)
                    except OSError as exc:
                        raise LocalWriteError(exc) from exc
                    digest.update(chunk)
                    moved += len(chunk)
                    if on_progress is not None:
                        on_progress(len(chunk))
                size = lf.tell()
            finally:
                lf.close()
        except LocalWriteError as exc:
            raise exc.err from None
        finally:
            await src.aclose()
        return Downloaded(sha256=digest.hexdigest(), size=size, moved=moved)

    async def aclose(self) -> None:
        return None
