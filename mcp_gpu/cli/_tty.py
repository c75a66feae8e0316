"""The human side of a destructive act reads from the controlling terminal ONLY (issue 10, attack 9).

`printf 'destroy ...' | mcp-gpu teardown X` must not work: stdin can be a pipe an agent writes to. /dev/tty is the
process's controlling terminal; a process started by an agent's shell tool, by cron or over a pipe without a
terminal has none, and opening it fails. Everything shown and read here goes through that terminal.
"""

from __future__ import annotations

import os

from mcp_gpu.errors import ConfirmationError


class Terminal:
    def __init__(self) -> None:
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError as exc:
            raise ConfirmationError(
                "no controlling terminal: a destructive act is approved only by a person typing in a real terminal "
                f"({exc.strerror or exc})",
                hint="run this command yourself in an interactive terminal; piped input and agent shells are "
                     "refused on purpose") from None
        if not os.isatty(fd):
            os.close(fd)
            raise ConfirmationError("/dev/tty is not a terminal", hint="run this in an interactive terminal")
        self._fd = fd

    def say(self, text: str = "") -> None:
        os.write(self._fd, (text + "\n").encode("utf-8", "replace"))

    def ask(self, prompt: str) -> str:
        os.write(self._fd, prompt.encode("utf-8", "replace"))
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = os.read(self._fd, 1024)
            if not chunk:
                raise ConfirmationError("the terminal closed before an answer", hint="nothing was done")
            buf += chunk
        return buf.decode("utf-8", "replace").rstrip("\r\n")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
