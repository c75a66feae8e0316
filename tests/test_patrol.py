"""patrol over real sshd + tmux: real jobs, real signals, real cgroup OOM, real full disks, a real outage."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from mcp_gpu.app import App
from mcp_gpu.config import Settings
from mcp_gpu.lifecycle.launch import launch_detached
from mcp_gpu.lifecycle.patrol import patrol
from mcp_gpu.store import jobs as jobs_repo
from tests.sshd import Sshd

pytestmark = pytest.mark.anyio
STEPS = Path(__file__).parent / "jobs" / "steps.py"
_RUNS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def isolated_runs(runs: Path, sock: str) -> None:
    """Each test's jobs get their own run root and tmux socket (conftest kills them afterwards)."""
    _RUNS.update(root=str(runs), sock=sock)


def cmd(mode: str, *extra: str, steps: int = 1000) -> str:
    return " ".join([sys.executable, "-u", str(STEPS), mode, str(steps), *extra])


async def wait_until(pred: Callable[[], Awaitable[bool]], timeout: float = 20, every: float = 0.3) -> None:
    with anyio.fail_after(timeout):
        while not await pred():
            await anyio.sleep(every)


async def launch(app: App, host: str, name: str, command: str, workdir: Path, **kw: object) -> str:
    workdir.mkdir(parents=True, exist_ok=True)
    opts = {"tmux_socket": _RUNS["sock"], **dict(kw.pop("options", {}) or {})}  # type: ignore[call-overload]
    res = await launch_detached(app, host, command, str(workdir), name, probe_s=5, outputs=[str(workdir / "ck")],
                                run_root=_RUNS["root"], options=opts, **kw)  # type: ignore[arg-type]
    return res.job_id


def job_of(report, job_id: str):  # type: ignore[no-untyped-def]
    return next(j for j in report.jobs if j.job_id == job_id)


def pid_of(app: App, job_id: str) -> int:
    rec = jobs_repo.get(app.store, job_id)
    return int(Path(rec.run_dir, "pid").read_text())


async def test_healthy_job_is_running_with_progress(ssh_app: App, tmp_path: Path) -> None:
    jid = await launch(ssh_app, "testhost", "healthy", cmd("ok"), tmp_path / "w")

    async def progressed() -> bool:
        r = job_of(await patrol(ssh_app, [jid]), jid)
        return r.progress is not None and (r.progress.step or 0) >= 3

    await wait_until(progressed)
    r = job_of(await patrol(ssh_app, [jid]), jid)
    assert r.state == "running" and r.progress is not None and r.progress.total == 1000
    assert r.progress.loss is not None and r.findings == []
    assert "healthy@testhost running step" in r.line


async def test_sigkill_is_failed_with_host_oom_killed_evidence(ssh_app: App, tmp_path: Path) -> None:
    jid = await launch(ssh_app, "testhost", "killed", cmd("ok"), tmp_path / "w")
    os.kill(pid_of(ssh_app, jid), signal.SIGKILL)

    async def ended() -> bool:
        return job_of(await patrol(ssh_app, [jid]), jid).state != "running"

    await wait_until(ended)
    rec = jobs_repo.get(ssh_app.store, jid)
    assert rec.state.value == "failed" and rec.exit_code == 137
    ev = [e for e in jobs_repo.events(ssh_app.store, jid) if e.kind == "patrol"]
    assert ev and ev[-1].detail["primary"] == "host_oom_killed"


async def test_sigterm_then_sigkill_after_grace_is_preempted(ssh_app: App, tmp_path: Path) -> None:
    jid = await launch(ssh_app, "testhost", "spot", cmd("slow-term"), tmp_path / "w")
    await patrol(ssh_app, [jid])
    pgid = int(Path(jobs_repo.get(ssh_app.store, jid).run_dir, "pgid").read_text())
    os.killpg(pgid, signal.SIGTERM)
    log = Path(jobs_repo.get(ssh_app.store, jid).run_dir, "out.log")
    with anyio.fail_after(10):
        while "SIGTERM received" not in log.read_text():
            await anyio.sleep(0.1)
    await anyio.sleep(1.0)  # the grace window of a spot platform
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)

    async def ended() -> bool:
        return job_of(await patrol(ssh_app, [jid]), jid).state not in ("running", "stalled")

    await wait_until(ended)
    rec = jobs_repo.get(ssh_app.store, jid)
    assert rec.state.value == "preempted"


async def test_loss_turning_nan_is_reported_as_nan_inf(ssh_app: App, tmp_path: Path) -> None:
    jid = await launch(ssh_app, "testhost", "nanjob", cmd("nan"), tmp_path / "w")

    async def seen_nan() -> bool:
        r = job_of(await patrol(ssh_app, [jid]), jid)
        return any(f.cls == "nan_inf" for f in r.findings)

    await wait_until(seen_nan)


