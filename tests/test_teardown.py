"""Teardown: the Iron-Law gate on a real sshd host, the token bound to it, and the meter-stop verb on a fake cloud.

Every completion here goes through a human channel: the approval `mcp-gpu approve` records (human_approves /
confirmed in tests.teardown_helpers); tests/security covers the channels themselves."""
# ruff: noqa: F811  (fixtures imported from tests.teardown_helpers are redefined as parameters)

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import structlog
from mcp import Client
from structlog.testing import capture_logs

from mcp_gpu import log, totp
from mcp_gpu.app import App
from mcp_gpu.errors import ConfigError, ConfirmationError, GateRefused, NotFoundError, StoreError
from mcp_gpu.lifecycle.teardown import confirm_teardown, request_teardown
from mcp_gpu.server import build_server
from mcp_gpu.store import audit_log
from mcp_gpu.tools.register_host import register_host_record
from tests.fake_providers import FakeCloud
from tests.teardown_helpers import (  # noqa: F401  (fixtures)
    IID,
    KEY,
    T0,
    Box,
    box,
    cloud,
    confirmed,
    destroys,
    events,
    human_approves,
    run_on_pty,
)

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- the gate


async def test_gate_refuses_a_job_without_a_manifest_and_names_verify_artifacts(box: Box) -> None:
    job = box.job()
    with pytest.raises(GateRefused) as e:
        await request_teardown(box.app, "box", reason="done")
    assert "no verified pull" in e.value.message and f'verify_artifacts(job_id="{job.id}")' in e.value.message
    assert e.value.data["missing"][0]["fix"] == f'verify_artifacts(job_id="{job.id}")'
    assert box.app.store.query("SELECT count(*) AS n FROM approvals")[0]["n"] == 0
    assert events(box.app) == ["teardown_requested", "teardown_refused"]


async def test_gate_refuses_a_manifest_that_is_not_all_ok(box: Box) -> None:
    job = box.job()
    mid = box.verify(job, all_ok=False)
    with pytest.raises(GateRefused) as e:
        await request_teardown(box.app, "box", reason="done")
    assert f"manifest #{mid}" in e.value.message and "not all_ok" in e.value.message


async def test_gate_refuses_a_pull_without_load_checks(box: Box) -> None:
    job = box.job()
    mid = box.verify(job, checked=False)
    with pytest.raises(GateRefused) as e:
        await request_teardown(box.app, "box", reason="done")
    assert f"manifest #{mid}" in e.value.message and "without load checks" in e.value.message
    assert e.value.data["missing"][0]["fix"] == f'verify_artifacts(job_id="{job.id}")'


async def test_gate_refuses_a_stale_manifest_when_a_newer_checkpoint_is_on_the_remote(box: Box) -> None:
    job = box.job()
    box.verify(job)
    box.checkpoint(box.outputs(job), "ckpt-002.pt", T0 + 100)
    with pytest.raises(GateRefused) as e:
        await request_teardown(box.app, "box", reason="done")
    assert "stale" in e.value.message and "ckpt-002.pt" in e.value.message
    assert f'verify_artifacts(job_id="{job.id}")' in e.value.message


async def test_gate_refuses_a_running_job_and_names_job_cancel(box: Box) -> None:
    job = box.job(running=True)
    box.verify(job)
    with pytest.raises(GateRefused) as e:
        await request_teardown(box.app, "box", reason="done")
    assert "still running" in e.value.message and f'job_cancel(job_id="{job.id}")' in e.value.message


async def test_allow_running_passes_and_the_phrase_must_say_so(box: Box) -> None:
    job = box.job(running=True)
    box.verify(job)
    r = await request_teardown(box.app, "box", reason="out of budget", allow_running=True)
    assert r.phrase == f"destroy vastai {IID} with running jobs"
    assert r.running_jobs_sacrificed == [job.id]
    assert any("RUNNING and sacrificed" in line for line in r.summary)


