"""The store's contract against a real PostgreSQL server: appends and reads, optimistic concurrency,
session ids across store instances, projections kept incrementally vs rebuilt, redaction, and a
wrong password. The server is ``LOPEN_TEST_POSTGRES_URL`` (``bin/postgres-for-tests`` starts one and
prints it). Each test works in a schema of its own, dropped afterwards, so reruns never meet old data.

Without ``LOPEN_TEST_POSTGRES_URL`` these tests are skipped, saying why — except in CI (``CI`` set),
where they fail: CI is where the PostgreSQL backend is proven.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import pytest

from events import catalogue as ev
from events.errors import ConcurrencyConflict, StoreError
from events.projections.plan import plan_path
from events.recorded import module_stream, session_stream
from events.redaction import REDACTED
from events.store import PAGE, EventStore

URL_VAR = "LOPEN_TEST_POSTGRES_URL"
DAY = date(2026, 11, 26)
TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


@pytest.fixture(scope="module")
def server() -> str:
    """The server's URL, or a skip (a failure in CI) saying how to get one."""
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
        psycopg.connect(_plain(url), connect_timeout=5).close()
    except psycopg.Error as exc:
        pytest.fail(f"cannot reach the server in {URL_VAR} ({_hide(url)}): {exc}", pytrace=False)
    return url


@pytest.fixture
def pg_url(server: str) -> Iterator[str]:
    """``server`` with a fresh schema of this test's own; the schema is dropped afterwards."""
    from psycopg.sql import SQL, Identifier

    schema = f"lopen_test_{uuid.uuid4().hex[:12]}"
    _admin(server, SQL("CREATE SCHEMA {}").format(Identifier(schema)))
    try:
        yield _with_query(server, schema=schema)
    finally:
        _admin(server, SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(Identifier(schema)))


@pytest.fixture
def store(pg_url: str, tmp_path: Path) -> Iterator[EventStore]:
    s = EventStore.open(tmp_path, pg_url)
    yield s
    s.close()


def test_append_read_and_version(store: EventStore, pg_url: str) -> None:
    assert store.location.startswith("postgresql://") and store.backend.path is None
    sid = store.new_session_id("auth", DAY)
    assert sid == "auth-20261126-1"
    stream = session_stream(sid)
    version = store.append(stream, [ev.StepEntered(phase="planning", step=2), ev.StepEntered(phase="planning", step=3)])
    assert version == 3 and store.version(stream) == 3
    records = list(store.read_stream(stream))
    assert [r.version for r in records] == [1, 2, 3]
    assert [type(r.event).__name__ for r in records] == ["SessionStarted", "StepEntered", "StepEntered"]
    assert all(r.event.session_id == sid and r.event.module == "auth" for r in records)
    assert [r.seq for r in store.read_all()] == [1, 2, 3]
    assert [r.seq for r in store.read_all(after=2)] == [3]
    assert [r.version for r in store.read_stream(stream, after_version=1)] == [2, 3]
    store.append(module_stream("auth"), [ev.SpecApproved(spec_hash="abc")])
    (rec,) = store.read_stream(module_stream("auth"))
    assert (rec.seq, rec.version, rec.event.module, rec.event.session_id) == (4, 1, "auth", "")
    assert store.version(session_stream("auth-20261126-9")) == 0 and store.last_seq() == 4
    # paging: more than a page in one batch, read back whole and in order
    many = [ev.ProgressReported(progress=f"p{i}") for i in range(PAGE * 2 + 10)]
    assert store.append(stream, many, expected_version=3) == 3 + len(many)
    assert [r.version for r in store.read_stream(stream)] == list(range(1, 4 + len(many)))
    seqs = [r.seq for r in store.read_all()]
    assert seqs == sorted(set(seqs)) and len(seqs) == 4 + len(many)
    with EventStore.open(store.root, pg_url) as again:  # a fresh connection sees the same history
        assert again.version(stream) == 3 + len(many) and again.last_seq() == store.last_seq()


