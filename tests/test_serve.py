"""`mcp-gpu serve` for people: loopback addresses (IPv6 in brackets too), the /mcp URL, a notice in a terminal,
a clear error for a port in use, and one log format on stderr (uvicorn's lines are JSON like ours)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mcp_gpu.cli.serve import parse_http, url_of
from mcp_gpu.errors import ConfigError
from tests.sshd import free_port

CLI = [sys.executable, "-m", "mcp_gpu"]


@pytest.mark.parametrize(("text", "host", "port"), [
    ("[::1]:8765", "::1", 8765), ("::1:8765", "::1", 8765), ("127.0.0.1:8765", "127.0.0.1", 8765),
    ("localhost:9000", "localhost", 9000), (":8765", "127.0.0.1", 8765), ("127.0.0.2:1", "127.0.0.2", 1),
])
def test_loopback_addresses_are_accepted(text: str, host: str, port: int) -> None:
    assert parse_http(text) == (host, port)


@pytest.mark.parametrize("text", ["0.0.0.0:8765", "[::]:8765", "example.com:80", "10.0.0.1:8765", "[::1]",
                                  "[::1:8765", "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1"])
def test_other_addresses_are_refused_with_an_example(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_http(text)
    assert "--http" in (info.value.hint or "")


def test_the_url_names_the_mcp_path() -> None:
    assert url_of("::1", 8765) == "http://[::1]:8765/mcp"
    assert url_of("127.0.0.1", 8765) == "http://127.0.0.1:8765/mcp"


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "MCP_GPU_HOME": str(tmp_path / "state")}


def test_a_port_in_use_is_named(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([*CLI, "serve", "--http", f"127.0.0.1:{port}"], capture_output=True, text=True,
                           env=_env(tmp_path), timeout=60, check=False)
    assert r.returncode == 2
    assert f"port {port}" in r.stderr and "already in use" in r.stderr and "Errno" not in r.stderr
    assert "--http 127.0.0.1:" in r.stderr  # what to do instead


def _wait_listening(port: int, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the server did not listen")


def test_http_log_is_one_format_and_names_the_url(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen([*CLI, "serve", "--http", f"127.0.0.1:{port}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
    try:
        _wait_listening(port, proc)
        with pytest.raises(urllib.error.HTTPError):  # any answer will do: the request gets an access log line
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert out == ""  # stdout is never used
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert not [ln for ln in lines if re.match(r"^(INFO|WARNING|ERROR|DEBUG):\s", ln)], err  # no plain uvicorn line
    events = [json.loads(ln) for ln in lines if ln.startswith("{")]
    assert any(e.get("logger", "").startswith("uvicorn") for e in events), err
    assert any(e.get("event") == "http_serving" and e.get("url") == f"http://127.0.0.1:{port}/mcp" for e in events)


def _read_until(fd: int, needle: bytes, timeout: float = 60) -> bytes:
    buf = b""
    deadline = time.monotonic() + timeout
    while needle not in buf and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                buf += os.read(fd, 4096)
            except OSError:
                break
    return buf


def test_serve_in_a_terminal_says_what_it_is(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen([*CLI, "serve"], stdin=slave, stdout=subprocess.PIPE, stderr=slave, env=_env(tmp_path))
    os.close(slave)
    try:
        text = _read_until(master, b"Ctrl-C").decode()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        os.close(master)
    assert "speaking MCP" in text and "stdin/stdout" in text and "claude mcp add mcp-gpu -- mcp-gpu serve" in text


def test_serve_under_a_client_prints_no_notice(tmp_path: Path) -> None:
    # a client starts it with pipes: the first bytes it reads must be protocol, and stderr stays quiet
    proc = subprocess.Popen([*CLI, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(tmp_path))
    _, err = proc.communicate(b"", timeout=60)  # EOF on stdin ends the stdio server
    assert b"speaking MCP" not in err
