"""The event store.

Shaped like the ``eventsourcing`` library's own recorder tests: ``StoreContract`` is an abstract
test case whose tests take the backend from fixtures (``url``, ``connect``, ``dump``) that a backend
class provides, and it runs once per backend — ``TestSQLiteStore`` on a real SQLite file and
``TestPostgresStore`` on the real PostgreSQL server named by ``LOPEN_TEST_POSTGRES_URL``
(``bin/postgres-for-tests`` starts one; without it those tests are skipped saying why, and fail in CI).
Other test files reuse ``SQLiteBackend`` / ``PostgresBackend`` for contracts of their own.

The contract: appends and reads, optimistic concurrency, events bound to their stream (project and
module), secrets kept out of the database while structural data is kept whole, decoding errors,
the bus, the legacy-layout migration (once, even racing) and two projects sharing one store.
After it: what only the embedded SQLite store has (corruption, write failures), the codec, the
redaction rules, the module lock and the layering.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent

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
from events.journal import Journal
from events.locks import ModuleLock
from events.projections.plan import plan_path
from events.recorded import is_history, is_legacy, module_stream, parse_session_id, stream_owner
from events.redaction import REDACTED, forget_secrets, is_secret_key, redact_text, register_secrets
from events.store import PAGE, EventStore

PROJECT = "proj"
AUTH = module_stream(PROJECT, "auth")
DAY = date(2026, 11, 26)
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
URL_VAR = "LOPEN_TEST_POSTGRES_URL"
Connect = Callable[..., EventStore]


# -- backends ----------------------------------------------------------------------------------------


class SQLiteBackend:
    """A real SQLite file, named by URL so that two project folders can share it."""

    backend = "sqlite"

    @pytest.fixture
    def url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'shared' / 'store.sqlite'}"

    @staticmethod
    def raw_bytes(url: str) -> bytes:
        """Everything in the database files (the WAL too)."""
        path = Path(url.removeprefix("sqlite:///"))
        return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def postgres_server() -> str:
    """The test server's URL, or a skip (a failure when ``CI`` is set) saying how to get one."""
    url = os.environ.get(URL_VAR, "").strip()
    if not url:
        why = f"{URL_VAR} is not set: run `bin/postgres-for-tests` (as root) and export the URL it prints"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests, but {why}", pytrace=False)
        pytest.skip(why)
    try:
        import psycopg
    except ImportError:
        pytest.fail(f"{URL_VAR} is set but psycopg is missing: pip install -e '.[postgres]'", pytrace=False)
    try:
        psycopg.connect(plain_url(url), connect_timeout=5).close()
    except psycopg.Error as exc:
        pytest.fail(f"cannot reach the server in {URL_VAR} ({hide_password(url)}): {exc}", pytrace=False)
    return url


class PostgresBackend:
    """The real PostgreSQL server; each test gets a schema of its own, dropped afterwards."""

    backend = "postgresql"

    @pytest.fixture
    def url(self) -> Iterator[str]:
        from psycopg.sql import SQL, Identifier

        server = postgres_server()
        schema = f"lopen_test_{uuid.uuid4().hex[:12]}"
        pg_admin(server, SQL("CREATE SCHEMA {}").format(Identifier(schema)))
        try:
            yield with_query(server, schema=schema)
        finally:
            pg_admin(server, SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(Identifier(schema)))

    @staticmethod
    def raw_bytes(url: str) -> bytes:
        """Every stored event and projection row, as the server holds them."""
        from psycopg.sql import SQL, Identifier

        schema = Identifier(dict(parse_qsl(urlsplit(url).query))["schema"])
        return b"".join(
            bytes(row[0])
            for table, column in (("stored_events", "state"), ("projection_rows", "value"))
            for row in pg_admin(url, SQL("SELECT {} FROM {}.{}").format(Identifier(column), schema, Identifier(table)))
        )


def plain_url(url: str) -> str:
    """The URL without Lopen's own query parameters (libpq rejects ``schema``)."""
    return urlunsplit(urlsplit(url)._replace(query=""))


def with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))


def hide_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{parts.netloc.rsplit('@', 1)[1]}"))


