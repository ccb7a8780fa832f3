"""Reading a session back for audit (``lopen replay``), one line per event, in constant memory.

A session is a view of its module's history: its events are those of the module stream with its
``session_id``, plus the module-level facts around it — the spec approval it started from, and
approvals or control requests recorded while it ran.

- ``session_records``: those events, in order;
- ``json_line``: ``{"seq": n, "type": …, "at": …, …fields}``;
- ``text_line``: ``<UTC time>  #<seq>  <type>  <essentials>``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import msgspec

from events.catalogue import Event
from events.recorded import Recorded, module_stream
from events.store import EventStore

_BASE_FIELDS = frozenset({"at", "session_id", "module", "project"})
_ENCODE = msgspec.json.Encoder().encode
WIDTH = 160


def session_records(store: EventStore, project: str, session_id: str) -> Iterator[Recorded]:
    """The events of one session (and the module facts around it), in order, paged."""
    views = store.projections
    session = views.sessions.get(session_id, project)
    if session is None:
        return
    stream = module_stream(project, session.module)
    state = views.plan.get(session.module, project)
    before = [seq for seq in (state.approval_seqs if state else []) if seq < session.first_seq]
    if before:
        yield from _at(store, before[-1], stream)
    for page in store.pages(session.first_seq - 1):
        for rec in page:
            if rec.seq > session.last_seq:
                return
            if rec.stream_id == stream and rec.event.session_id in (session_id, ""):
                yield rec


def _at(store: EventStore, seq: int, stream: str) -> Iterator[Recorded]:
    for page in store.pages(seq - 1, 1):
        yield from (rec for rec in page if rec.seq == seq and rec.stream_id == stream)
        return


def json_line(rec: Recorded) -> bytes:
    """``{"seq": n, "type": …, "at": …, …fields}`` and a newline."""
    return b'{"seq":%d,%s\n' % (rec.seq, _ENCODE(rec.event)[1:])


def text_line(rec: Recorded) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(rec.event.at))
    line = f"{stamp}Z  #{rec.seq:<6} {type(rec.event).__name__:<28} {essentials(rec.event)}"
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"


def essentials(event: Event) -> str:
    """The event's non-empty fields, compactly: ``step=3 phase=planning why="…"``."""
    parts = []
    for name in event.__struct_fields__:
        if name in _BASE_FIELDS:
            continue
        value = getattr(event, name)
        if value in ("", 0, (), {}) and not isinstance(value, bool):
            continue
        parts.append(f"{name}={_short(value)}")
    return " ".join(parts)


def _short(value: Any) -> str:
    if isinstance(value, tuple) and value and isinstance(value[0], msgspec.Struct):
        names = [str(getattr(v, v.__struct_fields__[0])) for v in value]
        return f"{len(names)}[{', '.join(names)}]"
    if isinstance(value, str):
        text = " ".join(value.split())
        text = text if len(text) <= 60 else text[:59] + "…"
        return msgspec.json.encode(text).decode() if (" " in text or not text) else text
    if isinstance(value, float):
        return f"{value:g}"
    text = _ENCODE(value).decode()
    return text if len(text) <= 60 else text[:59] + "…"
