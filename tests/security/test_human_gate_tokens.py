"""Tokens are handles, not permissions, and they fail closed: forged, replayed, expired, cross-target, issued by
another process (a restarted server), and two confirmations racing for one approval."""
# ruff: noqa: F811  (fixtures imported from tests.teardown_helpers are redefined as parameters)

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_gpu.app import App
from mcp_gpu.confirm import Confirmer
from mcp_gpu.lifecycle.teardown import request_teardown
from tests.fake_providers import FakeCloud
from tests.security.human_gate_helpers import Human, agent, data, executed, sleeper, text
from tests.teardown_helpers import IID, Box, box, cloud, destroys, human_approves  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


def _forge(token: str, **change: Any) -> str:
    b64, mac = token.split(".", 1)
    body = json.loads(base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)))
    body.update(change)
    raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=") + "." + mac


async def test_a_forged_token_is_refused(box: Box, cloud: FakeCloud) -> None:
    async with agent(box.app, human=Human("accept", instance_id=IID)) as c:
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        for forged in (_forge(s["token"], e=4_000_000_000), _forge(s["token"], t=f"other|vastai|{IID}"),
                       "not-a-token", s["token"][:-4] + "0000"):
            r = await c.call_tool("confirm_teardown", {"token": forged})
            assert r.is_error and "not a valid teardown token" in text(r)
    assert destroys(cloud) == []


async def test_a_replayed_token_acts_once(box: Box, cloud: FakeCloud) -> None:
    async with agent(box.app, human=Human("accept", instance_id=IID)) as c:
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        assert data(await c.call_tool("confirm_teardown", {"token": s["token"]}))["status"] == "done"
        cloud.add(IID)
        r = await c.call_tool("confirm_teardown", {"token": s["token"]})
    assert r.is_error and "already used" in text(r)
    assert destroys(cloud) == [f"DELETE /api/v0/instances/{IID}/"]


async def test_an_expired_token_is_refused_even_after_an_approval_attempt(box: Box, cloud: FakeCloud) -> None:
    req = await request_teardown(box.app, "box", reason="done", ttl_s=-5)
    with pytest.raises(Exception, match="expired"):
        human_approves(box.app, req.request_id, req.phrase)
    async with agent(box.app, human=Human("accept", instance_id=IID)) as c:
        r = await c.call_tool("confirm_teardown", {"token": req.token})
    assert r.is_error and "expired" in text(r) and destroys(cloud) == []


async def test_a_token_works_only_for_its_own_target(app: App, runs: Path, tmp_path: Path, sock: str) -> None:
    async with agent(app, human=Human("accept", job_name="job-b", instance_id="local")) as c:
        td = data(await c.call_tool("request_teardown", {"host": "local", "reason": "x"}))  # before any job runs
        a = await sleeper(app, runs, tmp_path, sock, "job-a")
        b = await sleeper(app, runs, tmp_path, sock, "job-b")
        ta = data(await c.call_tool("job_cancel", {"job_id": a.job_id}))
        human_approves(app, ta["request_id"], ta["phrase"])  # the human approved cancelling A only
        r = await c.call_tool("job_cancel", {"job_id": b.job_id, "token": ta["token"]})
        assert r.is_error and "not `cancel" in text(r)
        r = await c.call_tool("confirm_teardown", {"token": ta["token"]})  # a cancel token for a teardown
        assert r.is_error and "not a valid teardown token" in text(r)
        r = await c.call_tool("job_cancel", {"job_id": a.job_id, "token": td["token"]})  # and the other way
        assert r.is_error
    assert executed(app) == []


async def test_a_token_from_another_server_process_is_refused(box: Box, cloud: FakeCloud) -> None:
    """The HMAC key lives in the process: a restarted server (another Confirmer) never honours an old token."""
    other = Confirmer(box.app.store)
    ch = other.issue("teardown:destroy", f"box|vastai|{IID}", f"destroy vastai {IID}", kind="teardown", expect=IID)
    human_approves(box.app, ch.request_id, ch.phrase)  # even with a real approval behind it
    async with agent(box.app) as c:
        r = await c.call_tool("confirm_teardown", {"token": ch.token})
    assert r.is_error and "not a valid teardown token" in text(r) and destroys(cloud) == []
    assert not (box.app.settings.home / "confirm.key").exists()  # nothing to steal on disk


async def test_two_confirmations_racing_for_one_approval_act_once(box: Box, cloud: FakeCloud) -> None:
    async with agent(box.app) as c:
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        human_approves(box.app, s["request_id"], s["phrase"])
        results: list[Any] = []

        async def confirm() -> None:
            results.append(await c.call_tool("confirm_teardown", {"token": s["token"]}))

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(confirm)
    done = [r for r in results if not r.is_error and (r.structured_content or {}).get("status") == "done"]
    assert len(done) == 1 and all("already used" in text(r) for r in results if r.is_error)
    assert destroys(cloud) == [f"DELETE /api/v0/instances/{IID}/"]
