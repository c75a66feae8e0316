"""Shared fixtures: asyncio backend, an isolated state dir and App, and the real sshd on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mcp_gpu.app import App
from mcp_gpu.config import Settings

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # asyncssh runs on asyncio only


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated state dir; MCP_GPU_HOME points at it so CLI subprocesses share it."""
    h = tmp_path / "state"
    monkeypatch.setenv("MCP_GPU_HOME", str(h))
    return h


@pytest.fixture
def settings(home: Path) -> Settings:
    return Settings(home=home, connect_timeout=5, command_timeout=30, keepalive=2)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[App]:
    a = App.open(settings)
    try:
        yield a
    finally:
        await a.aclose()


@pytest.fixture
def is_root() -> Iterator[bool]:
    import os

    yield os.geteuid() == 0
