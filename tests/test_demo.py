"""The main job: `mcp-gpu demo` runs the whole lifecycle on `local` through the MCP server."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_gpu.cli.demo import WIDTH, counts_line, header


def _demo(home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MCP_GPU_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "mcp_gpu", "demo", "--steps", "40", "--step-s", "0.05"],
                          capture_output=True, text=True, timeout=300, env=env)


def test_demo_runs_every_phase_and_the_gate_passes_with_nothing_to_stop(tmp_path: Path) -> None:
    res = _demo(tmp_path / "state")
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    for phase in ("audit_env", "smoke_cpu", "launch_detached", "patrol", "verify_artifacts", "request_teardown"):
        assert phase in out
    assert "demo-train@local succeeded step 40" in out
    assert "all_ok=True" in out and "'stop local'" in out and "nothing_to_do" in out
    assert "[form shown to the human]" in out  # the demo plays the human through the form, not by echoing
    # phase 1 is skipped with a word, not silently
    assert "phase 1 · SSH and credentials: skipped" in out and "needs neither" in out
    # counts in words, not a Python dict
    assert "{'listed'" not in out and "3 file(s) listed, 3 pulled, 0 already verified" in out
    # every header fits its rule
    headers = [ln for ln in out.splitlines() if ln.startswith("== ")]
    assert len(headers) == 7 and {len(h) for h in headers} == {WIDTH}
    # the demo says plainly that it plays the human
    assert "the demo plays the human on `local`" in out
    # the job ran detached under its own run root in the demo's state dir, and its checkpoints were verified
    runs = list((tmp_path / "state" / "demo").glob("run-*"))
    assert len(runs) == 1
    assert len(list((runs[0] / "artifacts").rglob("MANIFEST.json"))) == 1

    # the demo prints how to look at its jobs; that command shows them, verified, with no verify asked for
    line = next(ln for ln in out.splitlines() if "mcp-gpu status --all" in ln)
    cmd = shlex.split(line.split(":", 1)[1])
    env = dict(os.environ, **dict(c.split("=", 1) for c in cmd if "=" in c and c.startswith("MCP_GPU_HOME")))
    st = subprocess.run([sys.executable, "-m", "mcp_gpu", *cmd[cmd.index("mcp-gpu") + 1:]], capture_output=True,
                        text=True, timeout=120, env=env)
    assert st.returncode == 0, st.stderr
    assert "demo-train" in st.stdout and "succeeded" in st.stdout
    nxt = next(ln for ln in st.stdout.splitlines() if ln.startswith("next:"))
    assert "verified" in nxt and "mcp-gpu verify" not in nxt and "verify_artifacts" not in nxt

    # a second run does not pile up: the first run's state is gone, the new one is fresh
    again = _demo(tmp_path / "state")
    assert again.returncode == 0, again.stdout + again.stderr
    runs2 = list((tmp_path / "state" / "demo").glob("run-*"))
    assert len(runs2) == 1 and runs2 != runs


def test_header_fits_its_rule_even_for_a_long_title() -> None:
    assert len(header("x" * 200)) == WIDTH and header("x" * 200).endswith("… ===")
    assert len(header("short")) == WIDTH


def test_counts_read_as_words() -> None:
    assert counts_line({"listed": 2, "pulled": 1, "skipped": 1, "failed": 0, "corrupt": 1}) == \
        "2 file(s) listed, 1 pulled, 1 already verified; 1 corrupt"


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
