"""The network confinement's own cost, measured directly (not part of the product: for
bin/bench-workflow --network; ``python bin/netcost.py`` prints it alone).

Under bubblewrap every sandboxed launch — the Copilot CLI, once per run, and each verify command Lopen
runs on the model's work — gets a network namespace of its own (``--unshare-net``) and the forwarder
(lopen.sandbox.forward), started first inside; Lopen's proxy (lopen.sandbox.proxy) is started once per
run, in Lopen's process; every model request travels client → forwarder → Unix socket → proxy →
provider. :func:`measure` times each piece with the real code, on loopback, alternating the confined
and the open variant so that a slower moment of the machine hits both:

- **launch**: ``bwrap … true`` without the namespace, with it, and with the forwarder before ``true``:
  what the namespace and the forwarder add to each launch;
- **proxy start**: ``NetworkProxy.start`` (once per run);
- **first answer**: from spawning a sandboxed client to its first answer from a loopback server, direct
  (bwrap without the namespace) and through the forwarder and the proxy — the wait before the CLI's
  first model request gets through;
- **per request**: a client inside the sandbox sends requests shaped like the CLI's (a 32 KiB body,
  an answer streamed in 40 chunks) over one kept-alive connection, as the CLI does (a demo run opens
  about 6 connections for 38 requests), direct and through; and over a new connection each time.

The server stands in for the model provider, in a process of its own.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lopen.sandbox import kernel  # noqa: E402
from lopen.sandbox.network import Allowlist  # noqa: E402
from lopen.sandbox.network import route as network_route  # noqa: E402
from lopen.sandbox.proxy import NetworkProxy  # noqa: E402

CHUNKS = 40
BODY = 32 * 1024

_SERVER = r"""
import asyncio, sys
CHUNKS = int(sys.argv[1])
EVENT = b'data: {"choices":[{"delta":{"content":"' + b"w" * 80 + b'"}}]}\n\n'
async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            sizes = [l.split(b":")[1] for l in head.lower().split(b"\r\n") if l.startswith(b"content-length:")]
            length = int(sizes[0]) if sizes else 0
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(CHUNKS):
                writer.write(b"%x\r\n%s\r\n" % (len(EVENT), EVENT))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""

_CLIENT = r"""
import http.client, json, sys, time
port, count, fresh, size = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "fresh", int(sys.argv[4])
body = b"x" * size
times, connection = [], None
for i in range(count):
    begun = time.perf_counter()
    if connection is None or fresh:
        if connection is not None:
            connection.close()
        connection = http.client.HTTPConnection("127.0.0.1", port)
    connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    answer = connection.getresponse()
    answer.read()
    assert answer.status == 200, answer.status
    times.append(time.perf_counter() - begun)
    if i == 0:
        print("first", flush=True)
print(json.dumps(times), flush=True)
"""


class Figures(msgspec.Struct):
    """Medians over the repetitions, in seconds."""

    launch_plain: float
    launch_netns: float
    launch_forwarder: float
    proxy_start: float
    first_direct: float
    first_through: float
    request_direct: float
    request_through: float
    connection_direct: float
    connection_through: float
    spread: dict[str, tuple[float, float]]

    @property
    def namespace(self) -> float:
        return self.launch_netns - self.launch_plain

    @property
    def forwarder(self) -> float:
        return self.launch_forwarder - self.launch_netns

    @property
    def per_request(self) -> float:
        return self.request_through - self.request_direct

    @property
    def per_connection(self) -> float:
        return self.connection_through - self.connection_direct

    @property
    def first_request(self) -> float:
        return self.first_through - self.first_direct

    def per_launch(self) -> float:
        """What the confinement adds to one sandboxed launch: the namespace and the forwarder."""
        return self.launch_forwarder - self.launch_plain

    def report(self) -> list[str]:
        ms = 1000
        lo_hi = {k: f"{lo * ms:.1f}–{hi * ms:.1f}" for k, (lo, hi) in self.spread.items()}
        return [
            f"per launch (the CLI, each verify command): bwrap {self.launch_plain * ms:.1f} ms; "
            f"+ namespace {self.namespace * ms:+.1f} ms; + forwarder {self.forwarder * ms:+.1f} ms "
            f"(bwrap+namespace+forwarder {self.launch_forwarder * ms:.1f} ms, range {lo_hi['launch_forwarder']})",
            f"per run: proxy start {self.proxy_start * ms:.2f} ms; first answer through "
            f"{self.first_through * ms:.1f} ms vs direct {self.first_direct * ms:.1f} ms: "
            f"{self.first_request * ms:+.1f} ms",
            f"per request (kept-alive, {BODY // 1024} KiB up, {CHUNKS} chunks down): direct "
            f"{self.request_direct * ms:.2f} ms (range {lo_hi['request_direct']}), through forwarder+proxy "
            f"{self.request_through * ms:.2f} ms (range {lo_hi['request_through']}): {self.per_request * ms:+.2f} ms",
            f"per new connection: direct {self.connection_direct * ms:.2f} ms, through "
            f"{self.connection_through * ms:.2f} ms: {self.per_connection * ms:+.2f} ms",
        ]