def pg_admin(url: str, statement: object) -> list[tuple[object, ...]]:
    """Run one statement on its own autocommit connection; the rows it returns, if any."""
    import psycopg

    with psycopg.connect(plain_url(url), autocommit=True, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute(statement)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


class BackendFixtures:
    """What every contract needs on top of a backend's ``url``: a project folder and store instances."""

    @pytest.fixture
    def root(self, tmp_path: Path) -> Path:
        folder = tmp_path / "project"
        (folder / ".git").mkdir(parents=True)
        return folder

    @pytest.fixture
    def connect(self, root: Path, url: str) -> Iterator[Connect]:
        """Open another store instance (connections of its own) on the same backend; closed at the end."""
        opened: list[EventStore] = []

        def open_store(folder: Path | None = None) -> EventStore:
            store = EventStore.open(folder or root, url)
            opened.append(store)
            return store

        yield open_store
        for store in opened:
            store.close()

    @pytest.fixture
    def store(self, connect: Connect) -> EventStore:
        return connect()

    @pytest.fixture
    def dump(self, url: str) -> Callable[[], bytes]:
        return lambda: self.raw_bytes(url)  # type: ignore[attr-defined]


def run_python(script: str, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    """Run ``script`` in a fresh interpreter (another process, as a second lopen would be); its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def start_together(script: str, *argvs: list[str]) -> list[str]:
    """Start one process per ``argv``; each prints ``ready`` when set up and waits for a line on stdin;
    once all are ready they are released at once. Returns their remaining outputs."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            assert line == "ready\n", line + (p.stderr.read() if p.stderr else "")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outputs = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            outputs.append(out.strip())
        return outputs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


# -- the legacy layout (before project ids) ------------------------------------------------------------

OLD_DAY, NEW_DAY = "20261120", "20261121"
LEGACY_FIRST, LEGACY_SECOND = f"auth-{OLD_DAY}-1", f"auth-{NEW_DAY}-1"


def legacy_history() -> list[tuple[str, ev.Event]]:
    """A pre-project-id store of module ``auth``: a finished first session, then the second run that broke
    every command in issue 15 (it re-planned and moved ``core/1`` from 'pending' after it was 'complete')."""
    first, second = LEGACY_FIRST, LEGACY_SECOND
    out: list[tuple[str, ev.Event]] = [
        ("module:auth", ev.SpecApproved(spec_hash="h1", section_hashes={"Overview": "a1", "Password Hashing": "b2"})),
    ]

    def session(sid: str, *events: ev.Event) -> None:
        out.extend((f"session:{sid}", msgspec.structs.replace(e, session_id=sid)) for e in events)

    plan = [
        ev.StepEntered(phase="planning", step=3),
        ev.ComponentsRecorded(components=(ev.ComponentSpec(name="core"),)),
        ev.TasksRecorded(
            component="core", tasks=(ev.TaskSpec(id="core/1", name="Parse"), ev.TaskSpec(id="core/2", name="Sign"))
        ),
    ]
    session(
        first,
        ev.SessionStarted(lopen_version="0.0.9"),
        *plan,
        ev.StepEntered(phase="building", step=6),
        ev.ComponentSelected(component="core"),
        ev.InvocationStarted(invocation_id="i1", kind="task"),
        ev.TokensUsed(invocation_id="i1", input=1000, output=100, premium=1.0),
        ev.TaskStatusChanged(task_id="core/1", from_state="pending", to_state="in-progress"),
        ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="complete"),
        ev.CommitRecorded(sha="c1" * 20, task_id="core/1"),
        ev.TaskStatusChanged(task_id="core/2", from_state="pending", to_state="in-progress"),
        ev.TaskStatusChanged(task_id="core/2", from_state="in-progress", to_state="complete"),
        ev.CommitRecorded(sha="c2" * 20, task_id="core/2"),
        ev.InvocationFinished(invocation_id="i1"),
        ev.SessionCompleted(reason="module complete"),
    )
    session(
        second,
        ev.SessionStarted(lopen_version="0.0.9"),
        *plan,
        ev.ComponentSelected(component="core"),
        ev.InvocationStarted(invocation_id="i2", kind="task"),
        ev.TokensUsed(invocation_id="i2", input=500, output=50, premium=1.0),
        ev.TaskStatusChanged(task_id="core/1", from_state="pending", to_state="in-progress"),  # the contradiction
        ev.SessionPaused(reason="interrupted"),
    )
    start = {first: 1_795_132_800.0, second: 1_795_219_200.0}  # 2026-11-20 and 2026-11-21, 00:00 UTC
    clock = {"module:auth": 1_795_046_400.0}
    timed = []
    for stream, event in out:
        owner = stream.partition(":")[2]
        at = clock[stream] = clock.get(stream, start.get(owner, 0.0)) + 60.0
        timed.append((stream, msgspec.structs.replace(event, module="auth", at=at)))
    return timed


LEGACY_CONTRADICTION = "task core/1 is 'complete', but the event moves it from 'pending'"


def write_legacy(store: EventStore, history: list[tuple[str, ev.Event]] | None = None) -> list[ev.Event]:
    """Store ``history`` as an old Lopen did: its own streams, payloads without ``project``."""
    codec = Codec()
    versions: dict[str, int] = {}
    stored = []
    history = history if history is not None else legacy_history()
    for stream, event in history:
        versions[stream] = versions.get(stream, 0) + 1
        payload = {k: v for k, v in msgspec.to_builtins(event).items() if k != "project"}
        stored.append(StoredEvent(stream, versions[stream], codec.topic(event), msgspec.json.encode(payload)))
    store.backend.events.insert_events(stored)
    return [e for _, e in history]


# -- the contract ----------------------------------------------------------------------------------------


class StoreContract(BackendFixtures):
    """Every backend keeps these promises (run by ``TestSQLiteStore`` and ``TestPostgresStore``)."""

    def test_append_and_read_back_in_order(self, store: EventStore, connect: Connect) -> None:
        sid = "auth-20261126-1"
        version = store.append(
            AUTH,
            [
                ev.SessionStarted(session_id=sid),
                ev.StepEntered(phase="planning", step=2, session_id=sid),
                ev.SpecApproved(spec_hash="abc"),
            ],
        )
        assert version == 3 and store.version(AUTH) == 3
        records = list(store.read_stream(AUTH))
        assert [r.version for r in records] == [1, 2, 3]
        assert [type(r.event).__name__ for r in records] == ["SessionStarted", "StepEntered", "SpecApproved"]
        assert all((r.stream_id, r.event.project, r.event.module) == (AUTH, PROJECT, "auth") for r in records)
        assert [r.event.session_id for r in records] == [sid, sid, ""]  # the writer's, never invented
        assert [r.seq for r in store.read_all()] == [1, 2, 3]
        assert [r.seq for r in store.read_all(after=2)] == [3]
        assert [r.version for r in store.read_stream(AUTH, after_version=1)] == [2, 3]
        assert [r.version for r in store.read_stream(AUTH, until_version=2)] == [1, 2]
        billing = module_stream(PROJECT, "billing")
        assert store.version(billing) == 0
        assert store.append(billing, [ev.SpecApproved(spec_hash="b")]) == 1
        (rec,) = store.read_stream(billing)
        assert (rec.seq, rec.version, rec.event.module) == (4, 1, "billing") and store.last_seq() == 4
        # more than a page in one batch: stored whole, read back whole and in order, also in windows
        many = [ev.ProgressReported(progress=f"p{i}") for i in range(PAGE * 2 + 10)]
        assert store.append(AUTH, many, expected_version=3) == 3 + len(many)
        assert [r.version for r in store.read_stream(AUTH)] == list(range(1, 4 + len(many)))
        window = [r.version for r in store.read_stream(AUTH, after_version=PAGE - 5, until_version=2 * PAGE + 2)]
        assert window == list(range(PAGE - 4, 2 * PAGE + 3))
        seqs = [r.seq for r in store.read_all()]
        assert seqs == list(range(1, 5 + len(many)))
        assert [len(p) for p in store.pages(0, PAGE)] == [PAGE, PAGE, 14]
        again = connect()  # a fresh connection sees the same history
        assert again.version(AUTH) == 3 + len(many) and again.last_seq() == store.last_seq()

    def test_a_stale_expected_version_is_a_conflict_and_stores_nothing(
        self, store: EventStore, connect: Connect
    ) -> None:
        other = connect()  # a second writer with connections of its own
        store.append(AUTH, [ev.SessionStarted(session_id="auth-20261126-1")])
        assert other.version(AUTH) == 1
        store.append(AUTH, [ev.StepEntered(phase="planning", step=2)], expected_version=1)
        with pytest.raises(ConcurrencyConflict) as caught:
            other.append(AUTH, [ev.StepEntered(phase="x", step=9), ev.StepEntered(phase="y", step=9)], 1)
        assert caught.value.expected == 1 and caught.value.actual == 2
        assert "expected version 1, it is at 2" in caught.value.render()
        assert store.version(AUTH) == 2 and store.last_seq() == 2
        # without an expected version a writer whose view is stale goes to the end instead
        store.append(AUTH, [ev.StepEntered(phase="planning", step=3)])
        assert other.append(AUTH, [ev.StepEntered(phase="planning", step=4)]) == 4
        assert [r.event.step for r in list(store.read_stream(AUTH))[1:]] == [2, 3, 4]

    def test_racing_writers_get_a_conflict_never_an_interleaved_history(self, connect: Connect) -> None:
        writers = [connect(), connect()]
        writers[0].append(AUTH, [ev.SessionStarted(session_id="auth-20261126-1")])
        rounds = 15
        start = threading.Barrier(len(writers))
        outcomes: dict[int, list[str]] = {r: [] for r in range(rounds)}
        errors: list[BaseException] = []

        def write(me: int) -> None:
            try:
                for r in range(rounds):
                    start.wait(timeout=60)
                    version = 1 + 3 * r  # every round, both writers think the stream is where it was
                    batch = [ev.ProgressReported(progress=f"w{me} r{r} {i}") for i in range(3)]
                    try:
                        writers[me].append(AUTH, batch, expected_version=version)
                        outcomes[r].append("won")
                    except ConcurrencyConflict as exc:
                        assert exc.expected == version and exc.actual == version + 3
                        outcomes[r].append("conflict")
            except BaseException as exc:
                errors.append(exc)
                start.abort()

        threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        assert all(sorted(o) == ["conflict", "won"] for o in outcomes.values()), outcomes
        progress = [r.event.progress for r in list(connect().read_stream(AUTH))[1:]]
        assert len(progress) == 3 * rounds
        for r in range(rounds):
            batch = progress[3 * r : 3 * r + 3]
            owner = batch[0].split()[0]
            assert batch == [f"{owner} r{r} {i}" for i in range(3)], batch  # one writer's whole batch

    def test_events_are_bound_to_their_stream(self, store: EventStore) -> None:
        with pytest.raises(ValueError, match="StepEntered of project other appended to proj"):
            store.append(AUTH, [ev.StepEntered(phase="planning", step=2, project="other")])
        with pytest.raises(ValueError, match="of module billing appended to module auth"):
            store.append(AUTH, [ev.StepEntered(phase="planning", step=2, module="billing")])
        for bad in ("auth", "session:auth-20261126-1", "module:auth", "module:proj/"):
            with pytest.raises(ValueError, match="stream id"):
                store.append(bad, [ev.StepEntered(phase="planning", step=2)])
        with pytest.raises(TypeError, match="not an event"):
            store.append(AUTH, [{"type": "StepEntered"}])  # type: ignore[list-item]
        assert store.last_seq() == 0  # none of the above stored anything
        store.append(AUTH, [ev.StepEntered(phase="planning", step=2, project=PROJECT, module="auth")])
        assert store.version(AUTH) == 1

    def test_secrets_never_reach_the_database(self, store: EventStore, dump: Callable[[], bytes]) -> None:
        known = "Xq9-vL2#pR7w"  # 12 characters shaped like nothing: found only because it is registered
        register_secrets([known, "abc"])  # too short to register: "abc" stays readable
        try:
            store.append(
                AUTH,
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
                    ev.ToolCalled(tool="bash", arguments={"command": "echo $X"}, result_summary=f"{known}\nabc done"),
                    ev.SessionFailed(reason=f"401 Bad credentials for token {TOKEN}", error_kind="auth"),
                    ev.TokensUsed(model="sk-live-0123456789abcdefXYZ"),  # a hint word in the type name skips nothing
                ],
            )
            store.projections.catch_up()
            tool, echoed, failed, tokens = [r.event for r in store.read_stream(AUTH)]
            assert tool.arguments["env"]["password"] == REDACTED
            assert tool.arguments["path"] == "src/token_service.py"  # not a secret: left alone
            assert echoed.result_summary == f"{REDACTED}\nabc done"
            assert failed.reason == f"401 Bad credentials for token {REDACTED}"
            assert tokens.model == REDACTED
            store.close()
            raw = dump()
            for secret in (TOKEN, "sk-proj-abcdefghijklmnop1234", "hunter2hunter2", "eyJhbGciOiJIUzI1NiJ9", known):
                assert secret.encode() not in raw, secret
            assert REDACTED.encode() in raw
        finally:
            forget_secrets()

    def test_structural_data_is_never_redacted(self, store: EventStore, dump: Callable[[], bytes]) -> None:
        """Issue 15: an `auth` spec's section names looked like secret keys, so its approved hashes were
        replaced with [REDACTED] and the spec was reported drifted on every run."""
        hashes = {
            "Overview": "0f1e2d3c4b5a6978",
            "Password Hashing": "8a7b6c5d4e3f2a1b",
            "Token Issuing": "1234abcd5678ef90",
            "Secret Rotation": "ffeeddccbbaa9988",
            "API Keys": "0011223344556677",
        }
        store.append(
            AUTH,
            [
                ev.SpecApproved(spec_hash="9" * 16, section_hashes=hashes, approver="token-admin"),
                ev.SpecDriftDetected(
                    changed_sections=("Password Hashing",), section_hashes=hashes, removed_sections=("Auth Token",)
                ),
                ev.ToolCalled(tool="edit", arguments={"password": "hunter2hunter2"}),  # still a secret here
            ],
        )
        approved, drift, tool = [r.event for r in store.read_stream(AUTH)]
        assert approved.section_hashes == hashes and approved.approver == "token-admin"
        assert drift.changed_sections == ("Password Hashing",) and drift.removed_sections == ("Auth Token",)
        assert drift.section_hashes == hashes
        assert tool.arguments == {"password": REDACTED}
        store.append(AUTH, [ev.ComponentsRecorded(components=(ev.ComponentSpec(name="Hasher"),))])
        store.append(AUTH, [ev.SpecApproved(spec_hash="9" * 16, section_hashes=hashes)])  # approved again, unchanged
        views = store.projections.for_project(PROJECT)
        views.catch_up()
        state = views.plan.get("auth")
        assert state is not None and state.approval is not None and state.approval.section_hashes == hashes
        assert state.pending_drift() is None  # the same text is not drift
        store.close()
        raw = dump()
        assert b'"Password Hashing":"8a7b6c5d4e3f2a1b"' in raw and b'"Token Issuing":"1234abcd5678ef90"' in raw

    def test_an_unknown_event_type_or_a_newer_schema_is_a_clear_error(self, store: EventStore) -> None:
        store.append(AUTH, [ev.SessionStarted(session_id="auth-20261126-1")])
        store.backend.events.insert_events([StoredEvent(AUTH, 2, "FutureThing@1", b'{"type":"FutureThing","at":1}')])
        with pytest.raises(UnknownEventType) as caught:
            list(store.read_all())
        assert "'FutureThing'" in caught.value.what and "#2" in caught.value.what
        assert "upgrade Lopen" in caught.value.how
        billing = module_stream(PROJECT, "billing")
        future = b'{"type":"StepEntered","at":1.0,"phase":"x","step":1}'
        store.backend.events.insert_events([StoredEvent(billing, 1, "StepEntered@7", future)])
        with pytest.raises(NewerSchemaVersion, match="v7; this Lopen knows up to v1"):
            list(store.read_stream(billing))
        (first,) = store.read_stream(AUTH, until_version=1)  # the rest of the store stays readable
        assert isinstance(first.event, ev.SessionStarted)

    def test_the_bus_delivers_after_commit_and_isolates_a_failing_subscriber(
        self, store: EventStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        store.append(AUTH, [ev.SessionStarted(session_id="auth-20261126-1")])
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
            store.append(AUTH, [ev.StepEntered(phase="planning", step=2)])
        assert "failed after #1" in caplog.text
        assert good == [2] and flaky == [] and batches == [[2]]
        store.append(AUTH, [ev.StepEntered(phase="planning", step=3), ev.StepEntered(phase="planning", step=4)])
        assert good == [2, 3, 4]
        assert flaky == [2, 3, 4]  # caught up from the store: #2 was not lost
        assert batches == [[2], [3, 4]]

    def test_the_bus_catches_up_with_events_other_writers_stored(self, connect: Connect) -> None:
        mine, theirs = connect(), connect()
        mine.append(AUTH, [ev.SessionStarted(session_id="auth-20261126-1")])
        seen: list[int] = []
        mine.subscribe(lambda rec: seen.append(rec.seq))
        theirs.append(AUTH, [ev.StepEntered(phase="planning", step=2)])
        mine.append(AUTH, [ev.StepEntered(phase="planning", step=3)])  # goes after theirs
        stored = list(mine.read_all(after=1))
        assert [r.event.step for r in stored] == [2, 3]
        assert seen == [r.seq for r in stored]  # (PostgreSQL's seqs may skip the number a lost race took)

    # -- blobs ----------------------------------------------------------------------------------------------

    def test_a_kept_blob_is_stored_in_the_transaction_of_the_event_naming_it(self, connect: Connect) -> None:
        """Issue 22, benchmarks: a new blob costs no commit of its own. Kept, it is stored only with the
        event that names it — all or nothing, so a batch that fails stores neither and an event never
        names a blob that is not stored."""
        store, other = connect(), connect()
        seen: list[str] = []
        store.subscribe(lambda rec: seen.append(rec.stream_id))
        text = "14 passed in 0.31s\n" * 200
        key = store.keep_blob(PROJECT, text)
        blob = f"blob:{PROJECT}:{key}"
        assert store.blob(PROJECT, key) == text  # this store has it (to be stored with its event)
        assert other.blob(PROJECT, key) is None and other.version(blob) == 0  # nothing stored yet
        store.append(AUTH, [ev.SessionStarted(session_id="auth-20261126-1")])  # names no blob
        assert other.version(blob) == 0
        called = ev.ToolCalled(tool="bash", result_summary=text[:300], result_blob=key)
        with pytest.raises(ConcurrencyConflict):
            store.append(AUTH, [called], expected_version=0)  # stale: the batch fails, its blob with it
        assert other.version(blob) == 0 and other.version(AUTH) == 1
        store.append(AUTH, [called], expected_version=1)
        assert other.blob(PROJECT, key) == text
        rows = [(r.stream_id, r.version) for r in other.read_all()]
        assert rows == [(AUTH, 1), (blob, 1), (AUTH, 2)]  # the blob just before the event naming it
        assert seen == [AUTH, blob, AUTH]
        assert store.keep_blob(PROJECT, text) == key  # known now: never inserted again
        last = other.last_seq()
        store.append(AUTH, [ev.ToolCalled(tool="bash", result_blob=key)])
        assert [r.stream_id for r in other.read_all(after=last)] == [AUTH]

    def test_a_blob_another_store_stored_first_is_already_there(self, connect: Connect) -> None:
        """Two writers keep the same text: the second one's batch collides with the first one's blob, and
        goes in again without it — both events stored, the blob once."""
        first, second = connect(), connect()
        text = "def login(user):\n    return check(user)\n" * 40
        key = second.keep_blob(PROJECT, text)  # kept, not stored yet: this store cannot know it will be
        assert first.keep_blob(PROJECT, text) == key
        first.append(AUTH, [ev.ToolCalled(tool="view", result_blob=key)], expected_version=0)
        second.append(AUTH, [ev.ToolCalled(tool="edit", result_blob=key)], expected_version=1)
        blob = f"blob:{PROJECT}:{key}"
        assert [(r.stream_id, r.version) for r in first.read_all()] == [(blob, 1), (AUTH, 1), (AUTH, 2)]
        assert second.blob(PROJECT, key) == text and second.version(blob) == 1

    def test_two_processes_storing_the_same_blob_at_once_both_succeed(
        self, store: EventStore, root: Path, url: str
    ) -> None:
        script = textwrap.dedent(
            """
            import sys
            from pathlib import Path
            from events import catalogue as ev
            from events.recorded import module_stream
            from events.store import EventStore
            store = EventStore.open(Path(sys.argv[1]), sys.argv[2])
            key = store.keep_blob("proj", "the same whole result\\n" * 500)
            event = ev.ToolCalled(tool="bash", result_blob=key)
            store.version("meta:connected")
            print("ready", flush=True)
            sys.stdin.readline()
            print(store.append(module_stream("proj", sys.argv[3]), [event], expected_version=0), key)
            """
        )
        outputs = start_together(script, [str(root), url, "auth"], [str(root), url, "billing"])
        assert outputs[0].split()[0] == outputs[1].split()[0] == "1", outputs  # both stored their event
        key = outputs[0].split()[1]
        rows = [(r.stream_id, r.version) for r in store.read_all()]
        assert sorted(rows) == sorted([(f"blob:{PROJECT}:{key}", 1), (AUTH, 1), (module_stream(PROJECT, "billing"), 1)])
        assert rows[0][0].startswith("blob:")  # stored before either event naming it
        assert store.blob(PROJECT, key) == "the same whole result\n" * 500

    # -- the legacy layout ---------------------------------------------------------------------------------

    def test_a_legacy_store_is_migrated_once_and_its_originals_kept(self, store: EventStore, connect: Connect) -> None:
        legacy = write_legacy(store)
        originals = store.backend.events.scan(0, 1000)
        assert len(originals) == len(legacy) and all(is_legacy(row[1]) for row in originals)

        assert store.migrate_legacy(PROJECT) == len(legacy)
        assert store.migrate_legacy(PROJECT) == 0
        assert connect().migrate_legacy("another-project") == 0  # the store's old history has one owner
        assert store.backend.events.scan(0, len(originals)) == originals  # untouched, byte for byte
        copies = [r.event for r in store.read_stream(AUTH)]
        assert [(type(e), e.session_id, e.at) for e in copies] == [(type(e), e.session_id, e.at) for e in legacy]
        assert all((e.project, e.module) == (PROJECT, "auth") for e in copies)
        (marker,) = store.read_stream("meta:legacy-migrated")
        assert isinstance(marker.event, ev.ControlRequested) and marker.event.action == "migrate-legacy-store"
        assert store.last_seq() == 2 * len(legacy) + 1

        views = store.projections.for_project(PROJECT)
        views.catch_up()
        assert [(s.id, s.status, s.project) for s in views.sessions.all()] == [
            (LEGACY_FIRST, "completed", PROJECT),
            (LEGACY_SECOND, "paused", PROJECT),
        ]
        first, second = views.tokens.session(LEGACY_FIRST), views.tokens.session(LEGACY_SECOND)
        assert first is not None and (first.input, first.output, first.premium) == (1000, 100, 1.0)
        assert second is not None and second.input == 500
        module = views.tokens.module("auth")
        assert module is not None and (module.input, module.premium, module.invocations) == (1500, 2.0, 2)
        plan = views.plan.get("auth")
        assert plan is not None and [t.state for t in plan.ordered_tasks()] == ["complete", "complete"]
        assert plan.tip == "c2" * 20 and plan.approval is not None
        assert plan.approval.section_hashes == {"Overview": "a1", "Password Hashing": "b2"}
        # the contradiction issue 15 stored is reported with its seq (the copy's), and skipped
        bad = next(
            r.seq
            for r in store.read_stream(AUTH)
            if isinstance(r.event, ev.TaskStatusChanged) and r.event.session_id == LEGACY_SECOND
        )
        assert plan.problems == [f"event #{bad} TaskStatusChanged skipped: {LEGACY_CONTRADICTION}"]
        assert not any(is_history(row[1]) for row in originals)  # so no projection reads the originals

    def test_two_processes_racing_to_migrate_copy_the_history_once(
        self, store: EventStore, root: Path, url: str
    ) -> None:
        legacy = write_legacy(store)
        script = textwrap.dedent(
            """
            import sys
            from pathlib import Path
            from events.store import EventStore
            store = EventStore.open(Path(sys.argv[1]), sys.argv[2])
            store.version("meta:legacy-migrated")  # connected
            print("ready", flush=True)
            sys.stdin.readline()
            print(store.migrate_legacy("proj"))
            """
        )
        outputs = start_together(script, [str(root), url], [str(root), url])
        assert sorted(int(o) for o in outputs) == [0, len(legacy)], outputs
        assert len(list(store.read_all())) == 2 * len(legacy) + 1
        assert store.version(AUTH) == len(legacy) and store.version("meta:legacy-migrated") == 1

    def test_a_migration_that_lost_the_race_after_its_check_copies_nothing(
        self, store: EventStore, connect: Connect, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """CI: the loser checked the marker before the winner committed and read the streams after, so it
        appended its copies after the winner's (marker at version 2): the history was copied twice."""
        legacy = write_legacy(store)
        loser = connect()
        checked = loser.version("meta:legacy-migrated")
        assert checked == 0
        real = loser.version
        stale = [checked]  # the check happened before the winner's commit; every later read is live
        monkeypatch.setattr(loser, "version", lambda stream_id: stale.pop() if stale else real(stream_id))
        assert store.migrate_legacy("proj") == len(legacy)
        assert loser.migrate_legacy("proj") == 0
        assert len(list(store.read_all())) == 2 * len(legacy) + 1
        assert store.version(AUTH) == len(legacy) and store.version("meta:legacy-migrated") == 1

    def test_a_new_store_is_not_migrated(self, store: EventStore) -> None:
        store.append(AUTH, [ev.SessionStarted(session_id="auth-20261126-1")])
        assert store.migrate_legacy(PROJECT) == 0
        assert store.version("meta:legacy-migrated") == 0 and store.last_seq() == 1

    # -- projects sharing one store -------------------------------------------------------------------------

    def test_two_projects_with_a_module_of_the_same_name_stay_apart(self, connect: Connect, tmp_path: Path) -> None:
        """Issue 15: a second project's events went into the first one's history and broke both."""
        roots = {name: tmp_path / name for name in ("alpha", "beta")}
        stores = {name: connect(folder) for name, folder in roots.items()}
        journals = {name: Journal(stores[name], name, "auth") for name in roots}
        sids = {name: j.open_session(ev.SessionStarted(lopen_version="1"), DAY) for name, j in journals.items()}
        assert sids == {"alpha": "auth-20261126-1", "beta": "auth-20261126-1"}  # each project counts its own
        for name, component in (("alpha", "Core"), ("beta", "Slugify")):
            slug = component.lower()
            journals[name].record(
                ev.ComponentsRecorded(components=(ev.ComponentSpec(name=component),)),
                ev.TasksRecorded(component=component, tasks=(ev.TaskSpec(id=f"{slug}/1", name="one"),)),
                ev.TaskStatusChanged(task_id=f"{slug}/1", from_state="pending", to_state="in-progress"),
                ev.InvocationStarted(invocation_id="i1", kind="task"),
                ev.TokensUsed(invocation_id="i1", input=100 if name == "alpha" else 7, output=1),
            )
        journals["alpha"].record(ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="complete"))
        journals["beta"].record(ev.SessionPaused(reason="budget"))
        views = {name: stores[name].projections.for_project(name) for name in roots}
        views["alpha"].catch_up()  # alpha's process applies beta's events too …
        views["beta"].follow()  # … and beta's run, starting, finds nothing left to apply

        for name, v in views.items():
            assert [(s.project, s.id) for s in v.sessions.all()] == [(name, "auth-20261126-1")]
            plan = v.plan.get("auth")
            assert plan is not None and plan.project == name and plan.problems == []
            assert [p.project for p in v.plan.all()] == [name]
        both = views["alpha"].sessions.all(every_project=True)
        assert sorted((s.project, s.id, s.status) for s in both) == [
            ("alpha", "auth-20261126-1", "running"),
            ("beta", "auth-20261126-1", "paused"),
        ]
        assert [p.project for p in views["beta"].plan.all(every_project=True)] == ["alpha", "beta"]
        alpha_plan, beta_plan = views["alpha"].plan.get("auth"), views["alpha"].plan.get("auth", project="beta")
        assert alpha_plan is not None and beta_plan is not None
        assert (list(alpha_plan.components), alpha_plan.tasks["core/1"].state) == (["core"], "complete")
        assert (list(beta_plan.components), beta_plan.tasks["slugify/1"].state) == (["slugify"], "in-progress")
        alpha_tokens, beta_tokens = views["beta"].tokens.module("auth", "alpha"), views["beta"].tokens.module("auth")
        assert alpha_tokens is not None and beta_tokens is not None
        assert (alpha_tokens.input, beta_tokens.input) == (100, 7)
        session_inputs = {key: row.input for key, row in views["alpha"].tokens.sessions().items()}  # `session list`
        assert session_inputs == {("alpha", "auth-20261126-1"): 100}
        every = {key: row.input for key, row in views["alpha"].tokens.sessions(every_project=True).items()}
        assert every == {("alpha", "auth-20261126-1"): 100, ("beta", "auth-20261126-1"): 7}
        assert stream_owner(journals["beta"].stream) == ("beta", "auth")
        # each folder's plan.md is its own project's plan (rendered by its own run, whoever applied the events)
        views["alpha"].follow()
        assert "**Core**" in plan_path(roots["alpha"], "auth").read_text()
        assert "**Slugify**" in plan_path(roots["beta"], "auth").read_text()
        assert "Slugify" not in plan_path(roots["alpha"], "auth").read_text()


class TestSQLiteStore(SQLiteBackend, StoreContract):
    pass


class TestPostgresStore(PostgresBackend, StoreContract):
    pass


# -- the embedded store only: files, corruption, write failures ---------------------------------------------


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[EventStore]:
    s = EventStore.open(tmp_path)
    yield s
    s.close()


@contextlib.contextmanager
def commits(store: EventStore) -> Iterator[list[str]]:
    """The transactions committed on ``store``'s SQLite connections inside the block (SQLite's own trace of
    the statements it runs: each COMMIT is a wait for the disk with ``synchronous=FULL``)."""
    seen: list[str] = []
    connections = list(store.backend._datastore.pool._pool)  # the store's idle connections: one is used next
    assert connections
    for c in connections:
        c._sqlite_conn.set_trace_callback(lambda sql: seen.append(sql) if sql.upper().startswith("COMMIT") else None)
    try:
        yield seen
    finally:
        for c in connections:
            c._sqlite_conn.set_trace_callback(None)


def test_a_batch_and_its_new_blobs_are_one_commit(sqlite_store: EventStore) -> None:
    """Issue 22, benchmarks: an invocation's prompt (three new blobs) and the event naming them cost one
    commit, not four; a blob stored on its own (``put_blob``) one."""
    store = sqlite_store
    store.append(AUTH, [ev.SessionStarted(session_id="auth-20261126-1")])
    with commits(store) as seen:  # what the invoker does: keep the prompt's parts, record the invocation
        parts = ("system", "guidance", "user")
        prompt = {part: store.keep_blob(PROJECT, f"the {part} part of the prompt\n" * 100) for part in parts}
        store.append(
            AUTH, [ev.InvocationStarted(invocation_id="i1", phase="building", step=6, kind="task", prompt=prompt)]
        )
    assert len(seen) == 1
    assert [r.stream_id.split(":")[0] for r in store.read_all()] == ["module", "blob", "blob", "blob", "module"]
    with commits(store) as seen:
        store.put_blob(PROJECT, "a text kept on its own\n" * 100)
    assert len(seen) == 1


def test_what_the_model_says_mid_invocation_is_committed_without_waiting_for_the_disk(
    sqlite_store: EventStore, tmp_path: Path
) -> None:
    """Lopen's own cost per session (issue 22, benchmarks): the CLI waits for each streamed event, and a
    commit that waits for the disk cost most of it. An append with ``durable=False`` commits with
    ``synchronous=NORMAL`` (WAL: safe from a killed process at once, from a power loss with the next durable
    commit), and the connection is back to ``FULL`` for every other append."""
    store = sqlite_store
    store.append(AUTH, [ev.SessionStarted(session_id="auth-20261126-1")])
    connections = list(store.backend._datastore.pool._pool)
    seen: list[str] = []
    for c in connections:
        c._sqlite_conn.set_trace_callback(lambda sql: seen.append(sql) if "synchronous" in sql.lower() else None)
    try:
        key = store.keep_blob(PROJECT, "collected 14 items\n" * 100)
        said = ev.ModelSaid(invocation_id="i1", text="I run the tests.", session_id="auth-20261126-1")
        called = ev.ToolCalled(invocation_id="i1", tool="bash", result_blob=key, session_id="auth-20261126-1")
        store.append(AUTH, [said, called], durable=False)
        assert seen == ["PRAGMA synchronous=NORMAL", "PRAGMA synchronous=FULL"]
        store.append(AUTH, [ev.TokensUsed(invocation_id="i1", model="m", input=10, session_id="auth-20261126-1")])
        assert len(seen) == 2  # a durable append changes nothing: FULL, as the store is opened
    finally:
        for c in connections:
            c._sqlite_conn.set_trace_callback(None)
    for c in connections:
        assert tuple(c._sqlite_conn.execute("PRAGMA synchronous").fetchone()) == (2,)
    with EventStore.open(tmp_path) as other:  # another process reads it all, the blob with it
        assert [type(r.event).__name__ for r in other.read_stream(AUTH)][1:] == [
            "ModelSaid",
            "ToolCalled",
            "TokensUsed",
        ]
        assert other.blob(PROJECT, key) == "collected 14 items\n" * 100


def test_the_default_store_is_a_sqlite_file_under_lopen(sqlite_store: EventStore, tmp_path: Path) -> None:
    path = tmp_path / ".lopen" / "store.sqlite"
    assert sqlite_store.backend.path == path and sqlite_store.location == str(path)
    sqlite_store.append(AUTH, [ev.SpecApproved(spec_hash="h")])
    with EventStore.open(tmp_path, f"sqlite:///{path}") as same:
        assert same.version(AUTH) == 1


def test_a_damaged_store_is_moved_aside_never_deleted(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path)
    store.append(AUTH, [ev.ProgressReported(progress="x" * 2000) for _ in range(200)])
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
        from pathlib import Path
        from events import catalogue as ev
        from events.errors import StoreWriteError
        from events.recorded import module_stream
        from events.store import EventStore
        store = EventStore.open(Path({str(tmp_path)!r}))
        try:
            for _ in range(50):
                store.append(module_stream("proj", "auth"), [ev.ProgressReported(progress="x" * 100_000)])
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


# -- stream ids ----------------------------------------------------------------------------------------------


def test_stream_ids_name_a_project_and_a_module() -> None:
    assert module_stream("0a1b2c3d4e5f", "auth") == "module:0a1b2c3d4e5f/auth"
    assert stream_owner("module:0a1b2c3d4e5f/my-module") == ("0a1b2c3d4e5f", "my-module")
    assert stream_owner("meta:legacy-migrated") == ("", "")
    for bad_project, bad_module in (("", "auth"), ("a/b", "auth"), ("p", "../etc"), ("p", "")):
        with pytest.raises(ValueError):
            module_stream(bad_project, bad_module)
    assert is_history("module:p/auth") and not is_history("module:auth") and not is_history("meta:x")
    assert is_legacy("session:auth-20261126-1") and is_legacy("module:auth") and not is_legacy("module:p/auth")
    assert parse_session_id("my-module-20261126-12") == ("my-module", "20261126", 12)
    for bad in ("auth-2026112-1", "auth-20261126-0", "auth", "-20261126-1"):
        with pytest.raises(ValueError, match="not a session id"):
            parse_session_id(bad)


# -- redaction rules ------------------------------------------------------------------------------------------


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
        ("## Password Hashing\n## Token Issuing", "## Password Hashing\n## Token Issuing"),
        # a command naming a variable shows what it does: the variable's value is what is secret
        (
            'curl -H "token: $GITHUB_TOKEN" x; TOKEN=${API_TOKEN}',
            'curl -H "token: $GITHUB_TOKEN" x; TOKEN=${API_TOKEN}',
        ),
        ("PASSWORD=$(cat pw.txt)", "PASSWORD=$(cat pw.txt)"),
    ],
)
def test_redact_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_registered_secrets_are_redacted_whatever_their_shape() -> None:
    register_secrets(["pa55", "abc", "", "Xq9-vL2#pR7w", "Xq9-vL2#pR7w-longer"])
    try:
        assert redact_text("a pa55 b") == f"a {REDACTED} b"  # four characters: long enough
        assert redact_text("abc") == "abc"  # three: would redact ordinary words
        assert redact_text("x Xq9-vL2#pR7w-longer y Xq9-vL2#pR7w") == f"x {REDACTED} y {REDACTED}"  # longest first
    finally:
        forget_secrets()
    assert redact_text("a pa55 b") == "a pa55 b"


