"""The terminal channel: `mcp-gpu approve` on a real pseudo-terminal (the pty is the process's controlling
terminal), refused without one, and refused inside the process tree of the MCP client that asked."""
# ruff: noqa: F811  (fixtures imported from tests.teardown_helpers are redefined as parameters)

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_gpu.app import App
from mcp_gpu.backends import RunLayout
from mcp_gpu.models import JobState
from mcp_gpu.store import jobs as jobstore
from tests.fake_providers import FakeCloud
from tests.jobhelpers import group_alive, wait_until
from tests.security.human_gate_helpers import ROOT, agent, cli, data, executed, sleeper, text
from tests.teardown_helpers import IID, Box, box, cloud, destroys, run_on_pty  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


def approve(home: Path, request_id: str, typed: str) -> tuple[int, str]:
    return run_on_pty([sys.executable, "-m", "mcp_gpu", "approve", request_id],
                      dict(os.environ, MCP_GPU_HOME=str(home)), [("> ", typed)])


async def test_the_human_approves_on_a_terminal_and_the_agents_next_call_completes_the_teardown(
        box: Box, cloud: FakeCloud, home: Path) -> None:
    async with agent(box.app) as c:  # a client without form elicitation
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        assert s["approve_command"] == f"mcp-gpu approve {s['request_id']}"
        assert data(await c.call_tool("confirm_teardown", {"token": s["token"]}))["status"] == "awaiting_human"
        listed = cli(home, "approve")
        assert s["request_id"] in listed.stdout and s["phrase"] in listed.stdout
        rc, out = approve(home, s["request_id"], s["phrase"])
        assert rc == 0 and "Approved" in out, out
        assert "Lost:" in out and "Keeps billing" in out  # the human saw the stored plan, not the agent's words
        assert destroys(cloud) == []  # approving stops nothing by itself
        done = data(await c.call_tool("confirm_teardown", {"token": s["token"]}))
    assert done["status"] == "done" and done["confirmed_via"] == "terminal"
    assert destroys(cloud) == [f"DELETE /api/v0/instances/{IID}/"]


async def test_a_wrong_phrase_on_the_terminal_approves_nothing_and_a_decline_is_final(
        box: Box, cloud: FakeCloud, home: Path) -> None:
    async with agent(box.app) as c:
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        rc, out = approve(home, s["request_id"], "destroy vastai 7654321")
        assert rc == 1 and "Not approved" in out
        assert data(await c.call_tool("confirm_teardown", {"token": s["token"]}))["status"] == "awaiting_human"
        rc, out = approve(home, s["request_id"], "decline")
        assert rc == 0 and "Declined" in out
        r = await c.call_tool("confirm_teardown", {"token": s["token"]})
        assert r.is_error and "decline is final" in text(r)
        rc, out = approve(home, s["request_id"], s["phrase"])  # too late to change one's mind on this request
        assert rc == 1 and "declined" in out
    assert destroys(cloud) == [] and executed(box.app) == []


async def test_a_job_cancel_approved_on_the_terminal(app: App, runs: Path, tmp_path: Path, sock: str,
                                                     home: Path) -> None:
    job = await sleeper(app, runs, tmp_path, sock)
    pgid = int(Path(RunLayout(job.run_dir).pgid).read_text())
    async with agent(app) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": job.job_id}))
        assert first["approve_command"] == f"mcp-gpu approve {first['request_id']}"
        rc, out = approve(home, first["request_id"], first["phrase"])
        assert rc == 0, out
        assert jobstore.get(app.store, job.job_id).state is JobState.running
        done = data(await c.call_tool("job_cancel", {"job_id": job.job_id, "token": first["token"]}))
    assert done["cancelled"] and done["confirmed_via"] == "terminal"
    await wait_until(lambda: not group_alive(pgid), timeout=10, what="job gone")


