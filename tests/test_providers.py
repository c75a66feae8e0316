"""Providers against a real local HTTP server speaking each platform's documented meter-stop endpoints."""

from __future__ import annotations

import json
import logging
import secrets
import sys
from collections.abc import Callable, Iterator

import anyio
import pytest
import structlog
from structlog.testing import capture_logs

from mcp_gpu import log
from mcp_gpu.errors import ConfigError, ProviderError, UnsupportedError
from mcp_gpu.providers import API_KEY_ENV, Provider, ProviderResult, base_url_env, get_provider
from tests.fake_providers import FOREVER, FakeCloud

pytestmark = pytest.mark.anyio

KEY = "sk-test-" + secrets.token_hex(16)
HTTP = ["runpod", "vastai", "lambda", "paperspace"]
WITH_STOP = ["runpod", "vastai", "paperspace"]
DESTROY = {"runpod": "terminate", "vastai": "destroy", "lambda": "terminate", "paperspace": "destroy"}
EXPECTED = {  # (method, path) of the documented verb, then of the status read
    ("runpod", "terminate"): ("DELETE", "/v1/pods/{id}"),
    ("runpod", "stop"): ("POST", "/v1/pods/{id}/stop"),
    ("runpod", "get"): ("GET", "/v1/pods/{id}"),
    ("vastai", "destroy"): ("DELETE", "/api/v0/instances/{id}/"),
    ("vastai", "stop"): ("PUT", "/api/v0/instances/{id}/"),
    ("vastai", "get"): ("GET", "/api/v0/instances/{id}/"),
    ("lambda", "terminate"): ("POST", "/api/v1/instance-operations/terminate"),
    ("lambda", "get"): ("GET", "/api/v1/instances/{id}"),
    ("paperspace", "destroy"): ("DELETE", "/v1/machines/{id}"),
    ("paperspace", "stop"): ("PATCH", "/v1/machines/{id}/stop"),
    ("paperspace", "get"): ("GET", "/v1/machines/{id}"),
}
IID = "inst-4242"

Make = Callable[..., FakeCloud]


@pytest.fixture
def cloud() -> Iterator[Make]:
    started: list[FakeCloud] = []

    def make(name: str, **kw: object) -> FakeCloud:
        c = FakeCloud(name, KEY, **kw).start()  # type: ignore[arg-type]
        started.append(c)
        return c

    yield make
    for c in started:
        c.stop()


