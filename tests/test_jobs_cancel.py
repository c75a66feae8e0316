"""job_cancel: nothing happens until a human approves (here: the approval `mcp-gpu approve` records, or the form
in the in-memory client); then the whole process tree goes. Also the CLI's typed confirmation on a real
pseudo-terminal, and the tools seen through an in-memory MCP client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_gpu.app import App
from mcp_gpu.backends import RunLayout
from mcp_gpu.confirm import Confirmer
from mcp_gpu.errors import ConfirmationError
from mcp_gpu.lifecycle.jobs import job_cancel, job_list
from mcp_gpu.lifecycle.launch import LaunchResult, launch_detached
from mcp_gpu.models import JobState
from mcp_gpu.server import build_server
from mcp_gpu.store import jobs as jobstore
from tests.jobhelpers import group_alive, pid_alive, wait_until
from tests.teardown_helpers import human_approves, run_on_pty

pytestmark = pytest.mark.anyio

# A job with a child process: the child's pid is the first log line; TERM is handled by the job.
TREE = "sleep 300 & echo $!; trap 'echo got TERM; exit 143' TERM; wait"


def opts(sock: str) -> dict[str, Any]:
    return {"tmux_socket": sock, "heartbeat_s": 1, "grace_s": 3, "probe_interval_s": 0.3}


async def _tree(app: App, host: str, name: str, runs: Path, tmp_path: Path, sock: str,
                backend: str = "auto") -> tuple[LaunchResult, int, int]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    res = await launch_detached(app, host, TREE, str(work), name, backend=backend, probe_s=5, run_root=str(runs),
                                options=opts(sock))
    assert res.state is JobState.running
    child = int(res.first_lines[0])
    pgid = int(Path(RunLayout(res.run_dir).pgid).read_text())
    assert pid_alive(child) and group_alive(pgid)
    return res, child, pgid


def _running(app: App, job_id: str, child: int) -> bool:
    return jobstore.get(app.store, job_id).state is JobState.running and pid_alive(child)


async def test_cancel_needs_a_human_approval_and_then_stops_the_whole_tree(
        ssh_app: App, runs: Path, tmp_path: Path, sock: str) -> None:
    res, child, pgid = await _tree(ssh_app, "testhost", "tree", runs, tmp_path, sock)
    other, other_child, _ = await _tree(ssh_app, "testhost", "other", runs, tmp_path, sock)

    first = await job_cancel(ssh_app, res.job_id)
    assert first.confirmation_required and not first.cancelled and first.token and first.request_id
    assert first.phrase == "cancel tree on testhost"
    assert _running(ssh_app, res.job_id, child)

    echoed = await job_cancel(ssh_app, res.job_id, first.token)  # the agent alone: nothing happens
    assert echoed.awaiting_human and not echoed.cancelled and f"mcp-gpu approve {first.request_id}" in echoed.message
    with pytest.raises(ConfirmationError):  # a wrong phrase typed by the human
        human_approves(ssh_app, first.request_id, "cancel other on testhost")
    for_other = await job_cancel(ssh_app, other.job_id)
    with pytest.raises(ConfirmationError):  # a token issued for another job
        await job_cancel(ssh_app, res.job_id, for_other.token)
    expired = await job_cancel(ssh_app, res.job_id, ttl_s=-1)
    with pytest.raises(ConfirmationError):  # an expired token
        await job_cancel(ssh_app, res.job_id, expired.token)
    stale = Confirmer(ssh_app.store, ssh_app.settings.home).issue("cancel", res.job_id, first.phrase, kind="cancel",
                                                                 expect="tree")
    with pytest.raises(ConfirmationError, match="not issued by this server process"):  # another process's key
        await job_cancel(ssh_app, res.job_id, stale.token)
    assert _running(ssh_app, res.job_id, child) and _running(ssh_app, other.job_id, other_child)

    human_approves(ssh_app, first.request_id, "  Cancel tree on testhost ")
    done = await job_cancel(ssh_app, res.job_id, first.token)
    assert done.cancelled and done.state is JobState.cancelled and done.how == "TERM"
    await wait_until(lambda: not pid_alive(child) and not group_alive(pgid), timeout=5, what="tree gone")
    rec = jobstore.get(ssh_app.store, res.job_id)
    assert rec.state is JobState.cancelled and rec.exit_code == 143
    assert "cancelled" in [e.kind for e in jobstore.events(ssh_app.store, res.job_id)]
    assert Path(RunLayout(res.run_dir).cancelled).read_text().split()[-1] == "TERM"
    assert "got TERM" in Path(RunLayout(res.run_dir).log).read_text()

    with pytest.raises(ConfirmationError):  # a replayed token
        await job_cancel(ssh_app, res.job_id, first.token)
    assert _running(ssh_app, other.job_id, other_child)  # the other job was never touched
    listed = {j.job_id: j.state for j in (await job_list(ssh_app)).jobs}
    assert listed == {res.job_id: JobState.cancelled, other.job_id: JobState.running}


async def test_cancel_escalates_to_kill_after_the_grace_window(app: App, runs: Path, tmp_path: Path,
                                                               sock: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    stubborn = "trap 'echo ignoring TERM' TERM; sleep 300 & echo $!; while :; do wait; done"
    res = await launch_detached(app, "local", stubborn, str(work), "stubborn", probe_s=5, run_root=str(runs),
                                options={**opts(sock), "grace_s": 1})
    child = int(res.first_lines[0])
    ch = await job_cancel(app, res.job_id)
    assert ch.request_id and ch.phrase
    human_approves(app, ch.request_id, ch.phrase)
    done = await job_cancel(app, res.job_id, ch.token)
    assert done.how == "KILL" and done.state is JobState.cancelled
    await wait_until(lambda: not pid_alive(child), timeout=5, what="child killed")


async def test_cancel_under_nohup_stops_the_process_group(app: App, runs: Path, tmp_path: Path, sock: str) -> None:
    res, child, pgid = await _tree(app, "local", "nohup-tree", runs, tmp_path, sock, backend="nohup")
    assert res.backend == "nohup"
    ch = await job_cancel(app, res.job_id)
    assert ch.request_id and ch.phrase
    human_approves(app, ch.request_id, ch.phrase)
    done = await job_cancel(app, res.job_id, ch.token)
    assert done.cancelled
    await wait_until(lambda: not pid_alive(child) and not group_alive(pgid), timeout=5, what="tree gone")


async def test_a_finished_job_needs_no_cancel(app: App, runs: Path, tmp_path: Path, sock: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    res = await launch_detached(app, "local", "exit 0", str(work), "quick", probe_s=5, run_root=str(runs),
                                options=opts(sock))
    async def finished() -> bool:
        return (await job_list(app)).jobs[0].state is JobState.succeeded

    await wait_until(finished, what="finished")
    out = await job_cancel(app, res.job_id)
    assert not out.confirmation_required and not out.cancelled and "already" in out.message


def _cli(args: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcp_gpu", *args], input=stdin, capture_output=True, text=True,
                          timeout=60, env=os.environ.copy(), check=False, start_new_session=True)


async def test_the_cli_asks_the_person_to_type_the_phrase(app: App, runs: Path, tmp_path: Path, sock: str) -> None:
    res, child, pgid = await _tree(app, "local", "cli-tree", runs, tmp_path, sock)
    piped = _cli(["cancel", res.job_id], "cancel cli-tree on local\n")
    assert piped.returncode == 2 and "no controlling terminal" in piped.stderr  # a pipe is not a person
    assert pid_alive(child)
    argv = [sys.executable, "-m", "mcp_gpu", "cancel", res.job_id]
    rc, out = run_on_pty(argv, os.environ.copy(), [("> ", "cancel something else")])
    assert rc == 1 and "Nothing was done" in out and "cancel cli-tree on local" in out
    assert pid_alive(child)
    rc, out = run_on_pty([*argv[:-1], "cli-tree"], os.environ.copy(), [("> ", "cancel cli-tree on local")])
    assert rc == 0, out
    await wait_until(lambda: not pid_alive(child) and not group_alive(pgid), timeout=5, what="tree gone")
    listed = _cli(["jobs"], "")
    assert res.job_id in listed.stdout and "cancelled" in listed.stdout


async def test_tools_through_an_in_memory_mcp_client(app: App, runs: Path, tmp_path: Path, sock: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    async with Client(build_server(app=app)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert {"launch_detached", "job_list", "job_logs", "job_cancel"} <= set(tools)
        assert tools["job_cancel"].annotations.destructive_hint is True  # type: ignore[union-attr]
        assert tools["launch_detached"].annotations.destructive_hint is False  # type: ignore[union-attr]
        assert tools["job_list"].annotations.read_only_hint is True  # type: ignore[union-attr]
        r = await c.call_tool("launch_detached", {"host": "local", "command": TREE, "workdir": str(work),
                                                  "name": "via-mcp", "probe_s": 5, "run_root": str(runs),
                                                  "options": opts(sock)})
        assert not r.is_error, r.content
        job = r.structured_content or {}
        assert job["state"] == "running"
        child = int(job["first_lines"][0])
        bad = await c.call_tool("launch_detached", {"host": "local", "command": "true", "workdir": str(work),
                                                    "name": "$(touch x)"})
        assert bad.is_error and "[config]" in bad.content[0].text  # type: ignore[union-attr]
        logs = await c.call_tool("job_logs", {"job_id": job["job_id"], "lines": 5})
        assert (logs.structured_content or {})["lines"][0] == str(child)
        ch = (await c.call_tool("job_cancel", {"job_id": job["job_id"]})).structured_content or {}
        assert ch["confirmation_required"] and pid_alive(child)
        echoed = await c.call_tool("job_cancel", {"job_id": job["job_id"], "token": ch["token"],
                                                  "confirmation": ch["phrase"]})
        assert (echoed.structured_content or {})["awaiting_human"] is True  # the echoed phrase approves nothing
        assert pid_alive(child)
        human_approves(app, ch["request_id"], ch["phrase"])
        done = await c.call_tool("job_cancel", {"job_id": job["job_id"], "token": ch["token"]})
        assert not done.is_error and (done.structured_content or {})["state"] == "cancelled"
        await wait_until(lambda: not pid_alive(child), timeout=5, what="child gone")


def test_scheduler_verdicts_decide_the_state_when_the_wrapper_left_none() -> None:
    from mcp_gpu.backends import Observation
    from mcp_gpu.lifecycle.jobs import state_from
    from mcp_gpu.models import JobState

    def s(backend: str | None, **kw: object) -> JobState | None:
        return state_from(Observation(**kw), backend)  # type: ignore[arg-type]

    assert s("slurm", alive=False, scheduler_state="PREEMPTED") is JobState.preempted
    assert s("slurm", alive=False, exit_code=143, scheduler_state="PREEMPTED") is JobState.preempted
    assert s("slurm", alive=False, scheduler_state="NODE_FAIL") is JobState.preempted
    assert s("slurm", alive=False, scheduler_state="OUT_OF_MEMORY") is JobState.failed
    assert s("slurm", alive=False, exit_code=0, scheduler_state="COMPLETED") is JobState.succeeded
    assert s("kubernetes", alive=False, scheduler_state="Evicted") is JobState.preempted
    assert s("kubernetes", alive=False, exit_code=0, scheduler_state="Complete") is JobState.succeeded
    assert s("tmux", alive=False) is JobState.lost
    assert s("tmux", alive=False, exit_code=1) is JobState.failed
    assert s("slurm", alive=True, scheduler_state="RUNNING") is None
