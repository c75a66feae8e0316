"""Hostile names, commands, paths and env values: nothing runs that the user did not ask for, bad names are
refused with a clear ConfigError before anything reaches a host."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_gpu.app import App
from mcp_gpu.errors import ConfigError
from mcp_gpu.lifecycle.jobs import refresh_job
from mcp_gpu.lifecycle.launch import launch_detached
from mcp_gpu.models import JobState
from mcp_gpu.store import jobs as jobstore
from tests.jobhelpers import kill_runs, wait_until

pytestmark = pytest.mark.anyio


def _evil(marker: Path) -> list[str]:
    m = str(marker)
    return [f"x;touch {m}", f"$(touch {m})", f"`touch {m}`", f"a'b;touch {m}", f'a"b$(touch {m})',
            f"a\ntouch {m}", "-rf", "--help", "ünïcødé-名前", "", "a b", "../../etc", "a/b", "." * 3, "x" * 64]


@pytest.mark.parametrize("index", range(15))
async def test_every_bad_job_name_gets_a_clear_config_error_and_nothing_runs(app: App, tmp_path: Path, sock: str,
                                                                             index: int) -> None:
    marker = tmp_path / "pwned"
    name = _evil(marker)[index]
    with pytest.raises(ConfigError) as info:
        await launch_detached(app, "local", f"touch {marker}", str(tmp_path), name, probe_s=1,
                              run_root=str(tmp_path / "runs"), options={"tmux_socket": sock})
    assert "invalid job name" in info.value.message and info.value.hint
    assert not marker.exists() and jobstore.list_jobs(app.store) == []


@pytest.mark.parametrize("bad", ["A;B", "1X", "X Y", "-x", "$(touch m)", "Ü", ""])
async def test_bad_env_and_secret_names_are_refused(app: App, tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match="environment variable name"):
        await launch_detached(app, "local", "true", str(tmp_path), "envname", env={bad: "v"})
    with pytest.raises(ConfigError, match="environment variable name"):
        await launch_detached(app, "local", "true", str(tmp_path), "envname", secret_env=[bad])
    assert jobstore.list_jobs(app.store) == []


async def test_a_missing_secret_or_a_line_break_in_a_path_is_refused(app: App, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPGPU_NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(ConfigError, match="not set"):
        await launch_detached(app, "local", "true", str(tmp_path), "nosecret", secret_env=["MCPGPU_NOT_SET_ANYWHERE"])
    with pytest.raises(ConfigError, match="line break"):
        await launch_detached(app, "local", "true", f"{tmp_path}\ntouch x", "nl")
    with pytest.raises(ConfigError):
        await launch_detached(app, "local", "true", str(tmp_path), "sock", options={"tmux_socket": "a;b"},
                              backend="tmux")
    assert not (tmp_path / "x").exists()


async def test_hostile_paths_env_values_and_commands_run_exactly_as_given(
        app: App, tmp_path: Path, sock: str, runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    markers = [tmp_path / f"m{i}" for i in range(6)]
    weird = f"-w;$(touch {markers[0]})`touch {markers[1]}`'q\"ü 名"
    work = tmp_path / weird  # the markers' own slashes make this a nest of hostile directory names
    work.mkdir(parents=True)
    root = tmp_path / f"-r;$(touch {markers[2]})`touch {markers[3]}`'\"ü"
    value = f"$(touch {markers[4]}); `touch {markers[5]}` \"dq\" 'sq' ;\nsecond line\t-x ünï\n"
    monkeypatch.setenv("MCP_HOSTILE_SECRET", value)
    command = ("pwd > where.txt\n"
               "printf '%s' \"$HOSTILE\" > env.txt\n"
               "printf '%s' \"$MCP_HOSTILE_SECRET\" > secret-copy.txt\n"
               "printf '%s\\n' 'a;b' '$(not run)' \"`echo ran`\" > cmd.txt\n")
    res = await launch_detached(app, "local", command, str(work), "hostile", env={"HOSTILE": value},
                                secret_env=["MCP_HOSTILE_SECRET"], probe_s=5, run_root=str(root),
                                options={"tmux_socket": sock, "heartbeat_s": 1, "probe_interval_s": 0.3})
    try:
        async def done() -> Any:
            rec, _ = await refresh_job(app, jobstore.get(app.store, res.job_id))
            return rec if rec.state.finished else None

        rec = await wait_until(done, what="hostile job to finish")
        assert rec.state is JobState.succeeded, (work / "where.txt").exists()
        assert (work / "where.txt").read_text().strip() == str(work)
        assert (work / "env.txt").read_text() == value
        assert (work / "secret-copy.txt").read_text() == value
        assert (work / "cmd.txt").read_text() == "a;b\n$(not run)\nran\n"  # the user's own backticks do run
        assert Path(res.run_dir).parent == root
        assert not any(m.exists() for m in markers)
    finally:
        kill_runs(root)


async def test_a_leading_dash_relative_workdir_is_a_path_not_an_option(app: App, tmp_path: Path, sock: str,
                                                                       runs: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-n").mkdir()
    res = await launch_detached(app, "local", "pwd", "-n", "dash", probe_s=5, run_root=str(runs),
                                options={"tmux_socket": sock, "probe_interval_s": 0.3})
    assert Path(jobstore.get(app.store, res.job_id).workdir) == tmp_path / "-n"


def test_the_cli_refuses_a_hostile_name_with_exit_2(tmp_path: Path, home: Path) -> None:
    marker = tmp_path / "cli-pwned"
    out = subprocess.run([sys.executable, "-m", "mcp_gpu", "launch", "local", "--name", f"$(touch {marker})",
                          "--workdir", str(tmp_path), "--", "touch", str(marker)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 2 and "invalid job name" in out.stderr
    assert not marker.exists()
