"""The sandbox's network allowlist and Lopen's proxy, on real sockets.

The proxy listens on a Unix socket, as it does for the forwarder inside bubblewrap; the
destinations are real TCP servers on loopback. An allowed destination answers through the proxy;
another port, another host, a wildcard that would open this machine, and a CONNECT to a host not
listed are answered ``403`` with a one-line reason, and each refusal is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from lopen.sandbox import kernel, network
from lopen.sandbox.network import Allowlist, Rule
from lopen.sandbox.proxy import NetworkProxy

# -- the allowlist, by name --------------------------------------------------------------------


def test_a_pattern_is_a_host_or_wildcard_with_an_optional_port():
    assert network.parse("PyPI.org") == Rule("pypi.org")
    assert network.parse("*.pythonhosted.org:443") == Rule("*.pythonhosted.org", 443)
    assert network.parse("127.0.0.1:8080") == Rule("127.0.0.1", 8080)
    assert network.parse("[::1]:8080") == Rule("::1", 8080)
    with pytest.raises(ValueError):
        network.parse("example.com:99999")


def test_a_host_rule_allows_its_web_ports_and_a_port_rule_that_port_alone():
    allow = Allowlist.of(["pypi.org", "*.githubcopilot.com", "registry.example:4873"])
    assert allow.refuses("pypi.org", 443) == "" and allow.refuses("PYPI.ORG", 80) == ""
    assert allow.refuses("api.individual.githubcopilot.com", 443) == ""
    assert allow.refuses("registry.example", 4873) == ""
    assert "pypi.org:22 is not in" in allow.refuses("pypi.org", 22)
    assert allow.refuses("githubcopilot.com", 443)  # *.domain is below the domain only
    assert allow.refuses("evil-githubcopilot.com", 443)
    assert allow.refuses("registry.example", 443)
    assert "sandbox.allow_network" in allow.refuses("example.com", 443)


def test_this_machine_opens_only_to_a_rule_naming_its_address_and_port():
    everything = Allowlist.of(["*", "*:8080"])
    assert "this machine" in everything.refuses("127.0.0.1", 8080)
    assert "this machine" in everything.refuses_address("localtest.me", "127.0.0.1", 443)
    assert "this machine" in everything.refuses_address("x.example", "::ffff:127.0.0.1", 443)
    assert everything.refuses_address("pypi.org", "151.101.0.223", 443) == ""
    provider = Allowlist(network.default_rules("http://127.0.0.1:8123/v1"))
    assert provider.refuses("127.0.0.1", 8123) == "" and provider.refuses_address("127.0.0.1", "127.0.0.1", 8123) == ""
    assert provider.refuses("127.0.0.1", 8124)


def test_the_default_is_the_provider_or_github_copilot():
    assert network.default_rules("https://models.example/v1") == [Rule("models.example", 443)]
    github = Allowlist(network.default_rules(""))
    assert github.refuses("api.githubcopilot.com", 443) == "" and github.refuses("api.github.com", 443) == ""
    assert github.refuses("pypi.org", 443)


def test_a_loopback_provider_gets_a_direct_listener_and_everything_else_the_proxy():
    route = network.route("/tmp/x/proxy.sock", "http://localhost:3128/v1")
    assert route.direct == (("127.0.0.1", 3128, "localhost"),) and route.proxy == ("127.0.0.1", 3129)
    assert route.forwarder_args()[-2:] == ["--direct", "127.0.0.1:3128=localhost"]
    env = route.environment()
    assert env["HTTPS_PROXY"] == "http://127.0.0.1:3129" and "127.0.0.1" in env["NO_PROXY"]
    assert network.route("/s", "https://models.example/v1").direct == ()


# -- the proxy, on real sockets ----------------------------------------------------------------


async def _echo_server() -> tuple[asyncio.AbstractServer, int]:
    """A TCP server on loopback that answers every request with ``HTTP 200`` and what it was asked."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        line = head.split(b"\r\n", 1)[0]
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nasked: " + line)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


