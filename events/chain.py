"""The hash chain: every stored event names the one before it in its stream (issue 22, item 3).

Rewriting an event in place is invisible to a store that only counts its rows. So each event, as it is
stored, carries the SHA-256 of its predecessor's *stored bytes* — the bytes the database holds, not the
event they decode to. The first event of a stream links to a genesis value made from the stream id, so
an event moved to another stream does not fit there either::

    digest(row)  = SHA-256(topic "\\n" state ["\\n" sealed link])      (hex, as ASCII bytes)
    link(v = 1)  = SHA-256("lopen-chain/1\\n" stream id)
    link(v > 1)  = digest(row v - 1)

Because a row's state holds its own link, its digest covers the link too, and so the whole history
before it: to rewrite event *k* unnoticed, every later event of the stream must be rewritten as well.

**Where the link lives.** Inside the stored state, as one more member at the end of the event's JSON
object: ``{…,"@prev":"<64 hex>"}``. It is written by the same INSERT as the event, so it is atomic on
every backend with no schema change; ``@prev`` can never be a field name (not an identifier), and the
decoders ignore members they do not know, so events read back exactly as before. Events stored before
the chain existed carry no ``@prev``: their links are computed once and kept beside them in the table
``chain_links`` (*sealed*, ``events.seal``), which the digest then covers too.

SHA-256 rather than BLAKE2b: measured on this project's payloads (150 B – 8 kB) with hashlib, SHA-256 is
1.1–1.7x faster where the CPU has SHA instructions (every x86 since 2017 and ARMv8), see docs/store.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import sha256

MARK = b',"@prev":"'
END = b'"}'
WIDTH = 64  # hex digits of a SHA-256
TAIL = len(MARK) + WIDTH + len(END)  # the bytes the link adds at the end of a state
GENESIS = b"lopen-chain/1\n"


def genesis(stream_id: str) -> bytes:
    """The link of a stream's first event."""
    return sha256(GENESIS + stream_id.encode()).hexdigest().encode()


def digest(topic: str, state: bytes, sealed: bytes | None = None) -> bytes:
    """The hash of one stored row: what its successor's link must be."""
    h = sha256(topic.encode())
    h.update(b"\n")
    h.update(state)
    if sealed:
        h.update(b"\n")
        h.update(sealed)
    return h.hexdigest().encode()


def link_of(state: bytes) -> bytes | None:
    """The link inside a stored state, or None for an event stored before the chain."""
    if state[-TAIL : -WIDTH - len(END)] == MARK and state[-len(END) :] == END:
        return state[-WIDTH - len(END) : -len(END)]
    return None


def with_link(payload: bytes, link: bytes) -> bytes:
    """The state to store: the event's JSON object with ``"@prev"`` added as its last member."""
    return payload[:-1] + MARK + link + END


def chain(link: bytes, topics: Sequence[str], payloads: Sequence[bytes]) -> tuple[list[bytes], bytes]:
    """Link a batch onto a stream whose last event hashes to ``link``: the states to store, and the
    digest of the last one (the stream's new head)."""
    states = []
    for topic, payload in zip(topics, payloads, strict=True):
        state = payload[:-1] + MARK + link + END
        states.append(state)
        h = sha256(topic.encode())
        h.update(b"\n")
        h.update(state)
        link = h.hexdigest().encode()
    return states, link