class Sleeps:
    """Records every wait a provider asks for; waits a moment for real so the server thread keeps pace."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await anyio.sleep(0)


def provider(c: FakeCloud, **kw: object) -> Provider:
    env = {API_KEY_ENV[c.d.name]: KEY, base_url_env(c.d.name): c.url}
    opts: dict[str, object] = {"http_timeout": 5.0, "poll_interval": 0.01, "poll_timeout": 5.0, **kw}
    return get_provider(c.d.name, env=env, **opts)  # type: ignore[arg-type]


def assert_documented_calls(c: FakeCloud, name: str, action: str) -> None:
    verb = EXPECTED[(name, action)]
    get = EXPECTED[(name, "get")]
    assert c.requests, "no request reached the server"
    first, rest = c.requests[0], c.requests[1:]
    assert (first.method, first.path) == (verb[0], verb[1].format(id=IID))
    if name == "lambda":
        assert first.body == {"instance_ids": [IID]}
    if (name, action) == ("vastai", "stop"):
        assert first.body == {"state": "stopped"}
    assert rest and all((r.method, r.path) == (get[0], get[1].format(id=IID)) for r in rest)
    for r in c.requests:
        assert c.d.auth_ok(r.headers, KEY), r.headers.get("authorization")


@pytest.mark.parametrize("name", HTTP)
async def test_destroy_sends_the_documented_verb_with_auth_then_polls_until_the_platform_reports_gone(
        cloud: Make, name: str) -> None:
    c = cloud(name)
    c.add(IID, lag=2)
    with anyio.fail_after(10):
        r = await provider(c).act(DESTROY[name], IID)
    assert (r.status, r.final_state, r.polls) == ("done", "gone", 3)
    assert_documented_calls(c, name, DESTROY[name])
    assert [call.method for call in r.http_calls] == [c.requests[0].method] + ["GET"] * 3
    assert r.http_calls[0].path == c.requests[0].path


@pytest.mark.parametrize("name", WITH_STOP)
async def test_stop_polls_until_the_platform_reports_the_instance_stopped(cloud: Make, name: str) -> None:
    c = cloud(name)
    c.add(IID, lag=1)
    with anyio.fail_after(10):
        r = await provider(c).act("stop", IID)
    assert (r.status, r.final_state, r.vendor_state) == ("done", "stopped", c.d.stopped)
    assert_documented_calls(c, name, "stop")


@pytest.mark.parametrize("name", HTTP)
async def test_destroy_words_are_synonyms_for_the_platforms_own_verb(cloud: Make, name: str) -> None:
    c = cloud(name)
    c.add(IID)
    with anyio.fail_after(10):
        r = await provider(c).act("destroy" if DESTROY[name] == "terminate" else "terminate", IID)
    assert (r.action, r.status) == (DESTROY[name], "done")


async def test_lambda_declares_stop_unsupported_with_a_reason_and_sends_nothing(cloud: Make) -> None:
    c = cloud("lambda")
    c.add(IID)
    p = provider(c)
    assert "stop" in p.unsupported and "stop" not in p.actions
    with pytest.raises(UnsupportedError) as e:
        await p.act("stop", IID)
    assert "no stop state" in e.value.message and "keeps billing" in e.value.message
    assert c.requests == []


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("name", HTTP)
async def test_a_refused_key_raises_a_non_retryable_error_that_does_not_echo_the_key(
        cloud: Make, name: str, status: int) -> None:
    c = cloud(name)
    c.add(IID)
    c.fault(status, body={"error": f"bad key {KEY}"})
    with pytest.raises(ProviderError) as e:
        await provider(c).act(DESTROY[name], IID)
    assert e.value.status == status and not e.value.is_retryable()
    assert API_KEY_ENV[name] in (e.value.hint or "")
    assert KEY not in str(e.value) and KEY not in json.dumps(e.value.to_dict())
    assert len(c.requests) == 1


@pytest.mark.parametrize("name", HTTP)
async def test_a_wrong_key_is_refused_by_the_server_and_reported_as_auth(cloud: Make, name: str) -> None:
    c = cloud(name)
    c.add(IID)
    env = {API_KEY_ENV[name]: "sk-wrong-" + secrets.token_hex(8), base_url_env(name): c.url}
    with pytest.raises(ProviderError) as e:
        await get_provider(name, env=env, poll_interval=0.01).act(DESTROY[name], IID)
    assert e.value.status == 401 and "rejected the API key" in e.value.message


@pytest.mark.parametrize("name", HTTP)
async def test_an_instance_already_gone_is_nothing_to_do_after_one_confirming_status_check(
        cloud: Make, name: str) -> None:
    c = cloud(name)
    with anyio.fail_after(10):
        r = await provider(c).act(DESTROY[name], IID)
    assert (r.status, r.final_state, r.polls) == ("nothing_to_do", "gone", 1)
    assert [x.status for x in r.http_calls] == [404, 404]


@pytest.mark.parametrize("name", HTTP)
async def test_a_429_is_retried_after_the_retry_after_delay(cloud: Make, name: str) -> None:
    c = cloud(name)
    c.add(IID)
    c.fault(429, headers={"Retry-After": "7"})
    sleeps = Sleeps()
    with anyio.fail_after(10):
        r = await provider(c, sleep=sleeps).act(DESTROY[name], IID)
    assert r.status == "done"
    assert sleeps.asked[0] == 7.0
    assert [x.status for x in r.http_calls][:2] == [429, 200]
    assert c.requests[0].method == c.requests[1].method != "GET"


@pytest.mark.parametrize("name", HTTP)
async def test_server_errors_are_retried_with_growing_backoff_then_succeed(cloud: Make, name: str) -> None:
    c = cloud(name)
    c.add(IID)
    c.fault(503, times=2)
    sleeps = Sleeps()
    with anyio.fail_after(10):
        r = await provider(c, sleep=sleeps, poll_interval=0.5).act(DESTROY[name], IID)
    assert r.status == "done"
    assert sleeps.asked[:2] == [0.5, 1.0]
    assert [x.status for x in r.http_calls][:3] == [503, 503, 200]


@pytest.mark.parametrize("name", HTTP)
async def test_persistent_server_errors_raise_a_retryable_error_after_the_retry_bound(cloud: Make, name: str) -> None:
    c = cloud(name)
    c.add(IID)
    c.fault(500, times=10, body={"error": f"boom, key was {KEY}"})
    with pytest.raises(ProviderError) as e:
        await provider(c, max_retries=2, sleep=Sleeps()).act(DESTROY[name], IID)
    assert e.value.status == 500 and e.value.is_retryable()
    assert len(c.requests) == 3
    assert KEY not in str(e.value) and "[redacted]" in str(e.value)


@pytest.mark.parametrize("name", HTTP)
async def test_accepted_but_still_running_is_polled_until_gone(cloud: Make, name: str) -> None:
    c = cloud(name)
    c.add(IID, lag=5, accept_status=202)
    with anyio.fail_after(10):
        r = await provider(c).act(DESTROY[name], IID)
    assert (r.status, r.polls) == ("done", 6)
    assert r.http_calls[0].status == 202


@pytest.mark.parametrize("name", HTTP)
async def test_an_instance_that_never_goes_away_times_out_and_never_claims_done(cloud: Make, name: str) -> None:
    c = cloud(name)
    c.add(IID, lag=FOREVER)
    with anyio.fail_after(10):
        r = await provider(c, poll_interval=0.02, poll_timeout=0.2).act(DESTROY[name], IID)
    assert r.status == "timed_out" and r.final_state != "gone"
    assert "NOT confirmed" in r.message and r.hint and "by hand" in r.hint
    assert r.polls >= 2


async def test_a_lambda_terminate_that_hangs_is_rechecked_by_status_lam14(cloud: Make) -> None:
    c = cloud("lambda")
    c.add(IID, lag=1)
    c.fault(200, method="POST", hang=True)
    with anyio.fail_after(10):
        r = await provider(c, http_timeout=0.3).act("terminate", IID)
    assert r.status == "done" and r.final_state == "gone"
    assert r.http_calls[0].status is None and "no answer" in (r.http_calls[0].note or "")
    assert "got no answer" in r.message


@pytest.mark.parametrize("gone", ["null", "destroyed", "exited"])
async def test_vastai_destroy_accepts_its_eventually_consistent_final_states_vast15(cloud: Make, gone: str) -> None:
    c = cloud("vastai", gone=gone)
    c.add(IID, lag=1)
    with anyio.fail_after(10):
        r = await provider(c).act("destroy", IID)
    assert r.status == "done"
    assert r.vendor_state == gone


@pytest.mark.parametrize("name", WITH_STOP)
async def test_stop_refused_because_already_stopped_is_nothing_to_do(cloud: Make, name: str) -> None:
    c = cloud(name)
    c.add(IID, state=c.d.stopped)
    c.fault(400, method=EXPECTED[(name, "stop")][0], body={"error": "already stopped"})
    with anyio.fail_after(10):
        r = await provider(c).act("stop", IID)
    assert (r.status, r.final_state) == ("nothing_to_do", "stopped")


async def test_another_refusal_raises_with_the_platforms_reason(cloud: Make) -> None:
    c = cloud("runpod")
    c.add(IID)
    c.fault(400, method="DELETE", body={"error": "pod is locked by a volume operation"})
    with pytest.raises(ProviderError) as e:
        await provider(c).act("terminate", IID)
    assert e.value.status == 400 and not e.value.is_retryable() and "locked" in e.value.message


async def test_an_unreachable_api_raises_after_bounded_retries_and_records_each_try() -> None:
    import socket

    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps = Sleeps()
    p = get_provider("runpod", env={"RUNPOD_API_KEY": KEY}, base_url=f"http://127.0.0.1:{port}/v1",
                     poll_interval=0.01, max_retries=2, sleep=sleeps)
    with pytest.raises(ProviderError) as e, anyio.fail_after(10):
        await p.act("terminate", IID)
    assert "could not reach" in e.value.message and e.value.status is None
    assert sleeps.asked == [0.01, 0.02]


@pytest.mark.parametrize("name", HTTP)
def test_a_missing_api_key_raises_config_error_naming_the_variable(name: str) -> None:
    with pytest.raises(ConfigError) as e:
        get_provider(name, env={})
    var = API_KEY_ENV[name]
    assert var in e.value.message and f"export {var}=" in (e.value.hint or "")


async def test_the_base_url_comes_from_the_env_override(cloud: Make) -> None:
    c = cloud("paperspace")
    c.add(IID)
    p = get_provider("paperspace", env={"PAPERSPACE_API_KEY": KEY, "MCP_GPU_PAPERSPACE_BASE_URL": c.url},
                     poll_interval=0.01)
    with anyio.fail_after(10):
        assert (await p.act("destroy", IID)).status == "done"
    assert len(c.requests) == 2


def test_providers_default_to_the_documented_base_urls() -> None:
    env = {v: KEY for v in API_KEY_ENV.values()}
    urls = {n: getattr(get_provider(n, env=env), "base_url", None) for n in HTTP}
    assert urls == {"runpod": "https://rest.runpod.io/v1", "vastai": "https://console.vast.ai",
                    "lambda": "https://cloud.lambdalabs.com", "paperspace": "https://api.paperspace.com/v1"}


async def test_an_instance_id_with_path_characters_is_rejected_before_any_call(cloud: Make) -> None:
    c = cloud("runpod")
    with pytest.raises(ConfigError):
        await provider(c).act("terminate", "../users/me")
    assert c.requests == []


def test_an_unknown_platform_raises_config_error_listing_the_known_ones() -> None:
    with pytest.raises(ConfigError) as e:
        get_provider("aws", env={})
    assert "runpod" in (e.value.hint or "") and "autodl" in (e.value.hint or "")


@pytest.mark.parametrize("name", ["autodl", "matpool", "featurize", "lanrui", "gpushare", "ssh"])
async def test_a_platform_without_an_api_returns_console_steps_and_never_claims_done(name: str) -> None:
    r = await get_provider(name, env={}).act("destroy", "abc-1")
    assert r.status == "manual" and r.http_calls == [] and r.polls == 0
    assert r.steps and any("abc-1" in s for s in r.steps)
    assert "nothing was done" in r.message


async def test_manual_steps_from_the_profile_replace_the_defaults() -> None:
    r = await get_provider("autodl", env={}, manual_steps=["Click 释放 on {instance_id}"]).act("release", "x9")
    assert r.steps == ["Click 释放 on x9"]


async def test_local_has_nothing_to_stop() -> None:
    r = await get_provider("local", env={}).act("terminate", "local")
    assert r.status == "nothing_to_do" and r.http_calls == []


def test_every_provider_satisfies_the_protocol() -> None:
    env = {v: KEY for v in API_KEY_ENV.values()}
    for name in [*HTTP, "autodl", "local"]:
        assert isinstance(get_provider(name, env=env), Provider)


@pytest.mark.parametrize("name", HTTP)
async def test_the_api_key_never_appears_in_results_errors_or_logs(
        cloud: Make, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    c = cloud(name)
    c.add(IID, lag=1)
    root = logging.getLogger()
    saved_handlers, saved_level, saved_config = root.handlers[:], root.level, structlog.get_config()
    try:
        log.configure("debug")
        logging.getLogger("httpx2").setLevel(logging.DEBUG)  # even the HTTP stack's own debug lines
        with capture_logs() as events, anyio.fail_after(10):
            r: ProviderResult = await provider(c).act(DESTROY[name], IID)
        log.configure("debug")
        log.get("test").info("after", result=r.model_dump())
        c.fault(500, times=10, body={"detail": KEY})
        c.add("other-1")
        with pytest.raises(ProviderError) as e:
            await provider(c, max_retries=1, sleep=Sleeps()).act(DESTROY[name], "other-1")
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stderr.flush()
    finally:
        logging.getLogger("httpx2").setLevel(logging.WARNING)
        root.handlers[:], root.level = saved_handlers, saved_level
        structlog.configure(**saved_config)
    err = capsys.readouterr().err
    assert "provider_http" in err
    assert events and any(ev["event"] == "provider_result" for ev in events)
    assert KEY not in r.model_dump_json()
    assert KEY not in json.dumps(events, default=str)
    assert KEY not in err
    assert KEY not in str(e.value) and KEY not in json.dumps(e.value.to_dict())
    assert KEY not in repr(provider(c))
