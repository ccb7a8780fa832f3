"""Git witnesses the event log and the log witnesses git (issue 22, item 3): every commit Lopen makes
carries its module stream's chain head (``Lopen-Chain``), and ``lopen verify`` checks each recorded
commit against it — on real repositories, a real SQLite store and real lanes (parallel components that
commit in worktrees of their own and are merged)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_guards_git_actor_units import World, build, git, lane

from events import catalogue as ev
from events.chain import digest, genesis, with_link
from lopen.app import integrity
from lopen.app.context import Project
from lopen.app.witness import Fact, WitnessFailed, check
from lopen.git.witness import Commit, chain_of, read_commits


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    try:
        yield w
    finally:
        for ref in w.refs:
            ref.stop()
        w.store.close()


@pytest.fixture
def module(world: World):  # the module's Git actor, its branch ensured
    actor = world.start()
    actor.ensure().get()
    return actor


def forge(store: Path, stream: str, version: int, old: bytes, new: bytes) -> None:
    """What only someone who controls the whole database can do: rewrite event ``version`` and every link
    after it, the stream's head and what verification remembered, so the hash chain holds again."""
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT originator_version, topic, state FROM stored_events WHERE originator_id = ? "
            "ORDER BY originator_version",
            (stream,),
        ).fetchall()
        link = genesis(stream)
        for number, topic, state in rows:
            payload = bytes(state)
            if number == version:
                assert old in payload
                payload = payload.replace(old, new)
            payload = with_link(payload[: payload.rindex(b',"@prev":')] + b"}", link)
            db.execute(
                "UPDATE stored_events SET state = ? WHERE originator_id = ? AND originator_version = ?",
                (payload, stream, number),
            )
            link = digest(topic, payload)
        db.execute("UPDATE chain_heads SET digest = ? WHERE stream_id = ?", (link, stream))
        db.execute("DELETE FROM chain_verified")


def test_task_lane_and_merge_commits_carry_the_chain_head_and_verify_says_git_witnesses_them(world, module):
    core, core_wt = lane(world, "core")
    api, api_wt = lane(world, "api")
    build(world, core, core_wt, "core/1", {"core.py": "C = 1\n"})
    build(world, api, api_wt, "api/1", {"api.py": "A = 1\n"})
    module.merge("core").get()
    module.merge("api").get()  # a merge commit: the module branch moved since api started

    recorded = [e for e in world.events(ev.CommitRecorded)] + [
        e for e in world.events(ev.ComponentMerged) if not e.fast_forward
    ]
    assert len(recorded) == 3
    commits = read_commits(world.root, [e.sha for e in recorded])
    decode = world.store.codec.decode
    versions = {
        decode(r[3], r[4]).sha: r[2]
        for r in world.store.chain_rows(world.journal.stream)
        if r[3].startswith(("CommitRecorded@", "ComponentMerged@"))
    }
    for event in recorded:
        trailer = chain_of(commits[event.sha].message)
        assert trailer == event.chain, event
        version, hexdigest = trailer.split()
        row = world.store.chain_event(world.journal.stream, int(version))
        assert row is not None and digest(row[3], row[4], row[5]).decode() == hexdigest
        # the head when the commit was made: the version before the event recording it
        assert int(version) < versions[event.sha]

    result = integrity.verify(Project(world.root), full=True)
    assert (result["commits"], result["witnessed"], result["not_witnessed"]) == (3, 3, [])


def test_a_history_rewritten_consistently_is_caught_by_the_commits_that_witnessed_it(world, module):
    core, core_wt = lane(world, "core")
    build(world, core, core_wt, "core/1", {"core.py": "C = 1\n"})
    (commit,) = world.events(ev.CommitRecorded)
    assert integrity.verify(Project(world.root), full=True)["witnessed"] == 1
    # the plan recorded before the commit is rewritten, with every later link, head and checkpoint
    forge(world.root / ".lopen" / "store.sqlite", world.journal.stream, 3, b"Sign tokens", b"Sign nothing")
    with pytest.raises(WitnessFailed) as caught:
        integrity.verify(Project(world.root), full=True)  # the chain alone holds: only git can tell
    assert caught.value.sha == commit.sha
    assert f"the history before commit {commit.sha[:12]} is not the one the commit witnessed" in caught.value.what
    version = commit.chain.split()[0]
    assert f"version {version} of {world.journal.stream}" in caught.value.why and caught.value.how


def test_a_recorded_commit_gone_from_git_is_named(world, module):
    core, core_wt = lane(world, "core")
    build(world, core, core_wt, "core/1", {"core.py": "C = 1\n"})
    (commit,) = world.events(ev.CommitRecorded)
    objects = Path(git(world.root, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "objects"
    (objects / commit.sha[:2] / commit.sha[2:]).unlink()
    with pytest.raises(WitnessFailed, match=f"commit {commit.sha[:12]} named by event #\\d+ of .* is not in"):
        integrity.verify(Project(world.root))


def raw(tree: str, message: str) -> bytes:
    return f"tree {tree}\nauthor A <a@x> 0 +0000\ncommitter A <a@x> 0 +0000\n\n{message}".encode()


def test_commits_before_the_trailer_are_not_witnessed_and_a_dropped_or_changed_trailer_fails() -> None:
    head = "7 " + "ab" * 32
    fact = Fact(9, "module:p/auth", 8, "CommitRecorded", "c1", "t1", head)

    def at(stream: str, version: int) -> str | None:
        return "ab" * 32 if version == 7 else None

    old = check(
        [Fact(9, "module:p/auth", 8, "CommitRecorded", "c0", "t1", "")],
        {"c0": Commit("c0", raw("t1", "x\n"))},
        at,
        "git",
    )
    assert (old.witnessed, old.unwitnessed) == (0, ["c0"])
    good = check([fact], {"c1": Commit("c1", raw("t1", f"feat: x\n\nLopen-Chain: {head}\n"))}, at, "git")
    assert (good.witnessed, good.unwitnessed) == (1, [])
    with pytest.raises(WitnessFailed, match="has no Lopen-Chain trailer"):
        check([fact], {"c1": Commit("c1", raw("t1", "feat: x\n"))}, at, "git")
    with pytest.raises(WitnessFailed, match="trailer does not match event #9"):
        check([fact], {"c1": Commit("c1", raw("t1", f"feat: x\n\nLopen-Chain: 6 {'ab' * 32}\n"))}, at, "git")
