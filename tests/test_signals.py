"""Signals that do what they say, with real tmux and real processes: a group SIGTERM (cancel, or from outside as a
spot preemption would send it) reaches the job and nothing hangs it up; a job that checkpoints on SIGTERM
finishes its save; the wrapper outlives the job and records its true exit; a job that ignores TERM is KILLed by
cancel after the grace (recorded as KILL) and, under an outside TERM, keeps running and is reported alive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_gpu import probes
from mcp_gpu.app import App
from mcp_gpu.backends import RunLayout
from mcp_gpu.backends.registry import get_backend
from mcp_gpu.backends.wrapper import CANCEL, WRAPPER
from mcp_gpu.lifecycle.jobs import refresh_job
from mcp_gpu.lifecycle.launch import launch_detached
from mcp_gpu.models import JobRecord, JobState
from mcp_gpu.store import jobs as jobstore
from mcp_gpu.transport.ssh import SSHTransport
from tests.jobhelpers import group_alive, pid_alive, sessions, wait_until
from tests.test_slurm import SLURM, _launch, _log_shows, _until, box, slurm_conf, slurm_sshd  # noqa: F401 (fixtures)

pytestmark = pytest.mark.anyio

# On TERM: says so, writes its checkpoint over ~3 s (a line every 0.1 s, then "complete"), renames it into place,
# says "saved" and exits 143 (or the status given as its second argument). SIGHUP keeps its default action: a
# hangup mid-save kills it, as it would a trainer.
TRAINER = """\
import os, signal, sys, time

ckpt = sys.argv[1]


def save(*_):
    print("saving checkpoint", flush=True)
    with open(ckpt + ".tmp", "w") as f:
        for i in range(30):
            f.write(f"shard {i}\\n")
            f.flush()
            time.sleep(0.1)
        f.write("complete\\n")
    os.replace(ckpt + ".tmp", ckpt)
    print("saved", flush=True)
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 143)


signal.signal(signal.SIGTERM, save)
print("ready", flush=True)
while True:
    time.sleep(0.1)
