"""Issue 10's attacks on the human gate (1, 5, 6, 8, 9), each tried as an agent would: through a real MCP client.

Each fails on the code before the human gate (the echoed phrase completed the act; `TOTP` fell back to the
token mode and wrong codes were unlimited; HTTP answered anyone; deleted audit rows went unnoticed; a piped phrase
was accepted) and passes now.
"""
# ruff: noqa: F811  (fixtures imported from tests.teardown_helpers are redefined as parameters)

from __future__ import annotations

import dataclasses
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_gpu import totp
from mcp_gpu.app import App
from mcp_gpu.config import Settings
from mcp_gpu.errors import ConfigError
from mcp_gpu.models import JobState
from mcp_gpu.store import jobs as jobstore
from tests.fake_providers import FakeCloud
from tests.security.human_gate_helpers import Human, agent, cli, data, executed, sleeper, text
from tests.sshd import free_port
from tests.teardown_helpers import IID, Box, box, cloud, destroys, events, run_on_pty  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# ---------------------------------------------------------------- attack 1: the agent confirms by itself


async def test_attack1_an_echoed_phrase_completes_no_teardown(box: Box, cloud: FakeCloud, mode: str) -> None:
    async with agent(box.app, mode=mode) as c:
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        assert f"mcp-gpu approve {s['request_id']}" in " ".join(s["next_steps"])
        r = data(await c.call_tool("confirm_teardown", {"token": s["token"], "confirmation": s["phrase"]}))
    assert r["status"] == "awaiting_human" and "nothing was done" in r["message"]
    assert destroys(cloud) == [] and executed(box.app) == []


async def test_attack1_an_echoed_phrase_cancels_no_job(app: App, runs: Path, tmp_path: Path, sock: str) -> None:
    job = await sleeper(app, runs, tmp_path, sock)
    async with agent(app) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": job.job_id}))
        again = data(await c.call_tool("job_cancel", {"job_id": job.job_id, "token": first["token"],
                                                      "confirmation": first["phrase"]}))
    assert not first["cancelled"] and again["awaiting_human"] and not again["cancelled"]
    assert jobstore.get(app.store, job.job_id).state is JobState.running and executed(app) == []


HUMANS: dict[str, Human | None] = {"no_elicitation": None, "declines": Human("decline"), "cancels": Human("cancel"),
                                   "types_wrong": Human("accept", instance_id="7654321", job_name="nope")}


@pytest.mark.parametrize("who", list(HUMANS))
async def test_no_sequence_of_mcp_calls_completes_a_teardown_without_a_human(box: Box, cloud: FakeCloud,
                                                                             who: str) -> None:
    human = HUMANS[who]
    async with agent(box.app, human=human) as c:
        tools = (await c.list_tools()).tools
        assert not [t.name for t in tools if "approve" in t.name]  # no tool can write an approval
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        tok = s["token"]
        tries: list[tuple[str, dict[str, Any]]] = [
            ("confirm_teardown", {"token": tok, "confirmation": s["phrase"]}),
            ("confirm_teardown", {"token": tok, "code": "123456"}),
            ("teardown_with_human", {"token": tok}),
            ("confirm_teardown", {"token": tok}),
            ("confirm_teardown", {"token": tok, "host": "box", "approved": True, "request_id": s["request_id"]}),
        ]
        s2 = data(await c.call_tool("request_teardown", {"host": "box", "reason": "again", "action": "destroy"}))
        tries += [("confirm_teardown", {"token": s2["token"], "confirmation": s2["phrase"]}),
                  ("teardown_with_human", {"token": s2["token"]}), ("confirm_teardown", {"token": s2["token"]}),
                  ("confirm_teardown", {"token": tok.split(".")[0] + "." + s2["token"].split(".")[1]})]
        for name, args in tries:
            try:
                r = await c.call_tool(name, args)
            except MCPError as err:  # teardown_with_human without form elicitation: -32021, the body never ran
                assert err.error.code == -32021
                continue
            assert r.is_error or (r.structured_content or {}).get("status") in ("awaiting_human", "declined")
    assert destroys(cloud) == [] and executed(box.app) == []
    assert box.app.store.query("SELECT count(*) AS n FROM approvals WHERE status IN ('approved','used')")[0]["n"] == 0