async def test_gate_passes_when_every_job_is_verified_and_describes_the_teardown(box: Box) -> None:
    jobs = [box.job("a"), box.job("b", exit_code="137 KILL")]
    mids = [box.verify(j) for j in jobs]
    r = await request_teardown(box.app, "box", reason="training finished")
    assert (r.action, r.target, r.phrase) == ("destroy", f"vastai {IID}", f"destroy vastai {IID}")
    assert r.irreversible and r.method == "api" and r.token and r.expires_at
    assert any("container disk" in x for x in r.lost)
    assert any("local volume" in x for x in r.survives)
    assert any("disk storage" in x or "bandwidth" in x for x in r.keeps_billing)
    assert any("balance" in c for c in r.danger_clocks)
    assert r.facts_verified == "2026-06" and r.facts_age_months >= 0
    assert {j.job_id: j.manifest_id for j in r.jobs} == {jobs[0].id: mids[0], jobs[1].id: mids[1]}
    assert {j.state for j in r.jobs} == {"exited"} and r.snapshot["host"] == "box"
    assert [j["ckpt_mtime"] for j in r.snapshot["jobs"]] == [T0, T0]
    assert r.summary[0].startswith("Gate passed on box: 2 job(s)") and r.phrase in r.summary[-2]
    assert events(box.app)[-2:] == ["teardown_requested", "confirmation_requested"]


async def test_an_unregistered_host_or_one_without_an_instance_id_points_at_register_host(app: App) -> None:
    with pytest.raises(NotFoundError) as e:
        await request_teardown(app, "nobox", reason="x")
    assert "register_host" in (e.value.hint or "")
    register_host_record(app.store, "half", "user@127.0.0.1:1", "runpod", None)
    with pytest.raises(ConfigError) as e2:
        await request_teardown(app, "half", reason="x")
    assert "instance id" in e2.value.message and "register_host" in (e2.value.hint or "")
    register_host_record(app.store, "noplat", "user@127.0.0.1:1", None, None)
    with pytest.raises(ConfigError, match="no platform"):
        await request_teardown(app, "noplat", reason="x")


# ---------------------------------------------------------------- confirmation and execution


async def test_a_good_confirmation_destroys_through_the_api_and_polls_until_gone(box: Box, cloud: FakeCloud) -> None:
    box.verify(box.job())
    r = await request_teardown(box.app, "box", reason="done")
    res = await confirmed(box.app, r, "Destroy  vastai " + IID)
    assert res.status == "done" and res.provider is not None and res.provider.final_state == "gone"
    assert res.provider.polls >= 3  # two in-between answers, then 404
    first = cloud.requests[0]
    assert (first.method, first.path) == ("DELETE", f"/api/v0/instances/{IID}/")
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert destroys(cloud) == [f"DELETE /api/v0/instances/{IID}/"]
    assert all(q.method == "GET" for q in cloud.requests[1:])
    assert events(box.app)[-3:] == ["confirmation_accepted", "teardown_confirmed", "teardown_executed"]
    # the account-wide listing proves it too (a DELETE that answered OK is not proof on its own: RP14, VAST15)
    assert res.proof == f"proven: vastai's instance listing no longer shows {IID}"
    assert cloud.requests[-1].path == "/api/v1/instances/"
    assert res.audit_ids and res.audit_ids == sorted(res.audit_ids)


@pytest.mark.parametrize("how", ["wrong_phrase", "replay", "expired", "tampered", "other_host"])
async def test_a_bad_confirmation_is_refused_and_nothing_is_destroyed(box: Box, cloud: FakeCloud, how: str) -> None:
    box.verify(box.job())
    r = await request_teardown(box.app, "box", reason="done", ttl_s=-5 if how == "expired" else None)
    token, host = r.token, None
    if how == "wrong_phrase":
        with pytest.raises(ConfirmationError) as e:
            human_approves(box.app, r.request_id, f"destroy vastai {IID}9")
    else:
        if how == "replay":
            await confirmed(box.app, r)
            cloud.requests.clear()
            cloud.add(IID)
        elif how == "tampered":
            human_approves(box.app, r.request_id, r.phrase)
            body, mac = token.split(".", 1)
            token = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + mac
        elif how == "other_host":
            human_approves(box.app, r.request_id, r.phrase)
            host = "otherbox"
        with pytest.raises(ConfirmationError) as e:
            await confirm_teardown(box.app, token, host=host)
    assert {"wrong_phrase": "does not match", "replay": "already used", "expired": "expired",
            "tampered": "not a valid teardown token", "other_host": "issued for host"}[how] in e.value.message
    assert destroys(cloud) == []
    assert events(box.app)[-1] == "confirmation_refused"


