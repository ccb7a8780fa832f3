"""Checking the hash chain (``events.chain``): ``lopen verify``, and every run before it starts.

``verify(store)`` walks the events appended since the last verification, in ``seq`` order, and checks
that each one's link is the digest of the event before it in its stream, that versions follow each
other without a gap, and that each stream ends at the head recorded with its newest event (table
``chain_heads``). ``verify(store, stream)`` does the same for one stream; ``full=True`` starts every
stream again at its genesis. The first event that does not fit raises ``ChainBroken`` naming it.

**Incremental.** What verification reached is remembered in the store (table ``chain_verified``: per
stream the version, its digest and its ``seq``; the row ``""`` holds the ``seq`` up to which every
event was checked). The next call reads only the events after it, and first hashes once more the event
at each remembered position (one query for all of them), so a rewrite of the newest verified event is
found too. Events before a remembered position are checked again only with ``full=True``.

**Blobs.** A blob's event (``events.blobs``) must also hold a text that hashes to the key its stream is
named by: a blob rewritten together with its chain head is still found. A blob's stream holds that one event
and has no recorded head (blobs stored by an older Lopen have one, and are held to it): an event after it
is not Lopen's, and a deleted blob is found through the events that name it — every blob an event walked
names must be stored (walked too, verified before, or looked up). A blob stream has one event and
never changes, so hashing every verified blob again on every run would cost a read of every text ever kept
(most of the store's bytes): an incremental verification hashes again at most ``AUDIT`` of them, in turn
(the row ``""`` remembers, in its version, the ``seq`` of the last one), so a blob rewritten after it was
verified is found by the next ``verify --full`` and by the incremental checks within
⌈blobs / ``AUDIT``⌉ runs — every run while the store holds fewer.

**Which event is named.** A link that does not match says that either the event before it changed or
the link itself did. The event after decides (a link is part of its event's bytes, so a changed link
changes that event's digest too): if it still fits the event with the bad link, the one before was
rewritten; otherwise the event holding the link was.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from hashlib import sha256
from typing import TYPE_CHECKING, Any

from events.backends import ChainRow, Verified
from events.blobs import NAMING, NO_RESULT_BLOB, mismatch, named
from events.chain import END, MARK, TAIL, WIDTH, digest, genesis, link_of
from events.errors import ChainBroken
from events.recorded import BLOB_PREFIX

if TYPE_CHECKING:
    from events.store import EventStore

SEALED = "meta:chain-sealed"  # the marker stream of an old store's sealing (events.seal)
PAGE = 5000
AUDIT = 1000  # verified blobs hashed again per incremental verification (~15 ms for 1,000 of 4 kB)
_LINK = slice(-WIDTH - len(END), -len(END))
_MARKED = slice(-TAIL, -WIDTH - len(END))


Tip = tuple[int, bytes, int, str]  # the last event checked in a stream: (version, digest, seq, topic)
HeadAt = tuple[int, bytes]  # a stream's recorded head: (version, digest of its newest event)
CATCH_UP = 20  # rounds of reading a stream again while another writer appends to it


@dataclass(frozen=True)
class Report:
    """What a verification checked: ``events`` links in ``streams`` streams in ``seconds``; ``full``
    when every stream was checked from its genesis."""

    streams: int
    events: int
    seconds: float
    full: bool

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


def verify(store: EventStore, stream: str | None = None, *, full: bool = False) -> Report:
    """Check the chain of every stream (or of ``stream``) from where the last verification stopped
    (``full``: from the start); remember where this one stopped. ``ChainBroken`` names the first event
    that does not fit."""
    started = time.perf_counter()
    recorder = store.backend.events
    remembered, anchors = recorder.chain_verified(stream)
    _, audited, _, after, _ = remembered.get("", ("", 0, b"", 0, 0.0))
    looked = {stream} if stream is not None else set()
    if stream is None and not full:  # the next AUDIT verified blobs, in turn (full: the walk meets them all)
        blobs = recorder.blob_anchors(audited, AUDIT)
        if audited and len(blobs) < AUDIT:  # round again from the first
            blobs += [b for b in recorder.blob_anchors(0, AUDIT - len(blobs)) if remembered[b[0]][3] <= audited]
        anchors += [row for _, row in blobs if row is not None]
        if blobs:
            audited = remembered[blobs[-1][0]][3]
        looked = {sid for sid, _ in blobs}
    tips = _check_anchors(store, remembered, anchors, looked)
    # The heads before the events: every event a head names was committed with it, so the walk that
    # follows meets it; one appended while we walk has a newer head (``_Walk.finish`` reads it then).
    heads = recorder.chain_heads(stream)
    walk = _Walk(store, {} if full else tips)
    if full and stream is None:  # each verified blob, as the walk hashes it, against what was verified
        walk.witnessed = {sid: v for sid, v in remembered.items() if sid.startswith(BLOB_PREFIX)}
    if stream is None:
        after = 0 if full else after
        position = after
        while True:
            page = recorder.chain_scan(position, PAGE)
            walk.feed(page)
            position = page[-1][0] if page else position
            if len(page) < PAGE:
                break
    else:
        tip = walk.tips.get(stream)
        walk.feed_stream(stream, tip[0] if tip else 0)
    walk.finish(heads, only=stream)
    for sid in walk.witnessed.keys() - walk.touched.keys():  # a verified blob the walk did not meet
        _check_anchors(store, {sid: walk.witnessed[sid]}, [], {sid})  # names it: gone
    _check_named(store, walk, remembered)
    now = time.time()
    saved: list[Verified] = [(sid, version, link, seq, now) for sid, (version, link, seq, _) in walk.touched.items()]
    if stream is None:
        saved.append(("", audited, b"", position, now))  # every event up to here is checked (later ones: some)
    if saved:
        recorder.save_verified(saved)
    return Report(len(walk.touched), walk.checked, time.perf_counter() - started, full)


def sealed_at(store: EventStore) -> float:
    """When the store's events older than the chain were sealed (0.0: never, none were)."""
    for rec in store.read_stream(SEALED):
        return rec.event.at
    return 0.0