@pytest.mark.parametrize("who", list(HUMANS))
async def test_no_sequence_of_mcp_calls_cancels_a_job_without_a_human(app: App, runs: Path, tmp_path: Path,
                                                                      sock: str, who: str) -> None:
    job = await sleeper(app, runs, tmp_path, sock)
    async with agent(app, human=HUMANS[who]) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": job.job_id}))
        tok = first["token"]
        for args in ({"token": tok, "confirmation": first["phrase"]}, {"token": tok, "code": "123456"},
                     {"token": tok}, {"token": tok, "approved": True}, {"token": tok + "x"}):
            r = await c.call_tool("job_cancel", {"job_id": job.job_id, **args})
            assert r.is_error or not (r.structured_content or {}).get("cancelled")
        second = data(await c.call_tool("job_cancel", {"job_id": "victim"}))
        r = await c.call_tool("job_cancel", {"job_id": "victim", "token": second["token"],
                                             "confirmation": second["phrase"]})
        assert r.is_error or not (r.structured_content or {}).get("cancelled")
    assert jobstore.get(app.store, job.job_id).state is JobState.running and executed(app) == []


# ---------------------------------------------------------------- attack 5: TOTP


def test_attack5_confirm_mode_names_are_parsed_strictly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MCP_GPU_CONFIRM", "TOTP")
    assert Settings.from_env().confirm_mode == "totp"  # accepted case-insensitively, never silently weakened
    for bad in ("t0tp", "totp2", "yes", "off"):
        monkeypatch.setenv("MCP_GPU_CONFIRM", bad)
        with pytest.raises(ConfigError, match="not a confirmation mode"):
            Settings.from_env()
    res = cli(tmp_path / "state", "serve", extra_env={"MCP_GPU_CONFIRM": "TOTP-please"})
    assert res.returncode == 2 and "not a confirmation mode" in res.stderr  # the server does not start


