"""The MCP surface: tools listed with schemas and annotations, errors as isError results, a real stdio server."""

from __future__ import annotations

import os
import sys

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_gpu.app import App
from mcp_gpu.server import build_server
from tests.sshd import Sshd

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)  # 2026-07-28 and 2025-11-25


async def test_audit_env_is_listed_read_only_with_an_output_schema(app: App, mode: str) -> None:
    async with Client(build_server(app=app), mode=mode) as c:  # type: ignore[arg-type]
        tools = {t.name: t for t in (await c.list_tools()).tools}
        t = tools["audit_env"]
        assert t.annotations is not None and t.annotations.read_only_hint is True
        assert t.annotations.destructive_hint is False
        assert t.output_schema is not None
        assert {"verdict", "summary", "findings", "gpus", "disks"} <= set(t.output_schema["properties"])
        assert "host" in t.input_schema["required"]


async def test_audit_env_over_ssh_returns_structured_findings(ssh_app: App, sshd: Sshd, mode: str) -> None:
    sshd.set_gpu("ecc")
    async with Client(build_server(app=ssh_app), mode=mode) as c:  # type: ignore[arg-type]
        r = await c.call_tool("audit_env", {"host": "testhost"})
        assert not r.is_error
        s = r.structured_content
        assert s is not None and s["verdict"] == "fail"
        assert any(f["class"] == "cuda_device_error" and f["gotcha"] == "U22" for f in s["findings"])


async def test_unknown_host_is_an_error_result_with_a_hint_not_a_traceback(app: App) -> None:
    async with Client(build_server(app=app)) as c:
        r = await c.call_tool("audit_env", {"host": "no-such-alias.invalid"})
        assert r.is_error
        text = r.content[0].text  # type: ignore[union-attr]
        assert "[connect]" in text and "Hint:" in text and "Traceback" not in text


async def test_unreachable_port_is_an_error_result(app: App) -> None:
    from tests.sshd import free_port

    async with Client(build_server(app=app)) as c:
        r = await c.call_tool("audit_env", {"host": f"root@127.0.0.1:{free_port()}"})
        assert r.is_error and "refused" in r.content[0].text  # type: ignore[union-attr]
    assert app.store.query("SELECT count(*) AS n FROM audits")[0]["n"] == 0


async def test_non_numeric_argument_is_rejected_by_validation(app: App) -> None:
    async with Client(build_server(app=app)) as c:
        r = await c.call_tool("audit_env", {"host": "local", "checkpoint_gb": "lots"})
        assert r.is_error and "checkpoint_gb" in r.content[0].text  # type: ignore[union-attr]


async def test_register_host_then_audit_by_its_name(ssh_app: App, sshd: Sshd) -> None:
    async with Client(build_server(app=ssh_app)) as c:
        r = await c.call_tool("register_host", {"name": "box1", "target": "testhost", "instance_id": "pod-123"})
        assert not r.is_error and r.structured_content["instance_id"] == "pod-123"  # type: ignore[index]
        a = await c.call_tool("audit_env", {"host": "box1"})
        assert not a.is_error and a.structured_content["host"] == "box1"  # type: ignore[index]
        bad = await c.call_tool("register_host", {"name": "x; rm -rf /", "target": "testhost"})
        assert bad.is_error and "invalid host name" in bad.content[0].text  # type: ignore[union-attr]


async def test_real_stdio_server_answers_audit_of_local(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = dict(os.environ, MCP_GPU_HOME=str(tmp_path / "state"))
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_gpu", "serve"], env=env)
    async with Client(params) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "audit_env" in names
        r = await c.call_tool("audit_env", {"host": "local"})
        assert not r.is_error
        assert r.structured_content is not None and r.structured_content["host"] == "local"


async def test_job_resource_shows_the_registry_record_and_unknown_ids_are_not_found(app: App, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from mcp import MCPError

    from mcp_gpu.models import JobRecord, JobState, iso
    from mcp_gpu.store import jobs as jobs_repo

    now = iso()
    jobs_repo.insert(app.store, JobRecord(id="job_0123456789", host="local", name="r1", backend="tmux",
                                          state=JobState.running, command="python train.py\n", workdir=str(tmp_path),
                                          run_dir=str(tmp_path / "run"), created_at=now, updated_at=now))
    async with Client(build_server(app=app)) as c:
        templates = [t.uri_template for t in (await c.list_resource_templates()).resource_templates]
        assert "gpu://jobs/{job_id}" in templates
        res = await c.read_resource("gpu://jobs/job_0123456789")
        body = json.loads(res.contents[0].text)  # type: ignore[union-attr]
        assert body["name"] == "r1" and body["state"] == "running"
        with pytest.raises(MCPError):
            await c.read_resource("gpu://jobs/job_nope")
