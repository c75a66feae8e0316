"""Placeholder keys are caught: the example config sets none, the server refuses one at start, and a provider
refuses to send one, each naming the variable and never echoing the value."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_gpu.config import check_secret_env, placeholder_reason
from mcp_gpu.errors import ConfigError
from mcp_gpu.providers import API_KEY_ENV, get_provider

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("value", [
    "<your-runpod-key>", "your-key-here", "YOUR_API_KEY", "xxx", "XXXXXXXXXXXX", "changeme", "CHANGE_ME",
    "set-in-your-environment-not-here", "my runpod key", "", "  ", "${RUNPOD_API_KEY}", "sk-xxxxxxxxxxxxxxxx",
    "placeholder", "paste-your-key", "***", "key", "todo", "...",
])
def test_placeholders_are_recognised(value: str) -> None:
    assert placeholder_reason(value) is not None


def test_real_keys_are_never_called_placeholders() -> None:
    samples = ["rpa_" + secrets.token_urlsafe(30), secrets.token_hex(32), "sk-test-" + secrets.token_hex(16),
               "secret_" + secrets.token_urlsafe(24)]
    samples += [secrets.token_urlsafe(32) for _ in range(3000)] + [secrets.token_hex(20) for _ in range(3000)]
    flagged = [s for s in samples if placeholder_reason(s)]
    assert not flagged


def test_a_provider_refuses_a_placeholder_and_names_the_variable() -> None:
    value = "<paste your key here>"
    with pytest.raises(ConfigError) as info:
        get_provider("runpod", env={"RUNPOD_API_KEY": value})
    text = info.value.message + (info.value.hint or "")
    assert "RUNPOD_API_KEY" in text and value not in text


def test_check_secret_env_ignores_unset_and_real_values() -> None:
    check_secret_env(API_KEY_ENV.values(), {"RUNPOD_API_KEY": secrets.token_hex(24)})
    with pytest.raises(ConfigError, match="VAST_API_KEY"):
        check_secret_env(API_KEY_ENV.values(), {"VAST_API_KEY": "xxxxxxxx"})


def test_serve_refuses_to_start_with_a_placeholder_key(tmp_path: Path) -> None:
    env = {**os.environ, "MCP_GPU_HOME": str(tmp_path), "RUNPOD_API_KEY": "set-in-your-environment-not-here"}
    r = subprocess.run([sys.executable, "-m", "mcp_gpu", "serve"], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, env=env, timeout=60, check=False)
    assert r.returncode == 2 and "RUNPOD_API_KEY" in r.stderr and "placeholder" in r.stderr
    assert "set-in-your-environment-not-here" not in r.stderr and r.stdout == ""


def test_the_example_client_config_sets_no_key() -> None:
    cfg = json.loads((ROOT / "claude_desktop_config.example.json").read_text())
    env = cfg["mcpServers"]["mcp-gpu"].get("env", {})
    assert not set(env) & set(API_KEY_ENV.values())
    assert not [k for k in env if re.search(r"KEY|TOKEN|SECRET|PASSW", k, re.I)]
