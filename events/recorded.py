"""Stream ids, session ids and ``Recorded`` (an event with its place in the store).

A module's whole history is one stream, ``module:<project>/<module>``: its plan, every session's
events, approvals, verdicts and commits, in order. A session is a view of that history (the events
whose ``session_id`` is the session's). Keying by a project id lets any number of projects share one
store (a team's PostgreSQL) without mixing modules of the same name.

Stores written before project ids existed hold ``session:<id>`` and ``module:<name>`` streams: the
*legacy* layout, migrated once into the new streams (``EventStore.migrate_legacy``) and otherwise
left untouched for audit.
"""

from __future__ import annotations

import re

import msgspec

from events.catalogue import Event

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
MODULE_RE = re.compile(rf"^{_NAME}$")
PROJECT_RE = MODULE_RE
SESSION_ID_RE = re.compile(rf"^(?P<module>{_NAME})-(?P<day>\d{{8}})-(?P<n>[1-9]\d*)$")
META_PREFIX = "meta:"
BLOB_PREFIX = "blob:"
BLOB_KEY_RE = re.compile(r"^[0-9a-f]{32}$")  # xxh3-128, hex


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


def module_stream(project: str, module: str) -> str:
    """The stream holding the whole history of one module of one project."""
    if not PROJECT_RE.match(project):
        raise ValueError(f"not a project id: {project!r}")
    if not MODULE_RE.match(module):
        raise ValueError(f"not a module name: {module!r}")
    return f"module:{project}/{module}"


def blob_stream(project: str, key: str) -> str:
    """The stream holding one blob of one project: ``blob:<project>:<key>`` (one event, ``BlobStored``)."""
    if not PROJECT_RE.match(project):
        raise ValueError(f"not a project id: {project!r}")
    if not BLOB_KEY_RE.match(key):
        raise ValueError(f"not a blob key (32 hex digits): {key!r}")
    return f"{BLOB_PREFIX}{project}:{key}"


def is_blob(stream_id: str) -> bool:
    return stream_id.startswith(BLOB_PREFIX)


def is_history(stream_id: str) -> bool:
    """True for a module history stream (``module:<project>/<module>``), false for legacy and meta streams."""
    return stream_id.startswith("module:") and "/" in stream_id


def is_legacy(stream_id: str) -> bool:
    """A stream of the layout before project ids: ``session:<id>`` or ``module:<name>``."""
    return stream_id.startswith("session:") or (stream_id.startswith("module:") and "/" not in stream_id)


def stream_owner(stream_id: str) -> tuple[str, str]:
    """``(project, module)`` of a history stream; ``(project, "")`` for a blob's; ``("", "")`` for a meta
    stream."""
    if stream_id.startswith(META_PREFIX):
        return "", ""
    if stream_id.startswith(BLOB_PREFIX):
        project, colon, key = stream_id[len(BLOB_PREFIX) :].partition(":")
        if colon and PROJECT_RE.match(project) and BLOB_KEY_RE.match(key):
            return project, ""
        raise ValueError(f"not a blob stream id (blob:<project>:<key>): {stream_id!r}")
    kind, _, ident = stream_id.partition(":")
    project, slash, module = ident.partition("/")
    if kind == "module" and slash and PROJECT_RE.match(project) and MODULE_RE.match(module):
        return project, module
    raise ValueError(f"not a stream id (module:<project>/<module>): {stream_id!r}")


def legacy_owner(stream_id: str) -> str:
    """The module a legacy stream belongs to."""
    kind, _, ident = stream_id.partition(":")
    return parse_session_id(ident)[0] if kind == "session" else ident
