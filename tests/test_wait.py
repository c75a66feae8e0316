"""`wait` over real sshd + tmux: wakes within seconds of a job finishing or failing, returns at its bound with no
change, sends progress, and concurrent waits share their probes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcp_gpu.app import App
from mcp_gpu.errors import ConfigError
from mcp_gpu.lifecycle.launch import launch_detached
from mcp_gpu.lifecycle.wait import probes_run, wait
from mcp_gpu.server import build_server

pytestmark = pytest.mark.anyio
STEPS = Path(__file__).parent / "jobs" / "steps.py"


async def start(app: App, host: str, name: str, script: str, work: Path, runs: Path, sock: str) -> str:
    work.mkdir(parents=True, exist_ok=True)
    res = await launch_detached(app, host, script, str(work), name, probe_s=2, outputs=[str(work / "ck")],
                                run_root=str(runs), options={"tmux_socket": sock})
    return res.job_id


async def test_wait_returns_within_seconds_of_a_job_finishing(ssh_app: App, tmp_path: Path, runs: Path,
                                                              sock: str) -> None:
    jid = await start(ssh_app, "testhost", "short", "sleep 4; echo done", tmp_path / "w", runs, sock)
    t0 = time.monotonic()
    res = await wait(ssh_app, [jid], timeout_s=60, interval_s=0.5)
    assert res.changed and res.reason == "a watched job changed"
    assert time.monotonic() - t0 < 20  # the job took ~4 s; a 30-min patrol loop would not have noticed yet
    job = res.report.jobs[0]
    assert job.state == "succeeded"
    assert any("→ succeeded" in c for c in res.changes)
    assert "verify_artifacts" in res.next


async def test_wait_reports_a_failure_with_its_class(ssh_app: App, tmp_path: Path, runs: Path, sock: str) -> None:
    script = (f"{sys.executable} -u {STEPS} ok 25; "
              "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; exit 1")
    jid = await start(ssh_app, "testhost", "oom", script, tmp_path / "w", runs, sock)
    res = await wait(ssh_app, [jid], timeout_s=60, interval_s=0.5)
    assert res.changed
    job = res.report.jobs[0]
    assert job.state == "failed" and job.primary == "cuda_oom"
    assert "(cuda_oom)" in res.changes[0]


async def test_wait_returns_at_its_bound_with_no_change(ssh_app: App, tmp_path: Path, runs: Path, sock: str) -> None:
    jid = await start(ssh_app, "testhost", "long", "sleep 300", tmp_path / "w", runs, sock)
    await wait(ssh_app, [jid], timeout_s=5, interval_s=0.5)  # absorbs the launching → running step
    t0 = time.monotonic()
    res = await wait(ssh_app, [jid], timeout_s=3, interval_s=0.5)
    took = time.monotonic() - t0
    assert not res.changed and res.reason.startswith("no change within 3")
    assert 2.0 < took < 10
    assert res.report.jobs[0].state == "running"
    assert "call wait again" in res.next


async def test_nothing_to_watch_returns_at_once(app: App) -> None:
    res = await wait(app, None, timeout_s=30)
    assert not res.changed and res.reason == "nothing to watch" and res.ticks == 0


async def test_a_bound_past_the_cap_is_refused_with_what_to_do(app: App) -> None:
    with pytest.raises(ConfigError, match="between 0 and 1800"):
        await wait(app, None, timeout_s=7200)


async def test_concurrent_waits_share_one_probe_per_interval(ssh_app: App, tmp_path: Path, runs: Path,
                                                             sock: str) -> None:
    ids = [await start(ssh_app, "testhost", f"j{i}", "sleep 300", tmp_path / f"w{i}", runs, sock) for i in range(2)]
    await wait(ssh_app, ids, timeout_s=5, interval_s=0.5)  # settle launching → running
    before = probes_run(ssh_app)
    results = []

    async def one() -> None:
        results.append(await wait(ssh_app, ids, timeout_s=4, interval_s=1.0))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one)
    ticks = max(r.ticks for r in results)
    probes = probes_run(ssh_app) - before
    assert len(results) == 5 and not any(r.changed for r in results)
    assert probes <= ticks + 1, (probes, ticks)  # five waiters, about one probe per interval — not five


async def test_the_wait_tool_sends_progress_and_wakes_on_the_change(ssh_app: App, tmp_path: Path, runs: Path,
                                                                    sock: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_GPU_WAIT_INTERVAL_S", "0.5")
    jid = await start(ssh_app, "testhost", "soon", "sleep 10; exit 3", tmp_path / "w", runs, sock)
    await wait(ssh_app, [jid], timeout_s=1.5, interval_s=0.5)
    seen: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async with Client(build_server(app=ssh_app)) as c:
        r = await c.call_tool("wait", {"job_ids": [jid], "timeout_s": 60}, progress_callback=on_progress)
    assert not r.is_error
    text = r.content[0].text  # type: ignore[union-attr]
    assert text.startswith("wait: CHANGED") and "failed" in text
    assert r.structured_content is not None and r.structured_content["changed"] is True
    assert seen and "no change yet" in seen[0]


def test_the_cli_exits_124_when_nothing_changes_and_0_when_a_job_finishes(home: Path, tmp_path: Path) -> None:
    env = {**os.environ, "MCP_GPU_HOME": str(home)}
    work = tmp_path / "w"
    work.mkdir()
    run = lambda *a: subprocess.run([sys.executable, "-m", "mcp_gpu", *a], env=env, capture_output=True,  # noqa: E731
                                    text=True, timeout=120)
    out = run("launch", "local", "--name", "cli-wait", "--workdir", str(work), "--backend", "nohup",
              "--probe-s", "1", "--", "sleep 15")
    assert out.returncode == 0, out.stderr
    try:
        first = run("wait", "cli-wait", "--timeout", "2", "--interval", "0.5")
        second = run("wait", "cli-wait", "--timeout", "1", "--interval", "0.5")
        assert first.returncode in (0, 124), first.stderr  # launching → running may count as a change
        assert second.returncode == 124, second.stdout + second.stderr
        assert "no change" in second.stdout
        done = run("wait", "cli-wait", "--timeout", "60", "--interval", "0.5")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "succeeded" in done.stdout
        again = run("wait", "cli-wait", "--timeout", "60")  # already finished: answers at once, no 60 s wait
        assert again.returncode == 0 and "already finished" in again.stdout, again.stdout
    finally:
        subprocess.run(["pkill", "-f", "sleep 15"], check=False)


async def test_wait_wakes_when_a_job_stalls(ssh_app: App, tmp_path: Path, runs: Path, sock: str) -> None:
    """A job that logs every 0.5 s and then hangs: wait returns `stalled` within seconds of the job's own cadence
    (floor 6 s here), not at its bound and not 10 minutes later."""
    w = tmp_path / "w"
    w.mkdir()
    res = await launch_detached(ssh_app, "testhost", f"STEP_S=0.5 HANG_AT=12 {sys.executable} -u {STEPS} hang-after 1000",
                                str(w), "hangs", probe_s=2, run_root=str(runs), options={"tmux_socket": sock},
                                stall_floor_s=6)
    t0 = time.monotonic()
    states: list[str] = []
    while time.monotonic() - t0 < 120:
        r = await wait(ssh_app, [res.job_id], timeout_s=120, interval_s=0.5)
        states.append(r.report.jobs[0].state)
        if r.changed and states[-1] == "stalled":
            break
    assert states[-1] == "stalled", states
    assert time.monotonic() - t0 < 90
    assert "stalled" in " ".join(r.changes)
