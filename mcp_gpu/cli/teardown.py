"""`mcp-gpu teardown HOST`, `mcp-gpu audit-log`, `mcp-gpu totp-setup`: phase 5b for the person at the terminal.

`teardown` checks the gate, shows what would happen on the controlling terminal, and reads the phrase from that
terminal only (never from stdin: a pipe is refused); it records a terminal approval and executes in this process.
`audit-log` prints the append-only log and says whether its hash chain is intact; `--accept-break` (typed on the
terminal) records a break and restarts the chain. `totp-setup` enrols an authenticator for MCP_GPU_CONFIRM=totp.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio

from mcp_gpu.app import App
from mcp_gpu.cli import emit_json, run_with_app
from mcp_gpu.cli._tty import Terminal
from mcp_gpu.config import Settings
from mcp_gpu.errors import ConfirmationError
from mcp_gpu.store import audit_log
from mcp_gpu.untrusted import clean_line


def add_parser(sub: Any) -> None:
    p = sub.add_parser("teardown", help="stop a host's meter behind the Iron-Law gate and your typed phrase")
    p.add_argument("host", help="registered host name, or 'local'")
    p.add_argument("--action", default="auto", help="auto = the platform's meter-stop verb (destroy, stop, ...)")
    p.add_argument("--reason", default="", help="why, for the audit log")
    p.add_argument("--allow-running", action="store_true", help="jobs still running die with the machine")
    p.add_argument("--json", action="store_true", help="print the gate and the result as JSON")
    p.set_defaults(func=run_teardown)
    a = sub.add_parser("audit-log", help="the append-only log of requests, confirmations, declines and executions")
    a.add_argument("--host", help="only entries for this host")
    a.add_argument("--limit", type=int, default=200, help="newest entries to show (default 200)")
    a.add_argument("--json", action="store_true", help="print the entries as JSON")
    a.add_argument("--accept-break", action="store_true",
                   help="record that the hash chain is broken and restart it (typed on the terminal)")
    a.set_defaults(func=run_audit_log)
    t = sub.add_parser("totp-setup", help="enrol an authenticator app for MCP_GPU_CONFIRM=totp")
    t.add_argument("--force", action="store_true", help="replace an existing secret")
    t.set_defaults(func=run_totp_setup)


def run_teardown(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle import human_gate
    from mcp_gpu.lifecycle import teardown as td

    tty = Terminal()  # before anything else: no terminal, no teardown

    async def go(app: App) -> td.TeardownResult | None:
        req = await td.request_teardown(app, args.host, args.action, args.reason, allow_running=args.allow_running,
                                        elicitation=False)
        tty.say(f"teardown of {req.host}: {req.action} {req.target}")
        for line in req.summary[:-2]:
            tty.say("  " + clean_line(line))
        tty.say(f"\nType exactly `{req.phrase}` to proceed (anything else aborts):")
        typed = await anyio.to_thread.run_sync(tty.ask, "> ")
        code = None
        if req.totp_required:
            code = await anyio.to_thread.run_sync(tty.ask, "authenticator code: ")
        pending, _plan = td.pending_of(app, req.token)
        try:
            human_gate.record_terminal_approval(app, pending, typed, code)
        except ConfirmationError as err:
            tty.say(f"aborted: {err.message}; nothing was done")
            return None
        return await td.confirm_teardown(app, req.token, host=req.host)

    with tty:
        res = run_with_app(go)
    if res is None:
        return 1
    if args.json:
        emit_json(res)
        return 0
    print(f"{res.status}: {res.message}")
    for step in res.steps:
        print(f"  - {step}")
    return 0 if res.status in ("done", "nothing_to_do", "manual") else 1


def run_audit_log(args: argparse.Namespace) -> int:
    app = App.open(Settings.from_env())
    try:
        if args.accept_break:
            return _accept_break(app)
        report = audit_log.verify(app.store)
        rows = audit_log.entries(app.store, limit=max(1, args.limit) * (20 if args.host else 1))
    finally:
        app.store.close()
    if args.host:
        rows = [r for r in rows if r["target"] and (r["target"] == args.host or r["target"].startswith(args.host + "|"))]
        rows = rows[-args.limit:]
    if args.json:
        print(json.dumps({"chain": {"ok": report.ok, "problems": report.problems, "rows_checked": report.rows_checked},
                          "entries": rows}, indent=2, ensure_ascii=False))
        return 0 if report.ok else 1
    for r in rows:
        detail = json.dumps(r["detail"], ensure_ascii=False, sort_keys=True)
        print(f"#{r['id']:<5} {r['at']}  {r['event']:<22} {r['action'] or '-':<26} {r['target'] or '-'}  "
              f"{detail[:160]}")
    if not rows:
        print("the audit log is empty" + (f" for {args.host}" if args.host else ""))
    print(report.text())
    if not report.ok:
        print("Destructive acts are refused until you run `mcp-gpu audit-log --accept-break` (which records the "
              "break in the log).", file=sys.stderr)
        return 1
    return 0


def _accept_break(app: App) -> int:
    report = audit_log.verify(app.store)
    if report.ok:
        print(report.text() + ": nothing to accept")
        return 0
    with Terminal() as tty:
        tty.say(report.text())
        typed = tty.ask("Type `accept break` to record this and restart the chain: ")
    if typed.strip().lower() != "accept break":
        print("aborted: nothing was recorded")
        return 1
    _rep, rid = audit_log.accept_break(app.store, who="terminal")
    print(f"recorded as audit row #{rid}; the chain restarts there. Destructive acts are allowed again.")
    return 0


def run_totp_setup(args: argparse.Namespace) -> int:
    from mcp_gpu import totp

    settings = Settings.from_env()
    secret = totp.enrol(settings.ensure_home(), force=args.force)
    print("Add this to your authenticator app (scan it as a QR code or paste it); it is shown only here:")
    print(totp.otpauth_uri(secret))
    print("Then set MCP_GPU_CONFIRM=totp in the environment of the MCP server and the CLI.")
    return 0