async def test_a_gate_that_closes_between_request_and_confirm_refuses(box: Box, cloud: FakeCloud) -> None:
    job = box.job()
    box.verify(job)
    r = await request_teardown(box.app, "box", reason="done")
    box.checkpoint(box.outputs(job), "ckpt-002.pt", T0 + 60)
    with pytest.raises(GateRefused, match="stale"):
        await confirmed(box.app, r)
    assert destroys(cloud) == []


async def test_a_gate_that_changed_but_still_passes_refuses_the_old_token(box: Box, cloud: FakeCloud) -> None:
    job = box.job()
    box.verify(job)
    r = await request_teardown(box.app, "box", reason="done")
    box.checkpoint(box.outputs(job), "ckpt-002.pt", T0 + 60)
    box.verify(job, newest="ckpt-002.pt", mtime=T0 + 60)  # re-verified: passes, but not what the human saw
    with pytest.raises(ConfirmationError, match="situation changed"):
        await confirmed(box.app, r)
    assert destroys(cloud) == []
    r2 = await request_teardown(box.app, "box", reason="done")
    assert (await confirmed(box.app, r2)).status == "done"


async def test_a_missing_api_key_is_a_clear_error_and_the_token_survives(box: Box, cloud: FakeCloud,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    r = await request_teardown(box.app, "box", reason="done")
    monkeypatch.delenv("VAST_API_KEY")
    with pytest.raises(ConfigError, match="VAST_API_KEY is not set"):
        await confirmed(box.app, r)
    assert cloud.requests == []
    monkeypatch.setenv("VAST_API_KEY", KEY)
    assert (await confirm_teardown(box.app, r.token)).status == "done"  # the human's approval still stands


async def test_a_platform_without_an_api_answers_manual_with_console_steps(ssh_app: App, cloud: FakeCloud,
                                                                          tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    app = ssh_app
    monkeypatch.setenv("MCP_GPU_GATE_RUN_ROOTS", str(tmp_path / "runs"))  # the gate probes the machine itself
    register_host_record(app.store, "adl", "testhost", "autodl", "autodl-42")
    r = await request_teardown(app, "adl", reason="done")
    assert r.phrase == "stop autodl autodl-42" and r.platform_verb == "关机" and not r.irreversible
    assert r.identity_check == "unproven" and any("INSTANCE IDENTITY UNPROVEN" in s for s in r.summary)
    res = await confirmed(app, r)
    assert res.status == "manual" and res.steps and any("autodl.com" in s for s in res.steps)
    assert "nothing was done" in res.message
    assert cloud.requests == []


async def test_local_has_nothing_to_stop(app: App) -> None:
    r = await request_teardown(app, "local", reason="demo")
    assert r.phrase == "stop local" and r.summary and r.token
    res = await confirmed(app, r, "stop local")
    assert res.status == "nothing_to_do" and "nothing to stop" in res.message


# ---------------------------------------------------------------- audit log, secrets, TOTP, CLI


async def test_the_audit_log_holds_every_step_and_rejects_update_and_delete(box: Box, cloud: FakeCloud) -> None:
    job = box.job()
    with pytest.raises(GateRefused):
        await request_teardown(box.app, "box", reason="early")
    box.verify(job)
    r = await request_teardown(box.app, "box", reason="done")
    with pytest.raises(ConfirmationError):
        human_approves(box.app, r.request_id, "yes")
    await confirmed(box.app, r)
    assert events(box.app) == ["teardown_requested", "teardown_refused", "teardown_requested",
                               "confirmation_requested", "confirmation_refused", "confirmation_approved",
                               "confirmation_accepted", "teardown_confirmed", "teardown_executed"]
    assert audit_log.verify(box.app.store).ok
    rows = audit_log.entries(box.app.store, target=f"box|vastai|{IID}")
    assert rows[0]["detail"]["reason"] == "early" and rows[-1]["detail"]["status"] == "done"
    with pytest.raises(StoreError, match="append-only"):
        box.app.store.execute("UPDATE audit_log SET event='nothing' WHERE id=1")
    with pytest.raises(StoreError, match="append-only"):
        box.app.store.execute("DELETE FROM audit_log")


async def test_the_api_key_never_appears_in_tool_output_audit_log_or_logs(
        box: Box, cloud: FakeCloud, capsys: pytest.CaptureFixture[str]) -> None:
    box.verify(box.job())
    root = logging.getLogger()
    saved_handlers, saved_level, saved_config = root.handlers[:], root.level, structlog.get_config()
    try:
        log.configure("debug")
        with capture_logs() as logs:
            async with Client(build_server(app=box.app)) as c:
                r = await c.call_tool("request_teardown", {"host": "box", "reason": "done"})
                s = r.structured_content
                assert s is not None
                human_approves(box.app, s["request_id"], s["phrase"])
                done = await c.call_tool("confirm_teardown", {"token": s["token"]})
                again = await c.call_tool("confirm_teardown", {"token": s["token"]})
    finally:
        root.handlers[:], root.level = saved_handlers, saved_level
        structlog.configure(**saved_config)
    assert not done.is_error and (done.structured_content or {}).get("status") == "done"
    assert again.is_error and "[confirmation]" in again.content[0].text  # type: ignore[union-attr]
    seen = [json.dumps(x.structured_content or {}) + str(x.content) for x in (r, done, again)]
    seen.append(json.dumps(audit_log.entries(box.app.store), default=str))
    seen.append(json.dumps(logs, default=str))
    seen.append(capsys.readouterr().err)
    assert all(KEY not in text for text in seen)


async def test_totp_mode_requires_a_fresh_code_from_the_authenticator(app: App) -> None:
    import dataclasses

    secret = totp.enrol(app.settings.home)
    assert oct(os.stat(app.settings.home / totp.KEY_FILE).st_mode & 0o777) == "0o600"
    assert oct(os.stat(app.settings.home).st_mode & 0o777) == "0o700"
    app.settings = dataclasses.replace(app.settings, confirm_mode="totp")
    r = await request_teardown(app, "local", reason="x")
    assert r.totp_required and any("authenticator" in line for line in r.summary)
    with pytest.raises(ConfirmationError, match="authenticator"):
        human_approves(app, r.request_id, r.phrase)
    step = int(time.time() // totp.STEP_S)
    valid = {totp.code_at(secret, s) for s in (step - 1, step, step + 1, step + 2)}
    wrong = next(f"{n:06d}" for n in range(10) if f"{n:06d}" not in valid)
    with pytest.raises(ConfirmationError, match="wrong or expired"):
        human_approves(app, r.request_id, r.phrase, wrong)
    code = totp.code_at(secret, int(time.time() // totp.STEP_S))
    assert (await confirmed(app, r, human_code=code)).status == "nothing_to_do"
    r2 = await request_teardown(app, "local", reason="x")
    with pytest.raises(ConfirmationError, match="already used"):
        human_approves(app, r2.request_id, r2.phrase, code)


def _cli(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MCP_GPU_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "mcp_gpu", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=False, start_new_session=True)


def test_the_cli_asks_for_the_phrase_on_the_terminal_and_executes_only_on_a_match(home: Path) -> None:
    env = {**os.environ, "MCP_GPU_HOME": str(home)}
    argv = [sys.executable, "-m", "mcp_gpu", "teardown", "local", "--reason", "cli test"]
    rc, out = run_on_pty(argv, env, [("> ", "yes")])
    assert rc == 1 and "aborted" in out and "token" not in out.lower()
    rc, out = run_on_pty(argv, env, [("> ", "stop local")])
    assert rc == 0, out
    assert "Type exactly `stop local`" in out and "nothing_to_do" in out
    log_out = _cli(home, "audit-log", "--host", "local")
    assert log_out.returncode == 0 and "teardown_executed" in log_out.stdout and "teardown_requested" in log_out.stdout
    assert "audit chain intact" in log_out.stdout


def test_the_cli_refuses_a_phrase_on_piped_stdin(home: Path) -> None:
    piped = _cli(home, "teardown", "local", "--reason", "cli test", stdin="stop local\n")
    assert piped.returncode == 2 and "no controlling terminal" in piped.stderr
    assert "teardown_executed" not in _cli(home, "audit-log").stdout


async def test_a_slurm_host_scancels_only_what_mcp_gpu_launched_and_here_that_is_nothing(
        ssh_app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = ssh_app
    monkeypatch.setenv("MCP_GPU_GATE_RUN_ROOTS", str(tmp_path / "runs"))  # the gate probes the login node itself
    register_host_record(app.store, "cluster", "testhost", "slurm", None)
    r = await request_teardown(app, "cluster", reason="done")
    assert r.phrase == "scancel slurm cluster" and r.method == "cli"
    res = await confirmed(app, r)
    assert res.status == "nothing_to_do" and "not ours to stop" in res.message and res.cancelled_jobs == []
