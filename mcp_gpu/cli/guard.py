"""`mcp-gpu guard status|arm|disarm`: the on-box guard. Arm and disarm ask YOU at the terminal (typed host name,
read from the controlling terminal, never from a pipe)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mcp_gpu.cli import emit_json, run_with_app
from mcp_gpu.errors import ConfirmationError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("guard", help="on-box guard that stops the meter when nobody watches (status, arm, disarm)",
                       description=__doc__)
    gs = p.add_subparsers(dest="guard_verb", metavar="ACTION")
    s = gs.add_parser("status", help="show every guard (or one host's): state, deadline, time left, new events")
    s.add_argument("host", nargs="?", help="one host (default: every host with a guard)")
    s.add_argument("--json", action="store_true", help="print JSON")
    a = gs.add_parser("arm", help="arm (or re-arm) the guard on a host; you approve at the terminal")
    a.add_argument("host", help="registered host name")
    a.add_argument("--max-hours", type=float, help="hard deadline, hours from now")
    a.add_argument("--idle-min", type=float, help="stop after no job ran and the GPUs idled this many minutes")
    a.add_argument("--grace-s", type=float, default=120.0, help="seconds from SIGTERM to SIGKILL (default 120)")
    a.add_argument("--interval-s", type=float, default=30.0, help="seconds between the guard's checks (default 30)")
    a.add_argument("--run-root", help="run root of the jobs on the host (default ~/.mcp-gpu/runs)")
    a.add_argument("--json", action="store_true", help="print JSON")
    d = gs.add_parser("disarm", help="stop the guard on a host; you approve at the terminal")
    d.add_argument("host", help="registered host name")
    d.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def ask_terminal(question: str, expected: str) -> None:
    """The human types `expected` on the controlling terminal (never piped stdin: an agent with a shell cannot
    answer for them by piping text in)."""
    from mcp_gpu.cli._tty import Terminal

    with Terminal() as tty:
        tty.say(question)
        typed = tty.ask(f"Type '{expected}' to approve (anything else refuses): ").strip()
    if typed != expected:
        raise ConfirmationError("not approved: nothing was changed", hint="run it again and type the exact text")


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle import guard as g

    verb = args.guard_verb or "status"
    if verb == "arm":
        rules = g.GuardRules(max_hours=args.max_hours, idle_minutes=args.idle_min, grace_s=args.grace_s,
                             interval_s=args.interval_s)

        async def arm(app: Any) -> Any:
            plan = g.plan_guard(app, args.host, rules)
            ask_terminal(plan.summary, args.host)
            return await g.arm_guard(app, plan, approved_by="terminal", run_root=args.run_root)

        st = run_with_app(arm)
        result: Any = st
        lines = [st.line]
    elif verb == "disarm":
        ask_terminal(f"Disarm the guard on {args.host}? Nothing will stop the meter when nobody watches.", args.host)
        st = run_with_app(lambda app: g.guard_status(app, args.host, disarm=True))
        result, lines = st, [st.line]
    else:
        from mcp_gpu.store import guards as repo

        async def status(app: Any) -> Any:
            hosts = [args.host] if getattr(args, "host", None) else [r["host"] for r in repo.all_guards(app.store)]
            return await g.all_guard_status(app, hosts)

        sts = run_with_app(status)
        result, lines = [s.model_dump() for s in sts], [s.line for s in sts] or ["no guard armed"]
    if getattr(args, "json", False):
        emit_json(result)
    else:
        print("\n".join(lines))
    sys.stdout.flush()
    return 0
