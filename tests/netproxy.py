"""A userspace TCP proxy on 127.0.0.1 that delays every chunk and optionally caps the rate, each direction.

`tc netem` is not available on this kernel, so WAN latency and slow links are simulated here (test-infra §5c).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading


class DelayProxy:
    def __init__(self, target_port: int, delay_s: float = 0.0, rate_bps: float | None = None) -> None:
        self.target_port = target_port
        self.delay_s = delay_s
        self.rate_bps = rate_bps
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> DelayProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def sender() -> None:
            while True:
                due, data = await queue.get()
                wait = due - self._loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        task = asyncio.ensure_future(sender())
        try:
            while True:
                data = await reader.read(65536)
                if self.rate_bps and data:
                    await asyncio.sleep(len(data) / self.rate_bps)
                await queue.put((self._loop.time() + self.delay_s, data))
                if not data:
                    break
            await task
        except (OSError, asyncio.CancelledError):
            task.cancel()
        finally:
            with contextlib.suppress(OSError):
                writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_w), self._pipe(up_r, writer), return_exceptions=True)

    def stop(self) -> None:
        """Cancel every connection's tasks and let them finish before the loop stops (no dangling tasks)."""

        async def shutdown() -> None:
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._loop.is_running():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)


def main() -> None:
    """`python -m tests.netproxy DELAY_MS TARGET_PORT...`: proxies in a process of their own (so a benchmark's
    own interpreter does not share its GIL with them); prints `PORTS p1 p2 ...` once they listen."""
    import sys

    delay = float(sys.argv[1]) / 1000
    targets = [int(p) for p in sys.argv[2:]]

    async def serve() -> None:
        ports = []
        for t in targets:
            proxy = DelayProxy(t, delay)
            proxy._loop = asyncio.get_running_loop()
            server = await asyncio.start_server(proxy._handle, "127.0.0.1", 0)
            ports.append(server.sockets[0].getsockname()[1])
        print("PORTS " + " ".join(map(str, ports)), flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
