"""The store's hash chain (issue 22, item 3): an event rewritten, inserted or deleted outside Lopen is
named — stream, version, ``#seq``, type — never silently folded into the totals.

``ChainContract`` runs on both backends (``TestSQLiteChain`` on a real file, ``TestPostgresChain`` on the
server of ``LOPEN_TEST_POSTGRES_URL``), tampering with the database directly — ``sqlite3`` on the file,
``psycopg`` on the server — as someone with access to it would.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent
from test_events_store import (
    AUTH,
    PROJECT,
    BackendFixtures,
    Connect,
    PostgresBackend,
    SQLiteBackend,
    start_together,
)

import events.verify
from events import catalogue as ev
from events.chain import genesis, link_of, with_link
from events.codec import Codec
from events.errors import ChainBroken, ConcurrencyConflict
from events.journal import Journal
from events.recorded import blob_stream, module_stream
from events.seal import needs_sealing
from events.store import EventStore

OTHER = module_stream(PROJECT, "billing")
SID = "auth-20261126-1"


def history() -> list[ev.Event]:
    """Twenty events of one session; version 7 is the one ``TokensUsed`` (1,000 tokens in)."""
    events: list[ev.Event] = [ev.SessionStarted(lopen_version="0.1.0"), ev.StepEntered(phase="building", step=6)]
    events += [ev.ProgressReported(invocation_id="i1", progress=f"step {n}") for n in range(4)]
    events.append(ev.TokensUsed(invocation_id="i1", model="m", input=1000, output=100, premium=1.0))
    events += [ev.ProgressReported(invocation_id="i1", progress=f"after {n}") for n in range(13)]
    return [msgspec.structs.replace(e, session_id=SID, at=1_795_132_800.0 + n) for n, e in enumerate(events)]


def fill(store: EventStore) -> None:
    """``history()`` in ``AUTH`` (batches of 1, 2, 3, …) and three events in ``OTHER``."""
    events, version, size = history(), 0, 1
    while version < len(events):
        version = store.append(AUTH, events[version : version + size], expected_version=version)
        size += 1
    store.append(OTHER, [ev.ProgressReported(progress=f"billing {n}") for n in range(3)])


# -- tampering, as someone with the database's credentials would -------------------------------------------


def _sql(url: str, statement: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
    """Run one statement on the backend behind ``url`` (``?`` placeholders), outside Lopen."""
    if url.startswith("sqlite:///"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return db.execute(statement, params).fetchall()
    from psycopg.sql import SQL

    schema = dict(parse_qsl(urlsplit(url).query))["schema"]
    statement = statement.replace("?", "%s").replace("stored_events", f'"{schema}".stored_events')
    import psycopg
    from test_events_store import plain_url

    with psycopg.connect(plain_url(url), autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(SQL(statement), params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def stored(url: str, stream: str, version: int) -> bytes:
    ((state,),) = _sql(
        url, "SELECT state FROM stored_events WHERE originator_id = ? AND originator_version = ?", (stream, version)
    )
    return bytes(state)  # type: ignore[arg-type]


def rewrite(url: str, stream: str, version: int, old: bytes, new: bytes) -> None:
    """Replace ``old`` by ``new`` in one stored event's bytes, in place."""
    state = stored(url, stream, version)
    assert old in state, state
    _sql(
        url,
        "UPDATE stored_events SET state = ? WHERE originator_id = ? AND originator_version = ?",
        (state.replace(old, new), stream, version),
    )


def rows(url: str) -> list[tuple[object, ...]]:
    """Every stored event, as the database holds it."""
    return [
        (sid, version, bytes(state))  # type: ignore[arg-type]
        for sid, version, state in _sql(
            url, "SELECT originator_id, originator_version, state FROM stored_events ORDER BY 1, 2", ()
        )
    ]


# -- the contract ---------------------------------------------------------------------------------------------


