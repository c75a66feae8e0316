"""The terminal deserves as much care as the agent: help on every option, verbs in lifecycle order, README in
step with `--help`, distinct pull/verify help, CLI verbs in hints, a status table coloured only on a terminal,
and a progress line only on a terminal."""

from __future__ import annotations

import argparse
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_gpu.cli import LIFECYCLE_ORDER, build_parser, waiting
from mcp_gpu.cli.patrol import table
from mcp_gpu.errors import ConnectError
from mcp_gpu.lifecycle.patrol import PatrolReport
from mcp_gpu.lifecycle.patrol_eval import JobPatrol

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "mcp_gpu"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _walk(parser: argparse.ArgumentParser, path: list[str]) -> list[tuple[str, argparse.Action]]:
    out: list[tuple[str, argparse.Action]] = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                out += _walk(sp, [*path, name])
        elif not isinstance(a, argparse._HelpAction | argparse._VersionAction):
            out.append((" ".join(path), a))
    return out


def test_every_option_of_every_verb_has_help() -> None:
    missing = [f"{path} {'/'.join(a.option_strings) or a.dest}" for path, a in _walk(build_parser(), ["mcp-gpu"])
               if not a.help]
    assert not missing, "options without help text: " + ", ".join(missing)


def verbs_in_help() -> list[str]:
    return [a.dest for a in _subparsers(build_parser())._choices_actions]


def test_verbs_are_listed_in_lifecycle_order() -> None:
    shown = verbs_in_help()
    ranked = [v for v in shown if v in LIFECYCLE_ORDER]
    assert ranked == sorted(ranked, key=LIFECYCLE_ORDER.index)
    assert shown[: len(ranked)] == ranked  # verbs not yet ranked come after the ranked ones
    assert shown.index("audit") < shown.index("smoke") < shown.index("launch") < shown.index("status") \
        < shown.index("verify") < shown.index("teardown")
    out = subprocess.run([*CLI, "--help"], capture_output=True, text=True, check=True).stdout
    positions = [out.index(f"\n    {v} ") for v in shown]
    assert positions == sorted(positions)
    assert "Exit codes" in out


def test_readme_cli_section_matches_help() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## The command line", 1)[1].split("\n## ", 1)[0]
    readme = re.findall(r"^\| `mcp-gpu ([a-z-]+)`", section, flags=re.M)
    assert readme == verbs_in_help()


def test_pull_and_verify_help_say_what_each_does() -> None:
    pull = subprocess.run([*CLI, "pull", "--help"], capture_output=True, text=True, check=True).stdout
    verify = subprocess.run([*CLI, "verify", "--help"], capture_output=True, text=True, check=True).stdout
    assert pull.replace("pull", "X") != verify.replace("verify", "X")
    pull, verify = " ".join(pull.split()), " ".join(verify.split())  # undo argparse's line wrapping
    assert "No load checks" in pull and "NOT teardown evidence" in pull
    assert "load-check every checkpoint" in verify and "teardown gate" in verify


def _report(states: list[str]) -> PatrolReport:
    jobs = [JobPatrol(job_id=f"job_{i}", name=f"j{i}", host="local", backend="tmux", state=s, previous_state=None,
                      changed=False, line="", next="") for i, s in enumerate(states)]
    return PatrolReport(at="now", duration_s=0, summary=[], changed=[], next="", jobs=jobs, hosts=[])


def test_status_table_colours_only_when_asked_and_keeps_columns_aligned() -> None:
    rep = _report(["running", "failed", "cancelled"])
    plain, coloured = table(rep), table(rep, colour=True)
    assert not any(ANSI.search(ln) for ln in plain)
    assert all(ANSI.search(ln) for ln in coloured)
    assert [ANSI.sub("", ln) for ln in coloured] == plain
    assert "\x1b[31mfailed" in coloured[2] and "\x1b[32mrunning" in coloured[1]