async def test_approve_refuses_without_a_controlling_terminal(box: Box, cloud: FakeCloud, home: Path) -> None:
    async with agent(box.app) as c:
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        res = cli(home, "approve", s["request_id"], stdin=s["phrase"] + "\n")
        assert res.returncode == 2 and "no controlling terminal" in res.stderr
        assert data(await c.call_tool("confirm_teardown", {"token": s["token"]}))["status"] == "awaiting_human"
    assert destroys(cloud) == []


async def test_approve_refuses_inside_the_process_tree_of_the_client_that_asked(tmp_path: Path) -> None:
    """The test process is the MCP client here (it started the stdio server): a command it runs on a pty stands
    for an agent's own shell tool driving a terminal, and must not approve."""
    home = tmp_path / "state"
    env = dict(os.environ, MCP_GPU_HOME=str(home))
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_gpu", "serve"], env=env, cwd=str(ROOT))
    async with Client(params) as c:
        s = data(await c.call_tool("request_teardown", {"host": "local", "reason": "x"}))
        rc, out = approve(home, s["request_id"], s["phrase"])
        assert rc == 2 and "process tree" in out, out
        r = data(await c.call_tool("confirm_teardown", {"token": s["token"]}))
    assert r["status"] == "awaiting_human"


def test_the_client_chain_stops_at_the_session_leader(tmp_path: Path) -> None:
    """leader shell → wrapper → wrapper → 'server': the chain is both wrappers (say npx and the client), never the
    leader (a human's login shell) nor anything outside the session (this test process)."""
    import json
    import subprocess

    (tmp_path / "probe.py").write_text(
        "import json, os; from mcp_gpu.lifecycle.human_gate import client_chain, _parent_of; p = os.getppid(); "
        "print(json.dumps({'chain': client_chain(p), 'p': p, 'gp': _parent_of(p), 'sid': os.getsid(0)}))")
    # `; true`: a shell must not exec its last command, or a level disappears
    (tmp_path / "c.sh").write_text(f"{sys.executable} {tmp_path / 'probe.py'}; true\n")
    (tmp_path / "b.sh").write_text(f"sh {tmp_path / 'c.sh'}; true\n")
    (tmp_path / "a.sh").write_text(f"sh {tmp_path / 'b.sh'}; true\n")
    out = subprocess.run(["sh", str(tmp_path / "a.sh")], capture_output=True, text=True, timeout=60,
                         start_new_session=True, cwd=ROOT, check=True).stdout
    got = json.loads(out)
    assert got["chain"] == [got["p"], got["gp"]], got
    assert got["sid"] not in got["chain"] and os.getpid() not in got["chain"]


async def test_the_agent_cannot_approve_through_a_command_the_server_runs_even_inside_a_pty(tmp_path: Path) -> None:
    """smoke_cpu runs commands as the server's children: `mcp-gpu approve` there is inside the server's process
    tree, bare or wrapped in `script` (which makes a pty and feeds it the piped phrase)."""
    import shutil

    home = tmp_path / "state"
    env = dict(os.environ, MCP_GPU_HOME=str(home))
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_gpu", "serve"], env=env, cwd=str(ROOT))
    async with Client(params) as c:
        s = data(await c.call_tool("request_teardown", {"host": "local", "reason": "x"}))
        approve_argv = [sys.executable, "-m", "mcp_gpu", "approve", s["request_id"]]
        attempts: list[list[str]] = [approve_argv]
        if shutil.which("script"):
            inner = " ".join(approve_argv)
            attempts.append(["sh", "-c", f"printf '%s\\n' '{s['phrase']}' | script -qec '{inner}' /dev/null"])
        for argv in attempts:
            r = await c.call_tool("smoke_cpu", {"command": argv, "cwd": str(tmp_path), "timeout_s": 60})
            said = text(r) + str(r.structured_content)
            # refused here by the process-tree check; a sandboxed smoke_cpu may refuse earlier (no registry, own
            # pid namespace): what matters is that nothing is approved
            assert "Approved" not in said and (r.structured_content or {}).get("exit_code") != 0, said
        after = data(await c.call_tool("confirm_teardown", {"token": s["token"]}))
    assert after["status"] == "awaiting_human"
