"""`next` is computed from a job's facts in one place: per state, per audience, and through real jobs on `local`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from mcp_gpu.app import App
from mcp_gpu.artifacts.manifest import latest_manifest
from mcp_gpu.lifecycle import next_step as ns
from mcp_gpu.lifecycle.jobs import job_cancel
from mcp_gpu.lifecycle.launch import launch_detached
from mcp_gpu.lifecycle.patrol import patrol
from mcp_gpu.lifecycle.verify import verify_artifacts
from mcp_gpu.models import TRIAGE_CLASSES
from tests.jobhelpers import wait_until

TOOL_CALL = re.compile(r"\b(verify_artifacts|patrol|job_logs|job_cancel|launch_detached|smoke_cpu|request_teardown)\(")
CLI_VERB = re.compile(r"mcp-gpu (verify|status|logs|cancel|launch|smoke|teardown)\b")


def facts(state: str, **kw: object) -> ns.Facts:
    return ns.Facts(job_id="job_abc", name="t1", host="box1", state=state, **kw)  # type: ignore[arg-type]


# state, facts overrides, what the advice must contain, what it must never contain (for the agent)
TABLE: list[tuple[str, dict[str, object], list[str], list[str]]] = [
    ("running", {}, ["patrol()", "30 min"], ["verify_artifacts", "job_cancel"]),
    ("launching", {}, ["patrol()"], ["verify_artifacts"]),
    ("silent", {"remedy": "run with python -u"}, ["python -u", 'job_logs(job_id="job_abc")'], ["job_cancel"]),
    ("stalled", {}, ["py-spy", 'job_logs(job_id="job_abc")', 'job_cancel(job_id="job_abc")'], ["verify_artifacts(job_id"]),
    ("unreachable", {}, ["never cancel or tear down"], ["job_cancel(", "request_teardown("]),
    ("preempted", {}, ["relaunch", 'launch_detached(host="box1", name="t1"', 'verify_artifacts(job_id="job_abc")'],
     ["patrol() again"]),
    ("cancelled", {}, ["nothing to patrol", 'verify_artifacts(job_id="job_abc")'], ["patrol()", "preempt"]),
    ("cancelled", {"has_outputs": False}, ["nothing", "cancelled"], ["verify_artifacts", "patrol()"]),
    ("cancelled", {"manifest": "ok"}, ["nothing", "verified"], ["verify_artifacts", "patrol()"]),
    ("succeeded", {}, ['verify_artifacts(job_id="job_abc")', "not verified"], ["patrol()"]),
    ("succeeded", {"manifest": "not_ok"}, ["NOT all_ok", 'verify_artifacts(job_id="job_abc")'], []),
    ("succeeded", {"manifest": "unchecked"}, ["load checks", "verify_artifacts"], []),
    ("succeeded", {"manifest": "stale"}, ["newer", "verify_artifacts"], []),
    ("succeeded", {"manifest": "ok"}, ["verified", 'request_teardown(host="box1")'], ["verify_artifacts"]),
    ("succeeded", {"has_outputs": False}, ['paths=["', "declared no outputs"], ['verify_artifacts(job_id="job_abc")']),
    ("lost", {}, ["uptime", 'job_logs(job_id="job_abc")', "launch_detached("], []),
]


@pytest.mark.parametrize(("state", "kw", "has", "never"), TABLE)
def test_each_state_gets_its_own_advice_for_the_agent(state: str, kw: dict[str, object], has: list[str],
                                                      never: list[str]) -> None:
    text = ns.job_next(facts(state, **kw), "mcp")
    for s in has:
        assert s in text, (state, kw, text)
    for s in never:
        assert s not in text, (state, kw, text)
    assert not CLI_VERB.search(text), text


@pytest.mark.parametrize(("state", "kw"), [(s, kw) for s, kw, _, _ in TABLE])
def test_the_person_gets_cli_verbs_never_tool_calls(state: str, kw: dict[str, object]) -> None:
    mcp, cli = ns.job_next(facts(state, **kw), "mcp"), ns.job_next(facts(state, **kw), "cli")
    assert not TOOL_CALL.search(cli), cli
    # every action the agent is told to take has its CLI verb
    for tool, verb in (("verify_artifacts(", "mcp-gpu verify t1"), ("job_logs(", "mcp-gpu logs t1"),
                       ("job_cancel(", "mcp-gpu cancel t1"), ("request_teardown(", "mcp-gpu teardown box1"),
                       ("patrol()", "mcp-gpu status")):
        assert (tool in mcp) == (verb in cli), (state, kw, mcp, cli)


def test_a_job_without_outputs_is_told_the_way_out_of_the_verify_loop() -> None:
    cli = ns.job_next(facts("succeeded", has_outputs=False), "cli")
    assert f"mcp-gpu verify t1 --path {ns.PLACEHOLDER_PATH}" in cli


@pytest.mark.parametrize("cls", [c for c in TRIAGE_CLASSES if c not in ("healthy", "preempted", "cancelled")])
def test_failed_with_each_class_has_a_fix_and_never_retries_blindly(cls: str) -> None:
    text = ns.job_next(facts("failed", primary=cls), "mcp")
    assert "never retry" in text and 'job_logs(job_id="job_abc")' in text and "smoke_cpu" in text
    fix = text.split(": ", 1)[1].split(". Read", 1)[0]
    assert fix and fix != "read the log before relaunching", (cls, text)  # a class-specific fix
    # the finding's own remedy wins over the generic one
    assert ns.job_next(facts("failed", primary=cls, remedy="do X first"), "mcp").startswith(f"failed ({cls}): do X")


def test_relaunched_job_says_so() -> None:
    text = ns.job_next(facts("preempted", relaunched="job_new"), "cli")
    assert "relaunched as job_new" in text and "mcp-gpu status" in text


def test_combine_orders_by_urgency() -> None:
    run, ok = facts("running"), facts("succeeded", manifest="ok")
    bad = ns.Facts(job_id="job_b", name="b", host="box1", state="failed", primary="cuda_oom")
    unv = ns.Facts(job_id="job_u", name="u", host="box2", state="succeeded")
    gone = facts("unreachable")
    assert ns.combine([], "mcp").startswith("nothing running: launch_detached")
    assert ns.combine([], "cli").startswith("nothing running: mcp-gpu launch")
    assert ns.combine([run, ok, bad, unv, gone]).startswith("b: failed (cuda_oom)")
    assert ns.combine([run, ok, unv, gone]).startswith("some hosts did not answer")
    assert ns.combine([run, ok, unv]) == f"u: {ns.job_next(unv)}"
    assert ns.combine([run, ok]).startswith("all running")
    assert ns.combine([ok], "cli").endswith("mcp-gpu teardown box1")
    assert "verify" not in ns.combine([ok], "cli")
    cancelled = facts("cancelled", has_outputs=False)
    assert ns.combine([cancelled]).startswith("nothing to do") and "running" not in ns.combine([cancelled])
    assert "(+1 more)" in ns.combine([bad, facts("stalled")])


def test_to_cli_rewrites_tool_calls_in_hints() -> None:
    hint = ('- job job_1 (t1) has no verified pull (no manifest) → verify_artifacts(job_id="job_1")\n'
            'wait and patrol(job_ids=["job_1"]) until it ends, or job_cancel(job_id="job_1"); see job_list')
    out = ns.to_cli(hint)
    assert "mcp-gpu verify job_1" in out and "mcp-gpu patrol job_1" in out and "mcp-gpu cancel job_1" in out
    assert "`mcp-gpu jobs`" in out and not TOOL_CALL.search(out)
    assert "job_id=" not in ns.to_cli("verify_artifacts needs a job_id, or a host and paths; pass job_id='job_…'")
    reg = ('register it with register_host(name="box1", target="me@h", platform="vastai|runpod|...", '
           'instance_id="<the provider\'s id>") or `mcp-gpu hosts add box1 me@h --platform P --instance-id ID`')
    assert ns.to_cli(reg) == "register it with `mcp-gpu hosts add box1 me@h --platform P --instance-id ID`"
    assert ns.to_cli("request a token with request_teardown(host='box1'); nothing was done") == \
        "request a token with mcp-gpu teardown box1; nothing was done"
    for hint in ("run verify_artifacts again: partial files resume", "call request_teardown again for a fresh token",
                 "Verify the pull (verify_artifacts) before terminate", "launch_detached does this"):
        assert not TOOL_CALL.search(ns.to_cli(hint)) and "mcp-gpu" in ns.to_cli(hint), ns.to_cli(hint)


# -- end to end through real jobs on `local` -----------------------------------------------------------------------

def _opts(sock: str) -> dict[str, object]:
    return {"tmux_socket": sock, "heartbeat_s": 1, "grace_s": 2, "probe_interval_s": 0.3}


async def _launch(app: App, name: str, command: str, work: Path, runs: Path, sock: str,
                  outputs: list[str] | None = None) -> str:
    work.mkdir(parents=True, exist_ok=True)
    res = await launch_detached(app, "local", command, str(work), name, probe_s=3, run_root=str(runs),
                                outputs=outputs, options=_opts(sock))
    return res.job_id


async def _patrol_next(app: App, jid: str) -> tuple[str, str, str]:
    rep = await patrol(app, [jid])
    job = next(j for j in rep.jobs if j.job_id == jid)
    return job.state, rep.next, ns.patrol_next(app.store, rep.jobs, "cli")


@pytest.mark.anyio
async def test_running_job_on_local(app: App, tmp_path: Path, runs: Path, sock: str) -> None:
    jid = await _launch(app, "r1", "sleep 60", tmp_path / "w", runs, sock)
    state, mcp, cli = await _patrol_next(app, jid)
    assert state == "running"
    assert "patrol() again in ~30 min" in mcp and "mcp-gpu status again in ~30 min" in cli


@pytest.mark.anyio
async def test_cancelled_job_on_local_is_not_patrolled_again(app: App, tmp_path: Path, runs: Path, sock: str) -> None:
    jid = await _launch(app, "s1", "sleep 300", tmp_path / "w", runs, sock)
    from tests.teardown_helpers import human_approves

    first = await job_cancel(app, jid)
    human_approves(app, first.request_id, first.phrase)  # the human's terminal approval (tests/security: the real one)
    await job_cancel(app, jid, first.token)
    state, mcp, cli = await _patrol_next(app, jid)
    assert state == "cancelled"
    for text in (mcp, cli):
        assert "running" not in text and "patrol again" not in text and "patrol()" not in text and "preempt" not in text
    assert "verify" not in cli  # it declared no outputs and wrote none


@pytest.mark.anyio
async def test_succeeded_job_on_local_asks_for_verify_once(app: App, tmp_path: Path, runs: Path, sock: str) -> None:
    out = tmp_path / "w" / "out"
    cmd = f"mkdir -p {out} && {sys.executable} -c \"print('done')\" && echo '{{\"loss\": 0.1}}' > {out}/result.json"
    jid = await _launch(app, "v1", cmd, tmp_path / "w", runs, sock, outputs=[str(out)])

    async def finished() -> bool:
        return (await _patrol_next(app, jid))[0] == "succeeded"

    await wait_until(finished, timeout=30, what="job succeeded")
    state, mcp, cli = await _patrol_next(app, jid)
    assert f'verify_artifacts(job_id="{jid}")' in mcp and "mcp-gpu verify v1" in cli

    report = await verify_artifacts(app, job_id=jid)
    assert report.all_ok, report.summary
    state, mcp, cli = await _patrol_next(app, jid)
    assert state == "succeeded"
    assert "verify" not in mcp.replace("verified", "") and "verify" not in cli.replace("verified", "")
    assert 'request_teardown(host="local")' in mcp and "mcp-gpu teardown local" in cli

    # an output written after the manifest makes it stale again (once the manifest is measurably older)
    at = latest_manifest(app.store, job_id=jid)
    assert at is not None
    await wait_until(lambda: ns._age_s(at.at) > 3.5, timeout=10, what="the manifest to age")
    (out / "late.json").write_text("{}")
    _, mcp, _ = await _patrol_next(app, jid)
    assert f'verify_artifacts(job_id="{jid}")' in mcp
