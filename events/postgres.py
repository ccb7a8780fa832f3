"""PostgreSQL backend: selected by ``store.url = "postgresql://user:password@host:port/db?schema=s"``.

Imported only when such a URL is configured; importing it without psycopg raises
ImportError, which ``events.backends`` turns into a clear ``StoreUnavailable``.
It mirrors the SQLite backend statement for statement; tests/test_events_postgres.py runs the
store's contract against a real server (``bin/postgres-for-tests``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import psycopg
from eventsourcing.persistence import IntegrityError, StoredEvent, Tracking
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore, PostgresTrackingRecorder
from psycopg.sql import SQL, Composable, Identifier

from events.backends import Backend, ChainRow, Head, Link, RawEvent, Row, Stale, Verified
from events.errors import StoreUnavailable

CONNECT_TIMEOUT = 5  # seconds


def open_postgres(url: str) -> Backend:
    parts = urlsplit(url)
    if not parts.hostname or not parts.path.strip("/"):
        raise StoreUnavailable(
            "store.url must name a host and a database: postgresql://user:password@host:port/dbname",
            f"got {parts.scheme}://{parts.hostname or ''}{parts.path}",
            "fix store.url in .lopen/config.json",
        )
    schema = parse_qs(parts.query).get("schema", [""])[0]
    location = f"postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}"
    password = unquote(parts.password or "")
    connection = {
        "dbname": unquote(parts.path.strip("/")),
        "host": parts.hostname,
        "port": parts.port or 5432,
        "user": unquote(parts.username or ""),
        "password": password,
    }
    datastore = None
    try:
        # One plain connection first: the pool would only say "couldn't get a connection after
        # 5 sec", this says why (wrong password, no such database, refused). It also holds an
        # advisory lock while the schema and tables are created: two workers starting at once
        # would otherwise race in PostgreSQL's catalog ("tuple concurrently updated").
        with psycopg.connect(**connection, connect_timeout=CONNECT_TIMEOUT, autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"lopen-store:{schema}",))
            if schema and not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone():
                conn.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(schema)))
            datastore = PostgresDatastore(
                **connection,
                connect_timeout=CONNECT_TIMEOUT,
                schema=schema,
                originator_id_type="text",
                pool_size=2,
                max_overflow=4,
            )
            events = PgEventRecorder(datastore, events_table_name="stored_events")
            events.create_table()
            views = PgViewRecorder(datastore, tracking_table_name="notification_tracking")
            views.create_table()
    except Exception as exc:
        if datastore is not None:
            datastore.close()
        raise StoreUnavailable(
            f"cannot use the PostgreSQL event store at {location}",
            " ".join(str(exc).replace(password or "\0", "[REDACTED]").split()),
            "check that the server is reachable and store.url's user, password and database are right",
        ) from exc
    return Backend(location, None, events, views, datastore)


class PgEventRecorder(PostgresApplicationRecorder):
    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str) -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        schema = Identifier(self.datastore.schema)
        self.chain_tables = {
            name: (schema, Identifier(name))
            for name in ("chain_heads", "chain_links", "chain_verified", events_table_name)
        }
        self.sql_create_statements += [
            SQL("CREATE TABLE IF NOT EXISTS {0}.{1} (stream_id text PRIMARY KEY, version bigint, digest bytea)").format(
                *self.chain_tables["chain_heads"]
            ),
            SQL(
                "CREATE TABLE IF NOT EXISTS {0}.{1} (stream_id text, version bigint, link bytea, "
                "PRIMARY KEY (stream_id, version))"
            ).format(*self.chain_tables["chain_links"]),
            SQL(
                "CREATE TABLE IF NOT EXISTS {0}.{1} ("
                "stream_id text PRIMARY KEY, version bigint, digest bytea, seq bigint, at double precision)"
            ).format(*self.chain_tables["chain_verified"]),
        ]
        self._links_insert = SQL("INSERT INTO {0}.{1} VALUES (%s, %s, %s) ON CONFLICT DO NOTHING").format(
            *self.chain_tables["chain_links"]
        )
        self._head_upsert = SQL(
            "INSERT INTO {0}.{1} AS h VALUES (%s, %s, %s) ON CONFLICT (stream_id) DO UPDATE "
            "SET version = EXCLUDED.version, digest = EXCLUDED.digest WHERE EXCLUDED.version > h.version"
        ).format(*self.chain_tables["chain_heads"])
        self._chain_select = SQL(
            "SELECT e.notification_id, e.originator_id, e.originator_version, e.topic, e.state, l.link "
            "FROM {0}.{1} e LEFT JOIN {2}.{3} l ON l.stream_id = e.originator_id AND l.version = e.originator_version "
        ).format(*self.chain_tables[events_table_name], *self.chain_tables["chain_links"])

    def _insert_events(
        self,
        curs: Any,
        stored_events: Sequence[StoredEvent],
        heads: Sequence[Head] = (),
        links: Sequence[Link] = (),
        **_: Any,
    ) -> None:
        """The library's hook inside the batch's transaction, before the events go in: the chain's heads
        and sealed links are written with them (rolled back with them on a conflict)."""
        if links:
            curs.executemany(self._links_insert, links)
        if heads:
            curs.executemany(self._head_upsert, heads)

    def _chain_rows(self, where: Composable, params: tuple[object, ...]) -> list[ChainRow]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(self._chain_select + where, params)
            return [
                (
                    r["notification_id"],
                    r["originator_id"],
                    r["originator_version"],
                    r["topic"],
                    bytes(r["state"]),
                    bytes(r["link"]) if r["link"] is not None else None,
                )
                for r in c.fetchall()
            ]

    def chain_scan(self, after: int, limit: int) -> list[ChainRow]:
        return self._chain_rows(SQL("WHERE e.notification_id > %s ORDER BY e.notification_id LIMIT %s"), (after, limit))

    def chain_stream(self, stream_id: str, after_version: int, limit: int) -> list[ChainRow]:
        return self._chain_rows(
            SQL("WHERE e.originator_id = %s AND e.originator_version > %s ORDER BY e.originator_version LIMIT %s"),
            (stream_id, after_version, limit),
        )

    def chain_event(self, stream_id: str, version: int) -> tuple[ChainRow | None, Head | None]:
        rows = self._chain_rows(SQL("WHERE e.originator_id = %s AND e.originator_version = %s"), (stream_id, version))
        heads = self.chain_heads(stream_id)
        return (rows[0] if rows else None), ((stream_id, *heads[stream_id]) if heads else None)

    def chain_heads(self, stream_id: str | None = None) -> dict[str, tuple[int, bytes]]:
        statement = SQL("SELECT stream_id, version, digest FROM {0}.{1}").format(*self.chain_tables["chain_heads"])
        params: tuple[object, ...] = ()
        if stream_id is not None:
            statement += SQL(" WHERE stream_id = %s")
            params = (stream_id,)
        with self.datastore.transaction(commit=False) as c:
            c.execute(statement, params)
            return {r["stream_id"]: (r["version"], bytes(r["digest"])) for r in c.fetchall()}

    def chain_verified(self, stream_id: str | None = None) -> tuple[dict[str, Verified], list[ChainRow]]:
        table = self.chain_tables["chain_verified"]
        where, params = (SQL(" WHERE v.stream_id = %s"), (stream_id,)) if stream_id is not None else (SQL(""), ())
        with self.datastore.transaction(commit=False) as c:
            c.execute(SQL("SELECT stream_id, version, digest, seq, at FROM {0}.{1} v").format(*table) + where, params)
            verified = {
                r["stream_id"]: (r["stream_id"], r["version"], bytes(r["digest"]), r["seq"], r["at"])
                for r in c.fetchall()
            }
        if stream_id is None:
            where = SQL(" WHERE v.stream_id > '' AND NOT starts_with(v.stream_id, 'blob:')")
        anchors = self._chain_rows(
            SQL("JOIN {0}.{1} v ON v.stream_id = e.originator_id AND v.version = e.originator_version").format(*table)
            + where,
            params,
        )
        return verified, anchors

    def blob_anchors(self, after: int, limit: int) -> list[tuple[str, ChainRow | None]]:
        statement = SQL(
            "SELECT v.stream_id AS sid, v.seq AS vseq, e.notification_id, e.originator_id, e.originator_version, "
            "e.topic, e.state, l.link FROM (SELECT stream_id, version, seq FROM {0}.{1} "
            "WHERE starts_with(stream_id, 'blob:') AND seq > %s ORDER BY seq LIMIT %s) v "
            "LEFT JOIN {2}.{3} e ON e.originator_id = v.stream_id AND e.originator_version = v.version "
            "LEFT JOIN {4}.{5} l ON l.stream_id = e.originator_id AND l.version = e.originator_version"
        ).format(
            *self.chain_tables["chain_verified"],
            *self.chain_tables[self.events_table_name],
            *self.chain_tables["chain_links"],
        )
        with self.datastore.transaction(commit=False) as c:
            c.execute(statement, (after, limit))
            return [
                (
                    r["sid"],
                    (
                        r["notification_id"],
                        r["originator_id"],
                        r["originator_version"],
                        r["topic"],
                        bytes(r["state"]),
                        bytes(r["link"]) if r["link"] is not None else None,
                    )
                    if r["notification_id"] is not None
                    else None,
                )
                for r in sorted(c.fetchall(), key=lambda r: r["vseq"])
            ]

    def save_verified(self, rows: Sequence[Verified]) -> None:
        statement = SQL(
            "INSERT INTO {0}.{1} AS v VALUES (%s, %s, %s, %s, %s) ON CONFLICT (stream_id) DO UPDATE SET "
            "version = EXCLUDED.version, digest = EXCLUDED.digest, seq = EXCLUDED.seq, at = EXCLUDED.at "
            "WHERE EXCLUDED.seq >= v.seq"
        ).format(*self.chain_tables["chain_verified"])
        with self.datastore.transaction(commit=True) as c:
            c.executemany(statement, rows)

    def add_links(self, links: Sequence[Link]) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.executemany(self._links_insert, links)

    def chain_of_types(self, names: Sequence[str], stream_id: str | None = None) -> list[ChainRow]:
        ranges = " OR ".join("starts_with(e.topic, %s)" for _ in names) or "FALSE"
        params: list[object] = [f"{name}@" for name in names]
        where = f"WHERE ({ranges})"
        if stream_id is not None:
            where += " AND e.originator_id = %s"
            params.append(stream_id)
        return self._chain_rows(SQL(where + " ORDER BY e.notification_id"), tuple(params))

    def _rows(self, where: str, params: tuple[object, ...]) -> list[RawEvent]:
        statement = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state FROM {0}.{1} " + where
        ).format(Identifier(self.datastore.schema), Identifier(self.events_table_name))
        with self.datastore.transaction(commit=False) as c:
            c.execute(statement, params)
            return [
                (r["notification_id"], r["originator_id"], r["originator_version"], r["topic"], bytes(r["state"]))
                for r in c.fetchall()
            ]

    def scan(self, after: int, limit: int) -> list[RawEvent]:
        return self._rows("WHERE notification_id > %s ORDER BY notification_id LIMIT %s", (after, limit))

    def select_stream(self, stream_id: str, after_version: int, limit: int) -> list[RawEvent]:
        return self._rows(
            "WHERE originator_id = %s AND originator_version > %s ORDER BY originator_version LIMIT %s",
            (stream_id, after_version, limit),
        )

    def stored_streams(self, stream_ids: Sequence[str]) -> set[str]:
        statement = SQL(
            "SELECT s FROM unnest(%s::text[]) s WHERE EXISTS (SELECT 1 FROM {0}.{1} WHERE originator_id = s)"
        ).format(Identifier(self.datastore.schema), Identifier(self.events_table_name))
        with self.datastore.transaction(commit=False) as c:
            c.execute(statement, (list(stream_ids),))
            return {r["s"] for r in c.fetchall()}

    def stream_extent(self, stream_id: str, after: int = 0) -> tuple[int, int, int]:
        statement = SQL(
            "SELECT COUNT(*) AS n, COALESCE(MAX(originator_version), 0) AS top, "
            "(SELECT COALESCE(MIN(originator_version), 0) FROM {0}.{1} WHERE originator_id = %s) AS low "
            "FROM {0}.{1} WHERE originator_id = %s AND originator_version > %s"
        ).format(Identifier(self.datastore.schema), Identifier(self.events_table_name))
        with self.datastore.transaction(commit=False) as c:
            c.execute(statement, (stream_id, stream_id, after))
            row = c.fetchone()
            return int(row["n"]), int(row["top"]), int(row["low"])


class PgViewRecorder(PostgresTrackingRecorder):
    def __init__(self, datastore: PostgresDatastore, *, tracking_table_name: str) -> None:
        super().__init__(datastore, tracking_table_name=tracking_table_name)
        self.rows = Identifier(self.datastore.schema), Identifier("projection_rows")
        self.tracking = Identifier(self.datastore.schema), Identifier(tracking_table_name)
        self.sql_create_statements.append(
            SQL(
                "CREATE TABLE IF NOT EXISTS {0}.{1} ("
                "projection text, key text, value bytea, PRIMARY KEY (projection, key))"
            ).format(*self.rows)
        )

    def positions(self, names: Iterable[str]) -> dict[str, int | None]:
        return {name: self.max_tracking_id(name) for name in names}

    def load(self, projection: str, key: str) -> tuple[bytes | None, int]:
        statement = SQL(
            "SELECT (SELECT value FROM {0}.{1} WHERE projection = %s AND key = %s) AS value, "
            "(SELECT notification_id FROM {2}.{3} WHERE application_name = %s) AS position"
        ).format(*self.rows, *self.tracking)
        with self.datastore.transaction(commit=False) as c:
            c.execute(statement, (projection, key, projection))
            row = c.fetchone()
            assert row is not None
            value = bytes(row["value"]) if row["value"] is not None else None
            return value, row["position"] or 0

    def load_all(self, projection: str) -> list[tuple[str, bytes]]:
        statement = SQL("SELECT key, value FROM {0}.{1} WHERE projection = %s ORDER BY key").format(*self.rows)
        with self.datastore.transaction(commit=False) as c:
            c.execute(statement, (projection,))
            return [(r["key"], bytes(r["value"])) for r in c.fetchall()]

    def load_prefix(self, projection: str, prefix: str) -> list[tuple[str, bytes]]:
        statement = SQL(
            "SELECT key, value FROM {0}.{1} WHERE projection = %s AND starts_with(key, %s) ORDER BY key"
        ).format(*self.rows)
        with self.datastore.transaction(commit=False) as c:
            c.execute(statement, (projection, prefix))
            return [(r["key"], bytes(r["value"])) for r in c.fetchall()]

    def save(self, rows: Sequence[Row], trackings: Sequence[Tracking]) -> None:
        upsert = SQL(
            "INSERT INTO {0}.{1} VALUES (%s, %s, %s) ON CONFLICT (projection, key) DO UPDATE SET value = EXCLUDED.value"
        ).format(*self.rows)
        with self.datastore.transaction(commit=True) as c:
            c.execute(SQL("LOCK TABLE {0}.{1} IN EXCLUSIVE MODE").format(*self.rows))
            c.executemany(upsert, rows)
            try:
                for tracking in trackings:
                    self._insert_tracking(c, tracking)
            except IntegrityError as exc:
                raise Stale from exc

    def replace(self, names: Sequence[str], rows: Sequence[Row], position: int) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(SQL("LOCK TABLE {0}.{1} IN EXCLUSIVE MODE").format(*self.rows))
            c.execute(
                SQL("SELECT MAX(notification_id) AS ahead FROM {0}.{1} WHERE application_name = ANY(%s)").format(
                    *self.tracking
                ),
                (list(names),),
            )
            row = c.fetchone()
            if row is not None and row["ahead"] is not None and row["ahead"] > position:
                raise Stale
            c.execute(SQL("DELETE FROM {0}.{1} WHERE projection = ANY(%s)").format(*self.rows), (list(names),))
            c.execute(
                SQL("DELETE FROM {0}.{1} WHERE application_name = ANY(%s)").format(*self.tracking), (list(names),)
            )
            c.executemany(SQL("INSERT INTO {0}.{1} VALUES (%s, %s, %s)").format(*self.rows), rows)
            for name in names:
                self._insert_tracking(c, Tracking(name, position))