async def test_process_that_lives_but_writes_nothing_is_stalled(ssh_app: App, tmp_path: Path) -> None:
    jid = await launch(ssh_app, "testhost", "stuck", cmd("stall"), tmp_path / "w")

    async def stalled() -> bool:
        r = job_of(await patrol(ssh_app, [jid], stall_floor_s=1.5), jid)
        return r.state == "stalled"

    await wait_until(stalled)
    r = job_of(await patrol(ssh_app, [jid], stall_floor_s=1.5), jid)
    assert r.findings[0].cls == "stalled" and jobs_repo.get(ssh_app.store, jid).state.value == "running"


async def test_an_error_line_already_reported_does_not_re_escalate(ssh_app: App, tmp_path: Path) -> None:
    jid = await launch(ssh_app, "testhost", "warnjob", cmd("cuda-warn"), tmp_path / "w")

    async def flagged() -> bool:
        r = job_of(await patrol(ssh_app, [jid]), jid)
        return any(f.cls == "cuda_device_error" for f in r.findings)

    await wait_until(flagged)
    await anyio.sleep(0.5)
    again = job_of(await patrol(ssh_app, [jid]), jid)
    assert not any(f.cls == "cuda_device_error" for f in again.findings)


async def test_unreachable_host_is_never_failed_and_recovers(settings: Settings, tmp_path: Path) -> None:
    server = Sshd(tmp_path / "box").start()
    app = App.open(replace(settings, ssh_config=(str(server.ssh_config),), connect_timeout=2, keepalive=1))
    try:
        jid = await launch(app, "testhost", "outage", cmd("ok", steps=100000), tmp_path / "w")
        assert job_of(await patrol(app, [jid]), jid).state == "running"
        server.stop(sessions=True)
        r = job_of(await patrol(app, [jid]), jid)
        assert r.state == "unreachable" and "not a failure" in r.line
        assert jobs_repo.get(app.store, jid).state.value == "running"
        assert "cancel" not in r.next or "never" in r.next
        server.start()

        async def back() -> bool:
            return job_of(await patrol(app, [jid]), jid).state == "running"

        await wait_until(back)
    finally:
        server.stop()
        await app.aclose()


async def test_two_hosts_one_down_still_reports_the_other(ssh_app: App, sshd: Sshd, tmp_path: Path) -> None:
    from mcp_gpu.models import HostRecord
    from mcp_gpu.store import hosts
    from tests.sshd import free_port

    hosts.upsert(ssh_app.store, HostRecord(name="deadbox", target=f"root@127.0.0.1:{free_port()}"))
    live = await launch(ssh_app, "testhost", "alive", cmd("ok"), tmp_path / "a")
    now = jobs_repo.get(ssh_app.store, live)
    dead = jobs_repo.insert(ssh_app.store, now.model_copy(update={"id": "job_deadbeef00", "host": "deadbox",
                                                                   "name": "ghost"}))
    r = await patrol(ssh_app, [live, dead.id])
    assert job_of(r, live).state == "running"
    assert job_of(r, dead.id).state == "unreachable"
    assert {h.host: h.reachable for h in r.hosts} == {"testhost": True, "deadbox": False}


def _mount_tmpfs(path: Path, opts: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "mcpgpu-patrol", str(path)], check=True)


@pytest.mark.root
async def test_tmpfs_filled_during_the_run_is_disk_full(ssh_app: App, tmp_path: Path, is_root: bool) -> None:
    if not is_root:
        pytest.skip("mounting a tmpfs needs root")
    fs = tmp_path / "small"
    _mount_tmpfs(fs, "size=2m")
    try:
        jid = await launch(ssh_app, "testhost", "filler", cmd("fill", str(fs)), tmp_path / "w")

        seen: list[str] = []

        async def full() -> bool:
            r = job_of(await patrol(ssh_app, [jid]), jid)
            seen.append(r.primary)
            return r.state == "failed"

        await wait_until(full)
        assert "disk_full" in seen
    finally:
        subprocess.run(["umount", "-l", str(fs)], check=False)


