"""Blobs: large texts kept once, content-addressed (issue 22, item 2).

A tool call's whole result and each part of an invocation's prompt are too large, and too often
repeated (a file read twice, the same system message), to copy into every event that names them. Each
distinct text is stored once as a ``BlobStored`` event in a stream of its own, ``blob:<project>:<key>``
(version 1), where ``key = xxh3-128(text as UTF-8)`` in hex; the events that use it carry the key
(``ToolCalled.result_blob``, ``InvocationStarted.prompt``). Being events, blobs are hash-chained,
verified, redacted and kept by both backends like every other fact, with no table of their own; a second
append of the same blob collides with the first (the stream's version 1) and is simply "already there".

**No head.** A blob's stream holds one event for ever, so it needs no recorded head (table ``chain_heads``,
one more row — a random page of its index — written at every commit that stores a new blob: most of what a
blob cost an append): the text checks itself (its key is its hash), and what a head would witness is
witnessed otherwise — a deleted blob by the event naming it (``lopen verify`` checks that every key an event
names is stored, ``named``), a blob stream past version 1 is not Lopen's. Blobs stored by a Lopen that
recorded their heads keep them, and are checked against them as before.

Secrets are redacted from the text *before* its key is computed, so the key names the text as stored;
``lopen verify`` checks that each blob's text still hashes to its key (``mismatch``).

**Packed.** Blobs are most of a store's bytes, and every byte is written to disk at commit: a text of
``PACK_FROM`` bytes or more is compressed (zlib, level 1) and stored packed when that saves at least a tenth
of its bytes (base64 included) — ``BlobStored.packing = "zlib"``, the bytes in ``packed``, ``text`` empty.
The key stays the hash of the text itself, so a text kept packed and the same text kept plain by an older
Lopen are the same blob, and verification unpacks before hashing. A blob's ``packing`` is stored with it
(schema 2): nothing is ever guessed from the bytes, and schema-1 blobs (no packing) read as they were.
"""

from __future__ import annotations

import zlib

import msgspec
import xxhash

from events.catalogue import BlobStored
from events.chain import MARK, TAIL
from events.recorded import BLOB_PREFIX

PACK_FROM = 1024  # bytes of UTF-8: a shorter text is stored as it is
PACK_LEVEL = 1  # zlib's fastest: nearly the ratio of its default level on prompts and results, at a fraction
ZLIB = "zlib"


class _Text(msgspec.Struct, gc=False):
    key: str
    text: str
    packing: str = ""
    packed: bytes = b""


_decode_text = msgspec.json.Decoder(_Text).decode
NAMING = ("ToolCalled@", "InvocationStarted@")  # the topics of the events that name blobs (every schema version)


class _Names(msgspec.Struct, gc=False):
    """What of a ``ToolCalled``/``InvocationStarted`` names blobs (the rest of the event is skipped, not decoded)."""

    result_blob: str = ""
    prompt: dict[str, str] = {}


_decode_names = msgspec.json.Decoder(_Names).decode
# How a ``ToolCalled`` naming no blob ends: its last field, empty, then its link (``events.chain``) — known
# without decoding it (most tool calls; a quote inside a string is escaped, so no string ends so).
_RESULT_BLOB = b',"result_blob":"'
NO_RESULT_BLOB = _RESULT_BLOB + b'"' + MARK


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def key_of(text: str) -> str:
    """The key a text is stored under: its xxh3-128, hex (32 digits)."""
    return xxhash.xxh3_128_hexdigest(_utf8(text))


def blob_of(text: str) -> BlobStored:
    """The ``BlobStored`` keeping ``text`` (secrets already redacted): packed when it is long and that
    saves at least a tenth of its bytes once base64-encoded, as is otherwise."""
    data = _utf8(text)
    key = xxhash.xxh3_128_hexdigest(data)
    if len(data) >= PACK_FROM:
        packed = zlib.compress(data, PACK_LEVEL)
        if (len(packed) + 2) // 3 * 4 <= len(data) * 0.9:
            return BlobStored(key=key, text="", size=len(text), packing=ZLIB, packed=packed)
    return BlobStored(key=key, text=text, size=len(text))


def unpack(packing: str, packed: bytes) -> str:
    """A packed blob's text; ValueError naming what is wrong when it cannot be unpacked."""
    if packing != ZLIB:
        raise ValueError(f"it is packed as {packing!r}, which this Lopen does not know (a newer Lopen wrote it)")
    try:
        return zlib.decompress(packed).decode("utf-8", "surrogatepass")
    except (zlib.error, UnicodeDecodeError) as exc:
        raise ValueError(f"its packed text cannot be unpacked ({exc})") from None


def named(stream_id: str, topic: str, state: bytes) -> list[str]:
    """The blob streams an event stored in the module history ``stream_id`` names (``ToolCalled.result_blob``,
    each part of ``InvocationStarted.prompt``; its project's blobs), none for other events or for bytes that
    are not such an event any more (the chain names those). A tool call is read from its last bytes (its
    last field, then its link) without decoding it; anything else is decoded."""
    if not topic.startswith(NAMING):
        return []
    cut = len(state) - TAIL  # where a chained event's link starts
    fast = cut > 49  # (a tool call is longer: this only keeps the offsets below from counting from the end)
    if fast and state.endswith(NO_RESULT_BLOB, 0, cut + len(MARK)):
        return []
    project = stream_id[7 : stream_id.find("/")]  # module:<project>/<module>
    if fast and state.startswith(_RESULT_BLOB, cut - 49) and state.endswith(b'"' + MARK, 0, cut + len(MARK)):
        key = state[cut - 33 : cut - 1]
        if key.isalnum():
            return [f"{BLOB_PREFIX}{project}:{key.decode()}"]
    try:
        names = _decode_names(state)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return []
    keys = [names.result_blob] if names.result_blob else list(names.prompt.values())
    return [f"{BLOB_PREFIX}{project}:{key}" for key in keys if key]


def mismatch(stream_id: str, state: bytes) -> str:
    """Why the stored ``BlobStored`` state of ``stream_id`` is not the blob its key names ("" when it is)."""
    key = stream_id[len(BLOB_PREFIX) :].rpartition(":")[2]
    try:
        stored = _decode_text(state)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return f"its stored bytes are not a blob any more ({exc})"
    if stored.key != key:
        return f"it names the key {stored.key[:16]}…, its stream the key {key[:16]}…"
    try:
        text = unpack(stored.packing, stored.packed) if stored.packing else stored.text
    except ValueError as exc:
        return str(exc)
    found = key_of(text)
    if found != key:
        return f"its text hashes to {found[:16]}…, not to its key {key[:16]}…"
    return ""
