"""The forwarder: the only listener in the sandbox's empty network, relaying to Lopen's proxy.

Under bubblewrap the Copilot CLI starts in a network namespace of its own (``--unshare-net``):
loopback only, no route anywhere. bwrap runs this script first, inside the namespace::

    python -I .../forward.py --socket /tmp/lopen-net-…/proxy.sock --proxy 127.0.0.1:3128 \\
        --direct 127.0.0.1:8123=127.0.0.1 -- copilot --headless …

It binds its listeners, forks a relay, and becomes the CLI (``exec``: the CLI keeps the process,
its stdin and stdout — the SDK's pipe — and bwrap's attention). The relay accepts connections on:

- ``--proxy HOST:PORT`` — the HTTP proxy the CLI and the model's commands are pointed at
  (``HTTPS_PROXY``/``HTTP_PROXY``): each connection is passed on, byte for byte, to Lopen's proxy
  (:mod:`lopen.sandbox.proxy`) on the Unix socket ``--socket``, which judges its destination;
- ``--direct ADDRESS:PORT=HOST`` — a loopback address the CLI connects to without a proxy (a local
  BYOK provider, ``http://127.0.0.1:8123``): each connection is opened as ``CONNECT HOST:PORT`` at
  Lopen's proxy, so the same allowlist judges it, and relayed once the proxy agrees (else the
  proxy's refusal is what the client reads).

Nothing else listens, so a connection to any other address inside the namespace is refused by
the kernel, and there is no route to the outside. The relay dies with the CLI (the sandbox's PID
namespace ends with it; ``PR_SET_PDEATHSIG`` besides). Standard library only: it runs as a plain
script under Lopen's Python in isolated mode, without ``site`` (``-I -S``).

It stands between every sandboxed launch (the CLI, each verify command) and its command, so what runs
before the ``exec`` is kept short: the C socket module alone (``_socket``: ``socket`` would import
``enum``, tens of milliseconds on a busy machine) binds the listeners; the relay imports the rest
after the fork, while the command starts.
"""

from __future__ import annotations

import _socket
import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs as much as the rest of the forwarder
if TYPE_CHECKING:
    from collections.abc import Sequence
    from socket import socket as Socket

_CHUNK = 64 * 1024
_PR_SET_PDEATHSIG = 1


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def _bind(address: tuple[str, int]) -> int:
    """The file descriptor of a TCP socket listening on ``address`` (before the fork: ``_socket`` only)."""
    family = _socket.AF_INET6 if ":" in address[0] else _socket.AF_INET
    server = _socket.socket(family, _socket.SOCK_STREAM)
    server.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    server.bind(address)
    server.listen(64)
    return server.detach()


def _listening(fd: int) -> Socket:
    """The socket object of a listener bound by :func:`_bind` (in the relay, after the fork)."""
    import socket

    return socket.socket(fileno=fd)


def _pipe(source: Socket, target: Socket) -> None:
    """Copy ``source`` to ``target`` until the end, then half-close ``target``."""
    try:
        while data := source.recv(_CHUNK):
            target.sendall(data)
        target.shutdown(_socket.SHUT_WR)
    except OSError:
        pass


def _tunnel(path: str, destination: tuple[str, int] | None) -> tuple[Socket, bytes]:
    """A connection to Lopen's proxy at ``path``; for a direct address, opened as a CONNECT
    tunnel to ``destination``. Returns the socket and, when the proxy refused, its answer."""
    import socket

    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    upstream.connect(path)
    if destination is None:
        return upstream, b""
    host, port = destination
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    upstream.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        data = upstream.recv(_CHUNK)
        if not data:
            break
        answer += data
    if answer.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
        return upstream, b""
    while data := upstream.recv(_CHUNK):  # the refusal's body
        answer += data
    return upstream, answer or b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n"


def _relay(client: Socket, path: str, destination: tuple[str, int] | None) -> None:
    import threading

    try:
        upstream, refusal = _tunnel(path, destination)
    except OSError:
        client.close()
        return
    with client, upstream:
        if refusal:
            client.sendall(refusal)
            return
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()


def _accept(server: Socket, path: str, destination: tuple[str, int] | None) -> None:
    import socket
    import threading

    while True:
        client, _peer = server.accept()
        # Small writes go out at once: without it a chunk of a streamed model answer can wait for the client's
        # delayed acknowledgement of the one before (Nagle's algorithm: up to ~40 ms each time).
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_relay, args=(client, path, destination), daemon=True).start()


def serve(listeners: Sequence[tuple[Socket, tuple[str, int] | None]], path: str) -> None:
    """Relay every connection on ``listeners`` (socket, direct destination or None) to ``path``."""
    import threading

    threads = [threading.Thread(target=_accept, args=(s, path, d), daemon=True) for s, d in listeners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _parse(argv: Sequence[str]) -> tuple[str, list[tuple[str, int]], list[tuple[str, int, str]], list[str]]:
    if "--" not in argv:
        raise SystemExit("usage: forward.py --socket PATH [--proxy HOST:PORT] [--direct ADDR:PORT=HOST]… -- COMMAND …")
    split = list(argv).index("--")
    options, command = list(argv[:split]), list(argv[split + 1 :])
    path = ""
    proxies: list[tuple[str, int]] = []
    directs: list[tuple[str, int, str]] = []
    for flag, value in zip(options[::2], options[1::2], strict=True):
        if flag == "--socket":
            path = value
        elif flag == "--proxy":
            proxies.append(_address(value))
        elif flag == "--direct":
            address, _, destination = value.partition("=")
            host, port = _address(address)
            directs.append((host, port, destination or host))
        else:
            raise SystemExit(f"forward.py: unknown option {flag}")
    if not path or not command:
        raise SystemExit("forward.py: --socket and a command are required")
    return path, proxies, directs, command


def main(argv: Sequence[str] | None = None) -> int:
    path, proxies, directs, command = _parse(sys.argv[1:] if argv is None else argv)
    bound = [(_bind(a), None) for a in proxies] + [(_bind((h, p)), (d, p)) for h, p, d in directs]
    if os.fork() == 0:  # the relay: no stdio of the CLI's, gone with it
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            serve([(_listening(fd), destination) for fd, destination in bound], path)
        finally:
            os._exit(0)
    for fd, _destination in bound:
        os.close(fd)
    os.execvp(command[0], command)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
