"""`mcp-gpu launch HOST --name N --workdir W [--backend B] [--secret-env NAME]... -- COMMAND...`"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from mcp_gpu.app import App
from mcp_gpu.cli import emit_json, run_with_app, waiting
from mcp_gpu.errors import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("launch", help="start a job detached on a host (tmux/nohup/slurm/kubernetes)",
                       usage="mcp-gpu launch HOST --name N --workdir W [options] -- COMMAND...",
                       description="Everything after `--` is the command; one argument is taken as a shell line.")
    p.add_argument("host", help="'local', an ~/.ssh/config alias, user@host[:port], or a registered name")
    p.add_argument("--name", required=True, help="job name (same name on the same host = same job)")
    p.add_argument("--workdir", required=True, help="directory on the host the job runs from")
    p.add_argument("--backend", default="auto", help="auto (default), tmux, nohup, slurm, kubernetes")
    p.add_argument("--secret-env", action="append", default=[], metavar="NAME",
                   help="pass this env var from your environment to the job (value never stored); repeatable")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="non-secret env var; repeatable")
    p.add_argument("--probe-s", type=float, default=60, help="seconds to watch the start (default 60)")
    p.add_argument("--run-root", help="where run dirs go on the host (default ~/.mcp-gpu/runs)")
    p.add_argument("--output", action="append", default=[], metavar="DIR", help="output/checkpoint dir; repeatable")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="backend option; repeatable")
    p.add_argument("--guard-max-hours", type=float, metavar="H",
                   help="also arm the on-box guard: stop the meter H hours from now (you approve at the terminal)")
    p.add_argument("--guard-idle-min", type=float, metavar="M",
                   help="also arm the on-box guard: stop after M minutes with no job and idle GPUs")
    p.add_argument("--stall-floor-s", type=float, default=None,
                   help="never call the job stalled before this many silent seconds (default 120)")
    p.add_argument("--json", action="store_true", help="print the structured result")
    p.set_defaults(func=run, command=[])
    _split_at_double_dash(p)


def _split_at_double_dash(p: argparse.ArgumentParser) -> None:
    """Everything after the first `--` is the command, verbatim (argparse alone cannot mix a positional host,
    options and a trailing command)."""
    parse = p.parse_known_args

    def parse_known_args(args: Any = None, namespace: Any = None) -> Any:
        items = list(args or [])
        tail: list[str] = []
        if "--" in items:
            i = items.index("--")
            items, tail = items[:i], items[i + 1:]
        ns, extra = parse(items, namespace)
        ns.command = tail
        return ns, extra

    p.parse_known_args = parse_known_args  # type: ignore[method-assign]


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise ConfigError(f"{what} {item!r} is not NAME=VALUE", hint=f"e.g. {what} FOO=bar")
        out[k] = v
    return out


def command_of(parts: list[str]) -> str:
    if not parts:
        raise ConfigError("no command given", hint="put the command after `--`, e.g. -- python -u train.py")
    return parts[0] if len(parts) == 1 else shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle.launch import launch_detached, next_for

    command = command_of(list(args.command))
    env = _pairs(args.env, "--env")
    options: dict[str, Any] = dict(_pairs(args.option, "--option"))

    async def go(app: App) -> Any:
        res = await waiting(f"launching {args.name} on {args.host}, watching its start (up to {args.probe_s:g}s)",
                            launch_detached(app, args.host, command, args.workdir, args.name, backend=args.backend,
                                            env=env, secret_env=args.secret_env, probe_s=args.probe_s,
                                            run_root=args.run_root, outputs=args.output or None, options=options,
                                            stall_floor_s=args.stall_floor_s))
        if args.guard_max_hours is not None or args.guard_idle_min is not None:
            from mcp_gpu.cli.guard import ask_terminal
            from mcp_gpu.lifecycle import guard as g

            plan = g.plan_guard(app, args.host, g.GuardRules(max_hours=args.guard_max_hours,
                                                             idle_minutes=args.guard_idle_min))
            ask_terminal(plan.summary, args.host)
            st = await g.arm_guard(app, plan, approved_by="terminal", run_root=args.run_root)
            res.next = f"{st.line}; {res.next}"
        return res

    res = run_with_app(go)
    if args.json:
        emit_json(res)
    else:
        tag = " (already running: reused)" if res.reused else ""
        print(f"{res.job_id} {res.name} on {res.host}: {res.state.value}{tag} via {res.backend}, attempt {res.attempt}")
        print(f"run dir {res.run_dir}")
        for line in res.first_lines[:10]:
            print("  | " + line)
        for f in res.findings:
            print(f"  ! {f.severity} {f.cls}: {f.title}")
        print(f"next: {next_for(res, bool(args.output), 'cli')}")
    return 1 if res.state.value in ("failed", "lost") else 0
