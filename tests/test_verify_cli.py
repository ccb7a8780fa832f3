"""`lopen verify`, `lopen projections rebuild` and a run's start on a store whose events were rewritten in
place (issue 22, item 3), as a user runs them — in a subprocess, on SQLite and on PostgreSQL.

Before the chain, changing one ``TokensUsed`` row dropped the token totals silently, the rebuild said
"identical … NO" and exited 0, and a run carried on. Now each fails naming the event, and keeps it.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from eventsourcing.persistence import StoredEvent
from test_events_chain import SID, _sql, fill, rewrite, rows, stored
from test_events_cli import lopen, new_project
from test_events_store import AUTH, PROJECT, TOKEN, PostgresBackend, SQLiteBackend

from events import catalogue as ev
from events.blobs import key_of
from events.chain import chain, digest, genesis
from events.codec import Codec
from events.errors import ChainBroken
from events.store import EventStore
from lopen.project import open_store

CHECKOUT = Path(__file__).resolve().parent.parent


class CliContract:
    """Every test gets a project whose store (``url``) holds ``fill()``'s history, written by the real store."""

    @pytest.fixture
    def root(self, tmp_path: Path, url: str) -> Iterator[Path]:
        root = new_project(tmp_path / "project")
        with EventStore.open(root, url) as store:
            fill(store)
        yield root

    def run(self, root: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``lopen <args>`` on this checkout's code (the environment may have another one installed)."""
        return lopen(root, *args, LOPEN_STORE__URL=url, PYTHONPATH=str(CHECKOUT))

    def test_an_intact_store_verifies_and_then_checks_only_new_events(self, root: Path, url: str) -> None:
        first = self.run(root, url, "verify")
        assert first.returncode == 0, first.stderr
        assert first.stdout.startswith("chain intact: 23 events in 2 streams checked in ")
        assert "events/s), since the last check" in first.stdout and first.stdout.count("\n") == 1
        again = self.run(root, url, "verify", "--json")
        assert json.loads(again.stdout)["events"] == 0
        with EventStore.open(root, url) as store:
            store.append(AUTH, [ev.ProgressReported(progress="one more")])
        assert json.loads(self.run(root, url, "verify", "--json").stdout)["events"] == 1
        full = json.loads(self.run(root, url, "verify", "--full", "--json").stdout)
        assert (full["events"], full["full"], full["sealed_at"]) == (24, True, 0.0)

    def test_one_session_s_module_history_is_verified_alone(self, root: Path, url: str) -> None:
        done = self.run(root, url, "verify", "--session", SID)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"chain intact: 20 events in 1 stream of module:{PROJECT}/auth checked")
        missing = self.run(root, url, "verify", "--session", "billing-20261126-9")
        assert missing.returncode == 1 and "no session billing-20261126-9" in missing.stderr

    def test_a_rewritten_tokens_row_fails_verify_rebuild_and_the_next_run_naming_it(self, root: Path, url: str) -> None:
        assert self.run(root, url, "session", "list").returncode == 0  # projections kept, totals counted
        before = rows(url)
        rewrite(url, AUTH, 7, b'"input":1000', b'"input":10')  # someone lowers the token count
        named = "event #7 of module:proj/auth (version 7, TokensUsed) does not match the hash chain"
        for args in (("verify",), ("verify", "--full"), ("verify", "--session", SID), ("projections", "rebuild")):
            done = self.run(root, url, *args)
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            assert named in done.stderr and "why:" in done.stderr and "fix:" in done.stderr, done.stderr
        with pytest.raises(ChainBroken, match="version 7, TokensUsed"):
            start_run(root, url)
        assert rows(url) == [(s, v, _lowered(b) if (s, v) == (AUTH, 7) else b) for s, v, b in before]  # all kept

    def test_a_rewrite_of_events_verified_before_needs_full(self, root: Path, url: str) -> None:
        assert self.run(root, url, "verify").returncode == 0
        rewrite(url, AUTH, 7, b'"input":1000', b'"input":10')
        quick = self.run(root, url, "verify")
        assert quick.returncode == 0 and "0 events in 0 streams" in quick.stdout  # incremental: what is new
        for args in (("verify", "--full"), ("projections", "rebuild")):
            done = self.run(root, url, *args)
            assert done.returncode == 1 and "(version 7, TokensUsed)" in done.stderr, (args, done.stderr)

    def test_projection_rows_changed_under_an_intact_chain_fail_the_rebuild_naming_them(
        self, root: Path, url: str
    ) -> None:
        assert self.run(root, url, "projections", "rebuild").returncode == 0
        with EventStore.open(root, url) as store:
            views = store.projections
            views.catch_up()
            (key, value), *_ = [(k, v) for k, v in views.saved()["tokens"].items() if k.startswith("module:")]
            store.backend.views.save([("tokens@" + str(_tokens_version()), key, value.replace(b"1000", b"10"))], [])
        done = self.run(root, url, "projections", "rebuild")
        assert done.returncode == 1, done.stdout
        assert "identical to the projections kept incrementally: NO" in done.stdout
        assert "projection 'tokens' differ" in done.stderr and key in done.stderr

    def test_an_old_store_is_sealed_once_and_verifies(self, tmp_path: Path, url: str) -> None:
        root = new_project(tmp_path / "old")
        codec = Codec()
        with EventStore.open(root, url) as store:
            event = ev.ProgressReported(progress="written before the chain", project=PROJECT, module="auth")
            store.backend.events.insert_events(
                [StoredEvent(AUTH, v, codec.topic(event), codec.encode(event)) for v in (1, 2, 3)]
            )
        done = self.run(root, url, "verify", "--full")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("chain intact: 4 events in 2 streams")  # the 3 and the seal's marker
        assert "events older than the chain sealed on " in done.stdout

    def test_a_text_kept_twice_is_stored_once_and_a_rewritten_blob_fails_verify(self, root: Path, url: str) -> None:
        """Issue 22.2: a repeated file or prompt costs nothing the second time; its text as stored is the
        one its key names, and a blob rewritten in place — even with its chain head forged to match — is
        found by `lopen verify`, naming it."""
        text = "def login(user):\n    return check(user)\n" * 40 + f"GITHUB_TOKEN={TOKEN}\n"
        with EventStore.open(root, url) as store:
            key = store.put_blob(PROJECT, text)
            assert store.put_blob(PROJECT, text) == key  # the same store: known, nothing written
            first = store.last_seq()
        with EventStore.open(root, url) as other:  # another process: the text is there already
            assert other.put_blob(PROJECT, text) == key and other.last_seq() == first
            kept = other.blob(PROJECT, key)
        blobs = [(s, v, state) for s, v, state in rows(url) if str(s).startswith("blob:")]
        assert [(s, v) for s, v, _ in blobs] == [(f"blob:{PROJECT}:{key}", 1)]
        assert kept is not None and TOKEN not in kept and kept.startswith(text[:40]) and key_of(kept) == key
        assert len(blobs[0][2]) < len(text) / 3  # stored packed: a repetitive text is a fraction of its size
        assert self.run(root, url, "verify").returncode == 0

        stream = f"blob:{PROJECT}:{key}"
        rewrite_blob(url, stream, "return check(user)", "return True")  # a login that lets anyone in
        for args in (("verify",), ("verify", "--full")):
            done = self.run(root, url, *args)
            assert done.returncode == 1, (args, done.stdout)
            assert f"of {stream} (version 1, BlobStored)" in done.stderr, done.stderr
        # the forger also fixes the chain's records (its head, where verification stopped): the text no
        # longer hashes to its key
        forged = digest(f"BlobStored@{ev.BlobStored.schema_version}", stored(url, stream, 1))
        for name in ("chain_heads", "chain_verified"):
            table = name if url.startswith("sqlite") else f'"{_schema(url)}".{name}'
            _sql(url, f"UPDATE {table} SET digest = ? WHERE stream_id = ?", (forged, stream))
        done = self.run(root, url, "verify", "--full")
        assert done.returncode == 1 and "is not the blob its key names" in done.stderr, done.stderr
        assert "its text hashes to" in done.stderr

    def test_a_blob_stored_before_packing_reads_and_verifies_and_a_rewrite_still_fails(
        self, root: Path, url: str
    ) -> None:
        """A store written by a Lopen that kept every blob as plain text (``BlobStored`` schema 1) reads
        and verifies as it did; its blobs are never unpacked by guesswork, and a rewrite of one is found."""
        text = "collected 14 items\n\ntests/test_login.py ..............  [100%]\n" * 40
        key = key_of(text)
        stream = f"blob:{PROJECT}:{key}"
        codec = Codec()
        old = codec.encode(ev.BlobStored(key=key, text=text, size=len(text), project=PROJECT))
        state = old.replace(b',"packing":"","packed":""', b"")  # exactly what schema 1 stored
        assert b"packing" not in state
        (state,), head = chain(genesis(stream), ["BlobStored@1"], [state])  # linked as it was then
        with EventStore.open(root, url) as store:
            store.backend.events.insert_events(
                [StoredEvent(stream, 1, "BlobStored@1", state)], heads=[(stream, 1, head)]
            )
            assert store.blob(PROJECT, key) == text
            assert store.keep_blob(PROJECT, text) == key  # the same text kept again: the same blob
            store.append(AUTH, [ev.ToolCalled(tool="bash", result_blob=key, session_id=SID)])
        assert [s for s, _, _ in rows(url) if str(s).startswith("blob:")] == [stream]
        done = self.run(root, url, "verify", "--full")
        assert done.returncode == 0, done.stderr
        replayed = self.run(root, url, "replay", SID, "--transcript", "--json")
        assert replayed.returncode == 0, replayed.stderr
        assert [json.loads(line).get("result") for line in replayed.stdout.splitlines()][-1] == text
        rewrite(url, stream, 1, b"test_login.py", b"test_other.py")
        done = self.run(root, url, "verify", "--full")
        assert done.returncode == 1 and f"of {stream} (version 1, BlobStored)" in done.stderr, done.stderr


