"""The server does not hand out what guards it (attacks 4, 7, 10 and their variants), through the real MCP client.

Secrets here are random values put in the server's environment (this test process IS the server); a leak is
any of them showing up in a tool answer, a job's log file on disk, or a file the command managed to read.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_gpu.app import App
from mcp_gpu.lifecycle.sandbox import sandbox_for
from mcp_gpu.server import build_server
from tests.jobhelpers import wait_until

pytestmark = pytest.mark.anyio
PY = sys.executable


def text(r: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in r.content)


def everything(r: Any) -> str:
    return text(r) + json.dumps(r.structured_content or {})


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A provider key, a named secret, and tokens nobody named, in the server's environment."""
    k = {"VAST_API_KEY": "vk-" + secrets.token_hex(12), "HF_TOKEN": "hf_" + secrets.token_hex(12),
         "SOME_SERVICE_TOKEN": "svc-" + secrets.token_hex(12), "DEPLOY_HOOK_URL": "hook-" + secrets.token_hex(12)}
    for name, value in k.items():
        monkeypatch.setenv(name, value)
    yield k


def _leaks(blob: str, keys: dict[str, str], *, allowed: tuple[str, ...] = ()) -> list[str]:
    return [n for n, v in keys.items() if n not in allowed and v in blob]


# ---------------------------------------------------------------- attack 4: smoke_cpu


