"""Safe local writes over a real sshd, through both pull engines (the OpenSSH client and the SFTP fallback):
a planted `.partial` symlink or hard link is never written through, and a pull never writes more than the
listed size, even from a remote file that grows past it or never ends."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import anyio
import pytest

from mcp_gpu.app import App
from mcp_gpu.artifacts.listing import RemoteFile
from mcp_gpu.artifacts.pull import pull_one
from mcp_gpu.lifecycle.verify import verify_artifacts

pytestmark = pytest.mark.anyio
PRECIOUS = b"precious user data, must survive\n"


@pytest.fixture(params=["openssh", "sftp"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MCP_GPU_PULL_ENGINE", "sftp" if request.param == "sftp" else "")
    return str(request.param)


def _remote_out(tmp_path: Path) -> Path:
    out = tmp_path / "remote" / "out"
    out.mkdir(parents=True)
    (out / "metrics.json").write_bytes(b'{"loss": 0.125, "note": "' + b"x" * 4000 + b'"}\n')
    return out


@pytest.mark.parametrize("plant", ["symlink", "hardlink"])
async def test_a_planted_partial_link_is_never_written_through(ssh_app: App, tmp_path: Path, engine: str,
                                                               plant: str) -> None:
    out = _remote_out(tmp_path)
    victim = tmp_path / "victim.txt"  # shorter than the remote file: the old code "resumed" into it
    victim.write_bytes(PRECIOUS)
    dest = tmp_path / "dest"
    (dest / "out").mkdir(parents=True)
    partial = dest / "out" / "metrics.json.partial"
    if plant == "symlink":
        partial.symlink_to(victim)
    else:
        os.link(victim, partial)
    r = await verify_artifacts(ssh_app, host="testhost", paths=[str(out)], dest=dest)
    assert r.all_ok, r.summary
    assert victim.read_bytes() == PRECIOUS
    assert (dest / "out" / "metrics.json").read_bytes() == (out / "metrics.json").read_bytes()
    assert not (dest / "out" / "metrics.json").is_symlink()
    assert not partial.exists() and not partial.is_symlink()


async def test_a_planted_symlink_at_the_final_name_is_replaced_not_followed(ssh_app: App, tmp_path: Path,
                                                                           engine: str) -> None:
    out = _remote_out(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(PRECIOUS)
    dest = tmp_path / "dest"
    (dest / "out").mkdir(parents=True)
    (dest / "out" / "metrics.json").symlink_to(victim)
    r = await verify_artifacts(ssh_app, host="testhost", paths=[str(out)], dest=dest)
    assert r.all_ok, r.summary
    assert victim.read_bytes() == PRECIOUS
    assert not (dest / "out" / "metrics.json").is_symlink()


async def test_a_file_that_grew_past_its_listed_size_is_cut_there_and_reported(ssh_app: App, tmp_path: Path,
                                                                               engine: str) -> None:
    remote = tmp_path / "remote" / "grows.log"
    remote.parent.mkdir(parents=True)
    remote.write_bytes(b"8 bytes\n")
    listed = RemoteFile(root=str(remote), remote=str(remote), rel="grows.log", local_rel="r/grows.log", size=8,
                        mtime=0.0, sha256=None)
    with remote.open("ab") as f:  # it grows by 20 MiB after the listing
        f.write(os.urandom(20 << 20))
    t = await ssh_app.transport("testhost")
    dest = tmp_path / "dest"
    got = await pull_one(t, listed, dest)
    assert not got.ok and got.error_kind == "mismatch" and "8 of 8 bytes" in (got.error or "")
    assert got.moved <= 8
    assert not (dest / "r" / "grows.log").exists()


async def test_a_never_ending_remote_stream_writes_only_the_listed_bytes(ssh_app: App, tmp_path: Path,
                                                                         engine: str) -> None:
    """/dev/zero stands for a remote file that keeps growing faster than it is read: without the bound the
    pull never ends and fills the local disk."""
    listed = RemoteFile(root="/dev", remote="/dev/zero", rel="zero", local_rel="z/zero.bin", size=4096, mtime=0.0,
                        sha256=hashlib.sha256(b"\0" * 4096).hexdigest())
    t = await ssh_app.transport("testhost")
    dest = tmp_path / "dest"
    with anyio.fail_after(60):
        got = await pull_one(t, listed, dest)
    assert got.moved <= 4096
    if engine == "openssh":  # streamed: exactly the listed bytes arrive, and they are the listed content
        assert got.ok, got
        assert (dest / "z" / "zero.bin").stat().st_size == 4096
    else:  # SFTP reads up to the smaller of the listed and the stat size (a device stats as 0 bytes)
        assert not got.ok and got.error_kind == "mismatch"


async def test_the_local_bound_holds_even_when_the_remote_side_sends_more(sshd: object, tmp_path: Path) -> None:
    """The OpenSSH engine's own guard: the `ssh` child may not write past the limit (RLIMIT_FSIZE), here
    against a remote command that ignores the listed size and streams 100 MB."""
    from mcp_gpu.transport import openssh
    from mcp_gpu.transport.ssh import parse_target

    cfg = str(sshd.ssh_config)  # type: ignore[attr-defined]
    argv = openssh.argv_for(parse_target(sshd.alias, [cfg]), [cfg], "head -c 100000000 /dev/zero",  # type: ignore[attr-defined]
                            connect_timeout=5, keepalive=5)
    if argv is None:
        pytest.skip("no OpenSSH client here")
    local = tmp_path / "capped.partial"
    with anyio.fail_after(60):
        got = await openssh.download(argv, "testhost", "/dev/zero", str(local), 0, None, limit=4096)
    assert local.stat().st_size == 4096 and got.size == 4096
    assert got.sha256 == hashlib.sha256(b"\0" * 4096).hexdigest()
