"""A real OpenSSH sshd on 127.0.0.1 with its own host key, user key, known_hosts and ssh_config.

Tests reach it through an ssh_config alias (default `testhost`), strict host keys, exactly as a user
reaches a rented box. `SetEnv PATH=` puts the fake `nvidia-smi` (tests/fakebin) first on the remote PATH.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
FAKEBIN = Path(__file__).parent / "fakebin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path) -> None:
    if not path.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _descendants(pid: int) -> list[int]:
    """Per-connection sshd processes are children of the listener; their titles no longer name our config."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        res = subprocess.run(["pgrep", "-P", str(p)], capture_output=True, text=True, check=False)
        kids = [int(x) for x in res.stdout.split()]
        out.extend(kids)
        todo.extend(kids)
    return out


class Sshd:
    """One sshd instance. `start()`, `stop()`, `restart()`; `ssh_config` is the file clients use."""

    def __init__(self, root: Path, *, alias: str = "testhost", port: int | None = None,
                 extra_env: dict[str, str] | None = None, client_key: Path | None = None) -> None:
        self.root = root
        self.alias = alias
        self.port = port or free_port()
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o700)
        self.host_key = root / "host_ed25519"
        self.client_key = client_key or root / "client_ed25519"
        keygen(self.host_key)
        keygen(self.client_key)
        self.authorized = root / "authorized_keys"
        shutil.copy(str(self.client_key) + ".pub", self.authorized)
        os.chmod(self.authorized, 0o600)
        self.known_hosts = root / "known_hosts"
        self.pin()
        self.pidfile = root / "sshd.pid"
        self.log = root / "sshd.log"
        self.gpu_mode = root / "gpu_mode"
        self.gpu_mode.write_text("healthy\n")
        env = {"PATH": f"{FAKEBIN}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
               "MCP_GPU_FAKE_GPU_MODE": str(self.gpu_mode)}
        env.update(extra_env or {})
        self.env = env
        self.sshd_config = root / "sshd_config"
        self.sshd_config.write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {self.host_key}", f"PidFile {self.pidfile}",
            f"AuthorizedKeysFile {self.authorized}", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password", "UsePAM no", "StrictModes no", "Subsystem sftp internal-sftp",
            "MaxStartups 100:30:200", "MaxSessions 100", "ClientAliveInterval 0",
            "SetEnv " + " ".join(f"{k}={v}" for k, v in env.items()), "",
        ]))
        self.ssh_config = root / "ssh_config"
        self.write_client_config()

    def pin(self) -> None:
        pub = self.host_key.with_suffix(".pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")

    def write_client_config(self, alias_extra: str = "") -> None:
        self.ssh_config.write_text(
            f"Host {self.alias}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {getpass.getuser()}\n"
            f"  IdentityFile {self.client_key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {self.known_hosts}\n"
            f"  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 5\n{alias_extra}"
        )

    @property
    def pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def alive(self) -> bool:
        pid = self.pid
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True

    def start(self) -> Sshd:
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        subprocess.run([SSHD, "-t", "-f", str(self.sshd_config)], check=True)
        subprocess.run([SSHD, "-f", str(self.sshd_config), "-E", str(self.log)], check=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            # listening is not enough: the daemon writes its pidfile after it forks (stop() and tests need it)
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                if self.pid is not None:
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not listen on {self.port}: {self.log.read_text() if self.log.exists() else ''}")

    def stop(self, *, sessions: bool = True) -> None:
        """Stop the listener; with `sessions`, also kill its per-connection children (a real outage)."""
        pid = self.pid
        kids = _descendants(pid) if (pid is not None and sessions) else []
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 5
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.02)
        for kid in kids:
            with contextlib.suppress(OSError):
                os.kill(kid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.pidfile.unlink()

    def restart(self) -> Sshd:
        self.stop()
        return self.start()

    def set_gpu(self, mode: str) -> None:
        """Pick which fixture the fake nvidia-smi prints (a directory under tests/fixtures/nvidia-smi)."""
        self.gpu_mode.write_text(mode + "\n")

    def ssh_argv(self, *remote: str) -> list[str]:
        return ["ssh", "-F", str(self.ssh_config), self.alias, *remote]