def _status(tmp_path: Path, tty: bool) -> str:
    env = {**os.environ, "MCP_GPU_HOME": str(tmp_path / "state")}
    env.pop("NO_COLOR", None)
    env["TERM"] = "xterm"
    if not tty:
        return subprocess.run([*CLI, "status"], capture_output=True, text=True, env=env, check=True).stdout
    master, slave = pty.openpty()
    proc = subprocess.Popen([*CLI, "status"], stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    buf = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    proc.wait(timeout=60)
    os.close(master)
    return buf.decode()


def test_status_uses_colour_on_a_terminal_only(tmp_path: Path) -> None:
    assert "JOB" in _status(tmp_path, tty=False) and "\x1b[" not in _status(tmp_path, tty=False)
    assert "\x1b[1mJOB" in _status(tmp_path, tty=True)


@pytest.mark.anyio
async def test_waiting_ticks_only_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    import anyio

    async def slow() -> int:
        await anyio.sleep(1.2)
        return 7

    assert await waiting("working", slow(), force=True) == 7
    err = capsys.readouterr().err
    assert "working… 0s" in err and "working… 1s" in err and err.endswith("\r\x1b[K")
    assert await waiting("working", slow()) == 7  # stderr is not a terminal here: nothing printed
    assert capsys.readouterr().err == ""

    async def boom() -> None:
        raise ConnectError("x")

    with pytest.raises(ConnectError):  # the error comes out bare, not wrapped in a group
        await waiting("working", boom(), force=True)


def test_cli_hints_name_cli_verbs(tmp_path: Path) -> None:
    env = {**os.environ, "MCP_GPU_HOME": str(tmp_path / "state")}
    r = subprocess.run([*CLI, "verify"], capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 2 and "mcp-gpu verify" in r.stderr and "job_id=" not in r.stderr


def test_a_job_launched_without_outputs_is_told_how_to_verify(tmp_path: Path) -> None:
    """Issue 13 item 1 at the terminal: `verify t1` fails on the default output dir; the next step names
    `--path`, and verifying with `--path` works."""
    from tests.jobhelpers import kill_runs, tmux_socket

    env = {**os.environ, "MCP_GPU_HOME": str(tmp_path / "state")}
    work = tmp_path / "w"
    (work / "res").mkdir(parents=True)
    runs = tmp_path / "runs"
    with tmux_socket() as sock:
        try:
            r = subprocess.run([*CLI, "launch", "local", "--name", "t1", "--workdir", str(work), "--run-root",
                                str(runs), "--probe-s", "5", "--option", f"tmux_socket={sock}", "--",
                                f"echo 1 > {work}/res/out.json"], capture_output=True, text=True, env=env,
                               check=False)
            assert r.returncode == 0, r.stdout + r.stderr
            assert "job_logs" not in r.stdout and "verify_artifacts" not in r.stdout
            nxt = next(ln for ln in r.stdout.splitlines() if ln.startswith("next:"))
            assert "mcp-gpu" in nxt, nxt
            v = subprocess.run([*CLI, "verify", "t1"], capture_output=True, text=True, env=env, check=False)
            # it declared no outputs, so nothing required is missing (the gate asks the human to accept "keeps
            # nothing"), but the answer says the default dir is absent and how to name the real one
            assert "checkpoints does not exist" in v.stdout
            assert "mcp-gpu verify t1 --path P" in v.stdout
            ok = subprocess.run([*CLI, "verify", "t1", "--path", str(work / "res")], capture_output=True, text=True,
                                env=env, check=False)
            assert ok.returncode == 0, ok.stdout + ok.stderr
            assert "mcp-gpu teardown local" in ok.stdout
        finally:
            kill_runs(runs)



def test_patrol_every_counts_down_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_gpu.cli.patrol import countdown

    countdown(0.2)
    assert capsys.readouterr().err == ""  # not a terminal
    master, slave = pty.openpty()
    with os.fdopen(slave, "w") as tty:
        monkeypatch.setattr(sys, "stderr", tty)
        countdown(1.2)
        tty.flush()
    out = os.read(master, 4096).decode()
    os.close(master)
    assert "next patrol in" in out and "Ctrl-C" in out
