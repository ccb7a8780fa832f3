"""Where the model's network may go: the allowlist Lopen's network proxy enforces.

Under bubblewrap the Copilot CLI and every command it runs live in a network namespace of their
own, with nothing in it but a loopback interface (see :mod:`lopen.sandbox.forward` and
:mod:`lopen.sandbox.proxy`). The one way out is Lopen's proxy, outside the sandbox, and the proxy
lets a connection through only when its destination matches a :class:`Rule` of the
:class:`Allowlist`:

- ``host`` — that host on ports 443 and 80 (``api.githubcopilot.com``);
- ``*.domain`` — any host below ``domain`` (not ``domain`` itself), ports 443 and 80;
- ``*`` — any host on ports 443 and 80;
- any of these with ``:port`` — that port only (``pypi.org:443``, ``127.0.0.1:8080``).

Names are compared without case. Loopback, link-local and unspecified addresses are special: a
connection that *lands* on one (``127.0.0.1``, ``localhost``, a public name resolving to
``127.0.0.1``) is refused unless a rule names that very address and port — a wildcard never
opens Lopen's own machine, where Lopen's MCP control server and other local services listen.

The allowlist of a run is :func:`default_rules` (the model provider: a BYOK
``provider.base_url``'s host and port, or GitHub Copilot's endpoints) plus
``sandbox.allow_network``.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

import msgspec

GITHUB_COPILOT_HOSTS: tuple[str, ...] = (
    "api.githubcopilot.com",
    "*.githubcopilot.com",
    "api.github.com",
    "github.com",
    "*.githubusercontent.com",
)
"""What the Copilot CLI reaches with GitHub's model routing: the Copilot API (``api.githubcopilot.com``
and its per-plan hosts ``api.individual.``/``api.business.``/``api.enterprise.githubcopilot.com``),
GitHub's API for the token and user (``api.github.com``), ``github.com`` for sign-in, and
``*.githubusercontent.com`` (the CLI's telemetry and proxy hosts)."""

DEFAULT_PORTS: tuple[int, ...] = (443, 80)
"""The ports a rule without ``:port`` allows."""


class Rule(msgspec.Struct, frozen=True):
    """One allowlist entry: a host pattern (lower case) and its ports (empty = :data:`DEFAULT_PORTS`)."""

    host: str
    port: int = 0

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.port,) if self.port else DEFAULT_PORTS

    def matches_name(self, host: str, port: int) -> bool:
        """``host:port`` matches this rule by name (``host`` lower case, without brackets)."""
        if port not in self.ports:
            return False
        if self.host == "*":
            return True
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and fnmatch.fnmatchcase(host, self.host)
        return host == self.host

    def __str__(self) -> str:
        return f"{self.host}:{self.port}" if self.port else self.host


def parse(pattern: str) -> Rule:
    """The rule for ``pattern`` (``host``, ``*.domain``, ``*``, each with an optional ``:port``;
    an IPv6 address in brackets, ``[::1]:8080``). Raises ValueError for a bad port."""
    text = pattern.strip().lower()
    port = 0
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest.startswith(":"):
            port = int(rest[1:])
    elif text.count(":") == 1:
        host, _, number = text.partition(":")
        port = int(number)
    else:
        host = text
    if not host or not 0 <= port <= 65535:
        raise ValueError(f"not a network pattern: {pattern!r}")
    return Rule(host, port)


def is_local(address: str) -> bool:
    """``address`` (an IP address) is this machine or no machine: loopback, link-local, unspecified."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified


class Allowlist:
    """The rules of one run, and the two questions the proxy asks them."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules: tuple[Rule, ...] = tuple(dict.fromkeys(rules))

    @classmethod
    def of(cls, patterns: Iterable[str]) -> Allowlist:
        return cls(parse(p) for p in patterns)

    def refuses(self, host: str, port: int) -> str:
        """Why a connection to ``host:port`` is refused by name, or "" when some rule allows it."""
        name = host.strip("[]").lower()
        if any(rule.matches_name(name, port) for rule in self.rules):
            if is_local(name) and not self._names_exactly(name, port):
                return f"{name} is this machine: only a rule naming {name}:{port} itself opens it"
            return ""
        return f"{name}:{port} is not in the sandbox's network allowlist (sandbox.allow_network)"

    def refuses_address(self, host: str, address: str, port: int) -> str:
        """Why a connection to ``host:port``, resolved to ``address``, is refused, or "": an address
        on this machine needs a rule naming that address, or ``host`` itself, with the port (no wildcard)."""
        if not is_local(address):
            return ""
        name = host.strip("[]").lower()
        if self._names_exactly(address, port) or self._names_exactly(name, port):
            return ""
        return f"{host} resolves to {address}, this machine: only a rule naming {address}:{port} itself opens it"

    def _names_exactly(self, host: str, port: int) -> bool:
        return any(rule.host == host and rule.port == port for rule in self.rules)

    def __str__(self) -> str:
        return ", ".join(str(rule) for rule in self.rules)