class ChainContract(BackendFixtures):
    def test_every_stored_event_links_to_the_one_before_it(self, store: EventStore, url: str) -> None:
        fill(store)
        first = stored(url, AUTH, 1)
        assert link_of(first) == genesis(AUTH)
        assert [r.event for r in store.read_stream(AUTH)] == [
            msgspec.structs.replace(e, project=PROJECT, module="auth") for e in history()
        ]  # the link is not part of the event: it decodes as before

    def test_an_intact_store_verifies_and_the_next_check_reads_only_what_was_appended(
        self, store: EventStore, connect: Connect
    ) -> None:
        fill(store)
        report = store.verify()
        assert (report.streams, report.events, report.full) == (2, 23, False)
        assert connect().verify().events == 0  # remembered in the store: another process starts from there
        store.append(AUTH, [ev.ProgressReported(progress="more"), ev.ProgressReported(progress="again")])
        report = store.verify()
        assert (report.streams, report.events) == (1, 2)
        assert store.verify(AUTH).events == 0
        store.append(OTHER, [ev.ProgressReported(progress="billing 3")])
        assert store.verify(OTHER).events == 1  # one stream's check…
        assert store.verify().events == 0  # …counts for the whole store's
        assert store.verify(full=True).events == 26

    def test_a_rewritten_event_is_named_and_every_event_is_kept(self, store: EventStore, url: str) -> None:
        fill(store)
        store.verify()
        before = rows(url)
        rewrite(url, AUTH, 7, b'"input":1000', b'"input":9000')
        with pytest.raises(ChainBroken) as caught:
            store.verify(full=True)
        broken = caught.value
        assert (broken.stream_id, broken.version, broken.seq, broken.event_type) == (AUTH, 7, 7, "TokensUsed")
        assert broken.expected and broken.found and broken.expected != broken.found
        assert "event #7 of module:proj/auth (version 7, TokensUsed)" in broken.what
        assert "rewritten" in broken.why and broken.how
        assert len(rows(url)) == len(before)  # nothing deleted, nothing repaired
        assert b'"input":9000' in stored(url, AUTH, 7)

    def test_a_rewrite_after_the_last_check_is_found_by_the_next_one(self, store: EventStore, url: str) -> None:
        fill(store)
        store.verify()
        store.append(AUTH, [ev.ProgressReported(progress=f"late {n}") for n in range(3)])
        rewrite(url, AUTH, 21, b"late 0", b"late X")  # appended since the last check
        with pytest.raises(ChainBroken) as caught:
            store.verify()
        assert (caught.value.version, caught.value.event_type) == (21, "ProgressReported")

    def test_the_last_verified_and_the_newest_event_are_covered_too(
        self, store: EventStore, connect: Connect, url: str
    ) -> None:
        fill(store)
        store.verify()
        rewrite(url, AUTH, 20, b"after 12", b"after XX")  # the newest event: no event after it holds its hash
        with pytest.raises(ChainBroken, match="version 20, ProgressReported") as caught:
            store.verify()  # the position the last check stopped at is hashed again
        assert "verification of" in caught.value.why
        with pytest.raises(ChainBroken, match="version 20, ProgressReported") as caught:
            store.verify(full=True)  # and the head recorded when it was appended says the same
        with pytest.raises(ChainBroken, match="version 20"):
            connect().append(AUTH, [ev.ProgressReported(progress="on top")])  # never adopted by an append
        assert store.version(AUTH) == 20

    def test_verified_blobs_are_hashed_again_in_turn_and_all_of_them_by_full(
        self, store: EventStore, url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A blob never changes once stored, and blobs are most of a store's bytes: an incremental check
        hashes again only ``AUDIT`` verified blobs per run, in turn, not every text ever kept. A blob
        rewritten after its check is found by ``verify --full`` at once, by the runs within
        ⌈blobs / AUDIT⌉."""
        monkeypatch.setattr(events.verify, "AUDIT", 2)
        keys = [store.put_blob(PROJECT, f"result {n}\n" * 100) for n in range(5)]
        store.verify()
        last = blob_stream(PROJECT, keys[-1])
        rewrite(url, last, 1, b"result 4", b"result X")  # same length: only its hash tells
        with pytest.raises(ChainBroken, match=f"of {last} \\(version 1, BlobStored\\)"):
            store.verify(full=True)
        assert store.verify().events == 0  # blobs 1 and 2 hashed again
        assert store.verify().events == 0  # blobs 3 and 4
        with pytest.raises(ChainBroken, match=f"of {last} \\(version 1, BlobStored\\)") as caught:
            store.verify()  # blob 5 (and 1): its turn
        assert "verification of" in caught.value.why and "rewritten" in caught.value.why

    def test_a_verified_blob_deleted_with_its_head_is_named_by_full(self, store: EventStore, url: str) -> None:
        key = store.put_blob(PROJECT, "a whole result\n" * 100)
        store.verify()
        stream = blob_stream(PROJECT, key)
        heads = (
            "chain_heads"
            if url.startswith("sqlite")
            else f'"{dict(parse_qsl(urlsplit(url).query))["schema"]}".chain_heads'
        )
        _sql(url, "DELETE FROM stored_events WHERE originator_id = ?", (stream,))
        _sql(url, f"DELETE FROM {heads} WHERE stream_id = ?", (stream,))
        with pytest.raises(ChainBroken, match=f"version 1 of {stream} is gone"):
            store.verify(full=True)

    def test_a_blob_deleted_before_any_check_is_named_by_the_event_naming_it(self, store: EventStore, url: str) -> None:
        """A blob's stream has no recorded head (its one event never changes; one row less per new blob
        at every commit): deleting a blob no check has seen yet is found through the event that names it
        — by the incremental check, the full one and the check of that event's stream alone."""
        kept = [store.keep_blob(PROJECT, f"part {n}\n" * 100) for n in range(3)]  # stay: looked up, found
        key = store.keep_blob(PROJECT, "a whole result\n" * 100)
        prompt = dict(zip(("system", "guidance", "user"), kept, strict=True))
        store.append(AUTH, [ev.InvocationStarted(invocation_id="i1", prompt=prompt, session_id=SID)])
        store.append(AUTH, [ev.ToolCalled(tool="bash", result_blob=key)])
        stream = blob_stream(PROJECT, key)
        assert store.blob(PROJECT, key) == "a whole result\n" * 100
        assert stream not in store.backend.events.chain_heads()  # stored without a head
        _sql(url, "DELETE FROM stored_events WHERE originator_id = ?", (stream,))
        for check in (store.verify, lambda: store.verify(full=True), lambda: store.verify(AUTH)):
            with pytest.raises(ChainBroken, match=f"names the blob {key}, which is not in the event store") as caught:
                check()
            assert (caught.value.stream_id, caught.value.version, caught.value.event_type) == (AUTH, 2, "ToolCalled")
            assert "deleted outside Lopen" in caught.value.why

    def test_a_blob_verified_and_then_deleted_or_given_a_second_event_is_named(
        self, store: EventStore, url: str
    ) -> None:
        key = store.keep_blob(PROJECT, "the prompt\n" * 100)
        store.append(AUTH, [ev.InvocationStarted(invocation_id="i1", prompt={"user": key}, session_id=SID)])
        stream = blob_stream(PROJECT, key)
        assert store.verify().streams == 2
        codec = Codec()
        forged = ev.BlobStored(key=key, text="something else", size=14, project=PROJECT)
        link = events.verify.digest(
            *_sql(url, "SELECT topic, state FROM stored_events WHERE originator_id = ?", (stream,))[0]
        )  # type: ignore[arg-type]
        store.backend.events.insert_events(
            [StoredEvent(stream, 2, codec.topic(forged), with_link(codec.encode(forged), link))]
        )
        with pytest.raises(ChainBroken, match=f"of {stream} \\(version 2, BlobStored\\) was not appended by Lopen"):
            store.verify()
        _sql(url, "DELETE FROM stored_events WHERE originator_id = ?", (stream,))
        with pytest.raises(ChainBroken, match=f"version 1 of {stream} is gone"):
            store.verify(full=True)

    def test_a_blob_stored_with_a_head_by_an_older_lopen_is_still_held_to_it(self, store: EventStore, url: str) -> None:
        key = store.put_blob(PROJECT, "an old result\n" * 100)
        stream = blob_stream(PROJECT, key)
        state = stored(url, stream, 1)
        store.backend.events.insert_events([], heads=[(stream, 1, events.verify.digest("BlobStored@2", state))])
        assert store.verify(full=True).streams == 1  # its head recorded, as an older Lopen did: it fits
        _sql(url, "DELETE FROM stored_events WHERE originator_id = ?", (stream,))  # nothing names it: its head does
        with pytest.raises(ChainBroken, match=f"the events of {stream} are gone"):
            store.verify(full=True)

    def test_a_rewritten_link_names_the_event_holding_it(self, store: EventStore, url: str) -> None:
        fill(store)
        link = link_of(stored(url, AUTH, 5))
        assert link is not None
        rewrite(url, AUTH, 5, link, genesis("elsewhere"))
        with pytest.raises(ChainBroken) as caught:
            store.verify()
        assert caught.value.version == 5  # not 4: the event after 5 no longer fits 5 either

    def test_a_deleted_event_is_named(self, store: EventStore, url: str) -> None:
        fill(store)
        _sql(url, "DELETE FROM stored_events WHERE originator_id = ? AND originator_version = 3", (AUTH,))
        with pytest.raises(ChainBroken, match="missing") as caught:
            store.verify()
        assert caught.value.version == 4 and "follows version 2" in caught.value.why

    def test_an_event_inserted_outside_lopen_is_named(self, store: EventStore, url: str) -> None:
        fill(store)
        codec = Codec()
        forged = ev.TokensUsed(invocation_id="i1", input=1, project=PROJECT, module="auth")
        head = store.backend.events.chain_heads(AUTH)[AUTH][1]
        # a perfect link, but no head recorded for it: not appended through Lopen
        store.backend.events.insert_events(
            [StoredEvent(AUTH, 21, codec.topic(forged), with_link(codec.encode(forged), head))]
        )
        with pytest.raises(ChainBroken, match="not appended by Lopen") as caught:
            store.verify()
        assert (caught.value.version, caught.value.event_type) == (21, "TokensUsed")

    def test_a_check_racing_another_check_is_not_a_rewrite(
        self, store: EventStore, connect: Connect, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """CI (two machines on PostgreSQL): a check read where the last one stopped, another check moved it
        on, and the event read "there" was the one at the new position — a rewrite was reported."""
        fill(store)
        store.verify()
        recorder = store.backend.events
        stale, _ = recorder.chain_verified(None)  # what this check reads first …
        store.append(AUTH, [ev.ProgressReported(progress="more"), ev.ProgressReported(progress="again")])
        connect().verify()  # … another process's check moves the position on …
        real = recorder.chain_verified
        monkeypatch.setattr(recorder, "chain_verified", lambda stream: (stale, real(stream)[1]))  # … then the rows
        assert store.verify().events == 2

    def test_a_check_racing_a_writer_that_never_pauses_is_not_a_deletion(
        self, store: EventStore, connect: Connect, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """CI: a worker appended while the check read the stream and again while it read it once more; the
        head read last was ahead of every read, and events were reported "deleted outside Lopen"."""
        fill(store)
        store.verify()
        writer = connect()
        recorder = store.backend.events
        for name in ("chain_scan", "chain_stream"):  # every read of events is followed by another append
            real = getattr(recorder, name)

            def read_then_append(*args: object, real=real) -> list:  # type: ignore[no-untyped-def]
                rows = real(*args)
                writer.append(AUTH, [ev.ProgressReported(progress="meanwhile")])
                return rows

            monkeypatch.setattr(recorder, name, read_then_append)
        report = store.verify()
        assert report.full is False and writer.version(AUTH) > len(history())  # no alarm, while it grew
        monkeypatch.undo()
        assert store.verify(full=True).events == writer.version(AUTH) + 3  # every event, intact

    def test_racing_appenders_never_claim_the_same_predecessor(self, store: EventStore, root: Path, url: str) -> None:
        script = textwrap.dedent(
            """
            import sys
            from pathlib import Path
            from events import catalogue as ev
            from events.store import EventStore
            store = EventStore.open(Path(sys.argv[1]), sys.argv[2])
            store.version("module:proj/auth")
            print("ready", flush=True)
            sys.stdin.readline()
            for n in range(25):
                store.append("module:proj/auth", [ev.ProgressReported(progress=f"{sys.argv[3]} {n}")] * (n % 3 + 1))
            print("done")
            """
        )
        assert start_together(script, [str(root), url, "a"], [str(root), url, "b"]) == ["done", "done"]
        assert store.verify(full=True).events == store.version(AUTH) == 2 * sum(n % 3 + 1 for n in range(25))
        with pytest.raises(ConcurrencyConflict):  # a stale predecessor is a conflict, never a fork
            store.append(AUTH, [ev.ProgressReported(progress="stale")], expected_version=10)

    def test_an_old_store_is_sealed_once_and_then_verifies(self, store: EventStore, connect: Connect, url: str) -> None:
        codec = Codec()
        old = [msgspec.structs.replace(e, project=PROJECT, module="auth") for e in history()]
        legacy = ev.ProgressReported(progress="an old session stream", module="auth")
        store.backend.events.insert_events(  # as a Lopen before the chain stored them: no link, no head
            [StoredEvent(AUTH, v, codec.topic(e), codec.encode(e)) for v, e in enumerate(old, 1)]
            + [StoredEvent("session:auth-20261120-1", 1, codec.topic(legacy), codec.encode(legacy))]
        )
        assert needs_sealing(store)
        with pytest.raises(ChainBroken, match="not part of the hash chain"):
            store.verify()
        racing = connect()
        assert store.seal_unchained() == 21
        assert racing.seal_unchained() == 0 and store.seal_unchained() == 0  # once
        assert not needs_sealing(store)
        report = store.verify(full=True)
        assert (report.streams, report.events) == (3, 22)  # and the marker, in meta:chain-sealed
        (marker,) = store.read_stream("meta:chain-sealed")
        assert marker.event.action == "seal-chain" and "21 events" in marker.event.detail
        assert [bytes(r[2]) for r in rows(url) if r[0] == AUTH] == [codec.encode(e) for e in old]  # untouched
        store.append(AUTH, [ev.ProgressReported(progress="the first chained one")])
        assert store.verify().events == 1
        rewrite(url, AUTH, 7, b'"input":1000', b'"input":1001')
        with pytest.raises(ChainBroken) as caught:
            store.verify(full=True)
        assert (caught.value.version, caught.value.event_type) == (7, "TokensUsed")
        assert "sealed then" in caught.value.why

    def test_a_run_does_not_start_on_a_rewritten_history(self, store: EventStore, connect: Connect, url: str) -> None:
        fill(store)
        rewrite(url, AUTH, 7, b'"output":100', b'"output":1')
        journal = Journal(connect(), PROJECT, "auth")  # what a run opens first
        with pytest.raises(ChainBroken, match="version 7, TokensUsed"):
            journal.check_intact()  # before anything is recorded
        assert store.version(AUTH) == 20


class TestSQLiteChain(SQLiteBackend, ChainContract):
    pass


class TestPostgresChain(PostgresBackend, ChainContract):
    pass


def test_verification_is_fast_enough_to_run_before_every_run(tmp_path: Path) -> None:
    """Guard the order of magnitude only (bin/bench-store measures it): 20,000 events in well under a second."""
    (tmp_path / ".lopen").mkdir()
    with EventStore.open(tmp_path) as store:
        events = [ev.ProgressReported(progress=f"step {n}") for n in range(1000)]
        for module in range(20):
            store.append(module_stream(PROJECT, f"m{module}"), events)
        report = store.verify(full=True)
    assert report.events == 20_000 and report.seconds < 2


def test_the_blobs_an_event_names_are_read_from_its_stored_bytes_exactly() -> None:
    """``events.blobs.named`` reads a tool call's key from its last bytes without decoding it: a key-like
    text or a ``result_blob`` inside its arguments is never taken for the one it names, nor missed."""
    from events.blobs import named
    from events.chain import chain

    codec = Codec()
    key, other = "a" * 32, "b" * 32
    cases: list[tuple[ev.Event, list[str]]] = [
        (ev.ToolCalled(tool="bash"), []),
        (ev.ToolCalled(tool="bash", result_blob=key), [key]),
        (ev.ToolCalled(tool="bash", arguments={"x": {"result_blob": other}}), []),
        (ev.ToolCalled(tool="bash", arguments={"x": {"result_blob": ""}}, result_blob=key), [key]),
        (ev.ToolCalled(tool="bash", result_summary=f'"result_blob":"{other}"'), []),
        (ev.InvocationStarted(invocation_id="i1", prompt={"system": key, "user": other}), [key, other]),
        (ev.ProgressReported(progress=f'"result_blob":"{other}"'), []),
    ]
    for event, keys in cases:
        event = msgspec.structs.replace(event, project=PROJECT, module="auth")
        topic, payload = codec.topic(event), codec.encode(event)
        (state,), _ = chain(genesis(AUTH), [topic], [payload])
        expected = [blob_stream(PROJECT, k) for k in keys]
        assert named(AUTH, topic, state) == expected, event  # as stored, with its link
        assert named(AUTH, topic, payload) == expected, event  # as an event stored before the chain
