"""The form path: confirm_teardown / teardown_with_human ask the human directly (form elicitation) to type the
instance id; it is the default whenever the client declares form elicitation.

In-memory MCP clients with an elicitation callback, in both protocol eras (auto = 2026-07-28 InputRequiredResult,
legacy = 2025-11-25 elicitation/create). The fake vast.ai server says whether anything was destroyed.
"""
# ruff: noqa: F811  (fixtures imported from tests.teardown_helpers are redefined as parameters)

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitResult

from mcp_gpu.app import App
from mcp_gpu.server import build_server
from mcp_gpu.tools.register_host import register_host_record
from tests.fake_providers import FakeCloud
from tests.teardown_helpers import IID, cloud, destroys, events  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Human:
    """Plays the person in front of the client: answers each form with a fixed action and content."""

    def __init__(self, action: str, typed: str | None = None) -> None:
        self.action = action
        self.typed = typed
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(params.message)
        content = {"instance_id": self.typed} if self.action == "accept" else None
        return ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]


@pytest.fixture
def box(ssh_app: App, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> App:
    # no jobs; the gate still probes the machine itself (the loopback sshd), so keep its run roots the test's own
    monkeypatch.setenv("MCP_GPU_GATE_RUN_ROOTS", str(tmp_path / "runs"))
    register_host_record(ssh_app.store, "box", "testhost", "vastai", IID)
    return ssh_app


async def _token(c: Client) -> dict[str, Any]:
    r = await c.call_tool("request_teardown", {"host": "box", "reason": "finished"})
    assert not r.is_error, r.content
    assert r.structured_content is not None
    return dict(r.structured_content)


async def test_the_human_typing_the_right_instance_id_executes(box: App, cloud: FakeCloud, mode: str) -> None:
    human = Human("accept", IID)
    async with Client(build_server(app=box), mode=mode, elicitation_callback=human) as c:
        s = await _token(c)
        r = await c.call_tool("teardown_with_human", {"token": s["token"]})
    assert not r.is_error, r.content
    assert r.structured_content is not None and r.structured_content["status"] == "done"
    assert human.asked and f"destroy vastai {IID}" in human.asked[0] and "type the instance id" in human.asked[0]
    assert destroys(cloud) == [f"DELETE /api/v0/instances/{IID}/"]
    tail = events(box)[-3:]
    assert tail == ["confirmation_accepted", "teardown_confirmed", "teardown_executed"]
    detail = box.store.query("SELECT detail_json FROM audit_log WHERE event='teardown_confirmed'")[0]["detail_json"]
    assert '"via": "elicitation"' in detail


async def test_a_wrong_instance_id_is_refused_and_nothing_is_destroyed(box: App, cloud: FakeCloud, mode: str) -> None:
    async with Client(build_server(app=box), mode=mode, elicitation_callback=Human("accept", "7654321")) as c:
        s = await _token(c)
        r = await c.call_tool("teardown_with_human", {"token": s["token"]})
    assert r.is_error and "does not match" in r.content[0].text  # type: ignore[union-attr]
    assert destroys(cloud) == []
    assert events(box)[-1] == "confirmation_refused"


@pytest.mark.parametrize("answer", ["decline", "cancel"])
async def test_a_decline_is_final_and_burns_the_token(box: App, cloud: FakeCloud, mode: str, answer: str) -> None:
    async with Client(build_server(app=box), mode=mode, elicitation_callback=Human(answer)) as c:
        s = await _token(c)
        r = await c.call_tool("teardown_with_human", {"token": s["token"]})
        assert not r.is_error and r.structured_content is not None
        assert r.structured_content["status"] == "declined" and "void" in r.structured_content["message"]
        later = await c.call_tool("confirm_teardown", {"token": s["token"], "confirmation": s["phrase"]})
    assert later.is_error and "decline is final" in later.content[0].text  # type: ignore[union-attr]
    assert destroys(cloud) == []
    assert "teardown_declined" in events(box)
    row = box.store.query("SELECT detail_json FROM audit_log WHERE event='teardown_declined'")[0]
    assert f'"outcome": "{answer}"' in row["detail_json"]


async def test_a_client_without_form_elicitation_cannot_reach_the_tool_body(box: App, cloud: FakeCloud,
                                                                            mode: str) -> None:
    async with Client(build_server(app=box), mode=mode) as c:
        s = await _token(c)
        with pytest.raises(MCPError) as e:
            await c.call_tool("teardown_with_human", {"token": s["token"]})
        assert e.value.error.code == -32021
        echoed = await c.call_tool("confirm_teardown", {"token": s["token"], "confirmation": s["phrase"]})
        assert not echoed.is_error and echoed.structured_content is not None
        assert echoed.structured_content["status"] == "awaiting_human"  # the echoed phrase approves nothing
        assert f"mcp-gpu approve {s['request_id']}" in echoed.structured_content["message"]
    assert destroys(cloud) == []
    assert "teardown_declined" not in events(box) and "teardown_confirmed" not in events(box)


async def test_confirm_teardown_itself_asks_the_human_when_the_client_has_forms(box: App, cloud: FakeCloud,
                                                                                mode: str) -> None:
    human = Human("accept", IID)
    async with Client(build_server(app=box), mode=mode, elicitation_callback=human) as c:
        s = await _token(c)
        assert any("confirm_teardown" in step and "form" in step for step in s["next_steps"])
        r = await c.call_tool("confirm_teardown", {"token": s["token"]})
    assert not r.is_error and r.structured_content is not None, r.content
    assert r.structured_content["status"] == "done" and r.structured_content["confirmed_via"] == "elicitation"
    assert len(human.asked) == 1 and IID in human.asked[0] and "Lost:" in human.asked[0]
    assert destroys(cloud) == [f"DELETE /api/v0/instances/{IID}/"]


async def test_the_tools_carry_the_right_annotations(box: App) -> None:
    async with Client(build_server(app=box)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    req, conf, human = tools["request_teardown"], tools["confirm_teardown"], tools["teardown_with_human"]
    assert req.annotations is not None and req.annotations.read_only_hint is False
    assert req.annotations.destructive_hint is False
    assert conf.annotations is not None and conf.annotations.destructive_hint is True
    assert human.annotations is not None and human.annotations.destructive_hint is True
    assert set(human.input_schema["properties"]) == {"token"}
    assert set(conf.input_schema["properties"]) == {"token", "host", "code"}  # no field carries a human's words
    assert {"summary", "token", "phrase"} <= set(req.output_schema["properties"])  # type: ignore[index]
    assert {"status", "message"} <= set(conf.output_schema["properties"])  # type: ignore[index]
