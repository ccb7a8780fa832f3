"""Stream ids, session ids and ``Recorded`` (an event with its place in the store)."""

from __future__ import annotations

import re

import msgspec

from events.catalogue import Event

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
MODULE_RE = re.compile(rf"^{_NAME}$")
SESSION_ID_RE = re.compile(rf"^(?P<module>{_NAME})-(?P<day>\d{{8}})-(?P<n>[1-9]\d*)$")


class Recorded(msgspec.Struct, frozen=True, gc=False):
    """One stored event: ``seq`` is its notification id (global order, from 1)."""

    seq: int
    stream_id: str
    version: int
    event: Event


def parse_session_id(session_id: str) -> tuple[str, str, int]:
    """``"auth-20261126-3"`` → ``("auth", "20261126", 3)``; ValueError when malformed."""
    m = SESSION_ID_RE.match(session_id)
    if m is None:
        raise ValueError(f"not a session id (<module>-YYYYMMDD-<n>): {session_id!r}")
    return m["module"], m["day"], int(m["n"])


def session_stream(session_id: str) -> str:
    """The stream of one session: every event a run records goes here."""
    parse_session_id(session_id)
    return f"session:{session_id}"


def module_stream(module: str) -> str:
    """The stream of one module, for module facts recorded outside any session."""
    if not MODULE_RE.match(module):
        raise ValueError(f"not a module name: {module!r}")
    return f"module:{module}"


def stream_owner(stream_id: str) -> tuple[str, str]:
    """``(session_id, module)`` a stream implies (session id empty for module streams)."""
    kind, _, ident = stream_id.partition(":")
    if kind == "session":
        return ident, parse_session_id(ident)[0]
    if kind == "module" and MODULE_RE.match(ident):
        return "", ident
    raise ValueError(f"not a stream id (session:<id> or module:<name>): {stream_id!r}")
