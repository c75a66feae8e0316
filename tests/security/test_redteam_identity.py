"""Red team: a second alias for the SAME billing identity spelled differently (leading zeros in a numeric id,
upper case, platform in capitals) must be grouped with the first, so the gate still sees the first alias's jobs.
The provider reads `0123` as instance 123."""
# ruff: noqa: F811  (fixtures imported from tests.teardown_helpers are redefined as parameters)

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from mcp_gpu.server import build_server
from tests.fake_providers import FakeCloud
from tests.teardown_helpers import IID, Box, box, cloud, destroys  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


def text(r: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in r.content)


@pytest.mark.parametrize("iid", ["0" + IID, "00" + IID])
async def test_an_alias_with_leading_zeros_is_the_same_instance(box: Box, cloud: FakeCloud, iid: str) -> None:
    """vast.ai's API reads 01234567 as instance 1234567: an alias registered so must count as the same machine
    (every alias's jobs and machine are gated), not as a machine of its own with nothing on it."""
    box.verify(box.job())
    async with Client(build_server(app=box.app)) as c:
        reg = await c.call_tool("register_host", {"name": "box2", "target": "testhost", "platform": "vastai",
                                                  "instance_id": iid})
        assert not reg.is_error, text(reg)
        r = await c.call_tool("request_teardown", {"host": "box", "reason": "done"})
    assert not r.is_error, text(r)
    assert "box2" in r.structured_content["aliases"]  # type: ignore[index]
    assert destroys(cloud) == []


async def test_a_platform_name_in_capitals_is_refused(box: Box) -> None:
    async with Client(build_server(app=box.app)) as c:
        reg = await c.call_tool("register_host", {"name": "box3", "target": "testhost", "platform": "VastAI",
                                                  "instance_id": IID})
    assert reg.is_error
