"""The form channel for job_cancel (the default when the client declares elicitation), the explicit unattended
mode, and the state dir's permissions."""
# ruff: noqa: F811  (fixtures imported from tests.teardown_helpers are redefined as parameters)

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

from mcp_gpu import totp
from mcp_gpu.app import App
from mcp_gpu.config import UNATTENDED_PHRASE, Settings
from mcp_gpu.errors import ConfigError
from mcp_gpu.models import JobState
from mcp_gpu.store import jobs as jobstore
from tests.fake_providers import FakeCloud
from tests.security.human_gate_helpers import Human, agent, cli, data, executed, sleeper, text
from tests.teardown_helpers import IID, Box, box, cloud, destroys  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_job_cancel_asks_the_human_in_a_form_and_cancels_on_the_typed_name(
        app: App, runs: Path, tmp_path: Path, sock: str, mode: str) -> None:
    job = await sleeper(app, runs, tmp_path, sock)
    human = Human("accept", job_name="wrong-name")
    async with agent(app, human=human, mode=mode) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": job.job_id}))
        assert not human.asked  # the first call never acts and never asks
        assert any("form" in step for step in first["next_steps"])
        r = await c.call_tool("job_cancel", {"job_id": job.job_id, "token": first["token"]})
        assert r.is_error and "does not match" in text(r)
        assert jobstore.get(app.store, job.job_id).state is JobState.running
        human.content["job_name"] = "victim"
        done = data(await c.call_tool("job_cancel", {"job_id": job.job_id, "token": first["token"]}))
    assert done["cancelled"] and done["confirmed_via"] == "elicitation"
    assert "cancel victim on local" in human.asked[0] and "run directory" in human.asked[0]


@pytest.mark.parametrize("answer", ["decline", "cancel"])
async def test_a_declined_cancel_form_is_final(app: App, runs: Path, tmp_path: Path, sock: str, answer: str) -> None:
    job = await sleeper(app, runs, tmp_path, sock)
    async with agent(app, human=Human(answer)) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": job.job_id}))
        r = data(await c.call_tool("job_cancel", {"job_id": job.job_id, "token": first["token"]}))
        assert r["declined"] and not r["cancelled"]
        again = await c.call_tool("job_cancel", {"job_id": job.job_id, "token": first["token"]})
        assert again.is_error and "decline is final" in text(again)
    assert jobstore.get(app.store, job.job_id).state is JobState.running and executed(app) == []


# ---------------------------------------------------------------- unattended


def test_unattended_is_off_by_default_and_only_the_exact_phrase_turns_it_on(monkeypatch: pytest.MonkeyPatch,
                                                                              tmp_path: Path) -> None:
    monkeypatch.delenv("MCP_GPU_UNATTENDED", raising=False)
    assert Settings.from_env().unattended is False
    for bad in ("1", "true", "yes", UNATTENDED_PHRASE.upper()):
        monkeypatch.setenv("MCP_GPU_UNATTENDED", bad)
        with pytest.raises(ConfigError, match="MCP_GPU_UNATTENDED"):
            Settings.from_env()
    res = cli(tmp_path / "state", "serve", extra_env={"MCP_GPU_UNATTENDED": "1"})
    assert res.returncode == 2 and "MCP_GPU_UNATTENDED" in res.stderr
    monkeypatch.setenv("MCP_GPU_UNATTENDED", UNATTENDED_PHRASE)
    assert Settings.from_env().unattended is True


async def test_unattended_mode_completes_on_the_second_call_and_says_so_every_time(
        box: Box, cloud: FakeCloud) -> None:
    box.app.settings = dataclasses.replace(box.app.settings, unattended=True)
    async with agent(box.app) as c:
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "ci"}))
        assert s["unattended"] and "UNATTENDED MODE IS ON" in s["summary"][0]
        assert destroys(cloud) == []  # the first call never acts, even unattended
        done = data(await c.call_tool("confirm_teardown", {"token": s["token"]}))
    assert done["status"] == "done" and done["confirmed_via"] == "unattended"
    assert any("UNATTENDED MODE IS ON" in w for w in done["warnings"])
    assert destroys(cloud) == [f"DELETE /api/v0/instances/{IID}/"]


async def test_unattended_job_cancel_still_takes_two_calls_and_totp_still_applies(
        app: App, runs: Path, tmp_path: Path, sock: str) -> None:
    secret = totp.enrol(app.settings.home)
    app.settings = dataclasses.replace(app.settings, unattended=True, confirm_mode="totp")
    job = await sleeper(app, runs, tmp_path, sock)
    async with agent(app) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": job.job_id}))
        assert first["unattended"] and "UNATTENDED MODE IS ON" in first["message"] and not first["cancelled"]
        r = await c.call_tool("job_cancel", {"job_id": job.job_id, "token": first["token"]})
        assert r.is_error and "authenticator" in text(r)
        code = totp.code_at(secret, int(time.time() // totp.STEP_S))
        done = data(await c.call_tool("job_cancel", {"job_id": job.job_id, "token": first["token"], "code": code}))
    assert done["cancelled"] and done["confirmed_via"] == "unattended"


# ---------------------------------------------------------------- the state dir


def test_a_loose_state_dir_is_tightened_to_0700(tmp_path: Path) -> None:
    home = tmp_path / "state"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    Settings(home=home).ensure_home()
    assert oct(home.stat().st_mode & 0o777) == "0o700"