def day(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")


def describe(row: ChainRow) -> str:
    """``event #12 of module:p/auth (version 7, TokensUsed)``."""
    return f"event #{row[0]} of {row[1]} (version {row[2]}, {row[3].partition('@')[0]})"


def rewritten(row: ChainRow, expected: bytes, found: bytes, witness: str) -> ChainBroken:
    """``row`` no longer hashes to what ``witness`` recorded for it."""
    sealed = " (one of the events stored before the chain, sealed then)" if row[5] else ""
    return _broken(
        row,
        f"{describe(row)} does not match the hash chain",
        f"{witness} says it hashes to {expected.decode()[:16]}…, but it now hashes to {found.decode()[:16]}…: "
        f"its stored bytes were rewritten outside Lopen{sealed}",
        expected,
        found,
    )


def _broken(row: ChainRow, what: str, why: str, expected: bytes = b"", found: bytes = b"") -> ChainBroken:
    return ChainBroken(
        what,
        why,
        stream_id=row[1],
        version=row[2],
        seq=row[0],
        event_type=row[3].partition("@")[0],
        expected=expected.decode(),
        found=found.decode(),
    )


def _check_anchors(
    store: EventStore, remembered: dict[str, Verified], anchors: list[ChainRow], looked: set[str]
) -> dict[str, Tip]:
    """Each remembered position looked at (every stream's but the blobs' not in ``looked``) still holds the
    event verified there, byte for byte; each stream's tip (a blob not looked at: as remembered)."""
    found = {row[1]: row for row in anchors}
    tips: dict[str, Tip] = {}
    for sid, (_, version, expected, seq, at) in remembered.items():
        if not sid:
            continue
        row = found.get(sid)
        if row is not None and row[2] != version:  # another verification moved the position meanwhile
            row, _ = store.backend.events.chain_event(sid, version)  # (read apart from ``remembered``)
        if row is None and sid.startswith(BLOB_PREFIX) and sid not in looked:
            tips[sid] = (version, expected, seq, "")  # one event, verified before: trusted until its turn
            continue
        if row is None:
            raise ChainBroken(
                f"event version {version} of {sid} is gone from the event store {store.location}",
                f"it was verified on {day(at)}; events were deleted outside Lopen",
                stream_id=sid,
                version=version,
                seq=0,
                event_type="",
            )
        actual = digest(row[3], row[4], row[5])
        if actual != expected:
            raise rewritten(row, expected, actual, f"the verification of {day(at)}")
        tips[sid] = (version, expected, row[0], row[3])
    return tips


def _check_named(store: EventStore, walk: _Walk, remembered: dict[str, Verified]) -> None:
    """Every blob an event walked names is stored: walked too, verified before (a verified blob deleted since
    is found in its turn, ``AUDIT``), or else looked up (a stream's verification, a blob stored before it)."""
    unknown = [sid for sid in walk.names if sid not in walk.touched and sid not in remembered]
    stored = store.backend.events.stored_streams(unknown) if unknown else set()
    for sid in unknown:
        if sid in stored:
            continue
        row = walk.names[sid]
        key = sid.rpartition(":")[2]
        raise _broken(
            row,
            f"{describe(row)} names the blob {key}, which is not in the event store {store.location}",
            f"Lopen stores a blob with the first event naming it, so its event ({sid}, version 1) was deleted "
            "outside Lopen",
        )


class _Walk:
    """Follows streams event by event; ``tips`` are where each stream's check starts (none: genesis)."""

    def __init__(self, store: EventStore, tips: dict[str, Tip]) -> None:
        self.store = store
        self.tips = dict(tips)
        self._starts: dict[str, tuple[Any, bool]] = {}  # topic → the hash of its prefix (copied per event: no
        # re-hashing), and whether its events may name blobs
        self.touched: dict[str, Tip] = {}
        self.checked = 0
        self.witnessed: dict[str, Verified] = {}  # blob streams verified before (full): their digest then
        self.names: dict[str, ChainRow] = {}  # blob stream → the first event walked that names it

    def feed(self, rows: Iterable[ChainRow]) -> None:
        tips, touched, starts, witnessed, names = self.tips, self.touched, self._starts, self.witnessed, self.names
        checked = 0
        for row in rows:
            seq, sid, version, topic, state, sealed = row
            tip = tips.get(sid)
            if tip is None:
                expected, after = genesis(sid), 0
            else:
                after, expected = tip[0], tip[1]
            if version != after + 1:
                if version <= after:
                    continue  # checked already (``verify(store, stream)`` went further in this stream)
                raise self._gap(row, after)
            link = state[_LINK] if state[_MARKED] == MARK and state[-2:] == END else sealed
            if link != expected:
                raise self._mismatch(row, tip, expected, link)
            start = starts.get(topic)
            if start is None:  # the hash of its prefix, and whether its events may name blobs
                start = starts[topic] = (sha256(topic.encode() + b"\n"), topic.startswith(NAMING))
            if sid[:5] == "blob:":
                if version > 1:
                    raise _broken(
                        row,
                        f"{describe(row)} was not appended by Lopen",
                        f"{sid} is a blob's stream, which holds one event (its text): the events after it were "
                        "inserted outside Lopen",
                    )
                if why := mismatch(sid, state):
                    why += ": its text was rewritten"
                    raise _broken(row, f"{describe(row)} is not the blob its key names", why)
            elif start[1] and not state.endswith(NO_RESULT_BLOB, 0, len(state) - WIDTH - 2):  # (most tool calls)
                for blob in named(sid, topic, state):
                    names.setdefault(blob, row)
            h = start[0].copy()
            h.update(state)
            if sealed:
                h.update(b"\n")
                h.update(sealed)
            tip = tips[sid] = touched[sid] = (version, h.hexdigest().encode(), seq, topic)
            if witnessed and sid in witnessed and witnessed[sid][1] == version and witnessed[sid][2] != tip[1]:
                at = witnessed[sid][4]
                raise rewritten(row, witnessed[sid][2], tip[1], f"the verification of {day(at)}")
            checked += 1
        self.checked += checked

    def feed_stream(self, stream: str, after: int) -> None:
        recorder = self.store.backend.events
        while True:
            page = recorder.chain_stream(stream, after, PAGE)
            self.feed(page)
            if len(page) < PAGE:
                return
            after = page[-1][2]

    def finish(self, heads: dict[str, tuple[int, bytes]], only: str | None) -> None:
        """Each stream walked (and each with a recorded head) ends at that head: nothing deleted at the
        end, nothing appended without one, the newest event as it was when it was appended."""
        for sid in sorted(set(heads) | set(self.touched)):
            if (only is not None and sid != only) or (sid[:5] == "blob:" and sid not in heads):
                continue  # a blob's stream has no head (events.blobs): its one event was checked as it was walked
            tip, head = self._caught_up(sid, self.tips.get(sid), heads.get(sid))
            if tip is None or head is None:
                if tip is None and head is not None and head[0] > 0:
                    raise ChainBroken(
                        f"the events of {sid} are gone from the event store {self.store.location}",
                        f"its newest event was version {head[0]}; the store holds none of them: they were "
                        "deleted outside Lopen",
                        stream_id=sid,
                        version=head[0],
                        seq=0,
                        event_type="",
                    )
                if tip is not None and sid in self.touched:
                    row = self._row(sid, tip[0])
                    raise _broken(
                        row,
                        f"{describe(row)} was not appended by Lopen",
                        f"{sid} has no recorded head: its events were stored without the chain's bookkeeping "
                        "(inserted outside Lopen)",
                    )
                continue
            version, link = tip[0], tip[1]
            if version < head[0]:
                raise ChainBroken(
                    f"events of {sid} are missing from the event store {self.store.location}",
                    f"its newest event was version {head[0]}, the store holds versions up to {version}: "
                    "events were deleted outside Lopen",
                    stream_id=sid,
                    version=version + 1,
                    seq=0,
                    event_type="",
                )
            if version > head[0]:
                row = self._row(sid, head[0] + 1)
                raise _broken(
                    row,
                    f"{describe(row)} was not appended by Lopen",
                    f"{sid}'s head was recorded at version {head[0]}, so the events after it were inserted "
                    "outside Lopen",
                )
            if link != head[1]:
                row = self._row(sid, version)
                raise rewritten(row, head[1], link, f"the head of {sid} recorded when it was appended")

    def _caught_up(self, sid: str, tip: Tip | None, head: HeadAt | None) -> tuple[Tip | None, HeadAt | None]:
        """The stream's walked tip and the head to hold it to, other writers appending meanwhile: a head
        read before the walk names events the walk must meet (fewer: deleted); events walked past it
        were appended since, so the head is read again — and the event the older head named must still
        hash as it did. Gives up catching up with a writer that never pauses after ``CATCH_UP`` rounds."""
        for _ in range(CATCH_UP):
            if head is not None and (tip is None or tip[0] < head[0]):
                self.feed_stream(sid, tip[0] if tip else 0)  # the scan's pages ended before it
                tip = self.tips.get(sid)
                if tip is None or tip[0] < head[0]:
                    break  # committed before we looked, gone now: deleted
            if tip is None or (head is not None and tip[0] <= head[0]):
                break
            fresh = self.store.backend.events.chain_heads(sid).get(sid)
            if fresh is None or fresh[0] < tip[0]:
                return tip, fresh  # events past every head Lopen recorded: not appended by Lopen
            if head is not None and head[0] < fresh[0]:
                row = self._row(sid, head[0])  # the newest event then, as it was appended
                actual = digest(row[3], row[4], row[5])
                if actual != head[1]:
                    raise rewritten(row, head[1], actual, f"the head of {sid} recorded when it was appended")
            head = fresh
        return tip, head

    # -- naming what does not fit -------------------------------------------------------------------------

    def _row(self, stream: str, version: int) -> ChainRow:
        row, _ = self.store.backend.events.chain_event(stream, version)
        assert row is not None
        return row

    def _gap(self, row: ChainRow, after: int) -> ChainBroken:
        return _broken(
            row,
            f"events of {row[1]} are missing from the event store {self.store.location}",
            f"version {row[2]} (event #{row[0]}) follows version {after}: events were deleted outside Lopen",
        )

    def _mismatch(self, row: ChainRow, tip: Tip | None, expected: bytes, link: bytes | None) -> ChainBroken:
        if link is None:
            return _broken(
                row,
                f"{describe(row)} is not part of the hash chain",
                "it carries no link: it was inserted outside Lopen, or stored by a Lopen older than the "
                "chain after this store was sealed",
            )
        if tip is None:  # the first event of its stream: only its own link can be wrong
            return rewritten(row, expected, link, "its stream's genesis")
        own = digest(row[3], row[4], row[5])
        after, head = self.store.backend.events.chain_event(row[1], row[2] + 1)
        if after is not None:
            intact = link_of(after[4]) == own or after[5] == own
        else:
            intact = head is not None and head[1] == row[2] and head[2] == own
        if intact:  # the event after still fits this one: the link is as stored, the one before changed
            previous = self._row(row[1], tip[0])
            return rewritten(previous, link, tip[1], f"the next event (#{row[0]})")
        return _broken(
            row,
            f"{describe(row)} does not match the hash chain",
            f"its link says the event before it hashes to {link.decode()[:16]}…, it hashes to "
            f"{expected.decode()[:16]}…, and the event after no longer fits it either: its stored bytes "
            "were rewritten outside Lopen",
            expected,
            link,
        )
