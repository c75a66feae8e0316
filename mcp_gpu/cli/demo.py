"""`mcp-gpu demo`: the full lifecycle on `local`, driven through the MCP server exactly as an agent would.

audit_env → (phase 1, SSH and credentials, is skipped: `local` needs none) → smoke_cpu → launch_detached
(bundled trainer under tmux) → patrol until it finishes → verify_artifacts → request_teardown (the gate
passes; nothing to stop on `local`) → confirm_teardown, where the server asks the human in a form: the demo's
client declares form elicitation and answers it itself — the demo plays the human on `local` — printing the
question, standing in for the person who would type the instance id (`local`).

Each run gets a fresh state dir under <state dir>/demo/ (older finished runs are removed), and the demo ends
by printing the command that shows its jobs with `mcp-gpu status`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from mcp_gpu.app import App
from mcp_gpu.config import Settings


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the full lifecycle on this machine through the MCP server")
    p.add_argument("--steps", type=int, default=120, help="training steps of the bundled trainer (default 120)")
    p.add_argument("--step-s", type=float, default=0.1, help="seconds per step, so patrol sees it run (default 0.1)")
    p.add_argument("--timeout", type=float, default=300, help="give up waiting for the job after this many seconds")
    p.add_argument("--json", action="store_true", help="also print each tool's structured result")
    p.set_defaults(func=run)


WIDTH = 78  # every header line is exactly this wide


def header(title: str) -> str:
    """`== title ====…` exactly WIDTH wide; a title too long for the rule is cut with an ellipsis."""
    room = WIDTH - 7
    if len(title) > room:
        title = title[: room - 1] + "…"
    head = f"== {title} "
    return head + "=" * (WIDTH - len(head))


def _say(title: str) -> None:
    print("\n" + header(title))


def counts_line(counts: dict[str, int]) -> str:
    """verify's counts in words: what was listed and pulled, then only the problems that occurred."""
    n = counts.get
    line = f"{n('listed', 0)} file(s) listed, {n('pulled', 0)} pulled, {n('skipped', 0)} already verified"
    bad = [f"{n(k)} {k.replace('_', ' ')}" for k in ("failed", "corrupt", "invalid", "refused", "not_pulled") if n(k)]
    return line + ("; " + ", ".join(bad) if bad else "; none failed, corrupt, invalid or refused")