async def test_attack_4_smoke_cpu_cannot_read_the_keys_or_the_state_dir(app: App, tmp_path: Path,
                                                                        keys: dict[str, str]) -> None:
    key_file = app.settings.home / "confirm.key"
    key_file.write_text("state-dir-secret-" + secrets.token_hex(8))
    steal = tmp_path / "stolen.txt"
    grab = (f"import os, pathlib; p = pathlib.Path({str(key_file)!r}); s = pathlib.Path({str(steal)!r})\n"
            "got = [os.environ.get(n, '') for n in ('VAST_API_KEY', 'SOME_SERVICE_TOKEN', 'DEPLOY_HOOK_URL')]\n"
            "try: got.append(p.read_text())\nexcept OSError as e: print('state dir:', e.strerror)\n"
            f"try: got.append(open('/proc/{os.getpid()}/environ', 'rb').read().decode('latin-1'))\n"
            "except OSError as e: print('server environ:', e.strerror)\n"
            "s.write_text('\\n'.join(got)); print('HF', os.environ.get('HF_TOKEN'))")
    async with Client(build_server(app=app)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        ann = tools["smoke_cpu"].annotations
        assert ann is not None and not ann.read_only_hint and ann.open_world_hint
        r = await c.call_tool("smoke_cpu", {"command": [PY, "-c", grab], "cwd": str(tmp_path), "timeout_s": 60,
                                            "secret_env": ["HF_TOKEN"]})
    assert not r.is_error, text(r)
    stolen = steal.read_text()
    box = sandbox_for([app.settings.home])
    assert _leaks(stolen, keys, allowed=("HF_TOKEN",)) == []  # the allow-listed env holds no unnamed secret
    if box.active:
        assert key_file.read_text() not in stolen and "state dir: No such file or directory" in r.structured_content[
            "tail"]
        assert "server environ: Permission denied" in r.structured_content["tail"]
        assert str(app.settings.home.resolve()) in r.structured_content["sandbox"]
    else:  # pragma: no cover - this machine has user namespaces or root; elsewhere the answer must say so
        assert r.structured_content["sandbox"].startswith("NONE")
    # the named secret reached the command, and its value is redacted from the answer
    assert f"HF {keys['HF_TOKEN']}" not in everything(r) and "HF [redacted]" in r.structured_content["tail"]
    assert _leaks(everything(r), keys) == []


async def test_a_smoke_cannot_be_handed_the_provider_key_by_name(app: App, tmp_path: Path,
                                                                  keys: dict[str, str]) -> None:
    async with Client(build_server(app=app)) as c:
        r = await c.call_tool("smoke_cpu", {"command": ["env"], "cwd": str(tmp_path), "secret_env": ["VAST_API_KEY"]})
    assert r.is_error and "not handed to jobs" in text(r) and keys["VAST_API_KEY"] not in everything(r)


# ---------------------------------------------------------------- attack 7: local jobs


async def test_attack_7_a_local_job_gets_no_unnamed_token(app: App, tmp_path: Path, runs: Path, sock: str,
                                                           keys: dict[str, str]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    async with Client(build_server(app=app)) as c:
        r = await c.call_tool("launch_detached", {
            "host": "local", "command": "env; echo named=$HF_TOKEN", "workdir": str(work), "name": "envdump",
            "probe_s": 5, "run_root": str(runs), "secret_env": ["HF_TOKEN"],
            "options": {"tmux_socket": sock, "heartbeat_s": 1, "probe_interval_s": 0.3}})
        assert not r.is_error, text(r)
        jid, run_dir = r.structured_content["job_id"], Path(r.structured_content["run_dir"])
        await wait_until(lambda: (run_dir / "exit_code").exists(), what="the job to end")
        logs = await c.call_tool("job_logs", {"job_id": jid})
    on_disk = (run_dir / "out.log").read_text()
    assert f"named={keys['HF_TOKEN']}" in on_disk  # the named secret reached the job
    assert _leaks(on_disk, keys, allowed=("HF_TOKEN",)) == []  # nothing it did not name, not even on disk
    assert "MCP_GPU_HOME=" not in on_disk
    assert _leaks(everything(logs), keys) == [] and _leaks(everything(r), keys) == []


# ---------------------------------------------------------------- attack 10: the wrapper's own variables


@pytest.mark.parametrize("name", ["script", "rd", "wd", "BASH_ENV", "BASH", "LD_PRELOAD", "MCP_GPU_RUN_DIR"])
async def test_attack_10_env_cannot_override_the_wrapper(app: App, tmp_path: Path, runs: Path, sock: str,
                                                         name: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "evil-ran"
    evil = tmp_path / "evil.sh"
    evil.write_text(f"touch {marker}\n")
    evil.chmod(0o755)
    async with Client(build_server(app=app)) as c:
        r = await c.call_tool("launch_detached", {
            "host": "local", "command": "echo the recorded script", "workdir": str(work), "name": "wrapped",
            "probe_s": 3, "run_root": str(runs), "env": {name: str(evil)}, "options": {"tmux_socket": sock}})
        jobs = await c.call_tool("job_list", {})
    assert r.is_error and "reserved" in text(r)
    assert not marker.exists() and jobs.structured_content["jobs"] == []  # nothing was started


async def test_a_secret_env_cannot_name_a_reserved_variable(app: App, tmp_path: Path, runs: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("script", str(tmp_path / "evil.sh"))
    async with Client(build_server(app=app)) as c:
        r = await c.call_tool("launch_detached", {"host": "local", "command": "true", "workdir": str(tmp_path),
                                                  "name": "s", "run_root": str(runs), "secret_env": ["script"]})
    assert r.is_error and "reserved" in text(r)


# ---------------------------------------------------------------- every answer is scrubbed


async def test_every_tool_answer_redacts_secrets_the_server_knows(app: App, keys: dict[str, str]) -> None:
    """Even text the agent itself put in (a host's instance id) never comes back holding a key's value."""
    async with Client(build_server(app=app)) as c:
        reg = await c.call_tool("register_host", {"name": "h1", "target": "local", "platform": "vastai",
                                                  "instance_id": keys["VAST_API_KEY"]})
        listed = await c.call_tool("host_list", {})
        bad = await c.call_tool("register_host", {"name": "h2", "target": f"-x{keys['SOME_SERVICE_TOKEN']}"})
    assert _leaks(everything(reg) + everything(listed), keys) == []
    assert "[redacted]" in everything(listed)
    assert bad.is_error and _leaks(everything(bad), keys) == []


async def test_a_smoke_run_from_inside_the_state_dir_sees_only_its_own_directory(app: App) -> None:
    """Invented while breaking the sandbox: pick the state dir (or a folder in it) as cwd to lift the cover."""
    key = app.settings.home / "confirm.key"
    key.write_text("k-" + secrets.token_hex(8))
    inside = app.settings.home / "demo" / "work"
    inside.mkdir(parents=True)
    (inside / "train.py").write_text("print('mine')\n")
    async with Client(build_server(app=app)) as c:
        at_home = await c.call_tool("smoke_cpu", {"command": ["cat", "confirm.key"], "cwd": str(app.settings.home)})
        r = await c.call_tool("smoke_cpu", {"command": ["sh", "-c", f"cat train.py; cat {key} ../../confirm.key"],
                                            "cwd": str(inside)})
    assert at_home.is_error and "state dir" in text(at_home) and key.read_text() not in everything(at_home)
    assert not r.is_error and r.structured_content["tail"][0] == "print('mine')"  # its own folder is there
    if sandbox_for([app.settings.home]).active:
        assert key.read_text() not in everything(r)


def test_log_lines_redact_keys_from_the_servers_environment(keys: dict[str, str]) -> None:
    """A provider key or token in the environment is known to the server from the start, named or not."""
    from mcp_gpu import log

    line = log.redact(None, "info", {"event": f"calling with {keys['VAST_API_KEY']}",
                                     "stderr": [f"hf said {keys['HF_TOKEN']}", f"svc {keys['SOME_SERVICE_TOKEN']}"]})
    assert _leaks(json.dumps(line), keys, allowed=("DEPLOY_HOOK_URL",)) == []
    assert line["event"] == "calling with [redacted]"
