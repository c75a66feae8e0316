"""structlog to stderr only (stdout carries the MCP protocol on stdio), with secrets redacted."""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections.abc import MutableMapping
from typing import Any

import structlog

_SECRET_KEY = re.compile(r"(token|secret|passw|api[_-]?key|authorization|credential|cookie|private)", re.I)
_BEARER = re.compile(r"(?i)(bearer\s+|api[_-]?key[=:]\s*|token[=:]\s*)[A-Za-z0-9._~+/=-]{6,}")
_known: set[str] = set()
_lock = threading.Lock()
REDACTED = "[redacted]"


# Environment variables whose VALUES are secrets the server knows (provider keys, HF/W&B tokens, passwords...).
SECRET_ENV_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|_KEY$|CREDENTIAL|AUTH|COOKIE|PRIVATE", re.I)
MIN_ENV_SECRET = 8  # shorter values ("1", "true") would redact ordinary words


def env_secrets() -> list[str]:
    """Values of the server's environment variables whose names say they are secret (read fresh each time:
    a key exported after start is covered too)."""
    return [v for k, v in os.environ.items() if len(v) >= MIN_ENV_SECRET and SECRET_ENV_NAME.search(k)]


def known_secrets() -> list[str]:
    """Every secret value the server knows: registered ones and those in its environment, longest first."""
    with _lock:
        known = set(_known)
    known.update(env_secrets())
    return sorted(known, key=len, reverse=True)


def register_secret(value: str) -> None:
    """Remember a secret value so it is scrubbed wherever it would otherwise appear in a log line."""
    if value and len(value) >= 4:
        with _lock:
            _known.add(value)


def scrub(text: str) -> str:
    """Remove known secret values (registered, or in the server's environment) and bearer-like tokens."""
    for v in known_secrets():
        if v in text:
            text = text.replace(v, REDACTED)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


def scrub_data(value: Any) -> Any:
    """Every string inside a JSON-like value scrubbed (keys kept: they are field names, not secrets)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: scrub_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_data(v) for v in value]
    return value


def _scrub_value(key: str, value: Any) -> Any:
    if _SECRET_KEY.search(key):
        return REDACTED
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _scrub_value(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub_value(key + "[]", v) for v in value]
    return value


def redact(_logger: Any, _name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: secret-looking keys and known secret values never reach the sink."""
    for k in list(event_dict):
        if k in ("event", "level", "timestamp", "logger"):
            if isinstance(event_dict[k], str):
                event_dict[k] = scrub(event_dict[k])
            continue
        event_dict[k] = _scrub_value(k, event_dict[k])
    return event_dict


_configured = False


def configure(level: str = "info") -> None:
    """Point every logger (ours, the MCP SDK's, asyncssh's, uvicorn's) at one JSON sink on stderr.

    Call before the MCP server is built: its constructor calls logging.basicConfig, which does nothing
    once the root logger already has our handler.
    """
    global _configured
    lvl = getattr(logging, level.upper(), logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact,
    ]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, structlog.processors.JSONRenderer()],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(lvl)
    logging.getLogger("asyncssh").setLevel(logging.WARNING)  # asyncssh logs every channel at INFO
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        cache_logger_on_first_use=False,
    )
    _configured = True


def uvicorn_config(level: str = "info") -> dict[str, Any]:
    """uvicorn.Config arguments that keep its loggers on our JSON handler: without `log_config=None` uvicorn
    installs its own plain-text handlers (and `propagate=False`), so stderr would mix two formats."""
    return {"log_config": None, "log_level": level.lower()}


def get(name: str) -> Any:
    return structlog.get_logger(name)
