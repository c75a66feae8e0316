"""How we reach a machine: one small interface, a local and an SSH implementation, and a per-host pool.

A transport runs an argv (never a shell string built from user text) or one of our own static scripts
with its arguments, with stdin and a timeout, and returns a `Completed` record. A command that exits
non-zero is a record, not an error (`check=True` opts in); a connection that drops is a
`TransportError`, never an exit status.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shlex
import stat
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Literal, Protocol

from mcp_gpu.errors import CommandFailed

MAX_OUTPUT = 8 << 20
"""The most bytes of stdout (and, separately, of stderr) one call keeps: a remote command that prints more is
stopped and its record marked `truncated`, so no remote output can take the server's memory."""

DEFAULT_DEADLINE = 900.0
"""The deadline of a remote call that names none: nothing waits on a remote host without one."""


class OutputTooLarge(CommandFailed):
    """A command printed more than MAX_OUTPUT bytes (raised by `Completed.check`)."""


async def read_bounded(stream: AsyncReader, cap: int, sink: bytearray) -> bool:
    """Append `stream` to `sink` until EOF or until `cap` bytes are held; True when it was cut at the cap."""
    while True:
        chunk = await stream.read(1 << 16)
        if not chunk:
            return False
        room = cap - len(sink)
        if len(chunk) > room:
            sink += chunk[:room]
            return True
        sink += chunk


@dataclass(frozen=True)
class Completed:
    """What a finished command left behind. `exit_status` is None when a signal ended it."""

    argv: tuple[str, ...]
    exit_status: int | None
    exit_signal: str | None
    stdout: str
    stderr: str
    duration_s: float
    truncated: bool = False
    """True when the command printed more than the transport's per-call output bound (`MAX_OUTPUT`): the
    output was cut there, the command was stopped, and its exit status is unknown (None)."""

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.truncated

    def tail(self, n: int = 20) -> list[str]:
        lines = (self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr).splitlines()
        return lines[-n:]

    def check(self) -> Completed:
        if self.truncated:
            raise OutputTooLarge(
                f"`{display(self.argv)}` printed more than {MAX_OUTPUT // (1 << 20)} MiB: output cut there and the "
                "command stopped", hint="the remote side printed far more than expected; look at it by hand",
                data={"bytes_kept": len(self.stdout) + len(self.stderr)})
        if not self.ok:
            what = f"exit {self.exit_status}" if self.exit_status is not None else f"signal {self.exit_signal}"
            err = self.stderr.strip().splitlines()[-3:] if self.stderr.strip() else self.stdout.strip().splitlines()[-3:]
            raise CommandFailed(
                f"`{display(self.argv)}` failed ({what}): {' | '.join(err) or 'no output'}",
                hint="read the command's error above; nothing was retried",
                data={"exit_status": self.exit_status, "exit_signal": self.exit_signal, "stderr_tail": err},
            )
        return self


@dataclass(frozen=True)
class FileStat:
    path: str
    size: int
    mtime: float
    is_dir: bool


@dataclass(frozen=True)
class Downloaded:
    """What `download` left in the local file: its SHA-256 over ALL bytes (the resumed prefix included),
    its size, and how many bytes this call moved over the wire."""

    sha256: str
    size: int
    moved: int


ProgressFn = Callable[[int], None]
"""Called with the number of bytes that just arrived (a delta), synchronously, in order."""


class AsyncReader(Protocol):
    async def read(self, n: int = -1, /) -> bytes: ...


class LocalWriteError(Exception):
    """Wraps an OSError from the LOCAL side of a download (disk full, permissions) so transports never
    mistake it for a dropped link; `download` re-raises the original OSError."""

    def __init__(self, err: OSError) -> None:
        super().__init__(str(err))
        self.err = err


