"""Profiles and gotchas as MCP resources, prompts with arguments, and gotcha_lookup, through an in-memory client."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from mcp_gpu.app import App
from mcp_gpu.server import build_server

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parent.parent


def _text(result: Any) -> str:
    return str(result.contents[0].text)


async def test_profile_and_gotcha_resources_and_templates_are_listed(app: App) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app=app)) as c:
            uris = {str(r.uri) for r in (await c.list_resources()).resources}
            templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
    assert {"gpu://profiles", "gpu://gotchas"} <= uris
    assert {"gpu://profiles/{name}", "gpu://gotchas/{gotcha_id}"} <= templates


async def test_reading_a_profile_gives_its_head_as_json_then_its_notes(app: App) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app=app)) as c:
            index = json.loads(_text(await c.read_resource("gpu://profiles")))
            runpod = _text(await c.read_resource("gpu://profiles/runpod"))
    assert {p["name"] for p in index} >= {"runpod", "autodl", "slurm"}
    head = json.loads(re.search(r"```json\n(.*?)\n```", runpod, re.S).group(1))  # type: ignore[union-attr]
    assert head["meter_stop"] == {"verb": "terminate", "irreversible": True, "note": head["meter_stop"]["note"],
                                  "verified": "2026-06"}
    assert "RUNPOD_API_KEY" in head["credentials"]["env"]
    assert "## Spot and resume" in runpod


async def test_reading_gotchas_gives_a_compact_index_and_full_entries(app: App) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app=app)) as c:
            index = json.loads(_text(await c.read_resource("gpu://gotchas")))
            entry = json.loads(_text(await c.read_resource("gpu://gotchas/checkpoint.C2")))
            bare = json.loads(_text(await c.read_resource("gpu://gotchas/M17")))
    assert index["count"] == len(index["entries"]) and any(e.startswith("universal.U9 [") for e in index["entries"])
    assert entry["id"] == "checkpoint.C2" and entry["class"] == "checkpoint_corrupt"
    assert any("PytorchStreamReader" in s["value"] for s in entry["signals"])
    assert bare["id"] == "memory.M17"


async def test_unknown_profile_or_gotcha_is_a_clear_resource_error(app: App) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app=app)) as c:
            with pytest.raises(MCPError, match=r"(?s)no platform profile 'nimbus'.*known profiles: .*runpod"):
                await c.read_resource("gpu://profiles/nimbus")
            with pytest.raises(MCPError, match=r"no gotcha 'universal\.U999'"):
                await c.read_resource("gpu://gotchas/universal.U999")


async def test_a_corrupted_profile_reads_as_an_error_naming_file_and_field(
        app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "profiles"
    shutil.copytree(REPO / "profiles", d)
    (d / "lambda.md").write_text((d / "lambda.md").read_text().replace('method = "api"', 'method = "pigeon"'))
    monkeypatch.setenv("MCP_GPU_PROFILES_DIR", str(d))
    with anyio.fail_after(10):
        async with Client(build_server(app=app)) as c:
            with pytest.raises(MCPError, match=r"lambda\.md: field teardown\.method"):
                await c.read_resource("gpu://profiles/lambda")


async def test_prompts_are_listed_with_their_arguments(app: App) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app=app)) as c:
            listed = {p.name: p for p in (await c.list_prompts()).prompts}
    assert set(listed) >= {"patrol_loop", "launch_checklist", "triage_failure", "teardown_checklist"}
    args = {a.name: a.required for a in listed["triage_failure"].arguments or []}
    assert args == {"job_id": True}
    launch = {a.name: a.required for a in listed["launch_checklist"].arguments or []}
    assert launch == {"host": True, "command": True, "platform": False}
    assert listed["patrol_loop"].title and listed["patrol_loop"].description


async def test_a_prompt_substitutes_its_arguments_and_defaults(app: App) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app=app)) as c:
            triage = await c.get_prompt("triage_failure", {"job_id": "job-7f3a"})
            launch = await c.get_prompt("launch_checklist", {"host": "gpu-1", "command": "python train.py"})
            patrol = await c.get_prompt("patrol_loop", {})
    text = triage.messages[0].content.text  # type: ignore[union-attr]
    assert "`job-7f3a`" in text and "{job_id}" not in text and "gotcha_lookup" in text
    launch_text = launch.messages[0].content.text  # type: ignore[union-attr]
    assert "audit_env" in launch_text and "smoke_cpu" in launch_text and "launch_detached" in launch_text
    assert "platform: unknown" in launch_text
    patrol_text = patrol.messages[0].content.text  # type: ignore[union-attr]
    assert "every job not yet reported finished" in patrol_text and "Never tear down" in patrol_text
    assert "Call `wait`" in patrol_text and "changed: false" in patrol_text


async def test_a_prompt_without_its_required_argument_is_refused(app: App) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app=app)) as c:
            with pytest.raises(MCPError, match="job_id"):
                await c.get_prompt("triage_failure", {})


async def test_gotcha_lookup_tool_is_read_only_and_returns_structured_matches(app: App) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app=app)) as c:
            tool = {t.name: t for t in (await c.list_tools()).tools}["gotcha_lookup"]
            hit = await c.call_tool("gotcha_lookup", {"text": "OSError: [Errno 28] No space left on device"})
            calm = await c.call_tool("gotcha_lookup", {"text": "step 100 loss 0.23 lr 1e-4"})
    assert tool.annotations is not None and tool.annotations.read_only_hint and not tool.annotations.destructive_hint
    assert tool.output_schema is not None and "matches" in tool.output_schema["properties"]
    assert not hit.is_error and hit.structured_content is not None
    assert hit.structured_content["confident"] and hit.structured_content["matches"][0]["id"] == "universal.U6"
    assert calm.structured_content == {"query": "step 100 loss 0.23 lr 1e-4", "confident": False, "matches": []}
