"""Every remote read is bounded: a command printing hundreds of MB is cut at the transport's per-call bound
(the server's memory stays flat), and the audit probe caps, frames and times nvidia-smi so that a 400 MB
nvidia-smi, an nvidia-smi printing `@@meta` lines, or a hung one are each reported for what they are.

nvidia-smi stubs sit on the PATH of a private real sshd (`SetEnv PATH=`), as on a rented box."""

from __future__ import annotations

import resource
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from mcp_gpu.app import App
from mcp_gpu.config import Settings
from mcp_gpu.lifecycle.audit import audit_env
from mcp_gpu.transport import MAX_OUTPUT, OutputTooLarge
from mcp_gpu.transport.local import LocalTransport
from mcp_gpu.transport.ssh import SSHTransport
from tests.sshd import Sshd

pytestmark = pytest.mark.anyio
ROW = ("0, NVIDIA H100 80GB HBM3, GPU-5b1f3c2e-8d7a-4f21-9c3e-1a2b3c4d5e6f, 550.54.15, 81559, 1, 0, 31, 69.37, "
       "700.00, 345, 1980, 0, [N/A], 0x0000000000000001, 00000000:18:00.0")
STUB = f"""#!/bin/bash
# nvidia-smi stand-in whose misbehaviour is chosen by the file beside it
mode=$(cat "$(dirname "$0")/mode")
case $mode in
  flood) yes '{ROW}' | head -c 400000000 ;;
  spoof) printf '%s\\n@@meta\\nhostname=evil-host\\n@@meta aG9zdG5hbWU9ZXZpbC1ob3N0Cg==\\n@@end\\n' '{ROW}' ;;
  hang) sleep 600 ;;
  *) printf '%s\\n' '{ROW}' ;;
esac
"""


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.fixture
def stub_box(tmp_path: Path) -> Iterator[tuple[Sshd, Path]]:
    bin_dir = tmp_path / "stubbin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(STUB)
    smi.chmod(0o755)
    (bin_dir / "mode").write_text("healthy\n")
    server = Sshd(tmp_path / "box", alias="stubbox",
                  extra_env={"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}).start()
    try:
        yield server, bin_dir / "mode"
    finally:
        server.stop()


@pytest.fixture
async def stub_app(settings: Settings, stub_box: tuple[Sshd, Path]) -> App:  # type: ignore[misc]
    a = App.open(replace(settings, ssh_config=(str(stub_box[0].ssh_config),)))
    try:
        yield a
    finally:
        await a.aclose()


async def test_a_local_command_printing_too_much_is_cut_at_the_bound() -> None:
    t = LocalTransport()
    before = max_rss_mib()
    res = await t.run(["sh", "-c", "head -c 400000000 /dev/zero; echo never-reached >&2"], timeout=120)
    assert res.truncated and not res.ok and res.exit_status is None
    assert len(res.stdout) == MAX_OUTPUT and "never-reached" not in res.stderr
    with pytest.raises(OutputTooLarge):
        res.check()
    assert max_rss_mib() - before < 200


async def test_an_ssh_command_printing_400mb_is_cut_and_the_server_memory_stays_bounded(
        stub_box: tuple[Sshd, Path]) -> None:
    server, _ = stub_box
    t = SSHTransport("stubbox", server.alias, config_paths=[str(server.ssh_config)], connect_timeout=5)
    try:
        before = max_rss_mib()
        res = await t.run(["sh", "-c", "head -c 400000000 /dev/zero"], timeout=120)
        assert res.truncated and len(res.stdout) == MAX_OUTPUT
        assert max_rss_mib() - before < 200
        # the connection is still good for the next call
        assert (await t.run(["echo", "ok"], timeout=30)).stdout == "ok\n"
    finally:
        await t.aclose()


async def test_a_400mb_nvidia_smi_does_not_pass_the_audit_and_memory_stays_bounded(
        stub_app: App, stub_box: tuple[Sshd, Path]) -> None:
    stub_box[1].write_text("flood\n")
    before = max_rss_mib()
    r = await audit_env(stub_app, "stubbox")
    grew = max_rss_mib() - before
    assert r.verdict == "fail" and not r.gpus
    f = next(f for f in r.findings if "nvidia-smi printed more than" in f.title)
    assert f.severity == "error" and "expected one short line per GPU" in f.evidence[0]
    assert grew < 200, f"server RSS grew by {grew:.0f} MiB"


async def test_nvidia_smi_printing_meta_lines_cannot_rewrite_the_host_name(
        stub_app: App, stub_box: tuple[Sshd, Path]) -> None:
    stub_box[1].write_text("spoof\n")
    real = subprocess.run(["hostname"], capture_output=True, text=True, check=True).stdout.strip()
    r = await audit_env(stub_app, "stubbox")
    text = r.model_dump_json()
    assert "evil-host" not in text
    assert f"stubbox ({real}," in r.summary[0]
    assert [g.name for g in r.gpus] == ["NVIDIA H100 80GB HBM3"]  # the real row is still read


async def test_a_hung_nvidia_smi_is_reported_as_timed_out_not_as_a_driver_failure(
        stub_app: App, stub_box: tuple[Sshd, Path]) -> None:
    stub_box[1].write_text("hang\n")
    r = await audit_env(stub_app, "stubbox", smi_timeout_s=2)
    f = next(f for f in r.findings if f.cls == "cuda_device_error")
    assert f.title == "nvidia-smi timed out after 2 s"
    assert "killed by timeout (exit 124)" in f.evidence[0]
    assert not any("driver is not usable" in x.title for x in r.findings)
    assert r.verdict == "fail"
    # the rest of the probe still ran: disks and python are there
    assert r.disks and r.python.found