def provider_rule(base_url: str) -> Rule | None:
    """The rule for a BYOK provider's ``base_url``: its host and port (the scheme's when none)."""
    parts = urlsplit(base_url)
    if not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return Rule(parts.hostname.lower(), port)


def default_rules(provider_base_url: str = "") -> list[Rule]:
    """What every run may reach: the BYOK provider at ``provider_base_url``, or — with GitHub's
    routing (``""``) — GitHub Copilot's endpoints."""
    if provider_base_url:
        rule = provider_rule(provider_base_url)
        return [rule] if rule else []
    return [parse(host) for host in GITHUB_COPILOT_HOSTS]


PROXY_PORT = 3128
"""The port the forwarder's HTTP proxy listens on inside the sandbox (another when a direct
address takes it)."""

_LOOPBACK_NAMES = {"localhost": "127.0.0.1"}


class Route(msgspec.Struct, frozen=True):
    """How the sandbox's connections leave it: the forwarder's listeners inside, Lopen's proxy's
    Unix socket outside (see :mod:`lopen.sandbox.forward`).

    - ``socket`` — the proxy's Unix socket (visible, read-only, inside the sandbox);
    - ``proxy`` — where the forwarder's HTTP proxy listens inside (``HTTPS_PROXY``);
    - ``direct`` — loopback addresses the CLI connects to without a proxy (a local BYOK provider),
      each ``(listen address, port, destination host)``.
    """

    socket: str
    proxy: tuple[str, int] = ("127.0.0.1", PROXY_PORT)
    direct: tuple[tuple[str, int, str], ...] = ()

    def ports(self) -> list[int]:
        """The TCP ports the sandbox may connect to under Landlock: the proxy's, then each direct
        address's (Landlock's rules name a port, not an address)."""
        return list(dict.fromkeys([self.proxy[1], *(port for _a, port, _d in self.direct)]))

    def forwarder_args(self) -> list[str]:
        """The forwarder's options (before ``--`` and the command)."""
        args = ["--socket", self.socket, "--proxy", f"{self.proxy[0]}:{self.proxy[1]}"]
        for address, port, destination in self.direct:
            args += ["--direct", f"{address}:{port}={destination}"]
        return args

    def environment(self) -> dict[str, str]:
        """The proxy variables for the CLI and the model's commands: everything through the
        forwarder's proxy, except loopback (the sandbox's own, where the model's tests may run
        servers, and where the direct addresses listen)."""
        url = f"http://{self.proxy[0]}:{self.proxy[1]}"
        none = "localhost,127.0.0.1,::1"
        return {
            "HTTPS_PROXY": url,
            "HTTP_PROXY": url,
            "https_proxy": url,
            "http_proxy": url,
            "NO_PROXY": none,
            "no_proxy": none,
        }


def route(socket_path: str, provider_base_url: str = "", *services: str) -> Route:
    """The route for a sandbox whose proxy listens on ``socket_path``: a BYOK provider on loopback
    (``http://127.0.0.1:8123``, ``http://localhost:8123``) gets a direct listener at its address, and so
    does each of Lopen's own ``services`` on loopback (the OTLP endpoint the CLI exports its spans to)."""
    direct: tuple[tuple[str, int, str], ...] = ()
    for url in (provider_base_url, *services):
        rule = provider_rule(url) if url else None
        if rule is None:
            continue
        address = _LOOPBACK_NAMES.get(rule.host, rule.host)
        local = is_local(address) and not ipaddress.ip_address(address).is_unspecified
        if local and all((address, rule.port) != (a, p) for a, p, _d in direct):
            direct = (*direct, (address, rule.port, rule.host))
    port = PROXY_PORT
    while any(port == p for _a, p, _d in direct):
        port += 1
    return Route(socket=socket_path, proxy=("127.0.0.1", port), direct=direct)


def tcp_route(proxy_port: int, provider_base_url: str = "", *services: str) -> Route:
    """The route under Landlock: no namespace and no forwarder — the sandbox shares this machine's
    network, Lopen's proxy listens on loopback at ``proxy_port`` (``HTTPS_PROXY``), and a loopback
    provider or service is connected to directly, at its own address (its port allowed)."""
    direct = route("", provider_base_url, *services).direct
    return Route(socket="", proxy=("127.0.0.1", proxy_port), direct=direct)
