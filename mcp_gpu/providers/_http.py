"""What every API provider shares: one httpx2 client per call, bounded retries with Retry-After, the poll loop.

A platform module supplies only data and three small functions: the request for an action, the status path,
and how to read the vendor's state word from a status body; its `status_map` normalises that word.
httpx2's exceptions are translated here, once, into ProviderError.
"""

from __future__ import annotations

import base64
import math
import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple

import anyio
import httpx2

from mcp_gpu import log
from mcp_gpu.errors import ConfigError, ProviderError, UnsupportedError
from mcp_gpu.providers import API_KEY_ENV, ActionStatus, HttpCall, InstanceInfo, ProviderResult, Sleep

_log = log.get("mcp_gpu.providers")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DESTROY_WORDS = frozenset({"terminate", "destroy", "delete", "release"})
GONE = "gone"
MAX_RETRY_AFTER_S = 120.0
MAX_LIST_PAGES = 50  # a listing that never ends (a broken or hostile API) stops here, and says so


class Observation(NamedTuple):
    state: str          # normalised: gone, stopped, stopping, terminating, running, starting, unknown
    vendor: str | None  # the platform's own word, or "404" / "null"


class HttpProvider:
    """Base for RunPod, vast.ai, Lambda and Paperspace. Subclasses set the class data and override the hooks."""

    name: str = ""
    label: str = ""            # "RunPod": the name a person reads
    kind: str = "instance"     # pod / instance / machine
    key_url: str = ""          # where a key is created
    console_url: str = ""      # where a person checks by hand
    default_base_url: str = ""
    destroy_verb: str = "terminate"
    actions: frozenset[str] = frozenset()
    unsupported: Mapping[str, str] = {}
    status_map: Mapping[str, str] = {}

    def __init__(self, api_key: str, *, base_url: str | None = None, http_timeout: float = 30.0,
                 poll_interval: float = 5.0, poll_timeout: float = 600.0, max_retries: int = 4,
                 sleep: Sleep | None = None, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        if not api_key:
            raise ConfigError(f"{self.label} API key is empty", hint="set the platform's API key env var")
        self._key = api_key
        log.register_secret(api_key)
        # Basic auth puts base64(key + ":") on the wire: scrub that form too, in case anything ever echoes it.
        log.register_secret(base64.b64encode(f"{api_key}:".encode()).decode())
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.http_timeout = http_timeout
        self.poll_interval = poll_interval
        self.poll_timeout = poll_timeout
        self.max_retries = max_retries
        self._sleep: Sleep = sleep or anyio.sleep
        self._transport = transport

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    # ---- hooks a platform overrides -------------------------------------------------------------
    def request_for(self, action: str, instance_id: str) -> tuple[str, str, Any]:
        """(method, path, json body or None) of the documented verb."""
        raise NotImplementedError

    def status_path(self, instance_id: str) -> str:
        raise NotImplementedError

    def read_state(self, body: Any) -> str | None:
        """The vendor's state word from a 2xx status body; GONE when the body itself says the instance is gone."""
        raise NotImplementedError

    def client_kwargs(self) -> dict[str, Any]:
        return {"headers": {"Authorization": f"Bearer {self._key}"}}

    def list_request(self, cursor: str | None) -> str:
        """The path (with query) of one page of the account's instance listing."""
        raise NotImplementedError

    def list_page(self, body: Any) -> tuple[list[dict[str, Any]], str | None]:
        """(the instance objects on a page, the cursor of the next page or None)."""
        raise NotImplementedError

    def read_instance(self, item: dict[str, Any], now: float) -> InstanceInfo:
        raise NotImplementedError

    def info(self, iid: Any, vendor: Any, *, name: Any = None, hourly: Any = None, started: float | None = None,
             now: float = 0.0, ip: Any = None, ssh_host: Any = None, ssh_port: Any = None) -> InstanceInfo:
        """Build an InstanceInfo from the vendor's raw fields, tolerating missing or odd values."""
        raw = str(vendor) if vendor not in (None, "") else ""
        state = self.status_map.get(raw) or self.status_map.get(raw.lower()) or self.status_map.get(raw.upper()) \
            or "unknown"
        if state == GONE:
            state = "terminating"  # still listed: not gone yet
        price = _num(hourly)
        running = max(0.0, now - started) if started and state in ("running", "starting") else None
        cost = round(price * running / 3600.0, 2) if price is not None and running is not None else None
        port = _num(ssh_port)
        return InstanceInfo(provider=self.name, instance_id=str(iid), name=_text(name), state=state,
                            vendor_state=_text(vendor), hourly_usd=price, running_s=round(running, 1) if running else running,
                            cost_so_far_usd=cost, public_ip=_text(ip), ssh_host=_text(ssh_host),
                            ssh_port=int(port) if port is not None else None)

    def reached(self, action: str, obs: Observation) -> bool:
        if action == "stop":
            return obs.state in ("stopped", GONE)
        return obs.state == GONE

    # ---- the one public verb --------------------------------------------------------------------
    async def act(self, action: str, instance_id: str) -> ProviderResult:
        """Send the platform's verb for `action`, then poll until the platform confirms it or poll_timeout passes.

        Raises:
            UnsupportedError: the platform has no such verb (the reason is a sentence to repeat).
            ConfigError: unknown action or a malformed instance id.
            ProviderError: key refused (401/403, not retryable); 429/5xx past the retry bound (retryable);
                the platform refused the action for another reason; the API could not be reached.
        """
        action = self._canonical(action)
        if not _ID.fullmatch(instance_id or ""):
            raise ConfigError(f"invalid {self.label} {self.kind} id {instance_id!r}",
                              hint=f"pass the {self.kind} id exactly as the {self.label} console shows it")
        started = time.monotonic()
        async with self._client() as client:
            s = _Session(self, client)
            method, path, body = self.request_for(action, instance_id)
            resp = await s.send(method, path, body)
            first: str
            if resp is None:
                first = "no_answer"  # LAM14: the call may hang though the platform acts; the status decides
            elif resp.status_code == 404:
                first = "gone"
            elif resp.is_success:
                first = "accepted"
            else:
                obs = await self._observe(s, instance_id, None)
                if self.reached(action, obs):
                    return self._result(s, action, instance_id, "nothing_to_do", obs, 1, started,
                                        f"{self.label} refused the {action} ({resp.status_code}) because {self.kind} "
                                        f"{instance_id} is already {obs.state}; nothing to do.")
                raise ProviderError(
                    f"{self.label} refused to {action} {self.kind} {instance_id}: {resp.status_code} {_snippet(resp)}",
                    status=resp.status_code,
                    hint=f"read the reason above and check {self.kind} {instance_id} at {self.console_url}",
                )
            obs, polls, confirmed = await self._poll(s, action, instance_id)
        return self._finish(s, action, instance_id, first, obs, polls, confirmed, started)

    async def list_instances(self) -> list[InstanceInfo]:
        """Every instance of the account, following the platform's pagination (bounded by MAX_LIST_PAGES).

        Raises:
            ProviderError: key refused, the API unreachable, a page that is not the documented shape, or more
                pages than MAX_LIST_PAGES (the listing would be incomplete: never reported as complete).
        """
        now = time.time()
        out: list[InstanceInfo] = []
        async with self._client() as client:
            s = _Session(self, client)
            cursor: str | None = None
            for _page in range(MAX_LIST_PAGES):
                path = self.list_request(cursor)
                resp = await s.send("GET", path, None)
                if resp is None or not resp.is_success:
                    why = "no answer" if resp is None else f"{resp.status_code} {_snippet(resp)}"
                    raise ProviderError(f"{self.label} did not list instances ({why})",
                                        status=None if resp is None else resp.status_code,
                                        hint=f"retry in a minute; meanwhile check {self.console_url}")
                try:
                    items, cursor = self.list_page(resp.json())
                except (ValueError, TypeError, AttributeError) as err:
                    raise ProviderError(f"{self.label}'s instance listing is not in the documented shape ({err})",
                                        hint=f"check {self.console_url} by hand") from None
                out += [self.read_instance(it, now) for it in items if isinstance(it, dict)]
                if not cursor:
                    return out
        raise ProviderError(f"{self.label}'s listing did not end after {MAX_LIST_PAGES} pages; it is incomplete",
                            hint=f"check {self.console_url} by hand")

    # ---- internals ------------------------------------------------------------------------------
    def _canonical(self, action: str) -> str:
        a = (action or "").strip().lower()
        if a in DESTROY_WORDS:
            a = self.destroy_verb
        if a in self.unsupported:
            raise UnsupportedError(self.unsupported[a],
                                   hint=f"{self.label} supports: {', '.join(sorted(self.actions))}")
        if a not in self.actions:
            raise ConfigError(f"{self.label} has no action {action!r}",
                              hint=f"use one of: {', '.join(sorted(self.actions))}")
        return a

    def _client(self) -> httpx2.AsyncClient:
        kw = self.client_kwargs()
        headers = {"Accept": "application/json", "User-Agent": "mcp-gpu", **kw.pop("headers", {})}
        return httpx2.AsyncClient(base_url=self.base_url, headers=headers, timeout=httpx2.Timeout(self.http_timeout),
                                  transport=self._transport, **kw)

    async def _observe(self, s: _Session, instance_id: str, deadline: float | None) -> Observation:
        try:
            resp = await s.send("GET", self.status_path(instance_id), None, deadline=deadline)
        except ProviderError as e:
            if e.status in (401, 403):
                raise
            return Observation("unknown", None)  # a flaky status read is not a verdict: keep polling
        if resp is None:
            return Observation("unknown", None)
        if resp.status_code == 404:
            return Observation(GONE, "404")
        if not resp.is_success:
            return Observation("unknown", str(resp.status_code))
        try:
            body = resp.json()
        except ValueError:
            return Observation("unknown", None)
        vendor = self.read_state(body)
        if vendor == GONE:
            return Observation(GONE, "null")
        return Observation(self.status_map.get(vendor or "", "unknown"), vendor)

    async def _poll(self, s: _Session, action: str, instance_id: str) -> tuple[Observation, int, bool]:
        deadline = time.monotonic() + self.poll_timeout
        max_polls = max(1, math.ceil(self.poll_timeout / max(self.poll_interval, 1e-3)) + 1)
        polls = 0
        while True:
            obs = await self._observe(s, instance_id, deadline)
            polls += 1
            if self.reached(action, obs):
                return obs, polls, True
            if polls >= max_polls or time.monotonic() + self.poll_interval > deadline:
                return obs, polls, False
            await self._sleep(self.poll_interval)

    def _finish(self, s: _Session, action: str, iid: str, first: str, obs: Observation, polls: int,
                confirmed: bool, started: float) -> ProviderResult:
        seen = f"'{obs.vendor}'" if obs.vendor else "no readable state"
        if not confirmed:
            why = ("got no answer in time; it may or may not have been received" if first == "no_answer"
                   else "was accepted" if first == "accepted" else "answered 404, yet the status check still lists it")
            return self._result(
                s, action, iid, "timed_out", obs, polls, started,
                f"The {action} call for {self.label} {self.kind} {iid} {why}, but after {polls} status checks "
                f"the platform still reports {seen} ({obs.state}). It is NOT confirmed {_done_word(action)}.",
                hint=f"open {self.console_url} and check {self.kind} {iid} by hand; calling {action} again is "
                     f"safe and keeps polling",
            )
        if first == "gone":
            return self._result(s, action, iid, "nothing_to_do", obs, polls, started,
                                f"{self.label} has no {self.kind} {iid} (404), confirmed by a status check: "
                                f"nothing to {action}.")
        lead = (f"The {action} call got no answer within {self.http_timeout:g}s; the status was re-checked. "
                if first == "no_answer" else "")
        return self._result(s, action, iid, "done", obs, polls, started,
                            f"{lead}{self.label} reports {self.kind} {iid} {obs.state} ({seen}) after {polls} "
                            f"status check(s): the {action} is confirmed by the platform.")

    def _result(self, s: _Session, action: str, iid: str, status: ActionStatus, obs: Observation, polls: int,
                started: float, message: str, hint: str | None = None) -> ProviderResult:
        result = ProviderResult(provider=self.name, action=action, instance_id=iid, status=status,
                                final_state=obs.state, vendor_state=obs.vendor, polls=polls, http_calls=s.calls,
                                elapsed_s=round(time.monotonic() - started, 3), message=log.scrub(message),
                                hint=log.scrub(hint) if hint else None)
        _log.info("provider_result", provider=self.name, action=action, instance_id=iid, status=status,
                  final_state=obs.state, polls=polls, http_calls=len(s.calls))
        return result


class _Session:
    """One act(): the client, the record of calls, and the retry rule."""

    def __init__(self, p: HttpProvider, client: httpx2.AsyncClient) -> None:
        self.p = p
        self.client = client
        self.calls: list[HttpCall] = []

    async def send(self, method: str, path: str, body: Any, *, deadline: float | None = None) -> httpx2.Response | None:
        """The response (any status but 401/403/429/5xx), or None when the request timed out.

        Raises:
            ProviderError: 401/403; 429/5xx or connection failures past the retry bound.
        """
        p = self.p
        attempt = 0
        while True:
            try:
                resp = await self.client.request(method, path, json=body)
            except httpx2.TimeoutException:
                self._record(method, path, None, f"no answer within {p.http_timeout:g}s")
                return None
            except httpx2.TransportError as e:
                self._record(method, path, None, f"connection failed ({type(e).__name__})")
                delay = min(p.poll_interval * 2**attempt, 30.0)
                if attempt < p.max_retries and _fits(delay, deadline):
                    attempt += 1
                    await p._sleep(delay)
                    continue
                raise ProviderError(f"could not reach the {p.label} API at {p.base_url} ({type(e).__name__})",
                                    hint=f"check the network, then retry; meanwhile check {p.console_url}") from None
            self._record(method, path, resp.status_code)
            code = resp.status_code
            if code in (401, 403):
                raise ProviderError(
                    f"{p.label} rejected the API key ({code} on {method} {path})", status=code,
                    hint=f"check that the key in {_key_var(p.name)} is current and allowed to manage {p.kind}s "
                         f"(create one at {p.key_url}); the key itself is never shown")
            if code == 429 or code >= 500:
                delay = _retry_after(resp)
                if delay is None:
                    delay = min(p.poll_interval * 2**attempt, 30.0)
                if attempt < p.max_retries and _fits(delay, deadline):
                    attempt += 1
                    await p._sleep(delay)
                    continue
                raise ProviderError(
                    f"{p.label} answered {code} to {method} {path} {attempt + 1} time(s): {_snippet(resp)}",
                    status=code,
                    hint=f"the platform is rate-limiting or failing; retry in a minute and check {p.console_url}")
            return resp

    def _record(self, method: str, path: str, status: int | None, note: str | None = None) -> None:
        full = httpx2.URL(self.p.base_url + "/" + path.lstrip("/")).path
        self.calls.append(HttpCall(method=method, path=full, status=status, note=note))
        _log.info("provider_http", provider=self.p.name, method=method, path=full, status=status, note=note)


def parse_time(v: Any) -> float | None:
    """An ISO-8601 time as the platforms write it (with Z, an offset, or RunPod's `... +0000 UTC`) → epoch s."""
    if not isinstance(v, str) or not v.strip():
        return None
    from datetime import UTC, datetime

    text = v.strip().removesuffix(" UTC").replace("Z", "+00:00")
    for fmt in (None, "%Y-%m-%d %H:%M:%S.%f %z", "%Y-%m-%d %H:%M:%S %z"):
        try:
            dt = datetime.fromisoformat(text) if fmt is None else datetime.strptime(text, fmt)
        except ValueError:
            continue
        return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()
    return None


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) and f >= 0 else None


def _text(v: Any) -> str | None:
    if v in (None, ""):
        return None
    from mcp_gpu.untrusted import clean_line

    return clean_line(str(v), 200)  # vendor strings are remote text too (a pod name is the user's free text)


def _fits(delay: float, deadline: float | None) -> bool:
    return deadline is None or time.monotonic() + delay <= deadline


def _retry_after(resp: httpx2.Response) -> float | None:
    raw = resp.headers.get("Retry-After")
    if not raw:
        return None
    try:
        secs = float(raw)
    except ValueError:
        try:
            secs = parsedate_to_datetime(raw).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(secs, 0.0), MAX_RETRY_AFTER_S)


def _snippet(resp: httpx2.Response) -> str:
    text = " ".join(resp.text.split())[:200]
    return log.scrub(text) if text else "(empty body)"


def _done_word(action: str) -> str:
    return "stopped" if action == "stop" else "gone"


def _key_var(name: str) -> str:
    return API_KEY_ENV.get(name, "the API key env var")
