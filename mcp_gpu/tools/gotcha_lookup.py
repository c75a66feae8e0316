"""gotcha_lookup: paste an error line or a symptom, get the catalogue entries that explain it, with fixes."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from mcp_gpu.gotchas import LookupResult, lookup
from mcp_gpu.tools._base import LOCAL_READ_ONLY, gpu_tool


def register(server: MCPServer) -> None:
    @server.tool(title="Look up a known failure", annotations=LOCAL_READ_ONLY)
    @gpu_tool
    async def gotcha_lookup(
        text: Annotated[str, Field(description="an error line, a log tail, or a symptom in words", max_length=20_000)],
        limit: Annotated[int, Field(ge=1, le=20, description="most entries to return")] = 5,
        platform: Annotated[str | None, Field(description="profile name (e.g. 'autodl') to favour its entries")] = None,
    ) -> LookupResult:
        """Match text against the gotcha catalogue: exact signals (error strings, regexes) rank first, then
        shared words. `confident` is true only when an exact signal matched; otherwise treat matches as
        suggestions. Apply the entry's `fix`, never a blind retry."""
        # matching runs on a worker thread so that a long text never stalls other calls
        return await anyio.to_thread.run_sync(partial(lookup, text, limit=limit, platform=platform))
