"""Blobs: large texts kept once, content-addressed (issue 22, item 2).

A tool call's whole result and each part of an invocation's prompt are too large, and too often
repeated (a file read twice, the same system message), to copy into every event that names them. Each
distinct text is stored once as a ``BlobStored`` event in a stream of its own, ``blob:<project>:<key>``
(version 1), where ``key = xxh3-128(text as UTF-8)`` in hex; the events that use it carry the key
(``ToolCalled.result_blob``, ``InvocationStarted.prompt``). Being events, blobs are hash-chained,
verified, redacted and kept by both backends like every other fact, with no table of their own; a second
append of the same blob collides with the first (the stream's version 1) and is simply "already there".

Secrets are redacted from the text *before* its key is computed, so the key names the text as stored;
``lopen verify`` checks that each blob's text still hashes to its key (``check``).
"""

from __future__ import annotations

import msgspec
import xxhash

from events.recorded import BLOB_PREFIX


class _Text(msgspec.Struct, gc=False):
    key: str
    text: str


_decode_text = msgspec.json.Decoder(_Text).decode


def key_of(text: str) -> str:
    """The key a text is stored under: its xxh3-128, hex (32 digits)."""
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))


def mismatch(stream_id: str, state: bytes) -> str:
    """Why the stored ``BlobStored`` state of ``stream_id`` is not the blob its key names ("" when it is)."""
    key = stream_id[len(BLOB_PREFIX) :].rpartition(":")[2]
    try:
        stored = _decode_text(state)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return f"its stored bytes are not a blob any more ({exc})"
    if stored.key != key:
        return f"it names the key {stored.key[:16]}…, its stream the key {key[:16]}…"
    found = key_of(stored.text)
    if found != key:
        return f"its text hashes to {found[:16]}…, not to its key {key[:16]}…"
    return ""
