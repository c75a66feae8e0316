"""verify_artifacts end to end over a real OpenSSH sshd: pull, resume after a cut, corruption, refusal, disk full."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from mcp import Client

from mcp_gpu.app import App
from mcp_gpu.artifacts.manifest import is_stale, latest_manifest, read_manifest
from mcp_gpu.artifacts.pull import LocalDiskFull
from mcp_gpu.config import Settings
from mcp_gpu.errors import ConfigError
from mcp_gpu.lifecycle.verify import verify_artifacts
from mcp_gpu.server import build_server
from tests.netproxy import DelayProxy
from tests.sshd import Sshd
from tests.test_artifacts_checks import flip_bit_to_inf, write_safetensors

pytestmark = pytest.mark.anyio


def sha(p: Path) -> str:
    h = hashlib.sha256()
    with p.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def random_file(p: Path, size: int) -> Path:
    """Random bytes behind a fixed text header: random data that happened to start with a pickle PROTO (0x80)
    or zip (PK) magic would rightly be judged a corrupt checkpoint."""
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("wb") as f:
        head = b"mcp-gpu test payload\n"
        f.write(head[:size])
        left = max(0, size - len(head))
        while left:
            n = min(left, 4 << 20)
            f.write(os.urandom(n))
            left -= n
    return p


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    out = tmp_path / "remote" / "run1" / "out"
    out.mkdir(parents=True)
    return out


async def test_three_files_including_50mb_are_pulled_verified_and_a_second_run_pulls_nothing(
        ssh_app: App, run_dir: Path, tmp_path: Path) -> None:
    random_file(run_dir / "ckpt" / "weights_50mb.bin", 50 * 2**20)
    write_safetensors(run_dir / "ckpt" / "model.safetensors", {"w": np.ones((32, 32), np.float32)})
    (run_dir / "metrics.json").write_text('{"loss": 0.25}')
    dest = tmp_path / "dest"
    seen: list[tuple[int, int]] = []

    async def progress(done: int, total: int, msg: str) -> None:
        seen.append((done, total))

    r1 = await verify_artifacts(ssh_app, host="testhost", paths=[str(run_dir)], dest=dest, progress=progress)
    assert r1.all_ok, r1.summary
    assert r1.counts["pulled"] == 3 and r1.counts["skipped"] == 0
    assert r1.bytes_moved == r1.bytes_total > 50 * 2**20
    for rel in ("ckpt/weights_50mb.bin", "ckpt/model.safetensors", "metrics.json"):
        assert sha(dest / "out" / rel) == sha(run_dir / rel)
    assert not list(dest.rglob("*.partial"))
    assert seen and seen[-1][0] == seen[-1][1] == r1.bytes_total
    m = read_manifest(dest)
    assert m is not None and m.all_ok and m.checked and m.counts["pulled"] == 3
    entry = next(e for e in m.files if e.file == "out/ckpt/model.safetensors")
    assert entry.kind == "safetensors" and entry.result == "ok" and entry.local_sha256 == entry.remote_sha256
    assert m.newest_remote_checkpoint is not None
    assert m.newest_remote_checkpoint.name.rsplit("/", 1)[-1] in ("weights_50mb.bin", "model.safetensors")

    r2 = await verify_artifacts(ssh_app, host="testhost", paths=[str(run_dir)], dest=dest)
    assert r2.all_ok and r2.counts["pulled"] == 0 and r2.counts["skipped"] == 3 and r2.bytes_moved == 0

    rec = latest_manifest(ssh_app.store, host="testhost")
    assert rec is not None and rec.all_ok and rec.dest == str(dest)
    assert not (await is_stale(ssh_app, host="testhost")).stale
    later = run_dir / "ckpt" / "ckpt_99.pt"
    later.write_bytes(b"x")
    os.utime(later, (time.time() + 60, time.time() + 60))
    st = await is_stale(ssh_app, host="testhost")
    assert st.stale and st.current is not None and st.current.name.endswith("ckpt_99.pt")


@pytest.mark.parametrize("engine", ["openssh", "sftp"])
async def test_a_connection_cut_mid_transfer_resumes_on_the_rerun_with_fewer_bytes_moved(
        tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    # both byte paths: the OpenSSH client stream (default when `ssh` is installed) and asyncssh SFTP
    monkeypatch.setenv("MCP_GPU_PULL_ENGINE", engine)
    box = Sshd(tmp_path / "private-sshd").start()
    # a 40 MB/s link, so the cut lands mid-file whatever the engine's speed
    link = DelayProxy(box.port, rate_bps=40e6).start()
    pub = box.host_key.with_suffix(".pub").read_text().split()
    box.known_hosts.write_text(f"[127.0.0.1]:{link.port} {pub[0]} {pub[1]}\n")
    box.ssh_config.write_text(box.ssh_config.read_text().replace(f"Port {box.port}", f"Port {link.port}"))
    try:
        settings = Settings(home=home, ssh_config=(str(box.ssh_config),), connect_timeout=5, command_timeout=30,
                            keepalive=2)
        src = random_file(tmp_path / "remote" / "big" / "shard.bin", 50 * 2**20)
        dest = tmp_path / "dest"
        cut_at: list[int] = []

        async def cutter(done: int, total: int, msg: str) -> None:
            if not cut_at and done >= total // 2 and done < total:
                cut_at.append(done)
                box.stop(sessions=True)

        app = App.open(settings)
        try:
            r1 = await verify_artifacts(app, host="testhost", paths=[str(src.parent)], dest=dest, progress=cutter)
            assert cut_at, "the transfer finished before the cut"
            assert not r1.all_ok and r1.counts["failed"] == 1, (r1.files, r1.findings)
            assert any(f.cls == "ssh_disconnect" for f in r1.findings)
            partial = dest / "big" / "shard.bin.partial"
            assert partial.exists() and 0 < partial.stat().st_size < src.stat().st_size
            assert not (dest / "big" / "shard.bin").exists()
            box.start()
            r2 = await verify_artifacts(app, host="testhost", paths=[str(src.parent)], dest=dest)
        finally:
            await app.aclose()
        assert r2.all_ok, r2.summary
        assert r2.files[0].action == "resumed"
        assert r2.bytes_moved < src.stat().st_size
        assert r1.bytes_moved + r2.bytes_moved >= src.stat().st_size
        assert sha(dest / "big" / "shard.bin") == sha(src)
        assert not partial.exists()
    finally:
        link.stop()
        box.stop()


async def test_truncated_flipped_and_crc_damaged_checkpoints_are_each_checkpoint_corrupt(
        ssh_app: App, run_dir: Path, tmp_path: Path) -> None:
    write_safetensors(run_dir / "trunc.safetensors", {"w": np.ones((64, 64), np.float32)})
    (run_dir / "trunc.safetensors").write_bytes((run_dir / "trunc.safetensors").read_bytes()[:-512])
    write_safetensors(run_dir / "flip.safetensors", {"w": np.ones(64, np.float32)})
    flip_bit_to_inf(run_dir / "flip.safetensors", (run_dir / "flip.safetensors").stat().st_size - 4 * 64 + 40)
    np.savez(run_dir / "opt.npz", m=np.ones(2000, np.float32))
    with zipfile.ZipFile(run_dir / "ckpt.pt", "w") as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        zf.writestr("archive/data/0", b"\x22" * 8192)
    raw = bytearray((run_dir / "ckpt.pt").read_bytes())
    raw[raw.index(b"\x22" * 64) + 7] ^= 0x10
    (run_dir / "ckpt.pt").write_bytes(bytes(raw))
    write_safetensors(run_dir / "good.safetensors", {"w": np.ones(8, np.float32)})

    r = await verify_artifacts(ssh_app, host="testhost", paths=[str(run_dir)], dest=tmp_path / "d",
                               remote_check=True)
    assert not r.all_ok
    bad = {f.title.split(":")[0] for f in r.findings if f.cls == "checkpoint_corrupt"}
    assert bad == {"out/trunc.safetensors", "out/flip.safetensors", "out/ckpt.pt"}
    by = {f.file: f for f in r.files}
    assert by["out/good.safetensors"].result == "ok"
    assert "CRC" in by["out/ckpt.pt"].detail and "non-finite" in by["out/flip.safetensors"].detail
    m = read_manifest(tmp_path / "d")
    assert m is not None
    remote = {e.file: e.remote_check for e in m.files}
    assert "FAILED" in (remote["out/ckpt.pt"] or "") and "ok" in (remote["out/good.safetensors"] or "")


async def test_a_traversal_path_and_an_escaping_symlink_are_refused(ssh_app: App, run_dir: Path,
                                                                  tmp_path: Path) -> None:
    secret = tmp_path / "remote" / "secret.txt"
    secret.write_text("do not copy")
    (run_dir / "leak").symlink_to(secret)
    (run_dir / "real.json").write_text("{}")
    (run_dir / "alias.json").symlink_to(run_dir / "real.json")
    (run_dir / "evil\nname.txt").write_text("x")
    dest = tmp_path / "d"
    r = await verify_artifacts(ssh_app, host="testhost", paths=[str(run_dir)], dest=dest)
    refused = [f for f in r.findings if f.cls == "path_refused"]
    assert len(refused) == 2 and r.counts["refused"] == 2 and not r.all_ok
    assert any("outside" in f.title for f in refused) and any("control" in f.title for f in refused)
    assert sorted(p.name for p in (dest / "out").iterdir()) == ["alias.json", "real.json"]
    assert "do not copy" not in "".join(p.read_text() for p in dest.rglob("*") if p.is_file() and p.suffix != ".json")
    with pytest.raises(ConfigError) as info:
        await verify_artifacts(ssh_app, host="testhost", paths=[f"{run_dir}/../../remote"], dest=dest)
    assert "traversal" in info.value.message


@pytest.mark.root
async def test_a_nearly_full_local_disk_gives_a_clear_error_and_no_file_under_a_final_name(
        ssh_app: App, run_dir: Path, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "verify-tiny", str(mnt)], check=True)
    try:
        random_file(run_dir / "ckpt.bin", 6 * 2**20)
        (run_dir / "m.json").write_text("{}")
        with pytest.raises(LocalDiskFull) as info:
            await verify_artifacts(ssh_app, host="testhost", paths=[str(run_dir)], dest=mnt / "dest")
        assert "not enough space" in info.value.message and "nothing was written" in info.value.message
        assert info.value.hint
        assert [p for p in mnt.rglob("*") if p.is_file()] == []
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


async def test_the_cli_verify_verb_shows_progress_and_exits_zero_when_all_ok(
        ssh_settings: Settings, run_dir: Path, tmp_path: Path) -> None:
    random_file(run_dir / "w.bin", 3 * 2**20)
    (run_dir / "log.csv").write_text("step,loss\n1,2\n")
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "mcp_gpu", "verify", "--host", "testhost", "--path", str(run_dir),
                           "--dest", str(tmp_path / "d"), "--progress"], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "ALL OK" in proc.stdout and "100.0%" in proc.stderr
    again = subprocess.run([sys.executable, "-m", "mcp_gpu", "pull", "--host", "testhost", "--path", str(run_dir),
                            "--dest", str(tmp_path / "d")], capture_output=True, text=True, env=env, timeout=120,
                           check=False)
    assert again.returncode == 0 and "0 pulled" in again.stdout


async def test_the_tool_reports_mcp_progress_and_a_structured_verdict(ssh_app: App, run_dir: Path,
                                                                    tmp_path: Path) -> None:
    random_file(run_dir / "w.bin", 8 * 2**20)
    got: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        got.append(progress)

    async with Client(build_server(app=ssh_app)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        ann = tools["verify_artifacts"].annotations
        assert ann is not None and ann.read_only_hint is False and ann.destructive_hint is False
        assert ann.idempotent_hint is True
        r = await c.call_tool("verify_artifacts", {"host": "testhost", "paths": [str(run_dir)],
                                                   "dest": str(tmp_path / "d")}, progress_callback=on_progress)
    assert not r.is_error and r.structured_content is not None
    assert r.structured_content["all_ok"] is True and r.structured_content["counts"]["pulled"] == 1
    assert got and got[-1] == 8 * 2**20
    shutil.rmtree(tmp_path / "d")


async def test_the_local_host_is_pulled_through_the_same_path_with_resume(app: App, tmp_path: Path) -> None:
    src = random_file(tmp_path / "remote" / "out" / "w.bin", 3 * 2**20 + 17)
    dest = tmp_path / "d"
    partial = dest / "out" / "w.bin.partial"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(src.read_bytes()[: 2**20])
    r = await verify_artifacts(app, host="local", paths=[str(src.parent)], dest=dest)
    assert r.all_ok and r.files[0].action == "resumed" and r.bytes_moved == src.stat().st_size - 2**20
    assert sha(dest / "out" / "w.bin") == sha(src) and not partial.exists()
