"""Real fixtures for the teardown tests: run dirs and checkpoints on the sshd host, registry rows, a fake cloud."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_gpu.app import App
from mcp_gpu.artifacts.listing import Newest
from mcp_gpu.artifacts.manifest import Manifest, record_manifest
from mcp_gpu.models import JobRecord, JobState, iso
from mcp_gpu.store import jobs
from mcp_gpu.tools.register_host import register_host_record
from tests.fake_providers import FakeCloud

KEY = "vk-test-" + secrets.token_hex(16)
IID = "1234567"
T0 = 1_700_000_000


class Box:
    """The sshd host registered as a vast.ai instance, with jobs whose run dirs live on it."""

    def __init__(self, app: App, root: Path) -> None:
        self.app = app
        self.root = root
        self.procs: list[subprocess.Popen[bytes]] = []

    def job(self, name: str = "train", *, running: bool = False, exit_code: str = "0",
            host: str = "box") -> JobRecord:
        jid = jobs.new_id()
        rd = self.root / "runs" / jid
        out = self.root / "outputs" / jid
        rd.mkdir(parents=True)
        out.mkdir(parents=True)
        if running:
            p = subprocess.Popen(["sleep", "300"])
            self.procs.append(p)
            (rd / "pid").write_text(f"{p.pid}\n")
        else:
            (rd / "exit_code").write_text(exit_code + "\n")
        self.checkpoint(out, "ckpt-001.pt", T0)
        now = iso()
        rec = JobRecord(id=jid, host=host, name=name, backend="nohup",
                        state=JobState.running if running else JobState.succeeded, command="python train.py",
                        workdir=str(self.root), run_dir=str(rd), spec={"outputs": [str(out)]}, created_at=now,
                        updated_at=now)
        return jobs.insert(self.app.store, rec)

    @staticmethod
    def checkpoint(out: Path, name: str, mtime: int) -> Path:
        f = out / name
        f.write_bytes(b"weights")
        os.utime(f, (mtime, mtime))
        return f

    def outputs(self, rec: JobRecord) -> Path:
        return Path(rec.spec["outputs"][0])

    def verify(self, rec: JobRecord, *, all_ok: bool = True, newest: str = "ckpt-001.pt", mtime: int = T0,
               checked: bool = True) -> int:
        out = str(self.outputs(rec))
        m = Manifest(job=rec.id, host=rec.host, dest=str(self.root / "pulled" / rec.id), paths=[out], all_ok=all_ok,
                     checked=checked, counts={"ok": 1} if all_ok else {"corrupt": 1}, bytes_total=7,
                     newest_remote_checkpoint=Newest(name=f"{out}/{newest}", mtime=mtime), files=[])
        return record_manifest(self.app.store, m)

    def close(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait(timeout=5)


@pytest.fixture
def cloud(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloud]:
    c = FakeCloud("vastai", KEY).start()
    c.add(IID, lag=2)
    monkeypatch.setenv("VAST_API_KEY", KEY)
    monkeypatch.setenv("MCP_GPU_VASTAI_BASE_URL", c.url)
    monkeypatch.setenv("MCP_GPU_TEARDOWN_POLL_S", "0.05")
    monkeypatch.setenv("MCP_GPU_TEARDOWN_TIMEOUT_S", "10")
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def box(ssh_app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Box]:
    # the gate lists the default run root and tmux socket of the machine too: keep them the test's own
    monkeypatch.setenv("MCP_GPU_GATE_RUN_ROOTS", str(tmp_path / "remote" / "default-runs"))
    monkeypatch.setenv("MCP_GPU_GATE_TMUX_SOCKETS", f"gate-{secrets.token_hex(4)}")
    register_host_record(ssh_app.store, "box", "testhost", "vastai", IID)
    b = Box(ssh_app, tmp_path / "remote")
    try:
        yield b
    finally:
        b.close()


def destroys(c: FakeCloud) -> list[str]:
    return [f"{r.method} {r.path}" for r in c.requests if r.method != "GET"]


def events(app: App) -> list[str]:
    return [r["event"] for r in app.store.query("SELECT event FROM audit_log ORDER BY id")]


# ---------------------------------------------------------------- human channels


def human_approves(app: App, request_id: str, typed: str, code: str | None = None) -> None:
    """What `mcp-gpu approve` records once the human typed on their terminal (tests/security drives the real
    command on a pseudo-terminal; here the lifecycle tests take that step directly)."""
    from mcp_gpu.confirm import get_pending
    from mcp_gpu.lifecycle import human_gate

    pending = get_pending(app.store, request_id)
    assert pending is not None
    human_gate.record_terminal_approval(app, pending, typed, code)


async def confirmed(app: App, req: Any, typed: str | None = None, **kw: Any) -> Any:
    """The human approves `req` in the terminal, then the agent's next call completes it."""
    from mcp_gpu.lifecycle.teardown import confirm_teardown

    human_approves(app, req.request_id, req.phrase if typed is None else typed, kw.pop("human_code", None))
    return await confirm_teardown(app, req.token, **kw)


def run_on_pty(argv: list[str], env: dict[str, str], answers: list[tuple[str, str]],
               timeout: float = 120) -> tuple[int, str]:
    """Run argv with a fresh pseudo-terminal as its CONTROLLING terminal (new session + TIOCSCTTY) and type each
    answer once its prompt has appeared. Returns (exit code, everything the program wrote to the terminal)."""
    import fcntl
    import select
    import termios
    import time

    master, slave = os.openpty()

    def controlling_tty() -> None:  # runs in the child after setsid (start_new_session)
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                         preexec_fn=controlling_tty)
    os.close(slave)
    out, seen, todo = b"", 0, list(answers)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
                while todo and todo[0][0].encode() in out[seen:]:
                    seen = out.index(todo[0][0].encode(), seen) + len(todo[0][0])
                    os.write(master, todo.pop(0)[1].encode() + b"\n")
            elif p.poll() is not None:
                break
        else:
            p.kill()
            raise AssertionError(f"{argv} did not finish on the pty; it wrote: {out.decode(errors='replace')}")
        return p.wait(timeout=30), out.decode("utf-8", "replace")
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
            p.wait()
