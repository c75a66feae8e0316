"""Helpers for the launch/job tests: condition waits with deadlines, unique tmux sockets, and cleanup."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio


async def wait_until(pred: Callable[[], Any], timeout: float = 15.0, interval: float = 0.1,
                     what: str = "condition") -> Any:
    """Poll `pred` (sync or async) until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await anyio.sleep(interval)


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def group_alive(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def kill_runs(run_root: Path) -> None:
    """SIGKILL every job group started under run_root (tests run jobs on this machine, even over ssh)."""
    if not run_root.exists():
        return
    for pg in run_root.glob("*/pgid"):
        with contextlib.suppress(OSError, ValueError):
            g = int(pg.read_text().strip())
            if g > 1 and g != os.getpgid(0):
                os.killpg(g, signal.SIGKILL)


@contextlib.contextmanager
def tmux_socket() -> Iterator[str]:
    sock = "mcpgpu-t-" + secrets.token_hex(4)
    try:
        yield sock
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)
        tmpdir = os.environ.get("TMUX_TMPDIR") or "/tmp"
        with contextlib.suppress(OSError):
            (Path(tmpdir) / f"tmux-{os.getuid()}" / sock).unlink()


def sessions(sock: str) -> list[str]:
    res = subprocess.run(["tmux", "-L", sock, "list-sessions", "-F", "#{session_name}"], capture_output=True,
                         text=True, check=False)
    return res.stdout.split() if res.returncode == 0 else []


def no_tmux_path(root: Path) -> str:
    """A PATH directory holding links to every command of the usual bin dirs except tmux."""
    bindir = root / "bin-without-tmux"
    if bindir.exists():
        return str(bindir)
    bindir.mkdir(parents=True)
    for d in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        p = Path(d)
        if not p.is_dir():
            continue
        for entry in p.iterdir():
            target = bindir / entry.name
            if entry.name == "tmux" or target.exists() or target.is_symlink():
                continue
            target.symlink_to(entry)
    return str(bindir)