"""

# Ignores TERM (Python's SIG_IGN); HUP keeps its default action, so a hangup would end it.
STUBBORN = """\
import signal, time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(0.1)
"""

COMPLETE = "".join(f"shard {i}\n" for i in range(30)) + "complete\n"


def opts(sock: str, **extra: Any) -> dict[str, Any]:
    return {"tmux_socket": sock, "heartbeat_s": 1, "grace_s": 10, "probe_interval_s": 0.2, **extra}


async def _start(app: App, backend: str, name: str, program: str, work: Path, runs: Path, sock: str,
                 **extra: Any) -> tuple[JobRecord, RunLayout]:
    work.mkdir(parents=True, exist_ok=True)
    (work / "prog.py").write_text(program)
    cmd = f"{sys.executable} -u prog.py ckpt.txt"  # through the run script's shell: the intermediate bash is there
    res = await launch_detached(app, "local", cmd, str(work), name, backend=backend, probe_s=10,
                                run_root=str(runs), options=opts(sock, **extra))
    assert res.backend == backend and res.state is JobState.running, res
    layout = RunLayout(res.run_dir)
    await wait_until(lambda: "ready" in Path(layout.log).read_text(), what="the job to be ready")
    return jobstore.get(app.store, res.job_id), layout


def _pgid(layout: RunLayout) -> int:
    return int(Path(layout.pgid).read_text())


def _wrapper_pid(layout: RunLayout) -> int:
    """The wrapper is the job's parent: the job is its child `( ... exec setsid bash SCRIPT )`."""
    stat = Path(f"/proc/{int(Path(layout.pid).read_text())}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


async def _ended(app: App, job_id: str) -> JobRecord | None:
    rec, _ = await refresh_job(app, jobstore.get(app.store, job_id))
    return rec if rec.state.finished else None


async def _cancel(app: App, rec: JobRecord) -> None:
    """The backend's cancel, as `job_cancel` runs it once a human approved (the approval is not under test)."""
    t = await app.transport(rec.host)
    await get_backend(rec.backend).cancel(t, rec.handle, RunLayout(rec.run_dir))


def _assert_saved(work: Path, layout: RunLayout) -> None:
    log = Path(layout.log).read_text()
    assert "saving checkpoint" in log and "saved" in log, log
    assert (work / "ckpt.txt").read_text() == COMPLETE
    assert not (work / "ckpt.txt.tmp").exists()


BACKENDS = ["tmux", "nohup"]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_cancel_lets_a_sigterm_checkpoint_finish_and_records_the_true_exit(
        app: App, runs: Path, tmp_path: Path, sock: str, backend: str) -> None:
    work = tmp_path / "w"
    rec, layout = await _start(app, backend, f"ckpt-cancel-{backend}", TRAINER, work, runs, sock)
    pgid = _pgid(layout)
    await _cancel(app, rec)  # returns once the group is gone (the save fits well inside the 10 s grace)
    assert not group_alive(pgid)
    _assert_saved(work, layout)
    assert Path(layout.exit_code).read_text().strip() == "143 TERM"
    assert Path(layout.cancelled).read_text().split()[-1] == "TERM"
    done = await wait_until(lambda: _ended(app, rec.id), what="the cancel to be recorded")
    assert (done.state, done.exit_code, done.exit_signal) == (JobState.cancelled, 143, "TERM")
    if backend == "tmux":
        await wait_until(lambda: rec.id not in sessions(sock), what="the tmux session to close")


async def _preempt_once(app: App, backend: str, i: int, runs: Path, tmp_path: Path, sock: str) -> None:
    work = tmp_path / f"w{i}"
    rec, layout = await _start(app, backend, f"spot-{backend}-{i}", TRAINER, work, runs, sock)
    pgid, wrapper = _pgid(layout), _wrapper_pid(layout)
    assert os.getpgid(wrapper) != pgid  # the wrapper stands outside the group that cancel and preemption hit
    os.killpg(pgid, signal.SIGTERM)
    if i % 2:
        os.killpg(os.getpgid(wrapper), signal.SIGTERM)
    await wait_until(lambda: Path(layout.exit_code).exists(), timeout=30, what=f"try {i}: the recorded exit")
    assert not group_alive(pgid)  # the exit is written only once the job's whole group is gone
    await wait_until(lambda: not pid_alive(wrapper), what="the wrapper to exit after recording")
    _assert_saved(work, layout)
    assert Path(layout.exit_code).read_text().strip() == "143 TERM", f"try {i}"
    done = await wait_until(lambda: _ended(app, rec.id), what="the end to be recorded")
    assert (done.exit_code, done.exit_signal) == (143, "TERM") and done.state is not JobState.cancelled


@pytest.mark.parametrize(("backend", "tries"), [("tmux", 10), ("nohup", 4)])
async def test_an_outside_group_sigterm_lets_the_checkpoint_finish_every_time(
        app: App, runs: Path, tmp_path: Path, sock: str, backend: str, tries: int) -> None:
    """A spot preemption: TERM to the job's process group (the pgid file), and on odd tries to the wrapper's
    group too, as a box shutting down sends TERM to everything. Neither the wrapper's exit nor the pane closing
    may cut the save (before the fix the save survived about 1 try in 14)."""
    for i in range(tries):
        await _preempt_once(app, backend, i, runs, tmp_path, sock)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_job_that_ignores_term_is_killed_after_the_grace_and_recorded_as_kill(
        app: App, runs: Path, tmp_path: Path, sock: str, backend: str) -> None:
    work = tmp_path / "w"
    rec, layout = await _start(app, backend, f"stubborn-{backend}", STUBBORN, work, runs, sock, grace_s=2)
    pgid = _pgid(layout)
    await _cancel(app, rec)
    assert not group_alive(pgid)
    assert Path(layout.cancelled).read_text().split()[-1] == "KILL"
    assert Path(layout.exit_code).read_text().strip() == "137 KILL"  # the wrapper outlived the KILL and saw it
    done = await wait_until(lambda: _ended(app, rec.id), what="the cancel to be recorded")
    assert (done.state, done.exit_code, done.exit_signal) == (JobState.cancelled, 137, "KILL")
    ev = [e for e in jobstore.events(app.store, rec.id) if e.state == JobState.cancelled.value]
    assert ev and str(ev[-1].detail.get("cancelled", "")).endswith("KILL")


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_job_that_ignores_an_outside_term_keeps_running_and_is_reported_alive(
        app: App, runs: Path, tmp_path: Path, sock: str, backend: str) -> None:
    work = tmp_path / "w"
    rec, layout = await _start(app, backend, f"ignorer-{backend}", STUBBORN, work, runs, sock)
    pgid, wrapper = _pgid(layout), _wrapper_pid(layout)
    os.killpg(pgid, signal.SIGTERM)
    os.killpg(os.getpgid(wrapper), signal.SIGTERM)
    # the run script's shell, which does not ignore TERM, waits for its command instead of dying and leaving it
    # to a hangup; give a wrapper that would record an exit, or a pane that would close, every chance to do so
    for _ in range(3):
        Path(layout.heartbeat).unlink(missing_ok=True)
        await wait_until(lambda: Path(layout.heartbeat).exists(), what="a heartbeat after the TERM")
    assert not Path(layout.exit_code).exists()
    assert group_alive(pgid) and pid_alive(wrapper)
    assert "ready" in Path(layout.log).read_text()
    if backend == "tmux":
        assert rec.id in sessions(sock)
    rec2, obs = await refresh_job(app, jobstore.get(app.store, rec.id))
    assert obs is not None and obs.alive is True and rec2.state is JobState.running
    # and a hangup of the pane cannot reach it either: close the tmux session under it
    if backend == "tmux":
        subprocess.run(["tmux", "-L", sock, "kill-session", "-t", f"={rec.id}"], check=True)
        for _ in range(2):
            Path(layout.heartbeat).unlink(missing_ok=True)
            await wait_until(lambda: Path(layout.heartbeat).exists(), what="a heartbeat after the hangup")
        assert group_alive(pgid) and not Path(layout.exit_code).exists()
    os.killpg(pgid, signal.SIGKILL)
    await wait_until(lambda: Path(layout.exit_code).exists(), what="the wrapper, still there, to record the KILL")
    done = await wait_until(lambda: _ended(app, rec.id), what="the end after KILL")
    assert (done.state, done.exit_code, done.exit_signal) == (JobState.failed, 137, "KILL")


async def test_the_run_scripts_shell_waits_for_its_command_on_term_and_exits_with_its_status(
        app: App, runs: Path, tmp_path: Path, sock: str) -> None:
    """The run script's shell (not the trainer) is the job's main process: on TERM it waits for the save and takes
    its status (3 here: a save that failed), instead of dying at once with 143. (A job cannot set BASH_ENV through
    `env`: it is reserved, tests/security/test_sandbox_env.py.)"""
    work = tmp_path / "w"
    work.mkdir()
    (work / "prog.py").write_text(TRAINER)
    cmd = f"{sys.executable} -u prog.py ckpt.txt 3\necho after-the-trainer\n"
    res = await launch_detached(app, "local", cmd, str(work), "status", probe_s=10, run_root=str(runs),
                                options=opts(sock))
    layout = RunLayout(res.run_dir)
    await wait_until(lambda: "ready" in Path(layout.log).read_text(), what="the job to be ready")
    os.killpg(_pgid(layout), signal.SIGTERM)
    await wait_until(lambda: Path(layout.exit_code).exists(), timeout=30, what="the recorded exit")
    _assert_saved(work, layout)
    assert Path(layout.exit_code).read_text().strip() == "3"
    log = Path(layout.log).read_text()
    assert "after-the-trainer" not in log  # TERM still ends the script, once its command is done


async def test_strays_left_by_a_finished_script_are_hung_up_and_the_exit_waits_for_them(
        app: App, runs: Path, tmp_path: Path, sock: str) -> None:
    """A script that ends normally leaving a background process: the old pane hangup ended it; the wrapper now
    hangs it up itself (it has no terminal any more) and records the exit once the group is empty."""
    work = tmp_path / "w"
    work.mkdir()
    res = await launch_detached(app, "local", "sleep 300 & echo $! > stray.pid; echo up; exit 3", str(work), "strays",
                                probe_s=10, run_root=str(runs), options=opts(sock))
    layout = RunLayout(res.run_dir)
    await wait_until(lambda: Path(layout.exit_code).exists(), what="the exit")
    assert Path(layout.exit_code).read_text().strip() == "3"
    assert not pid_alive(int((work / "stray.pid").read_text()))
    assert not group_alive(_pgid(layout))


def test_wrapper_and_cancel_are_the_assembled_probe_files_and_pass_shellcheck(tmp_path: Path) -> None:
    import shutil

    alive = probes.load("lib/alive.sh")
    for name, text in (("wrapper.sh", WRAPPER), ("cancel.sh", CANCEL)):
        assert text == probes.load(name) and alive.rstrip("\n") in text and "# include:" not in text
        assert text.count("group_alive() {") == 1
        exe = shutil.which("shellcheck")
        if exe is None:
            pytest.fail("shellcheck is not installed (apt-get install shellcheck)")
        (tmp_path / name).write_text(text)
        out = subprocess.run([exe, "-s", "bash", str(tmp_path / name)], capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stdout


def test_a_kill_after_a_logged_sigterm_is_the_end_of_a_grace_window_not_an_oom() -> None:
    """The wrapper now records the true exit of a job that was still saving when the platform's KILL came (137,
    where the dead intermediate shell used to say 143): triage must still read it as a preemption."""
    from mcp_gpu.triage.engine import triage

    lines = ["step 10/100 loss 0.1", "SIGTERM received, saving checkpoint"]
    assert triage(lines, exit_code=137, exit_signal="KILL").primary == "preempted"
    assert triage(lines, exit_code=137, exit_signal="KILL", oom_kill_delta=1).primary == "host_oom_killed"
    assert triage(lines[:1], exit_code=137, exit_signal="KILL").primary == "host_oom_killed"


# --- Slurm: scancel and the time limit send TERM to every process of the job; `--signal=B:` only to the batch
# shell, which forwards the chosen signal to the job's group. Each way the job gets its TERM once and saves.

def _slurm_trainer(tmp_path: Path) -> tuple[str, Path]:
    (tmp_path / "prog.py").write_text(TRAINER)
    ckpt = tmp_path / "ckpt.txt"
    return f"python3 -u {tmp_path / 'prog.py'} {ckpt}\n", ckpt


def _saved_once(layout: RunLayout, ckpt: Path) -> None:
    log = Path(layout.log).read_text()
    assert log.count("saving checkpoint") == 1 and "saved" in log, log
    assert ckpt.read_text() == COMPLETE
    assert Path(layout.exit_code).read_text().strip() == "143 TERM"


@pytest.mark.slurm
async def test_scancel_lets_a_slurm_job_finish_its_checkpoint(box: SSHTransport, tmp_path: Path) -> None:  # noqa: F811
    cmd, ckpt = _slurm_trainer(tmp_path)
    handle, layout, _ = await _launch(box, tmp_path, "scancel-save", cmd)
    await _log_shows(layout, "ready", 30)
    await SLURM.cancel(box, handle, layout)  # TERM to every process of the job, KILL after KillWait (5 s here)
    end = await _until(box, handle, layout, lambda o: o.alive is False, 30)
    _saved_once(layout, ckpt)
    assert end.scheduler_state == "CANCELLED"


@pytest.mark.slurm
@pytest.mark.slow
async def test_slurm_signal_term_before_the_time_limit_reaches_the_job_once_and_the_save_completes(
        box: SSHTransport, tmp_path: Path) -> None:  # noqa: F811
    cmd, ckpt = _slurm_trainer(tmp_path)
    handle, layout, _ = await _launch(box, tmp_path, "limit-term", cmd, time_limit_s=60, signal="TERM",
                                      signal_before_s=30)
    assert "--signal=B:USR1@30" in handle["sbatch_argv"]  # type: ignore[operator]
    await _log_shows(layout, "ready", 30)
    await _log_shows(layout, "saved", 100)
    end = await _until(box, handle, layout, lambda o: o.alive is False, 60)
    _saved_once(layout, ckpt)
    assert "SIGTERM from Slurm (--signal), forwarded to the job" in Path(layout.log).read_text()
    assert end.scheduler_state != "TIMEOUT"  # it ended on its own, checkpoint written, before the limit
