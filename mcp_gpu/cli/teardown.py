"""`mcp-gpu teardown HOST`, `mcp-gpu audit-log`, `mcp-gpu totp-setup`: phase 5b for the person at the terminal.

`teardown` checks the gate, shows what would happen, and asks the person to type the phrase (no tokens shown);
it executes only on an exact match. `audit-log` prints the append-only log of every destructive step.
`totp-setup` enrols an authenticator for MCP_GPU_CONFIRM=totp (the URI is printed here, never to an agent).
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any

from mcp_gpu.app import App
from mcp_gpu.cli import emit_json, run_with_app
from mcp_gpu.config import Settings
from mcp_gpu.confirm import normalise
from mcp_gpu.store import audit_log


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
    a.set_defaults(func=run_audit_log)
    t = sub.add_parser("totp-setup", help="enrol an authenticator app for MCP_GPU_CONFIRM=totp")
    t.add_argument("--force", action="store_true", help="replace an existing secret")
    t.set_defaults(func=run_totp_setup)


def run_teardown(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle import teardown as td

    async def ask(app: App) -> td.TeardownRequest:
        return await td.request_teardown(app, args.host, args.action, args.reason, allow_running=args.allow_running)

    req = run_with_app(ask)
    print(f"teardown of {req.host}: {req.action} {req.target}")
    for line in req.summary[:-1]:
        print("  " + line)
    print(f"\nType exactly `{req.phrase}` to proceed (anything else aborts):")
    try:
        typed = input("> ")
    except EOFError:
        typed = ""
    if normalise(typed) != normalise(req.phrase):
        print("aborted: the phrase did not match; nothing was done")
        return 1
    code = None
    if req.totp_required:
        code = getpass.getpass("authenticator code: ") if sys.stdin.isatty() else input("code> ")

    async def go(app: App) -> td.TeardownResult:
        return await td.confirm_teardown(app, req.token, typed, host=req.host, code=code, via="cli")

    res = run_with_app(go)
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
        rows = audit_log.entries(app.store, limit=max(1, args.limit) * (20 if args.host else 1))
    finally:
        app.store.close()
    if args.host:
        rows = [r for r in rows if r["target"] and (r["target"] == args.host or r["target"].startswith(args.host + "|"))]
        rows = rows[-args.limit:]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    for r in rows:
        detail = json.dumps(r["detail"], ensure_ascii=False, sort_keys=True)
        print(f"#{r['id']:<5} {r['at']}  {r['event']:<22} {r['action'] or '-':<26} {r['target'] or '-'}  "
              f"{detail[:160]}")
    if not rows:
        print("the audit log is empty" + (f" for {args.host}" if args.host else ""))
    return 0


def run_totp_setup(args: argparse.Namespace) -> int:
    from mcp_gpu import totp

    settings = Settings.from_env()
    secret = totp.enrol(settings.ensure_home(), force=args.force)
    print("Add this to your authenticator app (scan it as a QR code or paste it); it is shown only here:")
    print(totp.otpauth_uri(secret))
    print("Then set MCP_GPU_CONFIRM=totp in the environment of the MCP server and the CLI.")
    return 0
