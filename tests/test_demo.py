"""The main job: `mcp-gpu demo` runs the whole lifecycle on `local` through the MCP server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_demo_runs_every_phase_and_the_gate_passes_with_nothing_to_stop(tmp_path: Path) -> None:
    env = dict(os.environ, MCP_GPU_HOME=str(tmp_path / "state"))
    res = subprocess.run([sys.executable, "-m", "mcp_gpu", "demo", "--steps", "40", "--step-s", "0.05"],
                         capture_output=True, text=True, timeout=300, env=env)
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    for phase in ("audit_env", "smoke_cpu", "launch_detached", "patrol", "verify_artifacts", "request_teardown"):
        assert phase in out
    assert "demo-train@local succeeded step 40" in out
    assert "all_ok=True" in out and "`stop local`" in out and "nothing_to_do" in out
    assert "[form shown to the human]" in out  # the demo plays the human through the form, not by echoing
    # the job ran detached under its own run root in the state dir, and its checkpoints were verified
    manifests = list((tmp_path / "state" / "demo" / "artifacts").rglob("MANIFEST.json"))
    assert len(manifests) == 1


@pytest.mark.anyio
async def test_streamable_http_server_answers_on_loopback(tmp_path: Path) -> None:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.sshd import free_port

    port = free_port()
    env = dict(os.environ, MCP_GPU_HOME=str(tmp_path / "state"))
    proc = subprocess.Popen([sys.executable, "-m", "mcp_gpu", "serve", "--http", f"127.0.0.1:{port}"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with anyio.fail_after(30):
            while True:
                try:
                    token = (tmp_path / "state" / "http.token").read_text().strip()  # created at first start
                    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
                    async with http, Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp",
                                                                   http_client=http)) as c:
                        names = {t.name for t in (await c.list_tools()).tools}
                        r = await c.call_tool("host_list", {})
                    break
                except Exception:  # not listening yet
                    if proc.poll() is not None:
                        raise AssertionError(proc.stderr.read().decode() if proc.stderr else "server exited") from None
                    await anyio.sleep(0.2)
        assert {"audit_env", "patrol", "request_teardown"} <= names and not r.is_error
    finally:
        proc.terminate()
        proc.wait(10)


def test_http_serve_refuses_a_non_loopback_address(tmp_path: Path) -> None:
    env = dict(os.environ, MCP_GPU_HOME=str(tmp_path / "state"))
    res = subprocess.run([sys.executable, "-m", "mcp_gpu", "serve", "--http", "0.0.0.0:8765"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "loopback" in res.stderr