@pytest.mark.root
async def test_cgroup_v1_memory_limit_kill_is_host_oom_killed_with_the_count(settings: Settings, tmp_path: Path,
                                                                              is_root: bool) -> None:
    base = Path("/sys/fs/cgroup/memory")
    if not is_root or not (base / "memory.limit_in_bytes").exists():
        pytest.skip("needs root and a cgroup v1 memory controller")
    own = next(ln.split(":")[2] for ln in Path("/proc/self/cgroup").read_text().splitlines()
               if ln.split(":")[1] == "memory")
    cg = base / own.lstrip("/") / f"mcpgpu-oom-{os.getpid()}"
    cg.mkdir()
    (cg / "memory.limit_in_bytes").write_text(str(300 << 20))
    server = Sshd(tmp_path / "box")
    try:
        server.start()
        # the whole "container": sshd, its sessions, the tmux server and the job share one memory cgroup
        (cg / "cgroup.procs").write_text(str(server.pid))
        app = App.open(replace(settings, ssh_config=(str(server.ssh_config),)))
        try:
            jid = await launch(app, "testhost", "hog", cmd("hog"), tmp_path / "w", env={"HOG_DELAY": "8"},
                               options={"tmux_socket": "mcpgpu-oomtest"})
            first = job_of(await patrol(app, [jid]), jid)
            log = Path(jobs_repo.get(app.store, jid).run_dir, "out.log")
            assert first.state == "running", log.read_text()[-2000:]

            async def killed() -> bool:
                return job_of(await patrol(app, [jid]), jid).state not in ("running", "stalled")

            await wait_until(killed, timeout=40)
            rec = jobs_repo.get(app.store, jid)
            ev = [e for e in jobs_repo.events(app.store, jid) if e.kind == "patrol"]
            assert rec.state.value == "failed" and ev[-1].detail["primary"] == "host_oom_killed"
            oom = int(next(ln.split()[1] for ln in (cg / "memory.oom_control").read_text().splitlines()
                           if ln.startswith("oom_kill ")))
            assert oom >= 1
        finally:
            subprocess.run(["tmux", "-L", "mcpgpu-oomtest", "kill-server"], check=False)
            await app.aclose()
    finally:
        server.stop()
        for p in (cg / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                os.kill(int(p), signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                cg.rmdir()
                break
            except OSError:
                time.sleep(0.1)


async def test_on_preempt_relaunch_policy_starts_one_linked_attempt_within_budget(ssh_app: App, tmp_path: Path) -> None:
    w = tmp_path / "w"
    w.mkdir()
    res = await launch_detached(ssh_app, "testhost", cmd("term-fast"), str(w), "spotty", probe_s=5,
                                run_root=_RUNS["root"],
                                options={"on_preempt": "relaunch", "max_restarts": 1, "tmux_socket": _RUNS["sock"]})
    await patrol(ssh_app, [res.job_id])
    pgid = int(Path(res.run_dir, "pgid").read_text())
    os.killpg(pgid, signal.SIGTERM)

    async def ended() -> bool:
        return job_of(await patrol(ssh_app, [res.job_id]), res.job_id).state not in ("running", "stalled")

    await wait_until(ended)
    first = jobs_repo.get(ssh_app.store, res.job_id)
    assert first.state.value == "preempted"
    again = [j for j in jobs_repo.list_jobs(ssh_app.store, name="spotty") if j.id != first.id]
    assert len(again) == 1 and again[0].previous_id == first.id and again[0].attempt == 2
    # the second preemption exhausts the budget: nothing more is started
    os.killpg(int(Path(again[0].run_dir, "pgid").read_text()), signal.SIGTERM)

    async def ended2() -> bool:
        return job_of(await patrol(ssh_app, [again[0].id]), again[0].id).state not in ("running", "stalled")

    await wait_until(ended2)
    assert len(jobs_repo.list_jobs(ssh_app.store, name="spotty")) == 2


async def test_patrol_tool_reports_compactly_and_lists_as_not_read_only(ssh_app: App, tmp_path: Path) -> None:
    from mcp import Client

    from mcp_gpu.server import build_server

    jid = await launch(ssh_app, "testhost", "viamcp", cmd("ok"), tmp_path / "w")
    async with Client(build_server(app=ssh_app)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["patrol"].annotations.read_only_hint is False  # type: ignore[union-attr]  # it writes state, may relaunch
        r = await c.call_tool("patrol", {"job_ids": [jid]})
        assert not r.is_error and r.structured_content is not None
        assert r.structured_content["jobs"][0]["job_id"] == jid
        assert "viamcp@testhost" in r.content[0].text  # type: ignore[union-attr]


@pytest.mark.slurm
async def test_slurm_job_is_patrolled_through_squeue_and_sacct(ssh_settings: Settings, tmp_path: Path) -> None:
    conf = os.environ.get("MCP_GPU_TEST_SLURM_CONF")
    if not conf or subprocess.run(["sinfo"], env={**os.environ, "SLURM_CONF": conf}, capture_output=True,
                                  check=False).returncode != 0:
        pytest.skip("no Slurm cluster: set MCP_GPU_TEST_SLURM_CONF (scripts/test.sh starts one)")
    server = Sshd(tmp_path / "slurmbox", extra_env={"SLURM_CONF": conf}).start()
    app = App.open(replace(ssh_settings, ssh_config=(str(server.ssh_config),)))
    try:
        jid = await launch(app, "testhost", "sjob", cmd("ok", steps=15), tmp_path / "w", backend="slurm")

        async def done() -> bool:
            return job_of(await patrol(app, [jid]), jid).state == "succeeded"

        await wait_until(done, timeout=60, every=1)
        rec = jobs_repo.get(app.store, jid)
        assert rec.state.value == "succeeded" and rec.backend == "slurm"
        assert rec.last_patrol["progress"]["step"] == 15
    finally:
        server.stop()
        await app.aclose()
