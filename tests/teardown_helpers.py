"""Real fixtures for the teardown tests: run dirs and checkpoints on the sshd host, registry rows, a fake cloud."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

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
