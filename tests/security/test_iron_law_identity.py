"""The Iron Law keyed on what bills (attack 2 and the ones found while breaking it), through the real MCP client.

The machine is the session's loopback sshd, registered as a vast.ai instance; the provider is the local fake
cloud; "unreachable" is a closed loopback port. Each test plays the agent: it may only call tools. It asserts on
what a human would notice: the request is refused (no token, nothing sent to the provider), or the phrase the
human must accept names every loss.
"""
# ruff: noqa: F811  (fixtures imported from tests.teardown_helpers are redefined as parameters)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_gpu.app import App
from mcp_gpu.config import Settings
from mcp_gpu.server import build_server
from tests.fake_providers import FakeCloud
from tests.sshd import Sshd, free_port
from tests.teardown_helpers import IID, Box, box, cloud, destroys  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


def text(r: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in r.content)


async def call(c: Client, tool: str, **args: Any) -> Any:
    return await c.call_tool(tool, args)


async def _agent_tries_to_destroy(c: Client, host: str, **extra: Any) -> Any:
    """What a hostile agent does: request, then echo the phrase itself if it got one."""
    r = await call(c, "request_teardown", host=host, reason="done", **extra)
    if not r.is_error:
        sc = r.structured_content
        await call(c, "confirm_teardown", token=sc["token"], confirmation=sc["phrase"])
    return r


async def test_attack_2_a_new_alias_for_the_same_instance_pointing_nowhere_is_refused(box: Box,
                                                                                       cloud: FakeCloud) -> None:
    job = box.job()  # real work on the real machine, never verified
    closed = free_port()
    async with Client(build_server(app=box.app)) as c:
        reg = await call(c, "register_host", name="victim", target=f"nobody@127.0.0.1:{closed}", platform="vastai",
                         instance_id=IID)
        assert not reg.is_error
        r = await _agent_tries_to_destroy(c, "victim")
    assert r.is_error, "the gate let an alias of a machine with unverified work through"
    msg = text(r)
    assert "cannot reach victim" in msg and job.id in msg  # the alias's machine AND the job on the real one
    assert destroys(cloud) == []


async def test_a_second_reachable_alias_sees_the_jobs_of_the_first(box: Box, cloud: FakeCloud) -> None:
    job = box.job()
    async with Client(build_server(app=box.app)) as c:
        await call(c, "register_host", name="box2", target="testhost", platform="vastai", instance_id=IID)
        r = await _agent_tries_to_destroy(c, "box2")
    assert r.is_error and f'verify_artifacts(job_id="{job.id}")' in text(r)
    assert destroys(cloud) == []


async def test_a_job_launched_under_an_alias_without_platform_is_found_on_the_machine(box: Box,
                                                                                       cloud: FakeCloud) -> None:
    """The agent registers the same machine with no platform, works there, then tears down the billing alias:
    the gate finds the run dir on the machine itself."""
    job = box.job(host="scratch")  # registered under an alias the billing identity does not know
    box.verify(box.job())  # the billing alias's own job is fine
    async with Client(build_server(app=box.app)) as c:
        await call(c, "register_host", name="scratch", target="testhost")
        r = await _agent_tries_to_destroy(c, "box")
    assert r.is_error and job.id in text(r) and "no verified pull" in text(r)
    assert destroys(cloud) == []


async def test_a_run_dir_planted_by_hand_keeps_the_gate_shut_and_only_the_phrase_can_name_it(
        box: Box, cloud: FakeCloud) -> None:
    box.verify(box.job())
    planted = box.root / "runs" / "job_planted01"
    planted.mkdir(parents=True)
    (planted / "meta.json").write_text(json.dumps({"job_id": "job_planted01"}))
    async with Client(build_server(app=box.app)) as c:
        r = await _agent_tries_to_destroy(c, "box")
        assert r.is_error and "job_planted01" in text(r) and "does not know" in text(r)
        ok = await call(c, "request_teardown", host="box", reason="done", accept_loss=True)
    assert not ok.is_error, text(ok)
    assert ok.structured_content["phrase"] == f"destroy vastai {IID} and lose unverified results of unregistered job " \
                                              "job_planted01"
    assert destroys(cloud) == []


async def test_an_unreachable_machine_is_a_loss_only_the_phrase_can_carry(box: Box, cloud: FakeCloud) -> None:
    closed = free_port()
    async with Client(build_server(app=box.app)) as c:
        await call(c, "register_host", name="gone", target=f"root@127.0.0.1:{closed}", platform="runpod",
                   instance_id="pod-gone-1")
        r = await call(c, "request_teardown", host="gone", reason="done")
        assert r.is_error and "cannot reach gone" in text(r) and "accept_loss=True" in text(r)
        ok = await call(c, "request_teardown", host="gone", reason="done", accept_loss=True)
    assert not ok.is_error, text(ok)
    sc = ok.structured_content
    assert sc["phrase"] == "terminate runpod pod-gone-1 and lose unverified results on gone"
    assert sc["losses_accepted"][0]["loss_kind"] == "unreachable"
    assert sc["summary"][0].startswith("Gate NOT passed") and any("accepts losing" in line for line in sc["summary"])


async def test_accept_loss_never_opens_the_gate_for_a_running_job(box: Box, cloud: FakeCloud) -> None:
    box.job(running=True)
    async with Client(build_server(app=box.app)) as c:
        r = await _agent_tries_to_destroy(c, "box", accept_loss=True)
    assert r.is_error and "still running" in text(r)
    assert destroys(cloud) == []