def test_a_stale_expected_version_is_a_conflict_and_stores_nothing(store: EventStore, pg_url: str) -> None:
    other = EventStore.open(store.root, pg_url)  # a second writer with connections of its own
    try:
        stream = session_stream(store.new_session_id("auth", DAY))
        assert other.version(stream) == 1
        store.append(stream, [ev.StepEntered(phase="planning", step=2)], expected_version=1)
        with pytest.raises(ConcurrencyConflict) as caught:
            other.append(stream, [ev.StepEntered(phase="x", step=9), ev.StepEntered(phase="y", step=9)], 1)
        assert caught.value.expected == 1 and caught.value.actual == 2
        assert "expected version 1, it is at 2" in caught.value.render()
        assert store.version(stream) == 2 and [r.event.step for r in list(store.read_stream(stream))[1:]] == [2]
        # without an expected version a writer whose view is stale goes to the end instead
        store.append(stream, [ev.StepEntered(phase="planning", step=3)])
        assert other.append(stream, [ev.StepEntered(phase="planning", step=4)]) == 4
        assert [r.version for r in store.read_stream(stream)] == [1, 2, 3, 4]
        assert [r.event.step for r in list(store.read_stream(stream))[1:]] == [2, 3, 4]
    finally:
        other.close()


def test_racing_writers_get_a_conflict_never_an_interleaved_history(pg_url: str, tmp_path: Path) -> None:
    writers = [EventStore.open(tmp_path, pg_url) for _ in range(2)]
    stream = session_stream(writers[0].new_session_id("auth", DAY))
    rounds = 15
    start = threading.Barrier(len(writers))
    outcomes: dict[int, list[str]] = {r: [] for r in range(rounds)}
    errors: list[BaseException] = []

    def write(me: int) -> None:
        try:
            for r in range(rounds):
                start.wait(timeout=30)
                version = 1 + 3 * r  # every round, both writers think the stream is where it was
                batch = [ev.ProgressReported(progress=f"w{me} r{r} {i}") for i in range(3)]
                try:
                    writers[me].append(stream, batch, expected_version=version)
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
    for w in writers:
        w.close()
    assert not errors, errors
    assert all(sorted(o) == ["conflict", "won"] for o in outcomes.values()), outcomes
    with EventStore.open(tmp_path, pg_url) as reader:
        progress = [r.event.progress for r in list(reader.read_stream(stream))[1:]]
    assert len(progress) == 3 * rounds
    for r in range(rounds):
        batch = progress[3 * r : 3 * r + 3]
        owner = batch[0].split()[0]
        assert batch == [f"{owner} r{r} {i}" for i in range(3)], batch  # one writer's whole batch


def test_session_ids_are_unique_across_store_instances(pg_url: str, tmp_path: Path) -> None:
    stores = [EventStore.open(tmp_path, pg_url) for _ in range(2)]
    start = threading.Barrier(len(stores))
    got: list[list[str]] = [[] for _ in stores]
    errors: list[BaseException] = []

    def reserve(i: int) -> None:
        try:
            start.wait(timeout=30)
            for _ in range(15):
                got[i].append(stores[i].new_session_id("auth", DAY, ev.SessionStarted(lopen_version=str(i))))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reserve, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    ids = [sid for mine in got for sid in mine]
    assert len(ids) == 30 and len(set(ids)) == 30
    assert sorted(int(i.rsplit("-", 1)[1]) for i in ids) == list(range(1, 31))
    for i, mine in enumerate(got):  # each id's stream holds exactly the SessionStarted of its reserver
        for sid in mine:
            (first,) = stores[0].read_stream(session_stream(sid))
            assert isinstance(first.event, ev.SessionStarted) and first.event.lopen_version == str(i)
    assert stores[1].new_session_id("auth", DAY) == "auth-20261126-31"
    for s in stores:
        s.close()


def _plan(component: str, n: int) -> list[ev.Event]:
    return [
        ev.ComponentsRecorded(components=(ev.ComponentSpec(name=component), ev.ComponentSpec(name="cli"))),
        ev.TasksRecorded(
            component=component,
            tasks=tuple(ev.TaskSpec(id=f"{component}/{i}", name=f"Task {i}", subtasks=("a", "b")) for i in range(n)),
        ),
    ]


def _work(sid_index: int, task: str) -> list[ev.Event]:
    inv = f"inv-{sid_index}-{task}"
    return [
        ev.StepEntered(phase="building", step=4),
        ev.TaskStatusChanged(task_id=task, from_state="pending", to_state="in-progress"),
        ev.InvocationStarted(invocation_id=inv, model="gpt-5"),
        ev.TokensUsed(invocation_id=inv, input=1000 + sid_index, output=100, cache_read=10, premium=1.0),
        ev.ContextWindowMeasured(invocation_id=inv, used=5000, limit=200000),
        ev.InvocationFinished(invocation_id=inv),
        ev.TaskStatusChanged(task_id=task, from_state="in-progress", to_state="complete"),
        ev.CommitRecorded(sha=f"{sid_index:040x}", task_id=task),
    ]


