"""The Slurm backend against a real single-node cluster (`.ci/services.sh up`), reached over the real sshd.

The cluster is found through MCP_GPU_TEST_SLURM_CONF (the SLURM_CONF that services.sh prints); the test sshd
hands it to remote commands with `SetEnv SLURM_CONF=...`, exactly as a login node's environment would.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anyio
import pytest

from mcp_gpu.app import App
from mcp_gpu.backends import LaunchSpec, Observation, RunLayout
from mcp_gpu.backends.slurm import SlurmBackend, format_time, job_state, parse_observation, sbatch_argv
from mcp_gpu.config import Settings
from mcp_gpu.errors import ConfigError
from mcp_gpu.lifecycle.jobs import refresh_job
from mcp_gpu.lifecycle.launch import launch_detached
from mcp_gpu.models import JobState
from mcp_gpu.store import jobs as jobstore
from mcp_gpu.transport.ssh import SSHTransport
from tests.sshd import Sshd

pytestmark = pytest.mark.anyio
SLURM = SlurmBackend()


# --- pure parts: no cluster needed -----------------------------------------------------------------------------

def _spec(**options: object) -> LaunchSpec:
    return LaunchSpec(job_id="j-1", name="train-a", command="true", workdir="/w", options=dict(options))


def test_sbatch_argv_carries_every_option_as_one_checked_element() -> None:
    argv = sbatch_argv(_spec(partition="gpu", gpus=2, gpu_type="a100", time_limit_s=3601, signal_before_s=120,
                             requeue=True), RunLayout("/r/j-1"), "/r/j-1/b.sh", "/r/j-1/run-abc.sh")
    assert argv[:2] == ["sbatch", "--parsable"]
    for arg in ("--job-name=train-a", "--output=/r/j-1/out.log", "--chdir=/w", "--partition=gpu",
                "--gres=gpu:a100:2", "--time=0-01:01:00", "--signal=B:USR1@120", "--requeue"):
        assert arg in argv
    assert argv[-4:] == ["/r/j-1/b.sh", "/r/j-1", "/r/j-1/run-abc.sh", "/w"]
    gpus = sbatch_argv(_spec(gpus=1, gpu_flag="gpus"), RunLayout("/r"), "/b", "/s")
    assert "--gpus=1" in gpus and "--no-requeue" in gpus


@pytest.mark.parametrize("options", [{"partition": "-x; rm -rf /"}, {"partition": "gpu$(id)"}, {"time": "1h"},
                                     {"gpus": "two"}, {"signal": "KILL"}, {"account": "a\nb"}])
def test_hostile_or_malformed_slurm_options_are_refused_before_anything_runs(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        sbatch_argv(_spec(**options), RunLayout("/r"), "/b", "/s")


def test_time_limits_round_up_to_whole_minutes() -> None:
    assert (format_time(1), format_time(60), format_time(90), format_time(86400 + 7200)) == (
        "0-00:01:00", "0-00:01:00", "0-00:02:00", "1-02:00:00")


def test_scheduler_states_map_to_registry_states_with_exit_codes_and_signals() -> None:
    running = parse_observation("squeue=RUNNING\nsacct=7|RUNNING|0:0\nexit_code=\n")
    assert running.alive is True and job_state(running) is JobState.running
    timeout = parse_observation("squeue=\nsacct=7|TIMEOUT|0:9\nexit_code=\n")
    assert (timeout.alive, timeout.exit_code, timeout.exit_signal) == (False, 137, "KILL")
    assert job_state(timeout) is JobState.failed and "time limit" in timeout.detail
    cancelled = parse_observation("squeue=\nsacct=7|CANCELLED by 0|0:15\nexit_code=143 TERM\n")
    assert (cancelled.exit_code, cancelled.exit_signal, job_state(cancelled)) == (143, "TERM", JobState.cancelled)
    no_acct = parse_observation("squeue=\nscontrol=JobId=7 JobState=OUT_OF_MEMORY Reason=OOM ExitCode=0:125\n")
    assert no_acct.scheduler_state == "OUT_OF_MEMORY" and job_state(no_acct) is JobState.failed
    assert job_state(parse_observation("squeue=\nsacct=7|NODE_FAIL|0:0\n")) is JobState.preempted
    assert job_state(parse_observation("squeue=PENDING\n")) is JobState.launching
    assert parse_observation("squeue=\nscontrol=\nexit_code=\n").alive is None


# --- the real cluster ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def slurm_conf() -> str:
    conf = os.environ.get("MCP_GPU_TEST_SLURM_CONF", "")
    if not conf:
        pytest.skip("MCP_GPU_TEST_SLURM_CONF is not set: start the cluster with `bash .ci/services.sh up` "
                    "and export the SLURM_CONF it prints as MCP_GPU_TEST_SLURM_CONF")
    res = subprocess.run(["sinfo", "-h", "-o", "%T"], env={**os.environ, "SLURM_CONF": conf},
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"sinfo fails against {conf}: {res.stderr.strip()[:200]}")
    return conf


@pytest.fixture(scope="module")
def slurm_sshd(slurm_conf: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    server = Sshd(tmp_path_factory.mktemp("sshd-slurm"), extra_env={"SLURM_CONF": slurm_conf}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def box(slurm_sshd: Sshd) -> AsyncIterator[SSHTransport]:
    t = SSHTransport("slurm-box", slurm_sshd.alias, config_paths=[str(slurm_sshd.ssh_config)], connect_timeout=5)
    try:
        yield t
    finally:
        await t.aclose()


async def _launch(t: SSHTransport, tmp_path: Path, name: str, script: str, **options: object
                  ) -> tuple[dict[str, object], RunLayout, LaunchSpec]:
    layout = RunLayout(str(tmp_path / name))
    Path(layout.run_dir).mkdir(parents=True)
    script_path = Path(layout.run_dir) / "run-0123456789ab.sh"
    script_path.write_text(script)
    spec = LaunchSpec(job_id=f"job-{name}", name=name, command=script, workdir=layout.run_dir,
                      env={"PLAIN": "visible"}, secrets={"MY_SECRET": "s3cr3t $(touch /tmp/pwned) `x`\nline2"},
                      options=dict(options))
    handle = await SLURM.launch(t, spec, layout, str(script_path))
    return handle, layout, spec


async def _until(t: SSHTransport, handle: dict[str, object], layout: RunLayout, ok: Callable[[Observation], bool],
                 within: float) -> Observation:
    seen: list[Observation] = []
    with anyio.fail_after(within):
        while True:
            obs = await SLURM.observe(t, handle, layout)
            seen.append(obs)
            if ok(obs):
                return obs
            await anyio.sleep(0.3)


async def _log_shows(layout: RunLayout, text: str, within: float) -> None:
    with anyio.fail_after(within):
        while not (Path(layout.log).exists() and text in Path(layout.log).read_text()):
            await anyio.sleep(0.2)


@pytest.mark.slurm
async def test_a_submitted_job_is_observed_running_then_finished_with_its_exit_code(box: SSHTransport,
                                                                                    tmp_path: Path) -> None:
    assert await SLURM.available(box)
    script = ('echo "gpus=$CUDA_VISIBLE_DEVICES plain=$PLAIN"\n'
              'printf %s "$MY_SECRET" | sha256sum | cut -c1-16 | sed "s/^/secret-sha=/"\n'
              'echo started; while [ ! -e release ]; do sleep 0.2; done; exit "$(cat release)"\n')
    fail_h, fail_l, fail_spec = await _launch(box, tmp_path, "exit3", script, gpus=1, time_limit_s=300)
    ok_h, ok_l, _ = await _launch(box, tmp_path, "exit0", script, gpus=1)

    running = await _until(box, fail_h, fail_l, lambda o: o.scheduler_state == "RUNNING", 30)
    assert running.alive is True and job_state(running) is JobState.running
    await _log_shows(fail_l, "started", 20)
    (Path(fail_l.run_dir) / "release").write_text("3\n")  # the job's cwd is its workdir (--chdir)
    failed = await _until(box, fail_h, fail_l, lambda o: o.alive is False, 60)
    assert (failed.exit_code, failed.scheduler_state, job_state(failed)) == (3, "FAILED", JobState.failed)

    (Path(ok_l.run_dir) / "release").write_text("0\n")
    done = await _until(box, ok_h, ok_l, lambda o: o.alive is False, 60)
    assert (done.exit_code, done.scheduler_state, job_state(done)) == (0, "COMPLETED", JobState.succeeded)

    log = Path(fail_l.log).read_text()
    assert "gpus=0" in log or "gpus=1" in log  # the fake GRES gave it a GPU
    secret = fail_spec.secrets["MY_SECRET"]
    assert f"secret-sha={hashlib.sha256(secret.encode()).hexdigest()[:16]}" in log  # multi-line value intact
    assert not Path("/tmp/pwned").exists()
    for f in Path(fail_l.run_dir).iterdir():  # never on disk in the run dir, never in the handle's argv
        assert "s3cr3t" not in f.read_text(errors="replace"), f
    assert "s3cr3t" not in repr(fail_h)
    assert Path(fail_l.exit_code).read_text().split()[0] == "3"  # the shared wrapper recorded it too


@pytest.mark.slurm
async def test_cancel_sends_sigterm_that_the_job_sees_and_the_job_ends_cancelled(box: SSHTransport,
                                                                                 tmp_path: Path) -> None:
    script = ("trap 'echo job-saw-SIGTERM; exit 143' TERM\n"
              'echo ready; while :; do sleep 0.2; done\n')
    handle, layout, _ = await _launch(box, tmp_path, "cancel-me", script)
    await _until(box, handle, layout, lambda o: o.scheduler_state == "RUNNING", 30)
    await _log_shows(layout, "ready", 20)
    await SLURM.cancel(box, handle, layout)
    gone = await _until(box, handle, layout, lambda o: o.alive is False, 30)
    await _log_shows(layout, "job-saw-SIGTERM", 10)
    assert (gone.scheduler_state, job_state(gone)) == ("CANCELLED", JobState.cancelled)
    assert (gone.exit_code, gone.exit_signal) == (143, "TERM") and gone.cancelled
    await SLURM.cancel(box, handle, layout)  # cancelling a finished job again is harmless


@pytest.mark.slurm
async def test_launch_detached_on_slurm_records_the_exit_code_in_the_registry(slurm_sshd: Sshd, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "state", ssh_config=(str(slurm_sshd.ssh_config),), connect_timeout=5,
                        command_timeout=30, keepalive=2)
    app = App.open(settings)
    try:
        res = await launch_detached(app, slurm_sshd.alias, "echo hello-from-slurm\nsleep 1\nexit 4\n", str(tmp_path),
                                    "e2e-slurm", backend="slurm", probe_s=20, run_root=str(tmp_path / "runs"),
                                    options={"gpus": 1, "time_limit_s": 120})
        assert res.backend == "slurm" and not res.reused
        rec = jobstore.get(app.store, res.job_id)
        assert rec.handle["slurm_job_id"].isdigit()
        with anyio.fail_after(60):
            while not rec.state.finished:
                rec, _ = await refresh_job(app, rec)
                await anyio.sleep(0.3)
        assert (rec.state, rec.exit_code) == (JobState.failed, 4)
        assert "hello-from-slurm" in Path(RunLayout(rec.run_dir).log).read_text()
    finally:
        await app.aclose()


@pytest.mark.slurm
@pytest.mark.slow
async def test_a_job_past_its_time_limit_gets_the_checkpoint_signal_then_ends_timeout(box: SSHTransport,
                                                                                      tmp_path: Path) -> None:
    job = ("import signal, sys, time\n"
           "signal.signal(signal.SIGUSR1, lambda *a: print('checkpoint-requested', flush=True))\n"
           "signal.signal(signal.SIGTERM, lambda *a: (print('saw-SIGTERM', flush=True), sys.exit(143)))\n"
           "print('ready', flush=True)\n"
           "while True: time.sleep(0.2)\n")
    (tmp_path / "job.py").write_text(job)
    handle, layout, _ = await _launch(box, tmp_path, "limit", f"exec python3 {tmp_path}/job.py\n", time_limit_s=60,
                                      signal_before_s=30)
    await _log_shows(layout, "ready", 30)
    await _log_shows(layout, "checkpoint-requested", 100)
    end = await _until(box, handle, layout, lambda o: o.alive is False, 90)
    assert end.scheduler_state == "TIMEOUT" and job_state(end) is JobState.failed
    assert "saw-SIGTERM" in Path(layout.log).read_text()
    assert end.exit_code == 143