def test_secret_keys() -> None:
    for key in ("api_key", "apiKey", "GITHUB_TOKEN", "access-token", "client_secret", "password", "Authorization"):
        assert is_secret_key(key), key
    for key in ("path", "max_tokens", "tokens", "command", "author", "input", "monkey"):
        assert not is_secret_key(key), key


def test_no_catalogue_field_looks_like_a_secret() -> None:
    """Redaction would replace such a field's value with a string; none may exist."""
    for cls in (*ev.EVENT_TYPES.values(), ev.Dependency, ev.ComponentSpec, ev.TaskSpec, ev.Finding):
        assert not [f for f in cls.__struct_fields__ if is_secret_key(f)], cls


def test_redaction_exempt_fields_exist() -> None:
    for cls in ev.EVENT_TYPES.values():
        assert cls.redaction_exempt <= set(cls.__struct_fields__), cls


# -- the codec -------------------------------------------------------------------------------------------------


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
        assert codec.topic(event) == f"{name}@{cls.schema_version}"
        assert codec.decode(codec.topic(event), codec.encode(event)) == event
        if cls.schema_version > 1:  # what an older Lopen stored still decodes, through the upcasters
            assert codec.decode(f"{name}@1", codec.encode(event)) == event
        assert msgspec.json.decode(codec.encode(event))["type"] == name


