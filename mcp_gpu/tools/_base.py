"""What every tool shares: reaching the App, and turning our errors into `isError` results with a hint."""

from __future__ import annotations

import functools
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

from mcp_gpu import log
from mcp_gpu.app import App
from mcp_gpu.errors import GpuError

P = ParamSpec("P")
R = TypeVar("R")
_log = log.get("mcp_gpu.tools")

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True)
LOCAL_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                  open_world_hint=False)
CREATES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True)
# writes local state and may start remote work (patrol's opt-in relaunch; smoke_cpu runs a command), never destroys
ACTS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)
OVERWRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                              open_world_hint=True)


def app_of(ctx: Context[Any, Any]) -> App:
    app = ctx.request_context.lifespan_context
    assert isinstance(app, App)
    return app


def error_text(err: GpuError) -> str:
    text = f"[{err.code}] {err.message}"
    if err.hint:
        text += f"\nHint: {err.hint}"
    if err.is_retryable():
        text += "\n(retryable)"
    return text


def redacted(result: R) -> R:
    """The answer with every secret value the server knows removed (log.scrub): structured output and the text
    the SDK renders from it. Untouched (same object) when nothing matched, the common case."""
    if isinstance(result, str):
        return log.scrub(result)  # type: ignore[return-value]
    if isinstance(result, BaseModel):
        text = result.model_dump_json(by_alias=True)
        clean = log.scrub(text)
        if clean != text:
            return type(result).model_validate(log.scrub_data(result.model_dump(mode="json", by_alias=True)))
    return result


def gpu_tool(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Wrap a tool body: GpuError → isError with code and hint; anything else → isError with an event id
    (the traceback stays in the server log, never in front of the model)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return redacted(await fn(*args, **kwargs))
        except GpuError as err:
            _log.info("tool_error", tool=fn.__name__, code=err.code, message=err.message)
            raise ToolError(log.scrub(error_text(err))) from err
        except ToolError:
            raise
        except Exception as exc:
            event = secrets.token_hex(4)
            _log.exception("tool_crash", tool=fn.__name__, event_id=event)
            raise ToolError(f"[internal] unexpected failure (event {event}); the server log has the details. "
                            f"Nothing destructive was done.") from exc

    return wrapper