def _wrong_codes(secret: str, n: int) -> list[str]:
    step = int(time.time() // totp.STEP_S)
    valid = {totp.code_at(secret, s) for s in range(step - 2, step + 3)}
    return [c for c in (f"{i:06d}" for i in range(100)) if c not in valid][:n]


async def test_attack5_wrong_codes_lock_the_authenticator_and_the_lockout_is_audited(box: Box,
                                                                                   cloud: FakeCloud) -> None:
    secret = totp.enrol(box.app.settings.home)
    box.app.settings = dataclasses.replace(box.app.settings, confirm_mode="totp")
    human = Human("accept", instance_id=IID, code="")
    async with agent(box.app, human=human) as c:
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        for i, wrong in enumerate(_wrong_codes(secret, totp.MAX_FAILURES)):
            human.content["code"] = wrong
            r = await c.call_tool("confirm_teardown", {"token": s["token"]})
            assert r.is_error and ("locked" in text(r)) == (i == totp.MAX_FAILURES - 1), text(r)
        human.content["code"] = totp.code_at(secret, int(time.time() // totp.STEP_S))
        r = await c.call_tool("confirm_teardown", {"token": s["token"]})  # even the right code, while locked
        assert r.is_error and "locked" in text(r)
    assert destroys(cloud) == [] and "totp_lockout" in events(box.app)
    assert "authenticator" in human.asked[0]


async def test_attack5_job_cancel_needs_the_authenticator_code_too(app: App, runs: Path, tmp_path: Path,
                                                                  sock: str) -> None:
    secret = totp.enrol(app.settings.home)
    app.settings = dataclasses.replace(app.settings, confirm_mode="totp")
    job = await sleeper(app, runs, tmp_path, sock)
    human = Human("accept", job_name="victim", code="")
    async with agent(app, human=human) as c:
        first = data(await c.call_tool("job_cancel", {"job_id": job.job_id}))
        r = await c.call_tool("job_cancel", {"job_id": job.job_id, "token": first["token"]})
        assert r.is_error and "authenticator" in text(r)
        assert jobstore.get(app.store, job.job_id).state is JobState.running
        human.content["code"] = totp.code_at(secret, int(time.time() // totp.STEP_S))
        done = data(await c.call_tool("job_cancel", {"job_id": job.job_id, "token": first["token"]}))
    assert done["cancelled"] and done["confirmed_via"] == "elicitation"


def test_attack5_the_totp_secret_is_0600_in_a_0700_state_dir(home: Path) -> None:
    home.mkdir(parents=True)
    os.chmod(home, 0o755)
    totp.enrol(home)
    assert oct(home.stat().st_mode & 0o777) == "0o700"
    assert oct((home / totp.KEY_FILE).stat().st_mode & 0o777) == "0o600"


# ---------------------------------------------------------------- attack 6: HTTP without authentication


async def test_attack6_http_mode_needs_the_bearer_token_and_keeps_the_host_check(tmp_path: Path) -> None:
    port = free_port()
    state = tmp_path / "state"
    env = dict(os.environ, MCP_GPU_HOME=str(state))
    argv = [sys.executable, "-m", "mcp_gpu", "serve", "--http", f"127.0.0.1:{port}"]
    url = f"http://127.0.0.1:{port}/mcp"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with anyio.fail_after(60):
            while True:
                try:
                    async with httpx2.AsyncClient() as h:
                        anon = await h.post(url, json=body)
                    break
                except httpx2.TransportError:
                    assert proc.poll() is None, "server exited"
                    await anyio.sleep(0.2)
        token = (state / "http.token").read_text().strip()
        assert oct((state / "http.token").stat().st_mode & 0o777) == "0o600"
        async with httpx2.AsyncClient() as h:
            wrong = await h.post(url, json=body, headers={"Authorization": "Bearer " + "x" * len(token)})
            evil = await h.post(url, json=body, headers={"Authorization": f"Bearer {token}",
                                                         "Host": "evil.example"})
        assert anon.status_code == 401 and wrong.status_code == 401
        assert 400 <= evil.status_code < 500 and evil.status_code != 401  # DNS-rebinding check still there
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as c:
            names = {t.name for t in (await c.list_tools()).tools}
        assert "request_teardown" in names
    finally:
        proc.terminate()
        proc.wait(10)
    first_err = proc.stderr.read().decode() if proc.stderr else ""
    assert f"Bearer {token}" in first_err and '"mcpServers"' in first_err  # shown once to the human
    again = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with anyio.fail_after(60):
            while True:
                try:
                    async with httpx2.AsyncClient() as h:
                        assert (await h.post(url, json=body)).status_code == 401
                    break
                except httpx2.TransportError:
                    assert again.poll() is None, "server exited"
                    await anyio.sleep(0.2)
    finally:
        again.terminate()
        again.wait(10)
    assert token not in (again.stderr.read().decode() if again.stderr else "")  # only at first start


# ---------------------------------------------------------------- attack 8: the audit log is edited


def _tamper(db: Path, how: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER audit_log_no_delete")
    conn.execute("DROP TRIGGER audit_log_no_update")
    if how == "delete_middle":
        conn.execute("DELETE FROM audit_log WHERE id = (SELECT min(id) + 1 FROM audit_log)")
    elif how == "delete_tail":
        conn.execute("DELETE FROM audit_log WHERE id = (SELECT max(id) FROM audit_log)")
    else:
        conn.execute("UPDATE audit_log SET detail_json='{}' WHERE id = (SELECT min(id) FROM audit_log)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("how", ["delete_middle", "delete_tail", "edit"])
async def test_attack8_a_tampered_audit_log_is_reported_and_destructive_acts_refuse(
        box: Box, cloud: FakeCloud, home: Path, how: str) -> None:
    async with agent(box.app, human=Human("accept", instance_id=IID)) as c:
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        _tamper(box.app.settings.db_path, how)
        r = await c.call_tool("confirm_teardown", {"token": s["token"]})
    assert r.is_error and "AUDIT LOG TAMPERED" in text(r) and "--accept-break" in text(r)
    assert destroys(cloud) == []
    shown = cli(home, "audit-log")
    assert shown.returncode == 1 and "AUDIT LOG TAMPERED" in shown.stdout
    rc, out = run_on_pty([sys.executable, "-m", "mcp_gpu", "audit-log", "--accept-break"],
                         dict(os.environ, MCP_GPU_HOME=str(home)), [("restart the chain: ", "accept break")])
    assert rc == 0 and "recorded as audit row" in out, out
    shown = cli(home, "audit-log")
    assert shown.returncode == 0 and "audit chain intact" in shown.stdout and "audit_chain_reset" in shown.stdout
    async with agent(box.app, human=Human("accept", instance_id=IID)) as c:  # the human recorded it: acts again
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        assert data(await c.call_tool("confirm_teardown", {"token": s["token"]}))["status"] == "done"


# ---------------------------------------------------------------- attack 9: the phrase on piped stdin


async def test_attack9_a_piped_phrase_approves_nothing(box: Box, cloud: FakeCloud, home: Path) -> None:
    async with agent(box.app) as c:
        s = data(await c.call_tool("request_teardown", {"host": "box", "reason": "done"}))
        for argv in (["approve", s["request_id"]], ["teardown", "box"]):
            res = cli(home, *argv, stdin=s["phrase"] + "\n")
            assert res.returncode == 2 and "no controlling terminal" in res.stderr, res
        r = data(await c.call_tool("confirm_teardown", {"token": s["token"]}))
    assert r["status"] == "awaiting_human" and destroys(cloud) == []
