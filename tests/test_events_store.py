"""The event store: appends, streams, optimistic concurrency, session ids, the bus, redaction,
decoding errors, corruption and write failures — all against real SQLite files."""

from __future__ import annotations

import logging
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import textwrap
from datetime import date
from pathlib import Path

import msgspec
import pytest

from events import catalogue as ev
from events.codec import Codec
from events.errors import (
    ConcurrencyConflict,
    ModuleLocked,
    NewerSchemaVersion,
    StoreCorrupted,
    StoreUnavailable,
    StoreWriteError,
    UnknownEventType,
)
from events.locks import ModuleLock
from events.recorded import module_stream, parse_session_id, session_stream
from events.redaction import REDACTED, is_secret_key, redact_text
from events.store import EventStore

DAY = date(2026, 11, 26)
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@pytest.fixture
def store(tmp_path: Path):
    s = EventStore.open(tmp_path)
    yield s
    s.close()


def test_append_and_read_back_in_order(store: EventStore) -> None:
    sid = store.new_session_id("auth", DAY)
    assert sid == "auth-20261126-1"
    stream = session_stream(sid)
    version = store.append(stream, [ev.StepEntered(phase="planning", step=2), ev.StepEntered(phase="planning", step=3)])
    assert version == 3
    records = list(store.read_stream(stream))
    assert [r.version for r in records] == [1, 2, 3]
    assert [type(r.event).__name__ for r in records] == ["SessionStarted", "StepEntered", "StepEntered"]
    assert all(r.event.session_id == sid and r.event.module == "auth" for r in records)
    assert [r.seq for r in store.read_all()] == [1, 2, 3]
    assert [r.seq for r in store.read_all(after=2)] == [3]
    assert store.version(stream) == 3 and store.last_seq() == 3


def test_stale_expected_version_is_a_clear_conflict_and_stores_nothing(store: EventStore) -> None:
    stream = session_stream(store.new_session_id("auth", DAY))
    store.append(stream, [ev.StepEntered(phase="planning", step=2)], expected_version=1)
    with pytest.raises(ConcurrencyConflict) as caught:
        store.append(stream, [ev.StepEntered(phase="x", step=9), ev.StepEntered(phase="y", step=9)], expected_version=1)
    assert caught.value.expected == 1 and caught.value.actual == 2
    assert "expected version 1, it is at 2" in caught.value.render()
    assert store.version(stream) == 2 and store.last_seq() == 2


def test_session_ids_count_up_per_module_and_day_and_are_never_reused(store: EventStore) -> None:
    ids = [store.new_session_id("auth", DAY) for _ in range(3)]
    assert ids == ["auth-20261126-1", "auth-20261126-2", "auth-20261126-3"]
    assert store.new_session_id("billing", DAY) == "billing-20261126-1"
    assert store.new_session_id("auth", date(2026, 11, 27)) == "auth-20261127-1"
    assert parse_session_id("my-module-20261126-12") == ("my-module", "20261126", 12)


