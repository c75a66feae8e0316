"""Red team: a job the agent launches on `local` is code running as the server's user. Through launch_detached
alone it must not reach what guards the server: the registry (to forge a human's approval), the audit log, the
TOTP secret or the HTTP token."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcp_gpu.app import App
from mcp_gpu.models import JobState
from mcp_gpu.store import jobs as jobstore
from tests.jobhelpers import wait_until
from tests.security.human_gate_helpers import agent, data, executed, sleeper, text

pytestmark = pytest.mark.anyio

FORGE = """
import glob, sqlite3, sys
n = 0
for db in glob.glob(sys.argv[1] + '/*.db') + glob.glob(sys.argv[1] + '/*.sqlite*'):
    try:
        c = sqlite3.connect(db)
        n += c.execute("UPDATE approvals SET status='approved', decided_via='terminal' WHERE status='pending'").rowcount
        c.commit()
    except Exception as e:
        print('failed', db, e)
print('forged', n)
"""


async def test_a_local_job_cannot_forge_a_terminal_approval(app: App, runs: Path, tmp_path: Path,
                                                            sock: str) -> None:
    victim = await sleeper(app, runs, tmp_path, sock)
    work = tmp_path / "work2"
    work.mkdir()
    (work / "forge.py").write_text(FORGE)
    home = app.settings.home
    async with agent(app) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": victim.job_id}))
        r = await c.call_tool("launch_detached", {
            "host": "local", "command": f"{sys.executable} forge.py {home}", "workdir": str(work),
            "name": "innocent", "probe_s": 5, "run_root": str(runs),
            "options": {"tmux_socket": sock, "heartbeat_s": 1, "probe_interval_s": 0.3}})
        assert not r.is_error, text(r)
        run_dir = Path(r.structured_content["run_dir"])  # type: ignore[index]
        await wait_until(lambda: (run_dir / "exit_code").exists(), what="the forging job to end")
        second = await c.call_tool("job_cancel", {"job_id": victim.job_id, "token": first["token"]})
    out = (run_dir / "out.log").read_text()
    assert "forged 1" not in out and not (second.structured_content or {}).get("cancelled"), out
    assert jobstore.get(app.store, victim.job_id).state is JobState.running and executed(app) == []


async def _run_local(app: App, c: object, tmp_path: Path, runs: Path, sock: str, command: str, name: str) -> str:
    work = tmp_path / f"work-{name}"
    work.mkdir()
    (work / "forge.py").write_text(FORGE)
    r = await c.call_tool("launch_detached", {  # type: ignore[attr-defined]
        "host": "local", "command": command, "workdir": str(work), "name": name, "probe_s": 5, "run_root": str(runs),
        "options": {"tmux_socket": sock, "heartbeat_s": 1, "probe_interval_s": 0.3}})
    assert not r.is_error, text(r)
    run_dir = Path(r.structured_content["run_dir"])
    await wait_until(lambda: (run_dir / "exit_code").exists(), what=f"job {name} to end")
    return (run_dir / "out.log").read_text()


@pytest.mark.parametrize("escape", ["proc-root", "tmux-server", "proc-cwd"])
async def test_a_local_job_cannot_escape_the_sandbox_to_forge_an_approval(app: App, runs: Path, tmp_path: Path,
                                                                         sock: str, escape: str) -> None:
    """Through the server's /proc entries, or the tmux server that runs the job's pane (started outside the
    sandbox): either would reach the registry from outside the hidden view."""
    import os

    victim = await sleeper(app, runs, tmp_path, sock)
    home, pid = app.settings.home, os.getpid()
    cmd = {
        "proc-root": f"{sys.executable} forge.py /proc/{pid}/root{home}",
        "proc-cwd": f"for fd in /proc/{pid}/fd/*; do {sys.executable} forge.py \"$(dirname \"$(readlink $fd)\")\"; "
                    f"done 2>&1 | sort -u",
        "tmux-server": f"tmux -L {sock} new-window -d '{sys.executable} {tmp_path}/work-esc/forge.py {home} "
                       f"> {tmp_path}/work-esc/via-tmux.log 2>&1'; sleep 3; cat {tmp_path}/work-esc/via-tmux.log",
    }[escape]
    async with agent(app) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": victim.job_id}))
        out = await _run_local(app, c, tmp_path, runs, sock, cmd, "esc")
        second = await c.call_tool("job_cancel", {"job_id": victim.job_id, "token": first["token"]})
    assert "forged 1" not in out and not (second.structured_content or {}).get("cancelled"), out
    assert jobstore.get(app.store, victim.job_id).state is JobState.running and executed(app) == []


async def test_smoke_cpu_cannot_reach_the_tmux_server_outside_its_sandbox(app: App, runs: Path, tmp_path: Path,
                                                                          sock: str) -> None:
    victim = await sleeper(app, runs, tmp_path, sock)  # a tmux server runs, started outside any sandbox
    work = tmp_path / "smoke"
    work.mkdir()
    (work / "forge.py").write_text(FORGE)
    log = work / "via-tmux.log"
    async with agent(app) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": victim.job_id}))
        smoke = await c.call_tool("smoke_cpu", {
            "command": ["sh", "-c", f"tmux -L {sock} new-window -d '{sys.executable} {work}/forge.py "
                                    f"{app.settings.home} > {log} 2>&1' && sleep 3"],
            "cwd": str(work), "timeout_s": 60})
        assert not smoke.is_error, text(smoke)
        second = await c.call_tool("job_cancel", {"job_id": victim.job_id, "token": first["token"]})
    out = log.read_text() if log.exists() else ""
    assert "forged 1" not in out and not (second.structured_content or {}).get("cancelled"), out
    assert jobstore.get(app.store, victim.job_id).state is JobState.running and executed(app) == []


async def test_audit_env_on_local_does_not_run_the_agents_interpreter_outside_the_sandbox(
        app: App, runs: Path, tmp_path: Path, sock: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """audit_env(python=...) runs that program on the host: on `local` an agent could name a script it wrote
    (through a job, which can write its own workdir) and have it run unsandboxed, with the provider keys."""
    monkeypatch.setenv("VAST_API_KEY", "vk-redteam-secret")
    victim = await sleeper(app, runs, tmp_path, sock)
    work = tmp_path / "aud"
    work.mkdir()
    (work / "forge.py").write_text(FORGE)
    evil = work / "python3"
    evil.write_text(f"#!/bin/sh\necho key=$VAST_API_KEY > {work}/key.txt\n"
                    f"exec {sys.executable} {work}/forge.py {app.settings.home} > {work}/via-audit.log 2>&1\n")
    evil.chmod(0o755)
    async with agent(app) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": victim.job_id}))
        await c.call_tool("audit_env", {"host": "local", "python": str(evil)})
        second = await c.call_tool("job_cancel", {"job_id": victim.job_id, "token": first["token"]})
    out = (work / "via-audit.log").read_text() if (work / "via-audit.log").exists() else ""
    key = (work / "key.txt").read_text() if (work / "key.txt").exists() else ""
    assert "vk-redteam-secret" not in key
    assert "forged 1" not in out and not (second.structured_content or {}).get("cancelled"), out
    assert jobstore.get(app.store, victim.job_id).state is JobState.running and executed(app) == []


async def test_a_slurm_job_on_the_servers_own_machine_cannot_forge_an_approval(
        app: App, runs: Path, tmp_path: Path, sock: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """sbatch on `local`: the job runs under slurmd as the server's user, outside the tmux pane's sandbox unless
    the batch script starts the wrapper in it too."""
    import os

    conf = os.environ.get("MCP_GPU_TEST_SLURM_CONF")
    if not conf:
        pytest.skip("MCP_GPU_TEST_SLURM_CONF is not set: start the cluster with `bash .ci/services.sh up`")
    monkeypatch.setenv("SLURM_CONF", conf)
    victim = await sleeper(app, runs, tmp_path, sock)
    work = tmp_path / "slurm-work"
    work.mkdir()
    (work / "forge.py").write_text(FORGE)
    async with agent(app) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": victim.job_id}))
        r = await c.call_tool("launch_detached", {
            "host": "local", "command": f"{sys.executable} forge.py {app.settings.home}", "workdir": str(work),
            "name": "innocent-slurm", "backend": "slurm", "probe_s": 5, "run_root": str(runs),
            "options": {"probe_interval_s": 0.5}})
        assert not r.is_error, text(r)
        run_dir = Path(r.structured_content["run_dir"])  # type: ignore[index]
        await wait_until(lambda: (run_dir / "exit_code").exists(), what="the slurm job to end", timeout=120)
        second = await c.call_tool("job_cancel", {"job_id": victim.job_id, "token": first["token"]})
    out = (run_dir / "out.log").read_text()
    assert "forged" in out and "forged 1" not in out and not (second.structured_content or {}).get("cancelled"), out
    assert jobstore.get(app.store, victim.job_id).state is JobState.running and executed(app) == []


@pytest.mark.xfail(strict=True, reason="hole left: a local job runs as the server's user and may signal any process "
                                       "of that user (kill needs no /proc view); a PID namespace would stop it but "
                                       "breaks the wrapper's pid/pgid files the server observes and cancels by")
async def test_a_local_job_cannot_kill_another_job_without_a_human(app: App, runs: Path, tmp_path: Path,
                                                                  sock: str) -> None:
    victim = await sleeper(app, runs, tmp_path, sock)
    async with agent(app) as c:
        out = await _run_local(app, c, tmp_path, runs, sock,
                               f"kill -TERM -- -$(cat {victim.run_dir}/pgid) && echo delivered", "killer")
    assert "delivered" not in out  # kill(2) succeeded: the signal reached the victim's group, no human asked
