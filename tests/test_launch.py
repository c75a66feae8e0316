"""launch_detached against real tmux over a real sshd (and on `local`): survival, idempotency, early failure,
exit statuses, the nohup fallback without tmux, immutable run scripts and secrets that never touch the disk."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_gpu.app import App
from mcp_gpu.backends import RunLayout
from mcp_gpu.backends.wrapper import PREPARE, WRAPPER
from mcp_gpu.config import Settings
from mcp_gpu.errors import UnsupportedError
from mcp_gpu.lifecycle.jobs import job_list, job_logs, refresh_job
from mcp_gpu.lifecycle.launch import launch_detached
from mcp_gpu.models import JobState
from mcp_gpu.store import jobs as jobstore
from tests.jobhelpers import group_alive, no_tmux_path, pid_alive, sessions, wait_until
from tests.sshd import Sshd

pytestmark = pytest.mark.anyio


@pytest.fixture
def work(tmp_path: Path) -> Path:
    w = tmp_path / "work"
    w.mkdir()
    return w


def opts(sock: str, **extra: Any) -> dict[str, Any]:
    return {"tmux_socket": sock, "heartbeat_s": 1, "grace_s": 3, "probe_interval_s": 0.3, **extra}


async def _finished(app: App, job_id: str) -> Any:
    rec, _ = await refresh_job(app, jobstore.get(app.store, job_id))
    return rec if rec.state.finished else None


async def test_job_survives_every_connection_closing_and_a_new_app_finds_it(
        ssh_app: App, ssh_settings: Settings, sock: str, runs: Path, work: Path) -> None:
    res = await launch_detached(ssh_app, "testhost", "echo started; sleep 60", str(work), "survivor", probe_s=5,
                                run_root=str(runs), options=opts(sock))
    assert res.state is JobState.running and res.backend == "tmux" and not res.reused
    assert res.first_lines == ["started"]
    pid = int(Path(RunLayout(res.run_dir).pid).read_text())
    await ssh_app.pool.aclose()  # every SSH connection of this app is gone
    assert pid_alive(pid)
    fresh = App.open(ssh_settings)
    try:
        listed = await job_list(fresh, host="testhost")
        assert [(j.job_id, j.state) for j in listed.jobs] == [(res.job_id, JobState.running)]
        assert not listed.jobs[0].unreachable
        logs = await job_logs(fresh, res.job_id)
        assert logs.lines == ["started"]
        assert sessions(sock) == [res.job_id]
        meta = json.loads(Path(RunLayout(res.run_dir).meta).read_text())
        assert meta["job_id"] == res.job_id and meta["command_sha256"] == res.script_sha
    finally:
        await fresh.aclose()


async def test_the_same_name_twice_does_not_start_a_second_job(ssh_app: App, sock: str, runs: Path,
                                                               work: Path) -> None:
    kw: dict[str, Any] = {"probe_s": 5, "run_root": str(runs), "options": opts(sock)}
    first = await launch_detached(ssh_app, "testhost", "echo once >> count.txt; sleep 60", str(work), "twice", **kw)
    second = await launch_detached(ssh_app, "testhost", "echo once >> count.txt; sleep 60", str(work), "twice", **kw)
    assert second.reused and second.job_id == first.job_id and second.attempt == 1
    assert sessions(sock) == [first.job_id]
    assert (work / "count.txt").read_text() == "once\n"
    assert len(jobstore.list_jobs(ssh_app.store, name="twice")) == 1


async def test_a_finished_name_launched_again_is_a_new_linked_attempt(ssh_app: App, sock: str, runs: Path,
                                                                      work: Path) -> None:
    kw: dict[str, Any] = {"probe_s": 5, "run_root": str(runs), "options": opts(sock)}
    first = await launch_detached(ssh_app, "testhost", "echo done", str(work), "again", **kw)
    await wait_until(lambda: _finished(ssh_app, first.job_id), what="first attempt to finish")
    second = await launch_detached(ssh_app, "testhost", "echo done", str(work), "again", relaunch=True, **kw)
    assert not second.reused and second.job_id != first.job_id
    assert (second.attempt, second.previous_id) == (2, first.job_id)
    assert jobstore.find_by_name(ssh_app.store, "testhost", "again").id == second.job_id  # type: ignore[union-attr]


async def test_a_job_that_dies_in_its_first_seconds_is_reported_failed_with_its_traceback(
        ssh_app: App, sock: str, runs: Path, work: Path) -> None:
    (work / "bad.py").write_text("print('loading config')\nimport json\njson.loads('{broken')\n")
    res = await launch_detached(ssh_app, "testhost", "python3 bad.py", str(work), "crasher", probe_s=15,
                                run_root=str(runs), options=opts(sock))
    assert res.state is JobState.failed and res.exit_code == 1
    assert res.first_lines[0] == "loading config"
    assert any("Traceback" in ln for ln in res.first_lines)
    assert res.findings and any("JSONDecodeError" in " ".join(f.evidence) + f.title for f in res.findings)
    assert "failed" in res.next
    assert jobstore.get(ssh_app.store, res.job_id).state is JobState.failed


@pytest.mark.parametrize("case", ["0", "1", "137", "143"])
async def test_exit_statuses_are_captured_in_the_exit_file_and_the_registry(
        ssh_app: App, sock: str, runs: Path, work: Path, case: str) -> None:
    command = {"0": "echo ok; sleep 1; exit 0", "1": "echo bad; sleep 1; exit 1"}.get(case, "echo up; sleep 60")
    res = await launch_detached(ssh_app, "testhost", command, str(work), f"exit-{case}", probe_s=5,
                                run_root=str(runs), options=opts(sock))
    layout = RunLayout(res.run_dir)
    if case == "137":
        os.kill(int(Path(layout.pid).read_text()), signal.SIGKILL)
    elif case == "143":
        os.killpg(int(Path(layout.pgid).read_text()), signal.SIGTERM)
    rec = await wait_until(lambda: _finished(ssh_app, res.job_id), what=f"exit {case}")
    expected = {"0": "0", "1": "1", "137": "137 KILL", "143": "143 TERM"}[case]
    assert Path(layout.exit_code).read_text().strip() == expected
    assert rec.exit_code == int(case)
    assert rec.exit_signal == {"137": "KILL", "143": "TERM"}.get(case)
    assert rec.state is (JobState.succeeded if case == "0" else JobState.failed)
    assert [e.kind for e in jobstore.events(ssh_app.store, res.job_id)][-1] in ("observed", "probe")


@pytest.fixture(scope="module")
def notmux(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    root = tmp_path_factory.mktemp("notmux")
    server = Sshd(root / "sshd", alias="notmux", extra_env={"PATH": no_tmux_path(root)}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def notmux_app(home: Path, notmux: Sshd) -> AsyncIterator[App]:
    a = App.open(Settings(home=home, ssh_config=(str(notmux.ssh_config),), connect_timeout=5, command_timeout=30,
                          keepalive=2))
    try:
        yield a
    finally:
        await a.aclose()


async def test_without_tmux_on_the_host_the_nohup_backend_runs_it(notmux_app: App, runs: Path, work: Path) -> None:
    t = await notmux_app.transport("notmux")
    assert not (await t.run_script("command -v tmux")).ok
    with pytest.raises(UnsupportedError):
        await launch_detached(notmux_app, "notmux", "true", str(work), "forced-tmux", backend="tmux",
                              run_root=str(runs))
    cmd = "echo via-nohup; while [ ! -e go ]; do sleep 0.1; done; exit 3"
    res = await launch_detached(notmux_app, "notmux", cmd, str(work), "fallback",
                                probe_s=5, run_root=str(runs), options={"heartbeat_s": 1, "probe_interval_s": 0.3})
    assert res.backend == "nohup" and res.state is JobState.running and res.first_lines == ["via-nohup"]
    handle = jobstore.get(notmux_app.store, res.job_id).handle
    assert handle["pgid"] == int(Path(RunLayout(res.run_dir).pgid).read_text())
    (work / "go").touch()
    rec = await wait_until(lambda: _finished(notmux_app, res.job_id), what="nohup job end")
    assert (rec.state, rec.exit_code) == (JobState.failed, 3)
    assert Path(RunLayout(res.run_dir).exit_code).read_text().strip() == "3"


async def test_crlf_scripts_are_normalised_and_stored_immutably_under_their_hash(
        app: App, sock: str, runs: Path, work: Path) -> None:
    res = await launch_detached(app, "local", "echo one\r\necho two\r\nsleep 60\r\n", str(work), "crlf", probe_s=5,
                                run_root=str(runs), options=opts(sock))
    script = Path(RunLayout(res.run_dir).script(res.script_sha))
    body = script.read_bytes()
    assert b"\r" not in body and hashlib.sha256(body).hexdigest() == res.script_sha
    assert res.first_lines == ["one", "two"]
    assert script.stat().st_mode & 0o777 == 0o400
    # the same file name with other content while the job runs: refused, the file is untouched
    t = await app.transport("local")
    out = await t.run_script(PREPARE, [str(runs), res.job_id, res.script_sha[:12], "echo evil\n", WRAPPER, "{}",
                                       str(work)])
    assert out.exit_status == 11 and "refusing" in out.stderr
    assert script.read_bytes() == body


async def test_a_secret_reaches_the_job_but_never_the_disk_the_registry_the_result_or_the_logs(
        app: App, sock: str, runs: Path, work: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    from mcp_gpu import log

    log.configure("debug")
    value = "s3cr3t-" + os.urandom(8).hex()
    monkeypatch.setenv("MCP_TEST_TOKEN", value)
    res = await launch_detached(app, "local", 'printf "%s" "$MCP_TEST_TOKEN" | sha256sum; sleep 60', str(work),
                                "secretive", secret_env=["MCP_TEST_TOKEN"], env={"PLAIN": "visible"}, probe_s=5,
                                run_root=str(runs), options=opts(sock))
    digest = hashlib.sha256(value.encode()).hexdigest()
    assert res.first_lines and res.first_lines[0].startswith(digest)
    blobs = [p.read_bytes() for p in Path(res.run_dir).rglob("*") if p.is_file()]
    blobs += [p.read_bytes() for p in app.settings.home.rglob("*") if p.is_file()]
    assert blobs and not any(value.encode() in b for b in blobs)
    assert not list(Path(res.run_dir).glob(".env*"))  # the FIFO is gone
    assert value not in res.model_dump_json()
    assert value not in json.dumps([dataclasses.asdict(e) if dataclasses.is_dataclass(e) else e.model_dump()
                                    for e in jobstore.events(app.store, res.job_id)])
    rec = jobstore.get(app.store, res.job_id)
    assert rec.spec["secret_env"] == ["MCP_TEST_TOKEN"] and value not in rec.model_dump_json()
    out, err = capfd.readouterr()
    assert value not in out and value not in err
    assert sys.platform.startswith("linux")
    environ = Path(f"/proc/{int(Path(RunLayout(res.run_dir).pid).read_text())}/environ").read_bytes()
    assert f"MCP_TEST_TOKEN={value}".encode() in environ and b"PLAIN=visible" in environ
    assert group_alive(int(Path(RunLayout(res.run_dir).pgid).read_text()))


async def test_the_bundled_trainer_runs_detached_on_local_and_checkpoints(app: App, sock: str, runs: Path,
                                                                          work: Path) -> None:
    trainer = Path(__file__).resolve().parent.parent / "mcp_gpu" / "demo" / "train.py"
    cmd = f"{sys.executable} -u {trainer} --steps 30 --ckpt-every 10 --keep 2 --out checkpoints"
    res = await launch_detached(app, "local", cmd, str(work), "demo-train", probe_s=10, run_root=str(runs),
                                options=opts(sock))
    assert res.state in (JobState.running, JobState.succeeded)
    rec = await wait_until(lambda: _finished(app, res.job_id), timeout=30, what="trainer")
    assert rec.state is JobState.succeeded, (await job_logs(app, res.job_id)).lines
    names = sorted(p.name for p in (work / "checkpoints").iterdir())
    assert [n for n in names if n.startswith("ckpt_")][:2] == ["ckpt_000020.npz", "ckpt_000030.npz"]
    assert (await job_logs(app, res.job_id, 1)).lines[0].startswith("done: step 30")
