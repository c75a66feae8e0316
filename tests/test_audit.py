"""audit_env end to end: real sshd, fake nvidia-smi fixtures on the remote PATH, real df/cgroup/python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcp_gpu.app import App
from mcp_gpu.errors import ConnectError, TransportError
from mcp_gpu.lifecycle.audit import audit_env
from tests.sshd import Sshd

pytestmark = pytest.mark.anyio


def classes(report: object) -> dict[str, str]:
    return {f.cls: f.severity for f in report.findings}  # type: ignore[attr-defined]


async def test_healthy_gpu_host_over_ssh_passes_and_reads_in_about_a_dozen_lines(ssh_app: App, sshd: Sshd) -> None:
    r = await audit_env(ssh_app, "testhost", checkpoint_gb=0.001, keep=3)
    assert r.gpus and r.gpus[0].name == "NVIDIA H100 80GB HBM3" and r.gpus[0].memory_total_mib == 81559
    assert r.gpus[0].sm_clock_max_mhz == 1980 and r.gpus[0].throttle_reasons == ["gpu_idle"]
    assert r.round_trips == 1 and r.budget is not None and r.budget.ok
    assert {d.path for d in r.disks} >= {"/", "/dev/shm"}
    assert all(d.inodes_total >= 0 for d in r.disks)
    assert not [f for f in r.findings if f.severity in ("error", "critical")], r.findings
    assert len(r.summary) <= 14
    rows = ssh_app.store.query("SELECT host, verdict FROM audits")
    assert [(x["host"], x["verdict"]) for x in rows] == [("testhost", r.verdict)]


async def test_eight_gpus_are_all_parsed(ssh_app: App, sshd: Sshd) -> None:
    sshd.set_gpu("eight")
    r = await audit_env(ssh_app, "testhost")
    assert [g.index for g in r.gpus] == list(range(8))
    assert "8× NVIDIA A100-SXM4-80GB" in r.summary[1]


async def test_uncorrected_ecc_remap_and_xid_48_fail_the_audit(ssh_app: App, sshd: Sshd) -> None:
    sshd.set_gpu("ecc")
    r = await audit_env(ssh_app, "testhost")
    assert r.verdict == "fail"
    sev = [f.severity for f in r.findings if f.cls == "cuda_device_error"]
    assert "critical" in sev  # Xid 48
    titles = " ".join(f.title for f in r.findings)
    assert "2 uncorrected ECC errors" in titles and "Xid 48" in titles and "remap" in titles


async def test_thermal_throttling_and_busy_gpu_warn(ssh_app: App, sshd: Sshd) -> None:
    sshd.set_gpu("throttle")
    r = await audit_env(ssh_app, "testhost")
    c = classes(r)
    assert c.get("gpu_throttled") == "warn" and c.get("gpu_busy") == "warn"
    assert "hw_thermal_slowdown" in r.gpus[0].throttle_reasons


async def test_missing_nvidia_smi_is_an_error_on_a_remote_host(ssh_app: App, sshd: Sshd) -> None:
    sshd.set_gpu("absent")
    r = await audit_env(ssh_app, "testhost")
    assert classes(r)["no_gpu"] == "error" and r.verdict == "fail"


async def test_driver_failure_is_reported_with_nvidias_message(ssh_app: App, sshd: Sshd) -> None:
    sshd.set_gpu("nodriver")
    r = await audit_env(ssh_app, "testhost")
    f = next(f for f in r.findings if f.cls == "cuda_device_error")
    assert "couldn't communicate with the NVIDIA driver" in " ".join(f.evidence)


async def test_local_audit_without_gpu_is_only_informational(app: App) -> None:
    r = await audit_env(app, "local")
    assert classes(r).get("no_gpu") == "info"
    assert r.memory.host_total_bytes and r.python.found


async def test_checkpoint_budget_that_does_not_fit_is_an_error(ssh_app: App, sshd: Sshd, tmp_path: Path) -> None:
    r = await audit_env(ssh_app, "testhost", checkpoint_gb=10**6, keep=3, run_dir=str(tmp_path / "ckpts"))
    assert r.budget is not None and not r.budget.ok
    assert classes(r)["disk_budget"] == "error" and r.verdict == "fail"


def _mount_tmpfs(path: Path, opts: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "mcpgpu-test", str(path)], check=True)


@pytest.fixture
def tmpfs(tmp_path: Path, is_root: bool):  # type: ignore[no-untyped-def]
    if not is_root:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mounted: list[Path] = []

    def make(name: str, opts: str) -> Path:
        p = tmp_path / name
        _mount_tmpfs(p, opts)
        mounted.append(p)
        return p

    yield make
    for p in mounted:
        subprocess.run(["umount", "-l", str(p)], check=False)


@pytest.mark.root
async def test_inode_exhaustion_fires_from_real_df_output(ssh_app: App, tmpfs) -> None:  # type: ignore[no-untyped-def]
    fs = tmpfs("inodes", "size=8m,nr_inodes=64")
    n = 0
    while True:
        try:
            (fs / f"f{n}").write_text("x")
        except OSError:
            break
        n += 1
    r = await audit_env(ssh_app, "testhost", run_dir=str(fs / "run"))
    inode = [f for f in r.findings if f.cls == "inode_exhausted"]
    assert inode and inode[0].severity == "error" and inode[0].gotcha == "U7"


@pytest.mark.root
async def test_nearly_full_disk_fails_the_budget_and_warns_about_bytes(ssh_app: App, tmpfs) -> None:  # type: ignore[no-untyped-def]
    fs = tmpfs("full", "size=4m,nr_inodes=1000")
    (fs / "big").write_bytes(b"\0" * (4 * 1024 * 1024 - 64 * 1024))
    r = await audit_env(ssh_app, "testhost", checkpoint_gb=0.001, keep=2, run_dir=str(fs / "ckpt"))
    c = classes(r)
    assert c["disk_budget"] == "error" and c["disk_full"] in ("warn", "error")
    assert r.budget is not None and r.budget.mount == str(fs)


async def test_unknown_alias_is_a_clear_error_and_writes_nothing(app: App) -> None:
    with pytest.raises(ConnectError) as info:
        await audit_env(app, "no-such-box.invalid")
    assert info.value.hint
    assert app.store.query("SELECT count(*) AS n FROM audits")[0]["n"] == 0


async def test_sshd_dropping_the_connection_mid_probe_is_a_transport_error(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = Sshd(tmp_path / "drop").start()
    slow = tmp_path / "slowpy"
    started = tmp_path / "probe-reached-python"
    slow.write_text(f"#!/bin/sh\ntouch {started}\nsleep 20\n")
    slow.chmod(0o755)
    from dataclasses import replace

    a = App.open(replace(settings, ssh_config=(str(server.ssh_config),), keepalive=1))
    try:
        import anyio

        caught: list[BaseException] = []

        async def cut() -> None:
            with anyio.fail_after(20):  # cut only once the probe is mid-command
                while not started.exists():
                    await anyio.sleep(0.05)
            server.stop(sessions=True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(cut)
            try:
                await audit_env(a, "testhost", python=str(slow))
            except TransportError as exc:
                caught.append(exc)
        assert caught and caught[0].code == "transport"
        assert a.store.query("SELECT count(*) AS n FROM audits")[0]["n"] == 0
    finally:
        server.stop()
        await a.aclose()


def test_cli_audit_prints_the_summary_and_exits_by_verdict(ssh_settings, sshd: Sshd) -> None:  # type: ignore[no-untyped-def]
    ok = subprocess.run([sys.executable, "-m", "mcp_gpu", "audit", "testhost"], capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "testhost" in ok.stdout and "H100" in ok.stdout
    sshd.set_gpu("ecc")
    bad = subprocess.run([sys.executable, "-m", "mcp_gpu", "audit", "testhost", "--json"], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 1 and '"verdict": "fail"' in bad.stdout
    junk = subprocess.run([sys.executable, "-m", "mcp_gpu", "audit", "testhost", "--checkpoint-gb", "lots"],
                          capture_output=True, text=True, timeout=60)
    assert junk.returncode == 2 and "invalid float value" in junk.stderr
