"""Lopen's network proxy: the sandbox's one way out, outside the sandbox.

Under bubblewrap the model's network namespace holds nothing but loopback; the forwarder inside
(:mod:`lopen.sandbox.forward`) relays each TCP connection made to it over a Unix socket to this
proxy, which runs in Lopen's own process (on the gateway's event loop). Under Landlock there is no
namespace: the proxy listens on a loopback TCP port (:meth:`NetworkProxy.start_tcp`), the one port
(besides a loopback provider's) the sandbox may connect to. The proxy speaks the
plain HTTP proxy protocol, the one ``HTTPS_PROXY``/``HTTP_PROXY`` clients (the Copilot CLI,
``curl``, ``pip``, ``requests``) speak:

- ``CONNECT host:port HTTP/1.1`` — a tunnel (HTTPS): answered ``200 Connection established``
  and then relayed byte for byte;
- ``GET http://host:port/path HTTP/1.1`` (any method, an absolute URL) — plain HTTP: the request
  is passed on in origin form (``GET /path``) and the answer relayed.

Each destination is judged by the :class:`~lopen.sandbox.network.Allowlist` twice: by name, then
— after the proxy itself resolved the name — by address, so a name pointing at ``127.0.0.1`` does
not open Lopen's own machine. A refused connection is answered ``403 Forbidden`` with a one-line
reason the model can read (in the body and in an ``X-Lopen-Refused`` header), and reported
through ``on_refused(target, reason)`` so the gateway records it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from lopen.sandbox.network import Allowlist

Refused = Callable[[str, str], None]
"""``on_refused(target, reason)``: a connection to ``target`` (``host:port``) was refused."""

_HEADER_LIMIT = 64 * 1024
_CONNECT_TIMEOUT = 30.0
_CHUNK = 64 * 1024


class NetworkProxy:
    """An allowlisting HTTP proxy on a Unix socket. ``start`` and ``close`` run on one event loop."""

    def __init__(self, allow: Allowlist, on_refused: Refused | None = None) -> None:
        self.allow = allow
        self.on_refused: Refused = on_refused or (lambda _target, _reason: None)
        self.path = ""
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, path: str) -> None:
        """Listen on the Unix socket ``path`` (made 0600: only Lopen's user may connect)."""
        self.path = path
        self._server = await asyncio.start_unix_server(self._serve, path=path)
        os.chmod(path, 0o600)

    async def start_tcp(self, server: socket.socket) -> None:
        """Serve on ``server``, a TCP socket already bound (on loopback; its port is given to the
        sandbox before the loop runs)."""
        self._server = await asyncio.start_server(self._serve, sock=server)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # each ends before the loop does: no
        if self.path:  # "coroutine … was never finished" at exit
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        _no_delay(writer.get_extra_info("socket"))  # under Landlock: the sandbox's connection, on TCP
        try:
            await self._handle(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            # closing (``close`` cancels the connections): end quietly — asyncio's start_server callback
            # (Python 3.11) asks a cancelled connection task for its exception and prints a traceback
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > _HEADER_LIMIT:
            return await _answer(writer, 431, "the request's header is too large")
        line, _, rest = head.partition(b"\r\n")
        try:
            method, target, version = line.decode("latin-1").split(" ")
        except ValueError:
            return await _answer(writer, 400, "not an HTTP proxy request")
        if method == "CONNECT":
            host, port = _host_port(target, 443)
            forward = b""
        else:
            url = urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                return await _answer(writer, 400, "send an absolute http:// URL, or CONNECT for https")
            host, port = url.hostname, url.port or 80
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            forward = f"{method} {path} {version}\r\n".encode("latin-1") + _without_proxy_headers(rest)
        upstream = await self._open(writer, host, port)
        if upstream is None:
            return
        up_reader, up_writer = upstream
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(forward)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _open(
        self, writer: asyncio.StreamWriter, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """The connection to ``host:port`` when the allowlist lets it through, else None (answered)."""
        target = f"{host}:{port}"
        reason = self.allow.refuses(host, port)
        if reason:
            return await self._refuse(writer, target, reason)
        loop = asyncio.get_running_loop()
        try:
            found = await loop.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        except OSError as exc:
            await _answer(writer, 502, f"cannot resolve {host}: {exc}")
            return None
        for _family, _type, _proto, _name, address in found:
            reason = self.allow.refuses_address(host, str(address[0]), port)
            if reason:
                return await self._refuse(writer, target, reason)
        last: OSError | None = None
        for family, _type, _proto, _name, address in found:
            try:
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.setblocking(False)
                _no_delay(sock)
                await asyncio.wait_for(loop.sock_connect(sock, address), _CONNECT_TIMEOUT)
                return await asyncio.open_connection(sock=sock, limit=_CHUNK)
            except (OSError, TimeoutError) as exc:
                sock.close()
                last = exc if isinstance(exc, OSError) else OSError(f"timed out after {_CONNECT_TIMEOUT:g} s")
        await _answer(writer, 502, f"cannot connect to {target}: {last}")
        return None

    async def _refuse(self, writer: asyncio.StreamWriter, target: str, reason: str) -> None:
        self.on_refused(target, reason)
        await _answer(writer, 403, f"Lopen's sandbox refused a connection to {target}: {reason}")


def _no_delay(sock: socket.socket | None) -> None:
    """Send small writes at once on a TCP ``sock`` (``TCP_NODELAY``). asyncio does it only for sockets made
    with ``IPPROTO_TCP`` named; without it a request written in two parts (its header, then its body — as
    Python's ``http.client`` and many clients write) waits for the peer's delayed acknowledgement, about
    40 ms a request, and so does each chunk of a streamed answer."""
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _host_port(authority: str, default: int) -> tuple[str, int]:
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default
    host, _, port = authority.rpartition(":")
    return (host, int(port)) if host else (authority, default)


def _without_proxy_headers(headers: bytes) -> bytes:
    """The request's header lines minus those meant for the proxy (``Proxy-*``)."""
    lines = headers.split(b"\r\n")
    return b"\r\n".join(line for line in lines if not line.lower().startswith(b"proxy-"))


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    """An HTTP error answer: ``reason`` on one line, in the body and in ``X-Lopen-Refused``."""
    phrase = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large"}.get(status, "Bad Gateway")
    body = (reason + "\n").encode()
    one_line = reason.replace("\r", " ").replace("\n", " ")
    writer.write(
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nX-Lopen-Refused: {one_line}\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until the end, then half-close ``writer``."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()