def test_projections_catch_up_and_rebuild_identically(store: EventStore, pg_url: str, tmp_path: Path) -> None:
    views = store.projections
    views.follow()  # kept current after every append
    updater = EventStore.open(tmp_path, pg_url)  # and a second updater catching up now and then
    sids = []
    for module in ("auth", "billing"):
        store.append(module_stream(module), [ev.SpecApproved(spec_hash=f"{module}-hash")])
        sid = store.new_session_id(module, DAY, ev.SessionStarted(lopen_version="0.1"))
        sids.append(sid)
        store.append(session_stream(sid), [*_plan("core", 3), ev.ComponentSelected(component="core")])
        for i in range(3):
            store.append(session_stream(sid), _work(len(sids), f"core/{i}"))
            updater.projections.catch_up()
    store.append(session_stream(sids[0]), [ev.SessionCompleted()])
    resumed = store.new_session_id("billing", DAY, ev.SessionStarted(resumed_from=sids[1]))
    store.append(session_stream(resumed), [ev.SessionPaused(reason="budget")])
    assert views.catch_up() == 0  # follow() already applied everything
    assert updater.projections.catch_up() >= 0
    incremental = views.digest()
    assert updater.projections.digest() == incremental

    assert views.sessions.get(sids[0]).status == "completed"
    assert (views.sessions.get(resumed).status, views.sessions.get(resumed).reason) == ("paused", "budget")
    tokens = views.tokens.module("auth")
    assert (tokens.input, tokens.output, tokens.premium, tokens.invocations) == (3003, 300, 3.0, 3)
    assert [t.state for t in views.plan.get("billing").components[0].tasks] == ["complete"] * 3
    assert views.resume.get(resumed).last_good_commit == f"{2:040x}"  # inherited from its predecessor
    assert views.modules.get("auth").status == "complete"
    assert "`core/2` Task 2" in plan_path(tmp_path, "billing").read_text()

    result = store.projections.rebuild()
    assert result["events"] == len(list(store.read_all()))
    assert views.digest() == incremental  # byte-identical
    updater.close()
    with EventStore.open(tmp_path, pg_url) as fresh:  # another process starts from the saved rows
        assert fresh.projections.catch_up() == 0 and fresh.projections.digest() == incremental


def test_secrets_never_reach_the_database(store: EventStore, pg_url: str) -> None:
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
        ],
    )
    store.projections.catch_up()
    _, tool, failed = [r.event for r in store.read_stream(stream)]
    assert tool.arguments["env"]["password"] == REDACTED and tool.arguments["path"] == "src/token_service.py"
    assert failed.reason == f"401 Bad credentials for token {REDACTED}"
    from psycopg.sql import SQL, Identifier

    schema = Identifier(dict(parse_qsl(urlsplit(pg_url).query))["schema"])
    raw = b"".join(
        bytes(row[0])
        for table, column in (("stored_events", "state"), ("projection_rows", "value"))
        for row in _admin(pg_url, SQL("SELECT {} FROM {}.{}").format(Identifier(column), schema, Identifier(table)))
    )
    for secret in (TOKEN, "sk-proj-abcdefghijklmnop1234", "hunter2hunter2", "eyJhbGciOiJIUzI1NiJ9"):
        assert secret.encode() not in raw
    assert REDACTED.encode() in raw


def test_a_wrong_password_is_a_clear_error_that_hides_the_password(
    pg_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    password = "Wr0ng-pa55word-7f3a"
    parts = urlsplit(pg_url)
    netloc = f"{quote(parts.username or '', safe='')}:{password}@{parts.hostname}:{parts.port or 5432}"
    url = urlunsplit(parts._replace(netloc=netloc))
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreError) as caught:
        EventStore.open(tmp_path, url)
    error = caught.value
    text = "\n".join([str(error), repr(error), error.render(), caplog.text])
    assert password not in text
    assert "password authentication failed" in error.render(), error.render()
    assert f"{parts.hostname}:{parts.port or 5432}" in error.what


# -- helpers ---------------------------------------------------------------------------------------


def _plain(url: str) -> str:
    """The URL without Lopen's own query parameters (libpq rejects ``schema``)."""
    return urlunsplit(urlsplit(url)._replace(query=""))


def _with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))


def _hide(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{parts.netloc.rsplit('@', 1)[1]}"))


def _admin(url: str, statement: object) -> list[tuple[object, ...]]:
    """Run one statement on its own autocommit connection; the rows it returns, if any."""
    import psycopg

    with psycopg.connect(_plain(url), autocommit=True, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute(statement)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []
