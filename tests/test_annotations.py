"""Annotation truth: each tool's hints match what it does, checked by calling it through an MCP client.

A tool marked read-only must leave the state dir (every file, and the registry's rows), the run roots and
work dirs on every host, and the test sshd box's files exactly as they were. Excluded, and why:
  - sshd.log: the test sshd writes a line per connection (that is the box's daemon, not the tool);
  - the SQLite files themselves (registry.sqlite3, -wal, -shm): a reader may checkpoint or touch them; the
    registry is compared row by row instead (a logical dump);
  - the `audits` table: audit_env's history of what it observed (a log; it only decides whether a
    platform's briefing was already shown).
Job states are settled (one patrol) before the snapshot: `job_list` records a verdict the host already shows.
A tool that writes must not be marked read-only; a tool that overwrites what was there must be destructive.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_gpu.app import App
from mcp_gpu.lifecycle.launch import launch_detached
from mcp_gpu.lifecycle.patrol import patrol
from mcp_gpu.server import build_server
from tests.jobhelpers import wait_until

pytestmark = pytest.mark.anyio
LOG_ROWS = ('INSERT INTO "audits"', "INSERT INTO \"sqlite_sequence\" VALUES('audits'")
SKIP_NAMES = {"sshd.log", "registry.sqlite3", "registry.sqlite3-wal", "registry.sqlite3-shm"}


def tree(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        if p.name in SKIP_NAMES:
            continue
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = "link:" + str(p.readlink())
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[rel + "/"] = "dir"
    return out


def registry(db: Path) -> list[str]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [line for line in con.iterdump() if not line.startswith(LOG_ROWS)]
    finally:
        con.close()


def snapshot(app: App, roots: list[Path]) -> dict[str, Any]:
    return {"state": tree(app.settings.home), "registry": registry(app.settings.db_path),
            **{str(r): tree(r) for r in roots}}


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for k in a:
        if a[k] != b[k]:
            if isinstance(a[k], dict):
                keys = set(a[k]) | set(b[k])
                out += [f"{k}:{x}" for x in sorted(keys) if a[k].get(x) != b[k].get(x)]
            else:
                out += [f"{k}: {x}" for x in sorted(set(a[k]) ^ set(b[k]))]
    return out


@pytest.fixture
async def world(ssh_app: App, sshd: Any, tmp_path: Path, runs: Path, sock: str) -> dict[str, Any]:
    """Jobs on both hosts (one finished with an output file, one running), a registered host, states settled."""
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    opts = {"tmux_socket": sock, "heartbeat_s": 60, "probe_interval_s": 0.3}
    done = await launch_detached(ssh_app, "testhost", f"echo hi; echo 1 > {work}/out/r.json", str(work), "done",
                                 probe_s=2, run_root=str(runs), outputs=[str(work / "out")], options=opts)
    live = await launch_detached(ssh_app, "local", "echo up; sleep 120", str(work), "live", probe_s=2,
                                 run_root=str(runs), options=opts)

    async def settled() -> bool:
        rep = await patrol(ssh_app, [done.job_id, live.job_id])
        return {j.job_id: j.state for j in rep.jobs} == {done.job_id: "succeeded", live.job_id: "running"}

    await wait_until(settled, timeout=30, what="jobs settled")
    async with Client(build_server(app=ssh_app)) as c:
        r = await c.call_tool("register_host", {"name": "box1", "target": "testhost", "platform": "vastai",
                                                "instance_id": "111"})
        assert not r.is_error, r.content
    return {"done": done.job_id, "live": live.job_id, "work": work, "sock": sock,
            "roots": [runs, work, Path(sshd.root)]}


def read_only_calls(w: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Arguments for every tool the server marks read-only (a new read-only tool must be added here)."""
    return {
        "audit_env": {"host": "testhost", "run_dir": str(w["work"])},
        "gotcha_lookup": {"text": "CUDA out of memory. Tried to allocate 2.00 GiB"},
        "host_list": {},
        "instances": {},  # no provider key in the test env: it lists nothing, and never writes
        "job_list": {},
        "job_logs": {"job_id": w["done"]},
        "triage_log": {"text": "Traceback (most recent call last):\nRuntimeError: CUDA error: out of memory",
                       "exit_code": 1},
    }


