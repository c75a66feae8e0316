"""One job per name, across processes: three `mcp-gpu launch` processes sharing a state dir, started at once
with the same name, give ONE job (the others hand back that job), on `local` and over a real sshd; launchers
that do NOT share a registry are stopped by the name's atomic claim on the box."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_gpu.store import Store
from mcp_gpu.store import jobs as jobs_repo
from tests.sshd import Sshd

STEPS = Path(__file__).parent / "jobs" / "steps.py"
MCP_GPU = [sys.executable, "-m", "mcp_gpu"]


def _launch_all(host: str, homes: list[Path], name: str, workdir: Path, runs: Path, sock: str,
                extra_env: dict[str, str] | None = None) -> list[subprocess.CompletedProcess[str]]:
    """Start one `mcp-gpu launch` per entry of `homes` at the same moment and wait for all of them."""
    workdir.mkdir(parents=True, exist_ok=True)
    procs = []
    for home in homes:
        env = {**os.environ, "MCP_GPU_HOME": str(home), **(extra_env or {})}
        procs.append(subprocess.Popen(
            [*MCP_GPU, "launch", host, "--name", name, "--workdir", str(workdir), "--run-root", str(runs),
             "--probe-s", "2", "--option", f"tmux_socket={sock}", "--json", "--",
             sys.executable, "-u", str(STEPS), "ok", "100000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def _run_dirs(runs: Path) -> list[Path]:
    return [p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")] if runs.exists() else []


def _assert_one_job(results: list[subprocess.CompletedProcess[str]], home: Path, host: str, name: str,
                    runs: Path) -> None:
    for r in results:
        assert r.returncode == 0, r.stderr
    answers = [json.loads(r.stdout) for r in results]
    ids = {a["job_id"] for a in answers}
    assert len(ids) == 1, answers
    assert sorted(a["reused"] for a in answers) == [False, True, True]
    store = Store(home / "registry.sqlite3")
    try:
        rows = jobs_repo.list_jobs(store, host=host, name=name)
        assert [r.id for r in rows] == list(ids)
        assert rows[0].state.value == "running"
    finally:
        store.close()
    assert len(_run_dirs(runs)) == 1  # one run dir, one job on the box


def test_three_processes_launching_one_name_locally_give_one_job(tmp_path: Path, runs: Path, sock: str) -> None:
    home = tmp_path / "state"
    results = _launch_all("local", [home] * 3, "same-name", tmp_path / "w", runs, sock)
    _assert_one_job(results, home, "local", "same-name", runs)


def test_three_processes_launching_one_name_over_ssh_give_one_job(tmp_path: Path, sshd: Sshd, runs: Path,
                                                                   sock: str) -> None:
    home = tmp_path / "state"
    results = _launch_all("testhost", [home] * 3, "same-ssh", tmp_path / "w", runs, sock,
                          {"MCP_GPU_SSH_CONFIG": str(sshd.ssh_config)})
    _assert_one_job(results, home, "testhost", "same-ssh", runs)


def test_launchers_with_separate_registries_are_stopped_by_the_claim_on_the_box(
        tmp_path: Path, sshd: Sshd, runs: Path, sock: str) -> None:
    homes = [tmp_path / f"state{i}" for i in range(3)]
    results = _launch_all("testhost", homes, "boxclaim", tmp_path / "w", runs, sock,
                          {"MCP_GPU_SSH_CONFIG": str(sshd.ssh_config)})
    won = [r for r in results if r.returncode == 0]
    lost = [r for r in results if r.returncode != 0]
    assert len(won) == 1 and len(lost) == 2, [(r.returncode, r.stderr[-300:]) for r in results]
    winner = json.loads(won[0].stdout)["job_id"]
    for r in lost:
        assert "held on the box by job " + winner in r.stderr and "nothing was started" in r.stderr
    assert len(_run_dirs(runs)) == 1
    assert (runs / ".names" / "boxclaim" / "job").read_text().strip() == winner


@pytest.mark.anyio
async def test_a_finished_name_can_be_launched_again_as_a_new_attempt(tmp_path: Path, runs: Path, sock: str) -> None:
    """The claim is released when its job finishes: the next launch of the name is attempt 2, not a reuse."""
    from mcp_gpu.app import App
    from mcp_gpu.config import Settings
    from mcp_gpu.lifecycle.launch import launch_detached

    app = App.open(Settings(home=tmp_path / "state", connect_timeout=5, command_timeout=30))
    try:
        wd = tmp_path / "w"
        wd.mkdir()
        cmd = f"{sys.executable} -u {STEPS} ok 2"
        first = await launch_detached(app, "local", cmd, str(wd), "again", probe_s=10, run_root=str(runs),
                                      options={"tmux_socket": sock})
        assert first.state.value == "succeeded", first
        second = await launch_detached(app, "local", cmd, str(wd), "again", probe_s=10, run_root=str(runs),
                                       options={"tmux_socket": sock})
        assert not second.reused and second.attempt == 2 and second.previous_id == first.job_id
    finally:
        await app.aclose()


def test_a_name_held_by_a_job_killed_with_its_wrapper_is_taken_over(tmp_path: Path) -> None:
    """A holder with no exit_code but no live wrapper or group (SIGKILLed together, a reboot) must not keep its
    name forever; a holder whose wrapper lives keeps it."""
    import importlib.resources

    script = importlib.resources.files("mcp_gpu.probes").joinpath("claim.sh").read_text()
    root = tmp_path / "runs"

    def claim(name: str, job: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", script, "claim", str(root), name, job, ""], capture_output=True,
                              text=True, timeout=30)

    assert claim("n", "job_dead").stdout.strip() == "claimed"
    (root / "job_dead").mkdir(parents=True)
    (root / "job_dead" / "pgid").write_text("999999\n")  # no such group, no exit_code: killed with its wrapper
    assert claim("n", "job_next").stdout.strip() == "claimed"
    live = subprocess.Popen(["sleep", "60"])
    try:
        (root / "job_next").mkdir()
        (root / "job_next" / "wrapper_pid").write_text(f"{live.pid}\n")
        held = claim("n", "job_third")
        assert held.returncode == 13 and held.stdout.strip() == "held=job_next"
    finally:
        live.kill()
        live.wait()
