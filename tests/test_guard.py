"""The on-box guard over real sshd: deadline and idle rules fire, a job's SIGTERM checkpoint completes first, the
stop goes to a local HTTP server speaking RunPod's documented stop endpoint, a destroy verb is never sent, a
guard on storage a stop would lose only writes a notice, and the guard survives the SSH connection and the server
going away. Events reach the audit log at the next contact."""

from __future__ import annotations

import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_gpu.app import App
from mcp_gpu.config import Settings
from mcp_gpu.errors import ConfigError
from mcp_gpu.lifecycle.guard import GuardRules, arm_guard, guard_status, plan_guard
from mcp_gpu.lifecycle.launch import launch_detached
from mcp_gpu.store import audit_log
from mcp_gpu.tools.register_host import register_host_record
from tests.fake_providers import FakeCloud
from tests.jobhelpers import wait_until
from tests.sshd import Sshd

pytestmark = pytest.mark.anyio
KEY = "rp-test-guard-0123456789"
POD = "pod-guard-1"
ROOT = Path(__file__).resolve().parents[1]

# On SIGTERM: say so, take ~2 s to write the checkpoint, then exit (a trainer that checkpoints on preemption).
TRAINER = r"""
import os, signal, sys, time
out = sys.argv[1]
def term(*_):
    print("SIGTERM: saving checkpoint", flush=True)
    time.sleep(2)
    with open(os.path.join(out, "last.pt.tmp"), "wb") as f:
        f.write(b"w" * 4096)
    os.replace(os.path.join(out, "last.pt.tmp"), os.path.join(out, "last.pt"))
    print("saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
i = 0
while True:
    i += 1
    print(f"step {i} loss {1 / i:.4f}", flush=True)
    time.sleep(0.2)
"""