def test_session_ids_do_not_collide_across_processes(tmp_path: Path) -> None:
    EventStore.open(tmp_path).close()
    script = textwrap.dedent(
        f"""
        import sys, datetime
        from pathlib import Path
        from events.store import EventStore
        store = EventStore.open(Path({str(tmp_path)!r}))
        print(" ".join(store.new_session_id("auth", datetime.date(2026, 11, 26)) for _ in range(15)))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    ids = [sid for p in procs for sid in p.communicate(timeout=60)[0].split()]
    assert len(ids) == 45 and len(set(ids)) == 45
    assert sorted(int(i.rsplit("-", 1)[1]) for i in ids) == list(range(1, 46))


def test_events_are_bound_to_their_stream(store: EventStore) -> None:
    stream = session_stream(store.new_session_id("auth", DAY))
    with pytest.raises(ValueError, match="appended to"):
        store.append(stream, [ev.StepEntered(phase="planning", step=2, session_id="other-20261126-1")])
    with pytest.raises(ValueError, match="module billing"):
        store.append(stream, [ev.StepEntered(phase="planning", step=2, module="billing")])
    with pytest.raises(ValueError, match="stream id"):
        store.append("auth", [ev.StepEntered(phase="planning", step=2)])
    store.append(module_stream("auth"), [ev.SpecApproved(spec_hash="abc")])
    (rec,) = store.read_stream(module_stream("auth"))
    assert rec.event.module == "auth" and rec.event.session_id == ""


def test_secrets_never_reach_the_database_file(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path)
    stream = session_stream(store.new_session_id("auth", DAY))
    store.append(
        stream,
        [
            ev.ToolCalled(
                tool="bash",
                arguments={
                    "command": f"GITHUB_TOKEN={TOKEN} gh api user",
                    "env": {"OPENAI_API_KEY": "sk-proj-abcdefghijklmnop1234", "password": "hunter2hunter2"},
                    "headers": ["Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig"],
                    "path": "src/token_service.py",
                },
                result_summary=f"fatal: could not read Password for https://{TOKEN}@github.com",
            ),
            ev.SessionFailed(reason=f"401 Bad credentials for token {TOKEN}", error_kind="auth"),
            ev.TokensUsed(model="sk-live-0123456789abcdefXYZ"),  # a hint word in the type name skips nothing
        ],
    )
    (_, tool, failed, tokens) = [r.event for r in store.read_stream(stream)]
    assert tokens.model == REDACTED
    store.close()
    raw = b"".join(p.read_bytes() for p in (tmp_path / ".lopen").glob("store.sqlite*"))
    for secret in (TOKEN, "sk-proj-abcdefghijklmnop1234", "hunter2hunter2", "eyJhbGciOiJIUzI1NiJ9"):
        assert secret.encode() not in raw
    assert REDACTED.encode() in raw
    assert tool.arguments["env"]["password"] == REDACTED
    assert tool.arguments["path"] == "src/token_service.py"  # not a secret: left alone
    assert failed.reason == f"401 Bad credentials for token {REDACTED}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"token {TOKEN} ok", f"token {REDACTED} ok"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", REDACTED),
        ("key sk-ant-api03-abcdefghijklmnop", f"key {REDACTED}"),
        ("Authorization: Bearer abc.def.ghi123", f"Authorization: Bearer {REDACTED}"),
        ("export API_KEY=supersecretvalue", f"export API_KEY={REDACTED}"),
        ('{"password": "hunter2x"}', f'{{"password": "{REDACTED}"}}'),
        ("used 1200 input tokens; max_tokens=4096", "used 1200 input tokens; max_tokens=4096"),
        ("tests/test_tokens.py passed; ask-me-later", "tests/test_tokens.py passed; ask-me-later"),
    ],
)
def test_redact_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_secret_keys() -> None:
    for key in ("api_key", "apiKey", "GITHUB_TOKEN", "access-token", "client_secret", "password", "Authorization"):
        assert is_secret_key(key), key
    for key in ("path", "max_tokens", "tokens", "command", "author", "input", "monkey"):
        assert not is_secret_key(key), key


def test_no_catalogue_field_looks_like_a_secret() -> None:
    """Redaction would replace such a field's value with a string; none may exist."""
    for cls in (*ev.EVENT_TYPES.values(), ev.Dependency, ev.ComponentSpec, ev.TaskSpec, ev.Finding):
        assert not [f for f in cls.__struct_fields__ if is_secret_key(f)], cls


def _insert_raw(tmp_path: Path, topic: str, state: bytes) -> None:
    with sqlite3.connect(tmp_path / ".lopen" / "store.sqlite") as c:
        c.execute("INSERT INTO stored_events VALUES ('session:auth-20261126-1', 2, ?, ?)", (topic, state))


def test_unknown_event_type_is_a_clear_error(store: EventStore, tmp_path: Path) -> None:
    store.new_session_id("auth", DAY)
    _insert_raw(tmp_path, "FutureThing@1", b'{"type":"FutureThing","at":1.0}')
    with pytest.raises(UnknownEventType) as caught:
        list(store.read_all())
    assert "'FutureThing'" in caught.value.what and "#2" in caught.value.what
    assert "upgrade Lopen" in caught.value.how


def test_newer_schema_version_is_a_clear_error(store: EventStore, tmp_path: Path) -> None:
    store.new_session_id("auth", DAY)
    _insert_raw(tmp_path, "StepEntered@7", b'{"type":"StepEntered","at":1.0,"phase":"x","step":1}')
    with pytest.raises(NewerSchemaVersion, match="v7; this Lopen knows up to v1"):
        list(store.read_stream(session_stream("auth-20261126-1")))


def test_upcasters_bring_old_versions_forward() -> None:
    class Renamed(ev.Event, kw_only=True):
        schema_version = 3
        title: str
        priority: int = 0

    upcasters = {
        ("Renamed", 1): lambda d: {**{k: v for k, v in d.items() if k != "name"}, "title": d["name"]},
        ("Renamed", 2): lambda d: {**d, "priority": 5},
    }
    codec = Codec({"Renamed": Renamed}, upcasters)
    event = codec.decode("Renamed@1", b'{"type":"Renamed","at":2.5,"name":"old"}', 9)
    assert event == Renamed(title="old", priority=5, at=2.5)
    assert codec.decode("Renamed@3", codec.encode(event)) == event
    with pytest.raises(NewerSchemaVersion, match="no upcaster"):
        Codec({"Renamed": Renamed}, {}).decode("Renamed@2", b'{"type":"Renamed","at":1.0,"title":"x"}', 3)


def test_every_event_type_round_trips() -> None:
    codec = Codec()
    for name, cls in ev.EVENT_TYPES.items():
        fields = {f: _sample(t) for f, t in zip(cls.__struct_fields__, _types(cls), strict=True) if f != "at"}
        event = cls(**fields)
        assert codec.topic(event) == f"{name}@1"
        assert codec.decode(codec.topic(event), codec.encode(event)) == event
        assert msgspec.json.decode(codec.encode(event))["type"] == name


def _types(cls: type) -> list[object]:
    return [f.type for f in msgspec.inspect.type_info(cls).fields]


def _sample(t: object) -> object:
    samples = {
        msgspec.inspect.StrType: "x",
        msgspec.inspect.IntType: 3,
        msgspec.inspect.FloatType: 1.5,
        msgspec.inspect.BoolType: True,
    }
    for kind, value in samples.items():
        if isinstance(t, kind):
            return value
    if isinstance(t, msgspec.inspect.DictType):
        return {"k": "v"}
    if isinstance(t, msgspec.inspect.UnionType):  # an optional field: sample its non-None type
        return _sample(next(u for u in t.types if not isinstance(u, msgspec.inspect.NoneType)))
    if isinstance(t, msgspec.inspect.VarTupleType):
        item = t.item_type
        if isinstance(item, msgspec.inspect.StructType):
            return (item.cls(**{f.name: _sample(f.type) for f in item.fields}),)
        return (_sample(item),)
    raise AssertionError(f"no sample for {t}")


def test_the_bus_delivers_after_commit_and_isolates_a_failing_subscriber(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    stream = session_stream(store.new_session_id("auth", DAY))
    good: list[int] = []
    flaky: list[int] = []
    batches: list[list[int]] = []
    failures = iter([True, False, False, False])

    def flaky_subscriber(rec) -> None:
        if next(failures):
            raise RuntimeError("boom")
        flaky.append(rec.seq)

    store.subscribe(lambda rec: good.append(rec.seq))
    store.subscribe(flaky_subscriber)
    store.subscribe(lambda recs: batches.append([r.seq for r in recs]), batch=True)
    with caplog.at_level(logging.ERROR, logger="events.bus"):
        store.append(stream, [ev.StepEntered(phase="planning", step=2)])
    assert "failed after #1" in caplog.text
    assert good == [2] and flaky == [] and batches == [[2]]
    store.append(stream, [ev.StepEntered(phase="planning", step=3), ev.StepEntered(phase="planning", step=4)])
    assert good == [2, 3, 4]
    assert flaky == [2, 3, 4]  # caught up from the store: #2 was not lost
    assert batches == [[2], [3, 4]]


def test_the_bus_catches_up_with_events_other_writers_stored(tmp_path: Path) -> None:
    mine, theirs = EventStore.open(tmp_path), EventStore.open(tmp_path)
    stream = session_stream(mine.new_session_id("auth", DAY))
    seen: list[int] = []
    mine.subscribe(lambda rec: seen.append(rec.seq))
    theirs.append(stream, [ev.StepEntered(phase="planning", step=2)])
    mine.append(stream, [ev.StepEntered(phase="planning", step=3)])
    assert seen == [2, 3]
    mine.close()
    theirs.close()


def test_module_lock_names_the_holder(tmp_path: Path) -> None:
    first, second = ModuleLock(tmp_path, "auth"), ModuleLock(tmp_path, "auth")
    with first:
        assert second.holder() == os.getpid()
        with pytest.raises(ModuleLocked) as caught:
            second.acquire()
        assert f"pid {os.getpid()}" in caught.value.what
        assert str(tmp_path / ".lopen" / "locks" / "auth.lock") in caught.value.why
        with ModuleLock(tmp_path, "billing"):  # other modules are independent
            pass
    assert second.holder() is None
    with second:
        pass


def test_a_damaged_store_is_moved_aside_never_deleted(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path)
    stream = session_stream(store.new_session_id("auth", DAY))
    store.append(stream, [ev.ProgressReported(progress="x" * 2000) for _ in range(200)])
    store.close()
    path = tmp_path / ".lopen" / "store.sqlite"
    data = bytearray(path.read_bytes())
    data[4096:] = os.urandom(len(data) - 4096)  # keep the header page, destroy every other page
    path.write_bytes(bytes(data))
    with pytest.raises(StoreCorrupted) as caught:
        s = EventStore.open(tmp_path)
        list(s.read_all())
    moved = list((tmp_path / ".lopen" / "corrupted").glob("store.sqlite-*"))
    assert len(moved) == 1 and moved[0].read_bytes() == bytes(data)
    assert not path.exists()
    assert str(path) in caught.value.what and str(moved[0]) in caught.value.why
    assert "fresh" in caught.value.how
    with EventStore.open(tmp_path) as fresh:  # the next run starts with an empty store
        assert fresh.last_seq() == 0


def test_a_file_that_is_not_a_database_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / ".lopen" / "store.sqlite"
    path.parent.mkdir()
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreCorrupted, match="cannot be read"):
        EventStore.open(tmp_path)
    assert (tmp_path / ".lopen" / "corrupted").is_dir() and not path.exists()


def test_a_failed_write_is_a_critical_error_naming_the_path(tmp_path: Path) -> None:
    """The file-size limit makes the kernel refuse to grow the WAL, as a full disk would (even for root)."""
    EventStore.open(tmp_path).close()
    script = textwrap.dedent(
        f"""
        import datetime
        from pathlib import Path
        from events import catalogue as ev
        from events.errors import StoreWriteError
        from events.recorded import session_stream
        from events.store import EventStore
        store = EventStore.open(Path({str(tmp_path)!r}))
        try:
            for _ in range(50):
                store.append(session_stream("auth-20261126-1"), [ev.ProgressReported(progress="x" * 100_000)])
        except StoreWriteError as exc:
            print(exc.render())
        """
    )

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))

    out = subprocess.run([sys.executable, "-c", script], preexec_fn=limit, capture_output=True, text=True, timeout=60)
    assert "error: cannot append to the event store" in out.stdout, out.stdout + out.stderr
    assert str(tmp_path / ".lopen" / "store.sqlite") in out.stdout
    assert "disk" in out.stdout and "file size limit (ulimit -f) 1,000,000 bytes" in out.stdout


