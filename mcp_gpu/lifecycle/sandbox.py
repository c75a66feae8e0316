"""A private mount namespace for the commands the server runs on this machine for the agent (`smoke_cpu`).

The command must not read what guards the server: its state dir (confirmation and TOTP keys, the registry, the
HTTP bearer token) and the provider key files that can stop a meter. Linux gives us that without extra software:
`unshare` (util-linux) makes a user + mount namespace (or, as root, a mount namespace), an empty tmpfs is mounted
over each hidden directory and /dev/null over each hidden file, and `setpriv` drops every capability and sets
no_new_privs before the command starts, so it can neither unmount the covers nor gain privilege back through a
setuid binary. Without capabilities and in another user namespace it cannot open the server's /proc/PID/root
or /proc/PID/environ either.

Where neither a user namespace nor root is available (or not Linux), there is no sandbox: the answer says so
plainly (`Sandbox.active` false, a warning finding) instead of pretending.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Args: N PATH... KEEP -- ARGV...  (run inside the new namespaces, before the command; fixed text, paths as argv).
# KEEP is the working directory when it lies INSIDE a hidden directory (the demo works under the state dir): the
# process still holds it open as its cwd after the cover is mounted, so `mount --bind .` puts back that subtree
# alone, at its own path.
_INNER = r"""set -eu
n=$1; shift
i=0
while [ "$i" -lt "$n" ]; do
  p=$1; shift; i=$((i + 1))
  if [ -d "$p" ]; then mount -t tmpfs -o size=16k,mode=0700 mcp-gpu-hidden "$p"
  elif [ -e "$p" ]; then mount --bind /dev/null "$p"
  fi
done
keep=$1; shift
if [ -n "$keep" ]; then mkdir -p -- "$keep"; mount --no-canonicalize --bind . "$keep"; cd -- "$keep"; fi
[ "$1" = "--" ] && shift
exec setpriv --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- "$@"
"""


@dataclass(frozen=True)
class Sandbox:
    active: bool
    how: str
    hidden: tuple[str, ...] = ()

    def wrap(self, argv: list[str], cwd: Path | None = None) -> list[str]:
        if not self.active:
            return argv
        keep = ""
        if cwd is not None:
            real = cwd.resolve()
            if any(real.is_relative_to(h) and str(real) != h for h in self.hidden):
                keep = str(real)
        return [*_PREFIX[self.how], "sh", "-c", _INNER, "mcp-gpu-sandbox", str(len(self.hidden)), *self.hidden,
                keep, "--", *argv]

    def covers(self, path: Path) -> bool:
        """Is `path` itself one of the hidden paths (a command may not run THERE)?"""
        return str(path.resolve()) in self.hidden

    @property
    def description(self) -> str:
        if not self.active:
            return ("NONE: " + self.how + " — the command runs as the server's user and CAN read the server's state "
                    "dir and key files; only its environment is allow-listed")
        shown = ", ".join(self.hidden) or "nothing"
        return f"{self.how}: hidden from the command: {shown}; all capabilities dropped, no_new_privs set"


_PREFIX: dict[str, list[str]] = {
    "user+mount namespace": ["unshare", "--user", "--map-current-user", "--mount", "--propagation", "private", "--"],
    "mount namespace (root)": ["unshare", "--mount", "--propagation", "private", "--"],
}
_works: dict[str, bool] = {}


def _try(how: str) -> bool:
    """Does this way of sandboxing work on this machine? (checked once per process with `true`)"""
    if how not in _works:
        probe = Sandbox(active=True, how=how, hidden=())
        try:
            res = subprocess.run(probe.wrap(["true"]), stdin=subprocess.DEVNULL, capture_output=True, timeout=10,
                                 check=False)
            _works[how] = res.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _works[how] = False
    return _works[how]


def escape_hatches() -> list[Path]:
    """Sockets of daemons that run commands as this user OUTSIDE the sandbox: the tmux servers (the one running a
    local job's pane was started outside it: `tmux -L mcp-gpu new-window CMD` ran CMD with the state dir in view)
    and the user's runtime dir (systemd --user, D-Bus). The tmux dir is created now if missing, so that a tmux
    server started later puts its socket under the cover too."""
    out: list[Path] = []
    tmux_dir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
    try:
        tmux_dir.mkdir(mode=0o700, exist_ok=True)
        out.append(tmux_dir)
    except OSError:
        pass
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        out.append(Path(runtime))
    return out


def covers_keeping(hide: list[Path], keep: list[Path]) -> list[Path]:
    """What to cover so that `hide` is unreadable but every path in `keep` stays reachable: a hidden dir that holds
    a kept path is not covered whole; its other entries are (recursively along the kept path's ancestors). A local
    job whose run dir or workdir lies inside the state dir (the demo) still cannot read the registry or the keys.
    A hidden path that IS a kept path is covered all the same (fail closed: the job cannot start there)."""
    kept = [k.expanduser().resolve() for k in keep]
    out: list[Path] = []
    for h in hide:
        try:
            real = h.expanduser().resolve()
        except OSError:
            continue
        inside = [k for k in kept if k != real and k.is_relative_to(real)]
        if not inside or not real.is_dir() or real.is_symlink():
            out.append(real)
            continue
        try:
            entries = sorted(real.iterdir())
        except OSError:
            out.append(real)
            continue
        for e in entries:
            if e.is_symlink() or e.resolve() not in inside:
                out += covers_keeping([e], inside) if not e.is_symlink() else [e]
    return out


def sandbox_for(hide: list[Path]) -> Sandbox:
    """The strongest sandbox this machine allows, hiding the given existing paths (resolved: a symlinked state
    dir is hidden where it really is)."""
    paths: list[str] = []
    for p in hide:
        try:
            real = p.expanduser().resolve()
        except OSError:
            continue
        if real.exists() and str(real) != "/":
            paths.append(str(real))
    paths = list(dict.fromkeys(paths))
    if not (os.uname().sysname == "Linux" and shutil.which("unshare") and shutil.which("setpriv")):
        return Sandbox(active=False, how="this machine has no Linux unshare/setpriv")
    for how in ("user+mount namespace", "mount namespace (root)"):
        if how.endswith("(root)") and os.geteuid() != 0:
            continue
        if _try(how):
            return Sandbox(active=True, how=how, hidden=tuple(paths))
    return Sandbox(active=False, how="user namespaces are disabled here and the server is not root")