def rewrite_blob(url: str, stream: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in a stored blob's text, in place — packed again when it is stored packed."""
    state = stored(url, stream, 1)
    blob = json.loads(state)
    if not blob.get("packing"):
        rewrite(url, stream, 1, old.encode(), new.encode())
        return
    assert blob["packing"] == "zlib", blob
    text = zlib.decompress(base64.b64decode(blob["packed"])).decode()
    assert old in text, text
    packed = base64.b64encode(zlib.compress(text.replace(old, new).encode())).decode()
    rewrite(url, stream, 1, blob["packed"].encode(), packed.encode())


def _schema(url: str) -> str:
    from urllib.parse import parse_qsl, urlsplit

    return dict(parse_qsl(urlsplit(url).query))["schema"]


def _lowered(state: object) -> bytes:
    return bytes(state).replace(b'"input":1000', b'"input":10')  # type: ignore[arg-type]


def _tokens_version() -> int:
    from events.projections import tokens

    return tokens.PROJECTION.version


def start_run(root: Path, url: str) -> None:
    """`lopen run auth` from the point where the engine takes over (the CLI's own checks need git and
    credentials): the store opened, the module locked, the journal read — then the check."""
    from lopen.app.engine import run_module
    from lopen.config import load_settings

    settings = load_settings(root, env={"LOPEN_STORE__URL": url})
    run_module(root, "auth", settings, say=lambda _: None)


class TestSQLiteVerifyCli(SQLiteBackend, CliContract):
    pass


class TestPostgresVerifyCli(PostgresBackend, CliContract):
    pass


def test_a_run_start_refused_records_nothing(tmp_path: Path) -> None:
    """The refusal happens before the session opens: the store holds what it held."""
    root = new_project(tmp_path / "project")
    with EventStore.open(root) as store:
        fill(store)
    db = root / ".lopen" / "store.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE stored_events SET state = replace(state, 'after 3', 'after X') WHERE originator_version = 12"
        )
    store, _ = open_store(root)
    with store:
        count = store.last_seq()
    with pytest.raises(ChainBroken, match="version 12, ProgressReported"):
        start_run(root, "")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM stored_events").fetchone()[0] == count
