"""`mcp-gpu approve [REQUEST_ID]`: the human channel for clients without form elicitation.

Without an id it lists the pending requests. With one it shows the stored plan (what the server computed, not
what the agent wrote) on the controlling terminal, and reads the phrase (and, with MCP_GPU_CONFIRM=totp, the
authenticator code) from that terminal only. A match records the approval in the registry; the agent's next
call (confirm_teardown / job_cancel with its token) then executes it in the server, after a fresh gate probe.
This command itself never stops a machine or signals a job. Typing `decline` refuses for good.

Refused: no controlling terminal (piped stdin, an agent's shell tool, cron), and a process that descends from the
MCP client or server that made the request (an agent running this through its own shell).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from mcp_gpu.app import App
from mcp_gpu.cli._tty import Terminal
from mcp_gpu.config import Settings
from mcp_gpu.confirm import get_pending, list_pending
from mcp_gpu.errors import ConfirmationError, NotFoundError
from mcp_gpu.untrusted import clean_line


def add_parser(sub: Any) -> None:
    p = sub.add_parser("approve", help="approve (or decline) a destructive request an agent made, on your terminal")
    p.add_argument("request_id", nargs="?", help="the id the agent showed (td-... or jc-...); none = list pending")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle import human_gate

    app = App.open(Settings.from_env())
    try:
        if not args.request_id:
            rows = list_pending(app.store)
            for p in rows:
                left = max(0, round(p.expires_at - time.time()))
                print(f"{p.id}  {clean_line(p.phrase)}  (expires in {left} s)")
            if not rows:
                print("no pending requests")
            return 0
        pending = get_pending(app.store, args.request_id)
        if pending is None:
            raise NotFoundError(f"no request {args.request_id!r}", hint="run `mcp-gpu approve` to list pending ones")
        inside = human_gate.started_by_requester(pending)
        if inside:
            raise ConfirmationError(
                "this command runs inside the process tree of the MCP client/server that made the request (an "
                "agent's own shell): it cannot approve", hint="run it yourself in a separate terminal window")
        with Terminal() as tty:
            tty.say(f"Request {pending.id} ({pending.kind}), made {pending.created_at}:")
            for line in pending.summary:
                tty.say("  " + clean_line(line))
            if pending.status != "pending" or pending.expired:
                tty.say(f"It is {'expired' if pending.expired else pending.status}: nothing to approve.")
                return 1
            tty.say(f"\nType exactly `{clean_line(pending.phrase)}` to approve, or `decline` to refuse for good:")
            typed = tty.ask("> ")
            if typed.strip().lower() == "decline":
                human_gate.record_terminal_decline(app, pending)
                tty.say("Declined. The request is void; nothing was done.")
                return 0
            code = tty.ask("authenticator code: ") if app.settings.confirm_mode == "totp" else None
            try:
                human_gate.record_terminal_approval(app, pending, typed, code)
            except ConfirmationError as err:
                tty.say(f"Not approved: {err.message}")
                return 1
            tty.say(f"Approved. Nothing has been stopped yet: the agent's next call with its token for {pending.id} "
                    "does it, after checking the gate again.")
        return 0
    finally:
        app.store.close()

