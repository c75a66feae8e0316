"""`mcp-gpu hosts [add NAME TARGET ...]`: the host registry."""

from __future__ import annotations

import argparse
from typing import Any

from mcp_gpu.app import App
from mcp_gpu.cli import emit_json
from mcp_gpu.config import Settings
from mcp_gpu.store import hosts


def add_parser(sub: Any) -> None:
    p = sub.add_parser("hosts", help="list or register hosts (platform + instance id for teardown)")
    hs = p.add_subparsers(dest="hosts_verb")
    a = hs.add_parser("add", help="register or update a host")
    a.add_argument("name", help="short name used in every other verb, e.g. box1")
    a.add_argument("target", help="'local', an ~/.ssh/config alias, or user@host[:port]")
    a.add_argument("--platform", help="platform profile: runpod, vastai, autodl, ... (`mcp-gpu profiles`)")
    a.add_argument("--instance-id", help="the provider's instance/pod id (teardown stops this one)")
    p.add_argument("--json", action="store_true", help="print the hosts as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.tools.register_host import register_host_record

    app = App.open(Settings.from_env())
    try:
        if args.hosts_verb == "add":
            rec = register_host_record(app.store, args.name, args.target, args.platform, args.instance_id)
            print(f"registered {rec.name} → {rec.target} platform={rec.platform or '-'} "
                  f"instance={rec.instance_id or '-'}")
            return 0
        rows = hosts.all_hosts(app.store)
        if args.json:
            emit_json([r.model_dump() for r in rows])
        else:
            for r in rows:
                print(f"{r.name:16} {r.target:28} {r.platform or '-':12} {r.instance_id or '-'}")
            if not rows:
                print("no hosts registered (`local` always works)")
        return 0
    finally:
        app.store.close()