@pytest.fixture
def volume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Profiles where RunPod's volume disk (survives a stop) is this test's directory, not /workspace."""
    vol = tmp_path / "workspace"
    vol.mkdir()
    pdir = tmp_path / "profiles"
    shutil.copytree(ROOT / "profiles", pdir)
    text = (pdir / "runpod.md").read_text()
    (pdir / "runpod.md").write_text(text.replace('path = "/workspace"', f'path = "{vol}"'))
    monkeypatch.setenv("MCP_GPU_PROFILES_DIR", str(pdir))
    return vol


@pytest.fixture
def runpod(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloud]:
    c = FakeCloud("runpod", KEY).start()
    c.add(POD)
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    monkeypatch.setenv("MCP_GPU_RUNPOD_BASE_URL", c.url)
    try:
        yield c
    finally:
        c.stop()


async def start_trainer(app: App, out: Path, runs: Path, name: str = "train") -> str:
    out.mkdir(parents=True, exist_ok=True)
    script = out.parent / f"{name}.py"
    script.write_text(TRAINER)
    res = await launch_detached(app, "box", f"{sys.executable} -u {script} {out}", str(out.parent), name,
                                backend="nohup", probe_s=2, outputs=[str(out)], run_root=str(runs))
    return res.job_id


def events(app: App) -> list[str]:
    return [e["action"] for e in audit_log.entries(app.store, target="box") if e["event"] == "guard_event"]


def guard_dir(tmp_path: Path) -> str:
    return str(tmp_path / "guard")


async def test_the_deadline_fires_after_the_checkpoint_and_stops_the_pod_never_destroying_it(
        ssh_app: App, tmp_path: Path, runs: Path, volume: Path, runpod: FakeCloud) -> None:
    register_host_record(ssh_app.store, "box", "testhost", "runpod", POD)
    out = volume / "ck"
    await start_trainer(ssh_app, out, runs)
    plan = plan_guard(ssh_app, "box", GuardRules(max_hours=3 / 3600, grace_s=20, interval_s=0.5))
    assert plan.stop == "api" and plan.method == "POST" and plan.url.endswith(f"/pods/{POD}/stop")
    assert "never destroys" in plan.summary and "SIGTERM" in plan.summary
    st = await arm_guard(ssh_app, plan, approved_by="test", run_root=str(runs), guard_dir=guard_dir(tmp_path))
    assert st.alive and st.time_left_s is not None

    await wait_until(lambda: any(r.method == "POST" for r in runpod.requests), timeout=40, what="the stop call")
    # the checkpoint the job writes on SIGTERM was finished BEFORE the meter stopped
    assert (out / "last.pt").stat().st_size == 4096
    stop = next(r for r in runpod.requests if r.method == "POST")
    assert stop.path == f"/v1/pods/{POD}/stop" and runpod.d.auth_ok(stop.headers, KEY)
    assert not [r for r in runpod.requests if r.method == "DELETE"]
    # the run root also holds the name claims (`.names/`): the job's own directory is the one not hidden
    log = (Path(runs) / next(p.name for p in sorted(Path(runs).iterdir()) if not p.name.startswith(".")) / "out.log").read_text()
    assert "saved" in log

    async def ended() -> bool:
        return not (await guard_status(ssh_app, "box")).alive

    await wait_until(ended, timeout=10, what="the guard to exit after firing")
    st = await guard_status(ssh_app, "box")
    assert st.state == "fired rule=deadline stop=done http=200"
    kinds = events(ssh_app)  # every event on the box, pulled into the audit log in order
    assert kinds[:2] == ["guard:armed", "guard:fire"] and "guard:term" in kinds and "guard:stop" in kinds
    assert "guard:kill" not in kinds
    assert KEY not in (Path(guard_dir(tmp_path)) / "events.log").read_text()
    assert not any(KEY in p.read_text(errors="replace") for p in Path(guard_dir(tmp_path)).iterdir() if p.is_file())


async def test_the_idle_rule_fires_only_after_the_last_job_ended_and_the_gpus_idle(
        ssh_app: App, sshd: Sshd, tmp_path: Path, runs: Path, volume: Path, runpod: FakeCloud) -> None:
    register_host_record(ssh_app.store, "box", "testhost", "runpod", POD)
    sshd.set_gpu("guard-busy")
    out = volume / "ck"
    out.mkdir()
    await launch_detached(ssh_app, "box", "sleep 3", str(volume), "short", backend="nohup", probe_s=1,
                          outputs=[str(out)], run_root=str(runs))
    plan = plan_guard(ssh_app, "box", GuardRules(idle_minutes=2 / 60, grace_s=5, interval_s=0.5))
    await arm_guard(ssh_app, plan, approved_by="test", run_root=str(runs), guard_dir=guard_dir(tmp_path))
    gd = Path(guard_dir(tmp_path))
    first_free: list[int] = []

    def idle_long_enough() -> bool:
        # the guard's own clock: it has seen no job for longer than the idle rule (2 s) plus two checks
        state = (gd / "state").read_text() if (gd / "state").exists() else ""
        fields = dict(x.split("=", 1) for x in state.split()[1:] if "=" in x)
        if fields.get("jobs") != "none":
            return False
        first_free[:1] = first_free[:1] or [int(fields["checked"])]
        return int(fields["checked"]) - first_free[0] >= 3

    await wait_until(idle_long_enough, timeout=40, what="the job to end and the idle window to pass")
    assert not runpod.requests  # the job has ended, but the GPU is busy (someone else's process): not idle
    st = await guard_status(ssh_app, "box")
    assert st.alive and "no job running" in st.line
    sshd.set_gpu("guard-idle")
    await wait_until(lambda: any(r.method == "POST" for r in runpod.requests), timeout=30, what="the idle stop")
    st = await guard_status(ssh_app, "box")
    assert "fire idle" in " ".join(f"{e.event} {e.detail}" for e in st.new_events)


async def test_a_guard_whose_checkpoints_a_stop_would_lose_only_writes_a_notice(
        ssh_app: App, tmp_path: Path, runs: Path, volume: Path, runpod: FakeCloud) -> None:
    register_host_record(ssh_app.store, "box", "testhost", "runpod", POD)
    out = tmp_path / "container-disk" / "ck"  # on "/" (container disk): wiped by a RunPod stop (RP2)
    await start_trainer(ssh_app, out, runs)
    plan = plan_guard(ssh_app, "box", GuardRules(max_hours=2 / 3600, grace_s=20, interval_s=0.5))
    assert plan.stop == "notice" and "container disk" in (plan.why_notice or "")
    await arm_guard(ssh_app, plan, approved_by="test", run_root=str(runs), guard_dir=guard_dir(tmp_path))

    async def notice() -> bool:
        return bool((await guard_status(ssh_app, "box")).notice)

    await wait_until(notice, timeout=40, what="the notice")
    st = await guard_status(ssh_app, "box")
    assert "STILL BILLING" in st.notice and "NOTICE" in st.line
    assert not runpod.requests  # nothing was sent to the platform at all
    assert (out / "last.pt").exists()  # the jobs still got their SIGTERM and checkpointed


async def test_the_guard_outlives_the_ssh_connection_and_the_server(
        ssh_settings: Settings, tmp_path: Path, runs: Path, volume: Path, runpod: FakeCloud) -> None:
    app = App.open(ssh_settings)
    register_host_record(app.store, "box", "testhost", "runpod", POD)
    plan = plan_guard(app, "box", GuardRules(max_hours=4 / 3600, grace_s=5, interval_s=0.5))
    await arm_guard(app, plan, approved_by="test", run_root=str(runs), guard_dir=guard_dir(tmp_path))
    await app.aclose()  # every connection closed; the server is gone
    await wait_until(lambda: any(r.method == "POST" for r in runpod.requests), timeout=30, what="the stop call")
    app2 = App.open(ssh_settings)
    try:
        st = await guard_status(app2, "box")
        assert "stop=done" in st.state
    finally:
        await app2.aclose()


async def test_no_credential_on_either_side_is_a_refusal_that_is_logged(
        ssh_app: App, tmp_path: Path, runs: Path, volume: Path, runpod: FakeCloud,
        monkeypatch: pytest.MonkeyPatch) -> None:
    register_host_record(ssh_app.store, "box", "testhost", "runpod", POD)
    monkeypatch.delenv("RUNPOD_API_KEY")
    plan = plan_guard(ssh_app, "box", GuardRules(max_hours=1 / 3600, grace_s=2, interval_s=0.5))
    assert "inside the instance" in plan.key_source
    await arm_guard(ssh_app, plan, approved_by="test", run_root=str(runs), guard_dir=guard_dir(tmp_path))

    async def refused() -> bool:
        await guard_status(ssh_app, "box")
        return "guard:refuse" in events(ssh_app)

    await wait_until(refused, timeout=30, what="the refusal")
    assert not runpod.requests


async def test_disarm_stops_the_guard_and_is_audited(ssh_app: App, tmp_path: Path, runs: Path, volume: Path,
                                                      runpod: FakeCloud) -> None:
    register_host_record(ssh_app.store, "box", "testhost", "runpod", POD)
    plan = plan_guard(ssh_app, "box", GuardRules(max_hours=1, interval_s=0.5))
    st = await arm_guard(ssh_app, plan, approved_by="test", run_root=str(runs), guard_dir=guard_dir(tmp_path))
    assert st.alive and st.time_left_s is not None and 3500 < st.time_left_s <= 3600
    assert re.search(r"\d+\.\d h left", st.line)
    st = await guard_status(ssh_app, "box", disarm=True)
    assert not st.alive and st.state == "disarmed"
    kinds = [e["event"] for e in audit_log.entries(ssh_app.store, target="box")]
    assert "guard_armed" in kinds and "guard_disarmed" in kinds


async def test_a_guard_needs_a_rule_and_sane_bounds(app: App) -> None:
    with pytest.raises(ConfigError, match="needs a rule"):
        plan_guard(app, "local", GuardRules())
    with pytest.raises(ConfigError, match="out of range"):
        plan_guard(app, "local", GuardRules(max_hours=-1))


async def test_platforms_without_an_in_box_stop_get_a_notice_guard(app: App) -> None:
    register_host_record(app.store, "lam", "local", "lambda", "lam-1")
    plan = plan_guard(app, "lam", GuardRules(max_hours=1))
    assert plan.stop == "notice" and "lambda has no stop verb" in (plan.why_notice or "")


# ---- the human approves arming: form elicitation through a real MCP client, or the terminal ----

class Human:
    def __init__(self, action: str, typed: str | None = None) -> None:
        self.action, self.typed, self.asked = action, typed, []  # type: ignore[var-annotated]

    async def __call__(self, context: object, params: object) -> object:
        from mcp.types import ElicitResult

        self.asked.append(params.message)  # type: ignore[attr-defined]
        return ElicitResult(action=self.action,  # type: ignore[arg-type]
                            content={"host": self.typed} if self.action == "accept" else None)


async def test_arming_through_mcp_needs_the_human_to_type_the_host(
        ssh_app: App, tmp_path: Path, volume: Path, runpod: FakeCloud, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from mcp_gpu.server import build_server

    register_host_record(ssh_app.store, "box", "testhost", "runpod", POD)
    monkeypatch.setenv("HOME", str(tmp_path))  # the guard dir defaults under the remote home
    args = {"host": "box", "max_hours": 1.0}
    wrong = Human("accept", "not-box")
    async with Client(build_server(app=ssh_app), elicitation_callback=wrong) as c:
        r = await c.call_tool("guard_arm", args)
    assert r.is_error and "does not match" in r.content[0].text  # type: ignore[union-attr]
    assert "SIGTERM" in wrong.asked[0] and "never destroy" in wrong.asked[0]
    declined = Human("decline")
    async with Client(build_server(app=ssh_app), elicitation_callback=declined) as c:
        r = await c.call_tool("guard_arm", args)
    assert r.is_error and "did not approve" in r.content[0].text  # type: ignore[union-attr]
    async with Client(build_server(app=ssh_app)) as c:  # a client that cannot show forms: nothing runs
        with pytest.raises(MCPError):
            await c.call_tool("guard_arm", args)
    from mcp_gpu.store import guards as repo

    assert repo.find(ssh_app.store, "box") is None  # none of that armed anything
    human = Human("accept", "box")
    async with Client(build_server(app=ssh_app), elicitation_callback=human) as c:
        r = await c.call_tool("guard_arm", args)
        assert not r.is_error, r.content
        assert r.structured_content is not None and r.structured_content["alive"] is True
        st = await c.call_tool("guard_status", {})
        assert "guard ALIVE" in st.content[0].text  # type: ignore[union-attr]
        d = await c.call_tool("guard_disarm", {"host": "box"})
        assert not d.is_error and d.structured_content["alive"] is False  # type: ignore[index]
    assert not runpod.requests


def test_the_cli_arms_only_with_a_human_at_the_terminal(home: Path, tmp_path: Path, runs: Path) -> None:
    import os
    import pty
    import subprocess

    env = {**os.environ, "MCP_GPU_HOME": str(home)}
    base = [sys.executable, "-m", "mcp_gpu"]
    subprocess.run([*base, "hosts", "add", "box", "local"], env=env, check=True, capture_output=True, timeout=60)
    arm = [*base, "guard", "arm", "box", "--max-hours", "1", "--run-root", str(runs)]
    piped = subprocess.run(["setsid", *arm], env=env, input="box\n", capture_output=True, text=True, timeout=60)
    assert piped.returncode == 2 and "no controlling terminal" in piped.stderr  # a pipe is not a human

    primary, secondary = pty.openpty()
    proc = subprocess.Popen(arm, env={**env, "HOME": str(tmp_path)}, stdin=secondary, stdout=secondary,
                            stderr=secondary, start_new_session=True,
                            preexec_fn=lambda: __import__("fcntl").ioctl(0, __import__("termios").TIOCSCTTY, 0))
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + 60
    while b"to approve" not in seen and time.monotonic() < deadline:
        try:
            seen += os.read(primary, 4096)
        except OSError:  # the child closed the terminal: it ended before asking
            raise AssertionError(seen.decode(errors="replace")) from None
    os.write(primary, b"box\n")
    out = b""
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            out += os.read(primary, 4096)
        except OSError:
            break
    proc.wait(timeout=30)
    os.close(primary)
    assert proc.returncode == 0, (seen + out).decode(errors="replace")
    assert b"only writes a loud NOTICE" in seen  # local has no stop verb: the human saw exactly that
    status = subprocess.run([*base, "guard", "status"], env={**env, "HOME": str(tmp_path)}, capture_output=True,
                            text=True, timeout=60)
    assert "box: guard ALIVE" in status.stdout
    subprocess.run(["pkill", "-f", str(tmp_path / ".mcp-gpu" / "guard")], check=False)


async def test_patrol_shows_the_guard_and_what_the_host_bills(
        ssh_app: App, tmp_path: Path, runs: Path, volume: Path, runpod: FakeCloud) -> None:
    from mcp_gpu.lifecycle.patrol import patrol
    from mcp_gpu.tools.patrol import render

    register_host_record(ssh_app.store, "box", "testhost", "runpod", POD)
    runpod.instances[POD].hourly = 2.49
    runpod.instances[POD].started = time.time() - 2 * 3600
    jid = await start_trainer(ssh_app, volume / "ck", runs)
    plan = plan_guard(ssh_app, "box", GuardRules(max_hours=1, interval_s=0.5))
    await arm_guard(ssh_app, plan, approved_by="test", run_root=str(runs), guard_dir=guard_dir(tmp_path))
    report = await patrol(ssh_app, [jid])
    host = report.hosts[0]
    assert host.guard is not None and "guard ALIVE" in host.guard and "h left" in host.guard
    assert host.billing is not None and "$2.49/h" in host.billing
    assert re.search(r"up 2\.0 h, so far \$4\.9\d", host.billing)
    assert "guard ALIVE (armed, jobs running)" in host.guard
    text = render(report)
    assert "box bills: runpod pod-guard-1" in text and "guard ALIVE" in text
    await guard_status(ssh_app, "box", disarm=True)


async def test_launch_with_a_guard_asks_for_the_human_and_arms_nothing_by_itself(app: App, tmp_path: Path,
                                                                                 runs: Path) -> None:
    from mcp import Client

    from mcp_gpu.server import build_server
    from mcp_gpu.store import guards as repo

    async with Client(build_server(app=app)) as c:
        r = await c.call_tool("launch_detached", {
            "host": "local", "command": "sleep 30", "workdir": str(tmp_path), "name": "guarded", "backend": "nohup",
            "probe_s": 1, "run_root": str(runs), "guard": {"max_hours": 6, "idle_minutes": 30}})
    assert not r.is_error, r.content
    nxt = r.structured_content["next"]  # type: ignore[index]
    assert "guard_arm(host='local', max_hours=6.0, idle_minutes=30.0)" in nxt and "human approves" in nxt
    assert repo.find(app.store, "local") is None