def open_partial_fd(local: str, offset: int) -> int:
    """A descriptor for writing `local` from `offset`, opened so a planted file can never redirect the write.

    The last path component is never followed when it is a symlink (O_NOFOLLOW), and from offset 0 the file is
    created afresh and exclusively (O_CREAT|O_EXCL, after removing whatever sat at that name: unlinking a
    symlink removes the link, never its target). A kept prefix is resumed only when it is a plain file with a
    single link (a hard link to another file would be written through otherwise). Mode 0600.
    """
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    if offset <= 0:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(local)
        return os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL | nofollow | getattr(os, "O_CLOEXEC", 0), 0o600)
    fd = os.open(local, os.O_RDWR | nofollow | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise OSError(errno.EPERM, f"{local} is not a plain file with one link: refusing to resume into it")
        if st.st_size < offset:
            raise OSError(errno.EINVAL, f"{local} is shorter than the resume offset {offset}")
        os.ftruncate(fd, offset)
        os.lseek(fd, offset, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_partial(local: str, offset: int, digest: hashlib._Hash, block: int = 1 << 20) -> BinaryIO:
    """Open `local` for writing at `offset` (see `open_partial_fd`) after feeding the bytes already there
    into `digest`. Returns a binary file positioned at `offset`."""
    try:
        fd = open_partial_fd(local, offset)
        f = os.fdopen(fd, "r+b")
        try:
            left = offset
            pos = 0
            while left > 0:
                chunk = os.pread(fd, min(block, left), pos)
                if not chunk:
                    raise OSError(f"{local} is shorter than the resume offset {offset}")
                digest.update(chunk)
                left -= len(chunk)
                pos += len(chunk)
            f.seek(offset)
        except BaseException:
            f.close()
            raise
    except OSError as exc:
        raise LocalWriteError(exc) from exc
    return f


def display(argv: Sequence[str], limit: int = 120) -> str:
    """A short, quoted rendering of an argv for messages (scripts collapse to their first line)."""
    parts = [a if "\n" not in a else "<script>" for a in argv]
    text = shlex.join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Transport(Protocol):
    """The port every backend and lifecycle use case talks to."""

    host: str
    kind: Literal["local", "ssh"]

    async def run(self, argv: Sequence[str], *, stdin: bytes | str | None = None, timeout: float | None = None,
                  check: bool = False, max_output: int | None = None) -> Completed: ...

    async def run_script(self, script: str, args: Sequence[str] = (), *, stdin: bytes | str | None = None,
                         timeout: float | None = None, check: bool = False,
                         max_output: int | None = None) -> Completed: ...

    async def read_tail(self, path: str, max_bytes: int = 65536) -> bytes: ...

    async def stat(self, path: str) -> FileStat | None: ...

    def iter_file(self, path: str, *, offset: int = 0, block: int = 256 * 1024) -> AsyncIterator[bytes]: ...

    async def download(self, remote: str, local: str, *, offset: int = 0,
                       on_progress: ProgressFn | None = None, size: int | None = None) -> Downloaded:
        """Copy `remote` into `local` from `offset` on (the first `offset` local bytes are kept and hashed),
        hashing while streaming. `size` is the listed size: `local` never grows past it, whatever the remote
        sends (a file that grew is cut there, and its hash tells). A dropped link raises TransportError with
        `local` holding every byte that arrived, in order, so a later call can resume; a local write error
        raises the original OSError. `local` is opened with `open_partial_fd` (no symlink is followed)."""
        ...

    async def aclose(self) -> None: ...


class ScriptMixin:
    """Shared helpers written once on top of `run`: scripts go in as `bash -c SCRIPT name ARGS...`
    so stdin stays free for secrets, and arguments are argv elements, never spliced into the script."""

    async def run(self, argv: Sequence[str], *, stdin: bytes | str | None = None, timeout: float | None = None,
                  check: bool = False, max_output: int | None = None) -> Completed:
        raise NotImplementedError

    async def run_script(self, script: str, args: Sequence[str] = (), *, stdin: bytes | str | None = None,
                         timeout: float | None = None, check: bool = False,
                         max_output: int | None = None) -> Completed:
        return await self.run(["bash", "-c", script, "mcp-gpu", *args], stdin=stdin, timeout=timeout, check=check,
                              max_output=max_output)

    async def read_tail(self, path: str, max_bytes: int = 65536) -> bytes:
        res = await self.run(["tail", "-c", str(int(max_bytes)), "--", path], timeout=30)
        if not res.ok:
            return b""
        return res.stdout.encode("utf-8", "surrogateescape")

    async def stat(self, path: str) -> FileStat | None:
        res = await self.run(["stat", "-L", "-c", "%s %Y %F", "--", path], timeout=30)
        if not res.ok:
            return None
        size, mtime, kind = res.stdout.strip().split(" ", 2)
        return FileStat(path=path, size=int(size), mtime=float(mtime), is_dir=kind == "directory")


def monotonic() -> float:
    return time.monotonic()


def canonical_target(spec: str) -> str:
    """One written form per target, parsed once (at registration) and used as the connection pool's key, so two
    names for `Root@Box.example:22` and `root@box.example` share one connection. `local` and ssh_config aliases
    stay as written (an alias is resolved by ssh_config at connect time); `user@host[:port]` gets a lower-case host
    and drops the default port 22."""
    spec = spec.strip()
    if spec.lower() == "local":
        return "local"
    user, at, rest = spec.rpartition("@")
    host, port = rest, ""
    if rest.count(":") == 1:
        host, port = rest.split(":")
    if not at and not port:
        return spec  # an alias or a bare host name: ssh_config decides what it means
    host = host.lower()
    return f"{user}{at}{host}" + (f":{port}" if port and port != "22" else "")

