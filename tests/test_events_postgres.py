"""What only the PostgreSQL store has: a team's projects sharing one server, schemas, and the server's
own errors. The store's, the journal's, the projections' and the processes' contracts run on
PostgreSQL too: ``TestPostgresStore`` (tests/test_events_store.py), ``TestPostgresJournal``,
``TestPostgresProjections``, ``TestPostgresProcesses``.

The server is ``LOPEN_TEST_POSTGRES_URL`` (``bin/postgres-for-tests`` starts one and prints it). Each
test works in a schema of its own, dropped afterwards. Without the URL these tests are skipped saying
why — except in CI (``CI`` set), where they fail: CI is where the PostgreSQL backend is proven.
"""

from __future__ import annotations

import json
import logging
from datetime import date
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from test_events_cli import lopen, new_project
from test_events_store import BackendFixtures, Connect, PostgresBackend, pg_admin, postgres_server, with_query

from events import catalogue as ev
from events.errors import StoreError
from events.journal import Journal
from events.projections.plan import plan_path
from events.recorded import module_stream
from events.store import EventStore

DAY = date(2026, 11, 26)


class TestPostgres(PostgresBackend, BackendFixtures):
    def test_two_projects_on_one_server_build_and_list_independently(self, url: str, tmp_path: Path) -> None:
        """Issue 15: `lopen demo` in a second folder against the same store wrote into the first project's
        history, and every command of every project then failed. Two projects, one module name, one store."""
        roots = {name: new_project(tmp_path / name, name) for name in ("alpha", "beta")}
        env = {"LOPEN_STORE__URL": url}
        for name, root in roots.items():
            with EventStore.open(root, url) as store:
                journal = Journal(store, name, "auth")
                for n in range(2 if name == "alpha" else 1):
                    journal.open_session(ev.SessionStarted(lopen_version=name), DAY)
                    if n == 0:
                        journal.record(
                            ev.ComponentsRecorded(components=(ev.ComponentSpec(name=f"{name} core"),)),
                            ev.TasksRecorded(
                                component=f"{name} core", tasks=(ev.TaskSpec(id=f"{name}-core/1", name="one"),)
                            ),
                        )
                    journal.record(
                        ev.TaskStatusChanged(
                            task_id=f"{name}-core/1",
                            from_state="pending" if n == 0 else "in-progress",
                            to_state="in-progress" if n == 0 else "complete",
                        ),
                        ev.InvocationStarted(invocation_id=f"i{n}", kind="task"),
                        ev.TokensUsed(invocation_id=f"i{n}", input=100 if name == "alpha" else 7, output=0),
                        ev.SessionPaused(reason="x"),
                    )
                    journal.close()

        for name, root in roots.items():
            out = lopen(root, "session", "list", "--json", **env)
            assert out.returncode == 0, out.stderr
            rows = json.loads(out.stdout)
            expected = ["auth-20261126-1", "auth-20261126-2"] if name == "alpha" else ["auth-20261126-1"]
            assert [(r["project"], r["id"]) for r in rows] == [(name, sid) for sid in expected]
            assert {r["tokens"] for r in rows} == {100 if name == "alpha" else 7}
            shown = json.loads(lopen(root, "session", "show", "-f", "json", **env).stdout)
            assert [c["name"] for c in shown["components"]] == [f"{name} core"] and shown["problems"] == []
            modules = lopen(root, "modules", **env)
            assert modules.returncode == 0 and "auth" in modules.stdout, modules.stderr
            rebuilt = json.loads(lopen(root, "projections", "rebuild", "--json", **env).stdout)
            assert rebuilt["problems"] == [] and rebuilt["identical"] is True
            assert f"**{name} core**" in plan_path(root, "auth").read_text()

        every = lopen(roots["beta"], "session", "list", "--all-projects", **env)
        assert every.returncode == 0, every.stderr
        lines = every.stdout.splitlines()
        assert lines[0].split()[:2] == ["PROJECT", "SESSION"]
        assert sorted(tuple(line.split()[:2]) for line in lines[1:]) == [
            ("alpha", "auth-20261126-1"),
            ("alpha", "auth-20261126-2"),
            ("beta", "auth-20261126-1"),
        ]
        # each project's replay is its own session of the same id
        for name, root in roots.items():
            replay = lopen(root, "replay", "auth-20261126-1", "--json", **env)
            events = [json.loads(line) for line in replay.stdout.splitlines()]
            assert events and {e["project"] for e in events} == {name}, replay.stderr

    def test_each_schema_is_a_store_of_its_own(self, url: str, connect: Connect) -> None:
        from psycopg.sql import SQL, Identifier

        server = postgres_server()
        other_schema = urlsplit(url).query.replace("schema=", "") + "_other"
        pg_admin(server, SQL("CREATE SCHEMA {}").format(Identifier(other_schema)))
        try:
            mine, theirs = connect(), EventStore.open(Path("."), with_query(server, schema=other_schema))
            stream = module_stream("proj", "auth")
            mine.append(stream, [ev.SpecApproved(spec_hash="mine")])
            assert theirs.version(stream) == 0 and theirs.last_seq() == 0
            theirs.append(stream, [ev.SpecApproved(spec_hash="theirs")])
            assert [r.event.spec_hash for r in mine.read_stream(stream)] == ["mine"]
            theirs.close()
        finally:
            pg_admin(server, SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(Identifier(other_schema)))

    def test_workers_opening_a_new_schema_at_the_same_moment_all_get_the_store(self, url: str) -> None:
        """CI, issue 14: two `lopen worker`s started together on a fresh schema; one died with
        "tuple concurrently updated" while both created the tables. Eight open it at once here."""
        import threading

        from psycopg.sql import SQL, Identifier

        server = postgres_server()
        schema = urlsplit(url).query.replace("schema=", "") + "_race"
        gate, errors, stores = threading.Barrier(8), [], []

        def open_one() -> None:
            gate.wait()
            try:
                stores.append(EventStore.open(Path("."), with_query(server, schema=schema)))
            except StoreError as exc:
                errors.append(exc)

        try:
            threads = [threading.Thread(target=open_one) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == [] and len(stores) == 8
            stream = module_stream("proj", "auth")
            stores[0].append(stream, [ev.SpecApproved(spec_hash="one")])
            assert [r.event.spec_hash for r in stores[7].read_stream(stream)] == ["one"]
        finally:
            for store in stores:
                store.close()
            pg_admin(server, SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(Identifier(schema)))

    def test_a_wrong_password_is_a_clear_error_that_hides_the_password(
        self, url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        password = "Wr0ng-pa55word-7f3a"
        parts = urlsplit(url)
        netloc = f"{quote(parts.username or '', safe='')}:{password}@{parts.hostname}:{parts.port or 5432}"
        wrong = urlunsplit(parts._replace(netloc=netloc))
        with caplog.at_level(logging.DEBUG), pytest.raises(StoreError) as caught:
            EventStore.open(tmp_path, wrong)
        error = caught.value
        text = "\n".join([str(error), repr(error), error.render(), caplog.text])
        assert password not in text
        assert "password authentication failed" in error.render(), error.render()
        assert f"{parts.hostname}:{parts.port or 5432}" in error.what