async def test_the_identity_of_a_host_with_jobs_cannot_be_changed(box: Box) -> None:
    box.job()
    async with Client(build_server(app=box.app)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["register_host"].annotations is not None and tools["register_host"].annotations.destructive_hint
        r = await call(c, "register_host", name="box", target="testhost", platform="vastai", instance_id="7654321")
        assert r.is_error and "cannot be changed" in text(r)
        moved = await call(c, "register_host", name="box", target="testhost", platform="vastai", instance_id=IID)
        assert not moved.is_error  # same identity: only the target may change
        hosts = await call(c, "host_list")
    assert [h["instance_id"] for h in hosts.structured_content["hosts"] if h["name"] == "box"] == [IID]


# ---------------------------------------------------------------- the instance id is a claim


@pytest.fixture
def pod(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Any:
    """A second real sshd whose sessions carry what vast.ai sets inside an instance (CONTAINER_ID)."""
    from tests.conftest import _need_sshd

    _need_sshd()
    server = Sshd(tmp_path_factory.mktemp("pod"), alias="podbox", extra_env={"CONTAINER_ID": request.param,
                                                                               "VAST_CONTAINERLABEL": f"C.{request.param}"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def _pod_app(pod: Sshd, home: Path) -> App:
    return App.open(Settings(home=home, ssh_config=(str(pod.ssh_config),), connect_timeout=5, command_timeout=30,
                             keepalive=2))


@pytest.mark.parametrize("pod", ["9999999"], indirect=True)
async def test_a_box_that_reports_another_instance_id_refuses_the_teardown(pod: Sshd, home: Path, tmp_path: Path,
                                                                           cloud: FakeCloud,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_GPU_GATE_RUN_ROOTS", str(tmp_path / "runs"))
    app = await _pod_app(pod, home)
    try:
        async with Client(build_server(app=app)) as c:
            await call(c, "register_host", name="mine", target="podbox", platform="vastai", instance_id=IID)
            r = await _agent_tries_to_destroy(c, "mine", accept_loss=True)
    finally:
        await app.aclose()
    assert r.is_error and "CONTAINER_ID=9999999" in text(r)
    assert destroys(cloud) == []


@pytest.mark.parametrize("pod", [IID], indirect=True)
async def test_a_box_that_reports_its_own_id_proves_the_claim(pod: Sshd, home: Path, tmp_path: Path,
                                                              cloud: FakeCloud, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_GPU_GATE_RUN_ROOTS", str(tmp_path / "runs"))
    app = await _pod_app(pod, home)
    try:
        async with Client(build_server(app=app)) as c:
            await call(c, "register_host", name="mine", target="podbox", platform="vastai", instance_id=IID)
            r = await call(c, "request_teardown", host="mine", reason="done")
    finally:
        await app.aclose()
    assert not r.is_error, text(r)
    assert r.structured_content["identity_check"] == "proven"
    assert not any("UNPROVEN" in line for line in r.structured_content["summary"])


async def test_a_box_that_says_nothing_shows_identity_unproven_to_the_human(box: Box) -> None:
    async with Client(build_server(app=box.app)) as c:
        r = await call(c, "request_teardown", host="box", reason="done")
    assert not r.is_error, text(r)
    assert r.structured_content["identity_check"] == "unproven"
    assert any(line.startswith("INSTANCE IDENTITY UNPROVEN") for line in r.structured_content["summary"])


async def test_a_loss_the_human_accepted_is_bound_to_the_token(box: Box, cloud: FakeCloud) -> None:
    """The accepted losses travel in the signed action and the gate snapshot: the phrase that names them is the
    only one that works, and a new loss appearing before the confirmation voids the token."""
    from mcp_gpu.errors import ConfirmationError, GateRefused
    from mcp_gpu.lifecycle.teardown import request_teardown
    from tests.teardown_helpers import confirmed, human_approves

    job = box.job()
    r = await request_teardown(box.app, "box", reason="done", accept_loss=True)
    assert r.phrase == f"destroy vastai {IID} and lose unverified results of job {job.id}"
    with pytest.raises(ConfirmationError):  # the bare phrase does not name the loss: the human did not accept it
        human_approves(box.app, r.request_id, f"destroy vastai {IID}")
    late = box.root / "runs" / "job_late0001"
    late.mkdir(parents=True)
    (late / "out.log").write_text("started after the request\n")
    with pytest.raises((ConfirmationError, GateRefused)):
        await confirmed(box.app, r)
    assert destroys(cloud) == []
    again = await request_teardown(box.app, "box", reason="done", accept_loss=True)
    assert "unregistered job job_late0001" in again.phrase
    res = await confirmed(box.app, again)
    assert res.status == "done" and destroys(cloud) == [f"DELETE /api/v0/instances/{IID}/"]


@pytest.mark.parametrize("pod", ["9999999"], indirect=True)
async def test_an_alias_that_reaches_another_instance_refuses_the_teardown(pod: Sshd, sshd: Any, home: Path,
                                                                           tmp_path: Path, cloud: FakeCloud,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Two names for 'the same' instance, one of which reaches a box that says it is another one."""
    monkeypatch.setenv("MCP_GPU_GATE_RUN_ROOTS", str(tmp_path / "runs"))
    app = App.open(Settings(home=home, ssh_config=(str(sshd.ssh_config), str(pod.ssh_config)), connect_timeout=5,
                            command_timeout=30, keepalive=2))
    try:
        async with Client(build_server(app=app)) as c:
            await call(c, "register_host", name="box", target="testhost", platform="vastai", instance_id=IID)
            await call(c, "register_host", name="twin", target="podbox", platform="vastai", instance_id=IID)
            r = await _agent_tries_to_destroy(c, "box", accept_loss=True)
    finally:
        await app.aclose()
    assert r.is_error and "alias twin" in text(r) and "CONTAINER_ID=9999999" in text(r)
    assert destroys(cloud) == []
