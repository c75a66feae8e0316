"""The `triage_log` MCP tool over an in-memory client, and `mcp-gpu triage` as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from mcp_gpu.app import App
from mcp_gpu.server import build_server

pytestmark = pytest.mark.anyio

OOM_LOG = """\
 12%|█▏        | 120/1000 [00:24<02:56,  5.00it/s, loss=0.9]
Traceback (most recent call last):
  File "/workspace/train.py", line 188, in main
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 79.15 GiB of \
which 1.02 GiB is free.
"""

HEALTHY_LOG = """\
 45%|████▌     | 450/1000 [01:23<01:42,  5.38it/s, loss=0.123]
{'loss': 0.4521, 'learning_rate': 4.5e-05, 'epoch': 0.45}
epoch 3 | val_error=0.1 | error_rate=0.021 | mean_squared_error: 0.0132 | Errors: 0
"""


async def test_triage_log_returns_the_primary_class_and_findings_as_structured_output(app: App) -> None:
    async with Client(build_server(app=app)) as c:
        r = await c.call_tool("triage_log", {"text": OOM_LOG})
    assert not r.is_error
    out = r.structured_content
    assert out is not None
    assert out["primary"] == "cuda_oom"
    first = out["findings"][0]
    assert (first["class"], first["gotcha"], first["severity"]) == ("cuda_oom", "U10", "error")
    assert first["evidence"][0].startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB")


async def test_triage_log_is_read_only_local_and_says_healthy_for_a_healthy_log(app: App) -> None:
    async with Client(build_server(app=app)) as c:
        tool = {t.name: t for t in (await c.list_tools()).tools}["triage_log"]
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint and not tool.annotations.open_world_hint
        assert tool.output_schema is not None and "primary" in tool.output_schema["properties"]
        r = await c.call_tool("triage_log", {"text": HEALTHY_LOG})
    assert r.structured_content == {"primary": "healthy", "confidence": 0.0, "findings": []}


async def test_triage_log_uses_the_exit_code_to_tell_oom_from_preemption(app: App) -> None:
    async with Client(build_server(app=app)) as c:
        r = await c.call_tool("triage_log", {"text": "step 10 loss 2.0\n", "exit_code": 137})
    assert r.structured_content is not None and r.structured_content["primary"] == "host_oom_killed"


def _cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcp_gpu", "triage", *args], input=stdin, capture_output=True,
                          text=True, timeout=60, check=False)


def test_the_triage_verb_prints_json_and_exits_1_for_a_failure_read_from_stdin() -> None:
    done = _cli("--json", "-", stdin=OOM_LOG)
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert out["primary"] == "cuda_oom"
    assert out["findings"][0]["class"] == "cuda_oom"


def test_the_triage_verb_exits_0_for_a_healthy_log_file(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_text(HEALTHY_LOG)
    done = _cli("--json", str(log))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"primary": "healthy", "confidence": 0.0, "findings": []}


def test_the_triage_verb_reports_an_unreadable_file_as_an_error(tmp_path: Path) -> None:
    done = _cli(str(tmp_path / "missing.log"))
    assert done.returncode == 2
    assert "cannot read" in done.stderr


async def test_a_big_triage_does_not_hold_up_another_call(app: App) -> None:
    """The engine runs on a worker thread: a second call made while a long triage is in flight comes back first."""
    import anyio

    line = " 45%|████▌     | 450/1000000 [01:23<01:42,  5.38it/s, loss=0.123]\n"
    big = line * (30 * 1024 * 1024 // len(line.encode()))  # ~30 MB: seconds of work for the engine
    order: list[str] = []
    async with Client(build_server(app=app)) as c:
        started = anyio.Event()

        async def triage_big() -> None:
            started.set()
            r = await c.call_tool("triage_log", {"text": big})
            assert r.structured_content is not None and r.structured_content["primary"] == "healthy"
            order.append("triage")

        async def quick() -> None:
            await started.wait()
            r = await c.call_tool("gotcha_lookup", {"text": "CUDA out of memory"})
            assert not r.is_error
            order.append("lookup")

        async with anyio.create_task_group() as tg:
            tg.start_soon(triage_big)
            tg.start_soon(quick)
    assert order == ["lookup", "triage"]


def test_the_triage_verb_prints_a_report_for_people_by_default(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_text(OOM_LOG)
    done = _cli(str(log))
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert out.startswith("cuda_oom  (confidence 0.")
    assert "cause: cuda_oom [error]" in out
    assert "  ```\n  torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB" in out
    assert "next step: Lower the micro-batch" in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)
    healthy = tmp_path / "ok.log"
    healthy.write_text(HEALTHY_LOG)
    ok = _cli(str(healthy))
    assert ok.returncode == 0 and ok.stdout.startswith("healthy")


def test_the_triage_help_documents_the_exit_codes() -> None:
    done = _cli("--help")
    assert done.returncode == 0
    assert "exit codes:" in done.stdout
    for code in ("0  the log looks healthy", "1  a problem was found", "2  usage error"):
        assert code in done.stdout
