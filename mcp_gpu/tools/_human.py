"""What the destructive tools share about the client: can it show the human a form?"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context


def client_has_form(ctx: Context[Any, Any]) -> bool:
    """The client declared form elicitation (a bare `elicitation: {}` counts, as the SDK's own check does)."""
    try:
        caps = ctx.client_capabilities
    except (AttributeError, LookupError, RuntimeError):
        return False
    el = caps.elicitation if caps is not None else None
    return el is not None and (el.form is not None or el.url is None)
