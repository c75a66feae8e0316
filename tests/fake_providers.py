"""A real HTTP server on 127.0.0.1 (random port) that speaks each platform's documented meter-stop endpoints.

It keeps a tiny model of instances, records every request (method, path, headers, JSON body), checks the auth
header the platform expects, and can be scripted with faults (401, 429 + Retry-After, 5xx, a hanging call).
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FOREVER = 10**9


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Fault:
    method: str | None
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    hang: bool = False  # apply the action, then hold the answer until the server stops (LAM14)


@dataclass
class Instance:
    state: str
    lag: int = 0                 # GETs that still report the in-between state after an action
    transit: str = ""
    final: str | None = None     # vendor state once settled; None = gone
    acted: bool = False
    accept_status: int = 200
    name: str = ""
    hourly: float | None = None
    started: float | None = None  # epoch seconds the platform says it last started
    ip: str = "127.0.0.1"
    ssh_port: int = 22


@dataclass(frozen=True)
class Dialect:
    name: str
    prefix: str                  # path prefix the client's base URL carries (runpod/paperspace: /v1)
    routes: tuple[tuple[str, str, str], ...]  # (method, regex with (?P<id>), op)
    running: str
    transit_destroy: str
    transit_stop: str
    stopped: str
    state_key: str
    wrap: str | None             # JSON envelope key for a status body
    auth: str                    # bearer | basic

    def auth_ok(self, headers: dict[str, str], key: str) -> bool:
        want = f"Bearer {key}" if self.auth == "bearer" else "Basic " + base64.b64encode(f"{key}:".encode()).decode()
        return headers.get("authorization") == want

    def status_body(self, iid: str, state: str | None) -> Any:
        inst = None if state is None else {"id": iid, self.state_key: state}
        return {self.wrap: inst} if self.wrap else inst


DIALECTS: dict[str, Dialect] = {
    "runpod": Dialect("runpod", "/v1", (
        ("DELETE", r"/v1/pods/(?P<id>[^/]+)", "destroy"),
        ("POST", r"/v1/pods/(?P<id>[^/]+)/stop", "stop"),
        ("GET", r"/v1/pods/(?P<id>[^/]+)", "get"),
    ), "RUNNING", "RUNNING", "RUNNING", "EXITED", "desiredStatus", None, "bearer"),
    "vastai": Dialect("vastai", "", (
        ("DELETE", r"/api/v0/instances/(?P<id>[^/]+)/", "destroy"),
        ("PUT", r"/api/v0/instances/(?P<id>[^/]+)/", "stop"),
        ("GET", r"/api/v0/instances/(?P<id>[^/]+)/", "get"),
    ), "running", "running", "running", "stopped", "actual_status", "instances", "bearer"),
    "lambda": Dialect("lambda", "", (
        ("POST", r"/api/v1/instance-operations/terminate", "destroy"),
        ("GET", r"/api/v1/instances/(?P<id>[^/]+)", "get"),
    ), "active", "terminating", "active", "terminated", "status", "data", "basic"),
    "paperspace": Dialect("paperspace", "/v1", (
        ("DELETE", r"/v1/machines/(?P<id>[^/]+)", "destroy"),
        ("PATCH", r"/v1/machines/(?P<id>[^/]+)/stop", "stop"),
        ("GET", r"/v1/machines/(?P<id>[^/]+)", "get"),
    ), "ready", "ready", "stopping", "off", "state", None, "bearer"),
}


class FakeCloud:
    """One platform's API. `gone` is how a destroyed instance reads: 404, or (vast.ai) `null`/`destroyed`/`exited`."""

    def __init__(self, dialect: str, key: str, *, gone: str = "404") -> None:
        self.d = DIALECTS[dialect]
        self.key = key
        self.gone = gone
        self.instances: dict[str, Instance] = {}
        self.faults: list[Fault] = []
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        cloud = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _any(self) -> None:
                cloud._handle(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)

    # ---- scripting ----
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.d.prefix}"

    page_size = 2  # small pages so listings exercise the documented pagination

    def add(self, iid: str, *, lag: int = 0, accept_status: int = 200, state: str | None = None, name: str = "",
            hourly: float | None = None, started: float | None = None, ssh_port: int = 22) -> Instance:
        inst = Instance(state=state or self.d.running, lag=lag, accept_status=accept_status, name=name,
                        hourly=hourly, started=started, ssh_port=ssh_port)
        self.instances[iid] = inst
        return inst

    def fault(self, status: int, *, method: str | None = None, times: int = 1, headers: dict[str, str] | None = None,
              body: Any = None, hang: bool = False) -> None:
        self.faults.extend(Fault(method, status, dict(headers or {}), body, hang) for _ in range(times))

    def start(self) -> FakeCloud:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # ---- serving ----
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        rec = Recorded(h.command, h.path, {k.lower(): v for k, v in h.headers.items()}, body)
        hang = False
        with self._lock:
            self.requests.append(rec)
            fault = next((f for f in self.faults if f.method in (None, h.command)), None)
            if fault is not None:
                self.faults.remove(fault)
                if not fault.hang:
                    return self._send(h, fault.status, fault.body, fault.headers)
                hang = True
            if not self.d.auth_ok(rec.headers, self.key):
                return self._send(h, 401, {"error": "unauthorized"})
            status, payload = self._route(h.command, h.path, body)
        if hang:
            self._release.wait(timeout=30)
        self._send(h, status, payload)

    def _route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        listing = self._listing(method, path)
        if listing is not None:
            return listing
        for m, pattern, op in self.d.routes:
            match = re.fullmatch(pattern, path)
            if m == method and match:
                ids = body.get("instance_ids", []) if op == "destroy" and self.d.name == "lambda" else [match["id"]]
                if op == "stop" and self.d.name == "vastai" and body != {"state": "stopped"}:
                    return 400, {"error": "bad state"}
                return self._op(op, ids)
        return 404, {"error": f"no route {method} {path}"}

    def _op(self, op: str, ids: list[str]) -> tuple[int, Any]:
        iid = ids[0] if ids else ""
        inst = self.instances.get(iid)
        if op == "get":
            return self._status(iid, inst)
        if inst is None:
            return 404, {"error": {"code": "not_found", "message": f"{iid} does not exist"}}
        inst.acted = True
        inst.transit = self.d.transit_stop if op == "stop" else self.d.transit_destroy
        inst.final = self.d.stopped if op == "stop" else None
        return inst.accept_status, {"id": iid, "ok": True}

    # ---- the documented list endpoints ----
    def _listed(self) -> list[tuple[str, Instance]]:
        out = []
        for iid, inst in self.instances.items():
            if inst.acted and inst.final is None and inst.lag <= 0:
                continue  # destroyed: no longer listed
            out.append((iid, inst))
        return out

    def _vendor_state(self, inst: Instance) -> str:
        if inst.acted:
            return inst.transit if inst.lag > 0 or inst.final is None else inst.final
        return inst.state

    def _listing(self, method: str, path: str) -> tuple[int, Any] | None:
        from datetime import UTC, datetime
        from urllib.parse import parse_qs, urlsplit

        if method != "GET":
            return None
        u = urlsplit(path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        rows = self._listed()
        iso = lambda t: datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t else None  # noqa: E731
        name = self.d.name
        if name == "runpod" and u.path == "/v1/pods":
            return 200, [{"id": iid, "name": i.name, "desiredStatus": self._vendor_state(i), "costPerHr": i.hourly,
                          "lastStartedAt": iso(i.started), "publicIp": i.ip, "portMappings": {"22": i.ssh_port}}
                         for iid, i in rows]
        if name == "lambda" and u.path == "/api/v1/instances":
            return 200, {"data": [{"id": iid, "name": i.name, "status": self._vendor_state(i), "ip": i.ip,
                                   "instance_type": {"name": "gpu_1x_a100",
                                                     "price_cents_per_hour": round((i.hourly or 0) * 100)}}
                                  for iid, i in rows]}
        start = int(q.get("next_token") or q.get("after") or 0)
        page = rows[start:start + self.page_size]
        more = start + self.page_size < len(rows)
        if name == "vastai" and u.path == "/api/v1/instances/":
            return 200, {"success": True, "instances_found": len(page), "total_instances": len(rows),
                         "next_token": str(start + self.page_size) if more else None,
                         "instances": [{"id": int(iid) if iid.isdigit() else iid, "label": i.name,
                                        "actual_status": self._vendor_state(i), "dph_total": i.hourly,
                                        "start_date": i.started, "public_ipaddr": i.ip, "ssh_host": i.ip,
                                        "ssh_port": i.ssh_port} for iid, i in page]}
        if name == "paperspace" and u.path == "/v1/machines":
            return 200, {"hasMore": more, "nextPage": str(start + self.page_size) if more else None,
                         "items": [{"id": iid, "name": i.name, "state": self._vendor_state(i), "publicIp": i.ip}
                                   for iid, i in page]}
        return None

    def _status(self, iid: str, inst: Instance | None) -> tuple[int, Any]:
        if inst is None:
            return self._gone(iid)
        if inst.acted and inst.lag > 0:
            inst.lag -= 1
            return 200, self.d.status_body(iid, inst.transit)
        if inst.acted and inst.final is None:
            return self._gone(iid)
        inst.state = inst.final if inst.acted and inst.final else inst.state
        return 200, self.d.status_body(iid, inst.state)

    def _gone(self, iid: str) -> tuple[int, Any]:
        if self.gone == "null":
            return 200, self.d.status_body(iid, None)
        if self.gone in ("destroyed", "exited"):
            return 200, self.d.status_body(iid, self.gone)
        return 404, {"error": "not found"}

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer
