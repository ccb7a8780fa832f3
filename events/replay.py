"""Reading a session back for audit (``lopen replay``), one line per event, in constant memory.

- ``json_lines``: one JSON object per line: ``seq``, ``type``, ``at`` and the event's fields;
- ``text_lines``: ``<UTC time>  #<seq>  <type>  <essentials>``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import msgspec

from events.catalogue import Event
from events.recorded import Recorded, session_stream
from events.store import EventStore

_BASE_FIELDS = frozenset({"at", "session_id", "module"})
_ENCODE = msgspec.json.Encoder().encode
WIDTH = 160


def json_line(rec: Recorded) -> bytes:
    """``{"seq": n, "type": …, "at": …, …fields}`` and a newline."""
    return b'{"seq":%d,%s\n' % (rec.seq, _ENCODE(rec.event)[1:])


def json_lines(store: EventStore, session_id: str) -> Iterator[bytes]:
    for rec in store.read_stream(session_stream(session_id)):
        yield json_line(rec)


def text_lines(store: EventStore, session_id: str) -> Iterator[str]:
    for rec in store.read_stream(session_stream(session_id)):
        yield text_line(rec)


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