def fresh_home(root: Path) -> Path:
    """A new state dir for this run under `root`; earlier runs are removed unless a job of theirs may still run
    (a run dir that is in use is never pulled out from under its job)."""
    from mcp_gpu.store import Store

    root.mkdir(parents=True, exist_ok=True)
    for old in sorted(root.glob("run-*")):
        db = old / "registry.sqlite3"
        busy = False
        if db.exists():
            try:
                store = Store(db)
                try:
                    busy = bool(store.query("SELECT 1 FROM jobs WHERE state IN ('launching', 'running') LIMIT 1"))
                finally:
                    store.close()
            except Exception:  # an unreadable old run is kept, not guessed about
                busy = True
        if not busy:
            shutil.rmtree(old, ignore_errors=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    home = root / f"run-{stamp}"
    i = 1
    while home.exists():
        i += 1
        home = root / f"run-{stamp}-{i}"
    return home


def run(args: argparse.Namespace) -> int:
    base = Settings.from_env()
    home = fresh_home(base.home / "demo")
    settings = Settings(home=home, ssh_config=base.ssh_config, connect_timeout=base.connect_timeout,
                        command_timeout=base.command_timeout, keepalive=base.keepalive)
    return int(anyio.run(_demo, settings, args))


async def _call(client: Any, name: str, arguments: dict[str, Any], show_json: bool) -> dict[str, Any]:
    res = await client.call_tool(name, arguments)
    if res.is_error:
        text = " ".join(getattr(c, "text", "") for c in res.content)
        raise SystemExit(f"{name} failed: {text}")
    data: dict[str, Any] = res.structured_content or {}
    if show_json:
        print(json.dumps(data, indent=2)[:4000])
    return data


async def _demo(settings: Settings, args: argparse.Namespace) -> int:
    from mcp import Client

    from mcp_gpu.server import build_server

    app = App.open(settings)
    work = settings.home / "work"
    work.mkdir(parents=True, exist_ok=True)
    trainer = Path(__file__).resolve().parent.parent / "demo" / "train.py"
    shutil.copy(trainer, work / "train.py")
    py = sys.executable
    try:
        from mcp.client.session import ClientRequestContext
        from mcp.types import ElicitRequestParams, ElicitResult

        async def demo_human(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
            print(f"  [form shown to the human] {params.message}")
            print("  [the demo plays the human on `local` and types the instance id for you: local]")
            return ElicitResult(action="accept", content={"instance_id": "local"})

        async with Client(build_server(app=app), elicitation_callback=demo_human) as c:
            print(f"mcp-gpu demo: the whole lifecycle on `local` (this machine), through the MCP server, as an "
                  f"agent would drive it.\nstate dir {settings.home}\nwork dir  {work}")
            _say("phase 0 · audit_env(host='local')")
            audit = await _call(c, "audit_env", {"host": "local", "checkpoint_gb": 0.001, "keep": 3,
                                                 "run_dir": str(work / "checkpoints")}, args.json)
            for line in audit["summary"]:
                print("  " + line)

            _say("phase 1 · SSH and credentials: skipped")
            print("  phase 1 sets up the SSH alias to a rented box and pushes secrets over stdin; the demo runs on")
            print("  `local`, which needs neither, so there is nothing to do here.")

            _say("phase 2 · smoke_cpu: two steps on CPU, loggers off")
            smoke = await _call(c, "smoke_cpu", {"command": [py, "-u", "train.py", "--steps", "2", "--ckpt-every", "1",
                                                             "--out", str(work / "smoke-ckpt")],
                                                 "cwd": str(work), "timeout_s": 60}, args.json)
            print(f"  verdict {smoke['verdict']}: exit {smoke.get('exit_code')} in {smoke.get('duration_s', 0):.1f}s")
            for line in smoke.get("tail", smoke.get("last_lines", []))[-3:]:
                print("  | " + line)
            if smoke["verdict"] == "fail":
                return 1

            _say("phase 3 · launch_detached: the trainer under tmux, detached")
            cmd = (f"{py} -u train.py --steps {args.steps} --ckpt-every 20 --keep 3 --out checkpoints "
                   f"--sleep {args.step_s:g}")
            launch = await _call(c, "launch_detached", {"host": "local", "command": cmd, "workdir": str(work),
                                                        "name": "demo-train", "probe_s": 20,
                                                        "run_root": str(settings.home / "runs"),
                                                        "outputs": [str(work / "checkpoints")]}, args.json)
            job = launch["job_id"]
            print(f"  {job} {launch['state']} via {launch['backend']} in {launch['run_dir']}")
            for line in launch.get("first_lines", [])[:3]:
                print("  | " + line)

            _say("phase 4 · patrol until the job ends (an agent: every ~30 min)")
            deadline = time.monotonic() + args.timeout
            state = launch["state"]
            while time.monotonic() < deadline:
                pr = await _call(c, "patrol", {"job_ids": [job]}, args.json)
                j = next((x for x in pr["jobs"] if x["job_id"] == job), None)
                state = j["state"] if j else "unknown"
                print("  " + (j.get("line") or f"{job} {state}") if j else f"  {job} not in report")
                if state not in ("launching", "running", "stalled", "unreachable"):
                    break
                await anyio.sleep(2)
            if state != "succeeded":
                print(f"  job ended {state}: see `mcp-gpu logs {job}`")
                return 1

            _say("phase 5a · verify_artifacts: pull, SHA-256, load-check checkpoints")
            ver = await _call(c, "verify_artifacts", {"job_id": job}, args.json)
            print(f"  all_ok={ver['all_ok']}: {counts_line(ver.get('counts') or {})}")
            print(f"  manifest {ver.get('manifest') or ver.get('dest')}")

            _say("phase 5b · request_teardown: the server checks the Iron-Law gate")
            td = await _call(c, "request_teardown", {"host": "local", "reason": "demo finished"}, args.json)
            for line in td.get("summary", []):
                print("  " + line)
            if td.get("token"):
                print(f"  request {td.get('request_id')}: a human must approve '{td.get('phrase')}'")
                print("  On a real machine YOU approve it (a form in your client, or `mcp-gpu approve`); here the")
                print("  demo plays the human on `local` (there is no meter on `local`: nothing is stopped).")
                done = await _call(c, "confirm_teardown", {"token": td["token"]}, args.json)
                print(f"  → {done.get('status')}: {done.get('message')}")
            print("\ndemo complete: every phase ran through the MCP server.")
            env = f"MCP_GPU_HOME={shlex.quote(str(settings.home))}"
            print(f"its jobs, as `mcp-gpu` sees them: {env} mcp-gpu status --all")
            print(f"                                  {env} mcp-gpu jobs")
            return 0
    finally:
        await app.aclose()