async def test_read_only_tools_change_nothing_anywhere(ssh_app: App, world: dict[str, Any]) -> None:
    calls = read_only_calls(world)
    async with Client(build_server(app=ssh_app)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        marked = {n for n, t in tools.items() if t.annotations is not None and t.annotations.read_only_hint}
        assert marked == set(calls), f"read-only tools without a check here, or checks of tools not read-only: " \
                                     f"{marked ^ set(calls)}"
        for name in sorted(marked):
            ann = tools[name].annotations
            assert ann is not None and not ann.destructive_hint, name
            before = snapshot(ssh_app, world["roots"])
            for _ in range(2):  # twice: a second call must not change anything either
                r = await c.call_tool(name, calls[name])
                assert not r.is_error, (name, r.content)
            after = snapshot(ssh_app, world["roots"])
            assert not diff(before, after), f"{name} is marked read-only but changed: {diff(before, after)[:10]}"


async def test_tools_that_write_are_not_marked_read_only(ssh_app: App, world: dict[str, Any],
                                                         tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    brief = await launch_detached(ssh_app, "local", "echo bye", str(world["work"]), "brief", probe_s=0,
                                  run_root=str(world["roots"][0]), options={"tmux_socket": world["sock"]})
    await wait_until(lambda: (Path(brief.run_dir) / "exit_code").exists(), timeout=20, what="brief job exited")
    calls = {
        # patrol records what it saw (here: a job that ended since it was launched), and may relaunch
        "patrol": {"job_ids": [brief.job_id]},
        # smoke_cpu runs any command the agent gives it
        "smoke_cpu": {"command": [sys.executable, "-c", "open('made-by-smoke.txt', 'w').write('x')"],
                      "cwd": str(proj), "timeout_s": 30},
        "verify_artifacts": {"job_id": world["done"]},
    }
    async with Client(build_server(app=ssh_app)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for name, args in calls.items():
            before = snapshot(ssh_app, [*world["roots"], proj])
            r = await c.call_tool(name, args)
            assert not r.is_error, (name, r.content)
            assert diff(before, snapshot(ssh_app, [*world["roots"], proj])), f"{name} changed nothing?"
            ann = tools[name].annotations
            assert ann is not None and ann.read_only_hint is False, name
    assert (proj / "made-by-smoke.txt").exists()
    ann = tools["smoke_cpu"].annotations
    # it runs any command: the one above made a file; another could delete them (tests/security: attack 4)
    assert ann is not None and ann.open_world_hint is True and ann.destructive_hint is True


async def test_register_host_overwrites_so_it_is_destructive(ssh_app: App, world: dict[str, Any]) -> None:
    async with Client(build_server(app=ssh_app)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        # a host with no job yet (a machine with jobs keeps its identity: tests/security/test_iron_law_identity.py)
        spare = {"name": "spare", "target": "nobody@127.0.0.1:1"}
        assert not (await c.call_tool("register_host", {**spare, "platform": "vastai", "instance_id": "111"})).is_error
        r = await c.call_tool("register_host", {**spare, "platform": "runpod", "instance_id": "222"})
        assert not r.is_error, r.content
        hosts = (await c.call_tool("host_list", {})).structured_content
        assert hosts is not None
        box = next(h for h in hosts["hosts"] if h["name"] == "spare")
        assert (box["platform"], box["instance_id"]) == ("runpod", "222")  # vastai/111 is gone
        ann = tools["register_host"].annotations
        assert ann is not None and ann.destructive_hint is True and ann.read_only_hint is False


async def test_every_tool_that_can_end_or_replace_work_is_destructive(ssh_app: App) -> None:
    async with Client(build_server(app=ssh_app)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    for name in ("job_cancel", "confirm_teardown", "register_host"):
        ann = tools[name].annotations
        assert ann is not None and ann.destructive_hint is True and not ann.read_only_hint, name
    for name, t in tools.items():  # every tool says what it is: no hint left to the client's default
        a = t.annotations
        assert a is not None and None not in (a.read_only_hint, a.destructive_hint, a.open_world_hint), name