class Running:
    def __init__(self, proxy: NetworkProxy, port: int, other_port: int, refused: list[tuple[str, str]]) -> None:
        self.proxy, self.port, self.other_port, self.refused = proxy, port, other_port, refused

    async def ask(self, request: str) -> bytes:
        reader, writer = await asyncio.open_unix_connection(self.proxy.path)
        writer.write(request.encode())
        await writer.drain()
        answer = await reader.read()
        writer.close()
        return answer


def test_an_allowed_destination_answers_through_the_proxy_and_nothing_else_does(tmp_path):
    async def scenario() -> None:
        allowed, port = await _echo_server()
        other, other_port = await _echo_server()
        refused: list[tuple[str, str]] = []
        proxy = NetworkProxy(Allowlist.of([f"127.0.0.1:{port}", "*"]), lambda t, r: refused.append((t, r)))
        await proxy.start(str(tmp_path / "proxy.sock"))
        assert (tmp_path / "proxy.sock").stat().st_mode & 0o777 == 0o600
        running = Running(proxy, port, other_port, refused)
        try:
            # plain HTTP to the allowed address: passed on in origin form
            answer = await running.ask(f"GET http://127.0.0.1:{port}/v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"asked: GET /v1/models HTTP/1.1")
            # a CONNECT tunnel to it, then a request inside the tunnel
            tunnel = await running.ask(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nGET /inside HTTP/1.1\r\n\r\n")
            assert tunnel.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK")
            assert tunnel.endswith(b"asked: GET /inside HTTP/1.1")
            assert refused == []

            # another port of this machine — the MCP control server's, say — even with "*" listed
            other_answer = await running.ask(f"GET http://127.0.0.1:{other_port}/approve HTTP/1.1\r\n\r\n")
            assert other_answer.startswith(b"HTTP/1.1 403 Forbidden") and b"asked" not in other_answer
            assert f"Lopen's sandbox refused a connection to 127.0.0.1:{other_port}".encode() in other_answer
            # a name "*" allows, that lands on this machine
            by_name = await running.ask("CONNECT localhost:443 HTTP/1.1\r\n\r\n")
            assert by_name.startswith(b"HTTP/1.1 403") and b"resolves to 127.0.0.1, this machine" in by_name
            assert [t for t, _ in refused] == [f"127.0.0.1:{other_port}", "localhost:443"]
        finally:
            await proxy.close()
            allowed.close()
            other.close()

    asyncio.run(scenario())


def test_a_connect_to_a_host_not_listed_is_refused_with_its_reason(tmp_path):
    async def scenario() -> None:
        refused: list[tuple[str, str]] = []
        proxy = NetworkProxy(Allowlist.of(["pypi.org"]), lambda t, r: refused.append((t, r)))
        await proxy.start(str(tmp_path / "proxy.sock"))
        running = Running(proxy, 0, 0, refused)
        try:
            answer = await running.ask("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 403 Forbidden")
            assert b"X-Lopen-Refused: Lopen's sandbox refused a connection to example.com:443" in head
            assert body == (
                b"Lopen's sandbox refused a connection to example.com:443: example.com:443 is not in "
                b"the sandbox's network allowlist (sandbox.allow_network)\n"
            )
            wrong_port = await running.ask("CONNECT pypi.org:22 HTTP/1.1\r\n\r\n")
            assert wrong_port.startswith(b"HTTP/1.1 403")
            assert [t for t, _ in refused] == ["example.com:443", "pypi.org:22"]
            assert "allow_network" in refused[0][1]
        finally:
            await proxy.close()

    asyncio.run(scenario())


# -- the relay's latency: a model request is not held back -----------------------------------------

_CLIENT = r"""
import http.client, sys
port = int(sys.argv[1])
# http.client writes a request's header and body apart, as the CLI's HTTP client does
connection = http.client.HTTPConnection("127.0.0.1", port)
whole = 0
for _ in range(15):  # one kept-alive connection
    connection.request("POST", "/v1/chat/completions", b"x" * 32768)
    answer = connection.getresponse()
    whole += answer.status == 200 and answer.read().count(b"data:") == 20
print(whole)
"""


class Streaming:
    """A model provider stand-in on loopback and Lopen's proxy, on one loop of their own (as the gateway's):
    every request on a kept-alive connection is answered as a stream of 20 small events."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = self.call(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port: int = self.server.sockets[0].getsockname()[1]
        self.proxy = NetworkProxy(Allowlist.of([f"127.0.0.1:{self.port}"]))

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    @staticmethod
    async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                sizes = [line.split(b":")[1] for line in head.lower().split(b"\r\n") if line.startswith(b"content-len")]
                await reader.readexactly(int(sizes[0]) if sizes else 0)
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for _ in range(20):
                    event = b'data: {"delta": "' + b"w" * 60 + b'"}\n\n'
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        writer.close()

    def close(self) -> None:
        self.call(self.proxy.close())
        self.server.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


@pytest.fixture
def streaming() -> Iterator[Streaming]:
    running = Streaming()
    yield running
    running.close()


def _whole_answers(argv: list[str], port: int) -> int:
    done = subprocess.run(
        [*argv, sys.executable, "-I", "-S", "-c", _CLIENT, str(port)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")
def test_through_the_forwarder_and_the_proxy_a_kept_alive_connection_streams_every_answer_whole(streaming, tmp_path):
    """Under bubblewrap the CLI reaches a loopback provider at its own address inside its network namespace:
    the forwarder there, a Unix socket, Lopen's proxy outside — requests written in parts on one kept-alive
    connection, each answered as a stream of small chunks, all come through whole."""
    streaming.call(streaming.proxy.start(str(tmp_path / "proxy.sock")))
    route = network.route(streaming.proxy.path, f"http://127.0.0.1:{streaming.port}/v1")
    plan = kernel.Plan(writable=(str(tmp_path),), hidden=())
    path, args = kernel.launch(kernel.Protection("bwrap", ""), plan, sys.executable, route)
    assert "--unshare-net" in args and args[-2:] == ["--", sys.executable]
    command = [path, *args[:-1]]  # bwrap … -- python forward.py … --: the client comes next
    assert _whole_answers(command, streaming.port) == 15


@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")
@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_a_proxy_socket_under_dev_is_reached_from_inside(streaming, tmp_path):
    """A ``TMPDIR`` on ``/dev/shm`` puts the proxy's socket under ``/dev``, which the sandbox gets fresh
    (``--dev /dev``): the socket's folder is bound into it again, read-only, or every model request is
    reset."""
    folder = tempfile.mkdtemp(prefix="lopen-net-", dir="/dev/shm")
    try:
        streaming.call(streaming.proxy.start(os.path.join(folder, "proxy.sock")))
        route = network.route(streaming.proxy.path, f"http://127.0.0.1:{streaming.port}/v1")
        plan = kernel.Plan(writable=(str(tmp_path),), hidden=())
        path, args = kernel.launch(kernel.Protection("bwrap", ""), plan, sys.executable, route)
        assert _whole_answers([path, *args[:-1]], streaming.port) == 15
        probe = [path, *args[: args.index("--")], "--", sys.executable, "-I", "-S", "-c"]
        written = subprocess.run([*probe, f"open({folder!r} + '/x', 'w')"], capture_output=True, text=True)
        assert written.returncode != 0 and "Read-only file system" in written.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_proxys_connection_to_the_provider_sends_small_writes_at_once(streaming):
    """``TCP_NODELAY`` on the proxy's upstream socket. Without it (asyncio sets it only on sockets made with
    ``IPPROTO_TCP`` named; the proxy makes its own) a request written in two parts, or each chunk of a
    streamed answer, waits for the peer's delayed acknowledgement: about 40 ms a model request, measured
    by ``bin/netcost.py``. The option is checked, not the time (a test asserts no wall time)."""
    import socket

    class Unused:  # the proxy writes to the sandbox's side only to refuse, and this target is allowed
        def write(self, data: bytes) -> None:
            raise AssertionError(f"answered {data[:40]!r}")

    async def options() -> tuple[int, int]:
        upstream = await streaming.proxy._open(Unused(), "127.0.0.1", streaming.port)
        assert upstream is not None
        sock = upstream[1].get_extra_info("socket")
        found = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), sock.type
        upstream[1].close()
        return found

    nodelay, kind = streaming.call(options())
    assert kind == socket.SOCK_STREAM and nodelay != 0
