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


async def _app(settings: Settings) -> AsyncIterator[App]:
    a = App.open(settings)
    try:
        yield a
    finally:
        await a.aclose()


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[App]:
    """An App on this machine (`local`) with an isolated state dir."""
    async for a in _app(settings):
        yield a


@pytest.fixture
def is_root() -> Iterator[bool]:
    import os

    yield os.geteuid() == 0


def _need_sshd() -> None:
    import shutil

    if not (shutil.which("sshd") or Path("/usr/sbin/sshd").exists()):
        pytest.skip("OpenSSH sshd is not installed (the README's test command installs it)")


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The session's real sshd on loopback, reached as `testhost` through its own ssh_config."""
    from tests.sshd import Sshd

    _need_sshd()
    server = Sshd(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def ssh_settings(home: Path, sshd: object, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings whose ssh_config knows `testhost`; the env var makes CLI subprocesses see it too."""
    cfg = str(sshd.ssh_config)  # type: ignore[attr-defined]
    monkeypatch.setenv("MCP_GPU_SSH_CONFIG", cfg)
    sshd.set_gpu("healthy")  # type: ignore[attr-defined]
    return Settings(home=home, ssh_config=(cfg,), connect_timeout=5, command_timeout=30, keepalive=2)


@pytest.fixture
async def ssh_app(ssh_settings: Settings) -> AsyncIterator[App]:
    """An App whose pool reaches the session's sshd as `testhost`."""
    async for a in _app(ssh_settings):
        yield a


@pytest.fixture
def sock() -> Iterator[str]:
    """A private tmux socket for the test's jobs, killed afterwards."""
    from tests.jobhelpers import tmux_socket

    with tmux_socket() as s:
        yield s


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Path]:
    """A private run root for the test's jobs; every job group started under it is killed afterwards."""
    from tests.jobhelpers import kill_runs

    root = tmp_path / "runs"
    yield root
    kill_runs(root)
