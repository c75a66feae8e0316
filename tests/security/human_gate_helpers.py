"""Shared by tests/security/test_human_gate_*.py: an MCP client that plays the agent, a form-answering human,
a running local job, and the real `mcp-gpu` CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitResult

from mcp_gpu.app import App
from mcp_gpu.lifecycle.launch import LaunchResult, launch_detached
from mcp_gpu.models import JobState
from mcp_gpu.server import build_server

ROOT = Path(__file__).resolve().parents[2]


class Human:
    """Plays the person in front of the client: answers every form with `action` and the given fields."""

    def __init__(self, action: str, **content: str) -> None:
        self.action = action
        self.content = content
        self.asked: list[str] = []

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.message)
        return ElicitResult(action=self.action,  # type: ignore[arg-type]
                            content=dict(self.content) if self.action == "accept" else None)


def agent(app: App, *, human: Human | None = None, mode: str = "auto") -> Client:
    """The agent's MCP client; with `human`, the client declares form elicitation and shows forms to them."""
    return Client(build_server(app=app), mode=mode, elicitation_callback=human)  # type: ignore[arg-type]


def data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


def text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def sleeper(app: App, runs: Path, tmp_path: Path, sock: str, name: str = "victim") -> LaunchResult:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    res = await launch_detached(app, "local", "sleep 300", str(work), name, probe_s=5, run_root=str(runs),
                                options={"tmux_socket": sock, "heartbeat_s": 1, "grace_s": 2, "probe_interval_s": 0.3})
    assert res.state is JobState.running
    return res


def cli(home: Path, *args: str, stdin: str = "", extra_env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    """The real CLI, detached from any terminal (new session): what a pipe or an agent's shell tool gets."""
    env = {**os.environ, "MCP_GPU_HOME": str(home), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "mcp_gpu", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=False, start_new_session=True)


def executed(app: App) -> list[str]:
    return [r["event"] for r in app.store.query(
        "SELECT event FROM audit_log WHERE event IN ('teardown_executed', 'job_cancelled') ORDER BY id")]
