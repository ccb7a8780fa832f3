"""Sealing a store written before the hash chain (issue 22, item 3): once, never rejected.

Events stored by a Lopen older than the chain carry no link (``events.chain``), and the audit trail is
never rewritten, so their links are computed once — exactly as they would have been stored — and kept
beside them in the table ``chain_links``; each stream's head goes to ``chain_heads``. From then on they
are checked like every other event, and the first event appended after them links to the last one.

The marker event ``ControlRequested(action="seal-chain")`` in the stream ``meta:chain-sealed`` is
written in the same transaction as the heads: its time is the date ``lopen verify`` reports ("sealed
on …"), and it makes the sealing happen once. The links go in first, in pages (an old store may hold
millions of events): they are a pure function of the stored bytes, so a sealing cut short, or two
processes sealing at once, store the same values (an existing one is kept); only the marker's
transaction decides.

What sealing proves is weaker than the chain: it vouches that the events are as they were *when they
were sealed*, not when they were written. docs/store.md says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventsourcing.persistence import IntegrityError, StoredEvent

from events.backends import Head, Link
from events.catalogue import ControlRequested
from events.chain import chain, digest, genesis, link_of
from events.verify import PAGE, SEALED

if TYPE_CHECKING:
    from events.store import EventStore


def needs_sealing(store: EventStore) -> bool:
    """The store's first event carries no link and the store was never sealed (two queries)."""
    first = store.backend.events.chain_scan(0, 1)
    return bool(first) and link_of(first[0][4]) is None and not store.version(SEALED)


def seal(store: EventStore) -> int:
    """Seal every event stored without a link, once; return how many were sealed (0: nothing to do,
    or another process did it)."""
    if not needs_sealing(store):
        return 0
    recorder = store.backend.events
    tips: dict[str, tuple[int, bytes]] = {}
    links: list[Link] = []
    sealed = 0
    after = 0
    while True:
        page = recorder.chain_scan(after, PAGE)
        for _, sid, version, topic, state, _ in page:
            if link_of(state) is None:  # stored before the chain: its link is the digest before it
                link = tips[sid][1] if sid in tips else genesis(sid)
                links.append((sid, version, link))
                tips[sid] = (version, digest(topic, state, link))
                sealed += 1
            else:  # appended with the chain (by a process that sealed first): nothing to seal
                tips[sid] = (version, digest(topic, state))
        if len(links) >= PAGE:
            recorder.add_links(links)
            links = []
        if len(page) < PAGE:
            break
        after = page[-1][0]
    note = ControlRequested(
        action="seal-chain", caller="lopen", detail=f"{sealed} events stored before the hash chain, {len(tips)} streams"
    )
    topic = store.codec.topic(note)
    (state,), head = chain(genesis(SEALED), [topic], [store.codec.encode(note)])
    heads: list[Head] = [(sid, version, d) for sid, (version, d) in tips.items()]
    try:
        recorder.insert_events([StoredEvent(SEALED, 1, topic, state)], heads=[*heads, (SEALED, 1, head)], links=links)
    except IntegrityError:
        return 0  # another process sealed it first
    return sealed