def _launch(network: bool, socket_path: str = "", port: int = 0) -> list[str]:
    """The sandbox as Lopen launches it (``kernel.launch``: bwrap, and the forwarder when ``socket_path`` is given),
    up to the command: without ``network``, bwrap without its namespace."""
    route = network_route(socket_path, f"http://127.0.0.1:{port}/v1") if socket_path else None
    plan = kernel.Plan(writable=(tempfile.gettempdir(),), hidden=())
    path, args = kernel.launch(kernel.Protection("bwrap", ""), plan, "COMMAND", route)
    assert args[-1] == "COMMAND"
    return [path, *(a for a in args[:-1] if network or a != "--unshare-net")]


@contextmanager
def _proxy(port: int) -> Iterator[str]:
    """Lopen's proxy on a loop of its own (as on the gateway's), allowing the server's port; yields its socket."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    folder = tempfile.mkdtemp(prefix="lopen-net-")
    proxy = NetworkProxy(Allowlist.of([f"127.0.0.1:{port}"]))
    try:
        asyncio.run_coroutine_threadsafe(proxy.start(os.path.join(folder, "proxy.sock")), loop).result()
        yield proxy.path
    finally:
        asyncio.run_coroutine_threadsafe(proxy.close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        shutil.rmtree(folder, ignore_errors=True)


def _timed(argv: list[str]) -> float:
    begun = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - begun


def _client(argv: list[str], port: int, count: int, fresh: bool) -> tuple[float, list[float]]:
    """(seconds from spawn to the first answer, each request's seconds)."""
    command = [
        sys.executable,
        "-I",
        "-S",
        "-c",
        _CLIENT,
        str(port),
        str(count),
        "fresh" if fresh else "kept",
        str(BODY),
    ]
    begun = time.perf_counter()
    with subprocess.Popen([*argv, *command], stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "first":
            raise SystemExit(f"error: the benchmark's client failed under {argv}")
        first = time.perf_counter() - begun
        times = msgspec.json.decode(process.stdout.readline())
    if process.returncode:
        raise SystemExit(f"error: the benchmark's client failed under {argv}")
    return first, times


def measure(rounds: int = 5, requests: int = 100) -> Figures:
    """The figures, median of ``rounds`` alternating rounds (each ``requests`` requests per variant)."""
    if not shutil.which("bwrap"):
        raise SystemExit("error: the network confinement's cost is bubblewrap's, and bwrap is not installed")
    samples: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    with subprocess.Popen(
        [sys.executable, "-I", "-c", _SERVER, str(CHUNKS)], stdout=subprocess.PIPE, text=True
    ) as server:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        try:
            for _ in range(rounds):
                loop = asyncio.new_event_loop()
                begun = time.perf_counter()
                folder = tempfile.mkdtemp(prefix="lopen-net-")
                started = NetworkProxy(Allowlist.of([f"127.0.0.1:{port}"]))
                loop.run_until_complete(started.start(os.path.join(folder, "proxy.sock")))
                add("proxy_start", time.perf_counter() - begun)
                loop.run_until_complete(started.close())
                loop.close()
                shutil.rmtree(folder, ignore_errors=True)
                with _proxy(port) as path:
                    add("launch_plain", _timed([*_launch(False), "true"]))
                    add("launch_netns", _timed([*_launch(True), "true"]))
                    add("launch_forwarder", _timed([*_launch(True, path, port), "true"]))
                    for fresh in (False, True):
                        count = requests if not fresh else max(requests // 2, 1)
                        first_d, direct = _client(_launch(False), port, count, fresh)
                        first_t, through = _client(_launch(True, path, port), port, count, fresh)
                        kind = "connection" if fresh else "request"
                        add(f"{kind}_direct", statistics.median(direct[1:]))
                        add(f"{kind}_through", statistics.median(through[1:]))
                        if not fresh:
                            add("first_direct", first_d)
                            add("first_through", first_t)
        finally:
            server.kill()
    medians: dict[str, Any] = {name: statistics.median(values) for name, values in samples.items()}
    spread = {name: (min(values), max(values)) for name, values in samples.items()}
    return Figures(**medians, spread=spread)


if __name__ == "__main__":
    for line in measure().report():
        print(line)