def test_an_unwritable_store_directory_is_reported_with_the_os_error(tmp_path: Path) -> None:
    (tmp_path / ".lopen").write_text("a file where the folder should be")
    with pytest.raises(StoreWriteError) as caught:
        EventStore.open(tmp_path)
    assert str(tmp_path / ".lopen" / "store.sqlite") in caught.value.what
    assert "errno" in caught.value.why


def test_postgres_urls_select_postgres_and_say_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the postgres extra were not installed
    for name in ("events.postgres", "eventsourcing.postgres"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(StoreUnavailable) as caught:
        EventStore.open(tmp_path, "postgresql://lopen:s3cret@db.example:5432/lopen")
    assert "psycopg" in caught.value.what and "s3cret" not in caught.value.render()
    with pytest.raises(StoreUnavailable, match="not a store URL"):
        EventStore.open(tmp_path, "mysql://db/x")


def test_events_is_the_bottom_layer() -> None:
    code = (
        "import sys, events, events.projections, events.replay, events.report, events.backends;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('lopen', 'actors')];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_catalogue_is_documented() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "events.md").read_text()
    for name, cls in ev.EVENT_TYPES.items():
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{name}` |")), None)
        assert row is not None, f"{name} is missing from docs/events.md"
        for field in cls.__struct_fields__:
            if field not in ("at", "session_id", "module"):
                assert f"`{field}`" in row, f"{name}.{field} is missing from docs/events.md"
