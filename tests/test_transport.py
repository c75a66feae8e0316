"""The transports against real things: subprocess on this machine, and OpenSSH sshd on loopback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mcp_gpu.errors import CommandFailed, CommandTimeout, ConnectError, HostKeyError, TransportError
from mcp_gpu.transport.local import LocalTransport
from mcp_gpu.transport.ssh import SSHTransport
from tests.sshd import Sshd

pytestmark = pytest.mark.anyio


async def test_local_run_returns_a_record_for_a_failing_command_and_raises_only_with_check() -> None:
    t = LocalTransport()
    res = await t.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (res.exit_status, res.stdout, res.stderr) == (3, "out\n", "err\n")
    with pytest.raises(CommandFailed) as info:
        await t.run(["sh", "-c", "echo boom >&2; exit 3"], check=True)
    assert "boom" in info.value.message


async def test_local_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "child-alive"
    t = LocalTransport()
    with pytest.raises(CommandTimeout):
        await t.run(["sh", "-c", f"(sleep 2; touch {marker}) & sleep 30"], timeout=0.5)
    res = await t.run(["sh", "-c", "sleep 2.5; echo done"])
    assert res.ok and not marker.exists()


async def test_script_arguments_are_never_executed_as_shell(tmp_path: Path) -> None:
    t = LocalTransport()
    evil = f"$(touch {tmp_path}/pwned); `touch {tmp_path}/pwned2`; rm -rf /nonexistent"
    res = await t.run_script('printf "%s" "$1"', [evil])
    assert res.stdout == evil
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


async def test_ssh_runs_commands_over_one_pooled_connection(sshd: Sshd) -> None:
    t = SSHTransport("box", sshd.alias, config_paths=[str(sshd.ssh_config)], connect_timeout=5)
    try:
        a = await t.run(["sh", "-c", "echo $((6*7)); exit 4"])
        b = await t.run(["printf", "%s", "it's a \"quoted\" $HOME; `x`"], stdin="ignored")
        assert (a.exit_status, a.stdout) == (4, "42\n")
        assert b.stdout == "it's a \"quoted\" $HOME; `x`"
        assert t.connects == 1
    finally:
        await t.aclose()


async def test_ssh_passes_stdin_and_reads_tail_and_stat(sshd: Sshd, tmp_path: Path) -> None:
    t = SSHTransport("box", sshd.alias, config_paths=[str(sshd.ssh_config)])
    f = tmp_path / "log.txt"
    try:
        res = await t.run(["sh", "-c", f"cat > {f}"], stdin="line1\nline2\n")
        assert res.ok and f.read_text() == "line1\nline2\n"
        assert await t.read_tail(str(f), 6) == b"line2\n"
        st = await t.stat(str(f))
        assert st is not None and st.size == 12 and not st.is_dir
        assert await t.stat(str(tmp_path / "missing")) is None
        got = b"".join([c async for c in t.iter_file(str(f), offset=6)])
        assert got == b"line2\n"
    finally:
        await t.aclose()


async def test_ssh_unknown_host_key_is_refused_with_the_pinning_command(sshd: Sshd, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    cfg = tmp_path / "cfg"
    cfg.write_text(sshd.ssh_config.read_text().replace(str(sshd.known_hosts), str(empty)))
    t = SSHTransport("box", sshd.alias, config_paths=[str(cfg)])
    with pytest.raises(HostKeyError) as info:
        await t.run(["true"])
    err = info.value
    assert err.data["kind"] == "unknown"
    assert "ssh-keyscan -p" in (err.hint or "") and str(empty) in (err.hint or "")


async def test_ssh_changed_host_key_is_refused_and_never_accepted(sshd: Sshd, tmp_path: Path) -> None:
    other = tmp_path / "other_key"
    subprocess_run = __import__("subprocess").run
    subprocess_run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    pub = (tmp_path / "other_key.pub").read_text().split()
    kh = tmp_path / "known_hosts_changed"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {pub[0]} {pub[1]}\n")
    cfg = tmp_path / "cfg"
    cfg.write_text(sshd.ssh_config.read_text().replace(str(sshd.known_hosts), str(kh)))
    t = SSHTransport("box", sshd.alias, config_paths=[str(cfg)])
    with pytest.raises(HostKeyError) as info:
        await t.run(["true"])
    assert info.value.data["kind"] == "changed"
    assert "CHANGED" in info.value.message and "ssh-keygen -R" in (info.value.hint or "")
    assert kh.read_text().split()[2] == pub[1]  # known_hosts untouched


async def test_ssh_unknown_alias_and_closed_port_are_clear_connect_errors(sshd: Sshd, tmp_path: Path) -> None:
    t = SSHTransport("nope", "no-such-alias-xyz.invalid", config_paths=[str(sshd.ssh_config)], connect_timeout=3)
    with pytest.raises(ConnectError) as info:
        await t.run(["true"])
    assert "alias" in info.value.message
    from tests.sshd import free_port

    t2 = SSHTransport("closed", f"root@127.0.0.1:{free_port()}", config_paths=[str(sshd.ssh_config)])
    with pytest.raises(ConnectError) as info2:
        await t2.run(["true"])
    assert "refused" in info2.value.message


async def test_ssh_connection_dropped_mid_command_is_a_transport_error_not_an_exit_status(tmp_path: Path) -> None:
    if not shutil.which("sshd") and not Path("/usr/sbin/sshd").exists():
        pytest.skip("no sshd")
    server = Sshd(tmp_path / "drop").start()
    t = SSHTransport("box", server.alias, config_paths=[str(server.ssh_config)], keepalive=1)
    try:
        import anyio

        async def kill_soon() -> None:
            await anyio.sleep(0.5)
            server.stop(sessions=True)

        caught: list[BaseException] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_soon)
            try:
                await t.run(["sleep", "20"], timeout=15)
            except TransportError as exc:
                caught.append(exc)
        assert len(caught) == 1 and isinstance(caught[0], TransportError)
        assert caught[0].code == "transport" and "lost" in str(caught[0])
    finally:
        server.stop()
        await t.aclose()


async def test_proxyjump_from_ssh_config_reaches_a_host_through_a_jump_box(tmp_path: Path) -> None:
    jump = Sshd(tmp_path / "jump", alias="jumpbox").start()
    inner = Sshd(tmp_path / "inner", alias="innerbox", client_key=jump.client_key).start()
    try:
        kh = tmp_path / "known_hosts"
        kh.write_text(jump.known_hosts.read_text() + inner.known_hosts.read_text())
        cfg = tmp_path / "ssh_config"
        text = jump.ssh_config.read_text() + inner.ssh_config.read_text() + "  ProxyJump jumpbox\n"
        cfg.write_text(text.replace(str(jump.known_hosts), str(kh)).replace(str(inner.known_hosts), str(kh)))
        t = SSHTransport("inner", "innerbox", config_paths=[str(cfg)])
        try:
            res = await t.run(["sh", "-c", "echo via-jump"])
            assert res.stdout == "via-jump\n"
        finally:
            await t.aclose()
        # the jump box really carries it: with the jump box down, the inner host is out of reach
        jump.stop()
        t2 = SSHTransport("inner", "innerbox", config_paths=[str(cfg)], connect_timeout=3)
        with pytest.raises(ConnectError):
            await t2.run(["true"])
    finally:
        inner.stop()
        jump.stop()


def test_a_target_has_one_canonical_form_and_one_pooled_connection() -> None:
    from mcp_gpu.transport import canonical_target
    from mcp_gpu.transport.pool import TransportPool

    assert canonical_target("Root@Box.Example:22") == "Root@box.example"
    assert canonical_target("root@box.example:2222") == "root@box.example:2222"
    assert canonical_target("myalias") == "myalias" and canonical_target(" LOCAL ") == "local"
    targets = {"a": "root@127.0.0.1:22", "b": "root@127.0.0.1", "c": "root@127.0.0.1:2200"}
    pool = TransportPool(resolve=lambda n: targets.get(n, n))

    async def go() -> None:
        ta, tb, tc = await pool.get("a"), await pool.get("b"), await pool.get("c")  # connects lazily: no traffic
        assert ta is tb and tc is not ta
        await pool.aclose()

    import anyio

    anyio.run(go)