def test_literal_fields_refuse_other_values() -> None:
    codec = Codec()
    bad = b'{"type":"TaskStatusChanged","at":1.0,"task_id":"c/1","from_state":"pending","to_state":"done"}'
    with pytest.raises(Exception, match="cannot be decoded"):
        codec.decode("TaskStatusChanged@1", bad, 5)


def _types(cls: type) -> list[object]:
    return [f.type for f in msgspec.inspect.type_info(cls).fields]


def _sample(t: object) -> object:
    samples = {
        msgspec.inspect.StrType: "x",
        msgspec.inspect.IntType: 3,
        msgspec.inspect.FloatType: 1.5,
        msgspec.inspect.BoolType: True,
        msgspec.inspect.BytesType: b"x\x00\xff",  # a packed blob's bytes (base64 in the JSON)
    }
    for kind, value in samples.items():
        if isinstance(t, kind):
            return value
    if isinstance(t, msgspec.inspect.LiteralType):
        return t.values[-1]
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


# -- the module lock, layering, docs -----------------------------------------------------------------------


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


def test_events_is_the_bottom_layer() -> None:
    code = (
        "import sys, events, events.projections, events.selection, events.backends,"
        " events.fold, events.journal;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('lopen', 'actors')];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_catalogue_is_documented() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "events.md").read_text()
    missing = []
    for name, cls in ev.EVENT_TYPES.items():
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{name}` |")), None)
        if row is None:
            missing.append(name)
            continue
        missing += [
            f"{name}.{field}"
            for field in cls.__struct_fields__
            if field not in ("at", "session_id", "module", "project") and f"`{field}`" not in row
        ]
    assert not missing, f"missing from docs/events.md: {', '.join(missing)}"


def test_opening_a_store_again_never_opens_and_closes_its_file_in_this_process(tmp_path, monkeypatch):
    """Closing any descriptor of a SQLite file drops every POSIX lock the process holds on it, so a
    second open of the store in one process (the TUI's, the MCP server's) must not open the file
    itself: the first connection would lose its locks while other processes write (a corruption)."""
    from events import backends

    first = EventStore.open(tmp_path)
    path = tmp_path / ".lopen" / "store.sqlite"
    opened: list[str] = []
    real_open = os.open

    def spy(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(backends.os, "open", spy)
    backends.check_writable(path)
    assert str(path) not in opened
    first.close()
