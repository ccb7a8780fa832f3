"""Projections: sessions, tokens and the plan (whose row is the one fold), ``plan.md``, queries per
project, problems reported with their seq instead of failing, following the bus, incremental vs
rebuilt, concurrent updaters.

``ProjectionsContract`` runs on SQLite and on the real PostgreSQL server (backends from
tests/test_events_store.py); the rest runs on SQLite. The random-history property is in
tests/test_fold_property.py.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import date
from pathlib import Path

import msgspec
import pytest
from test_events_chain import _sql
from test_events_store import (
    AUTH,
    PROJECT,
    BackendFixtures,
    Connect,
    PostgresBackend,
    SQLiteBackend,
)

from events import catalogue as ev
from events.errors import NewerSchemaVersion, StoreWriteError
from events.journal import Journal
from events.projections import PROJECTIONS, Projections
from events.projections.base import Projection, Skip
from events.projections.plan import plan_path
from events.recorded import Recorded, module_stream
from events.selection import session_records
from events.store import EventStore
from lopen.app.views.report import session_report, to_markdown

DAY = date(2026, 11, 26)


def plan_events(component: str = "tokens", n: int = 2) -> list[ev.Event]:
    return [
        ev.ComponentsRecorded(
            components=(ev.ComponentSpec(name=component), ev.ComponentSpec(name="cli", status="done"))
        ),
        ev.TasksRecorded(
            component=component,
            tasks=tuple(
                ev.TaskSpec(id=f"{component}/{i}", name=f"Task {i}", subtasks=(f"step {i}a", f"step {i}b"))
                for i in range(1, n + 1)
            ),
        ),
    ]


def move(task: str, *states: str) -> list[ev.Event]:
    return [
        ev.TaskStatusChanged(task_id=task, from_state=a, to_state=b, tree="t" if b == "complete" else "")
        for a, b in itertools.pairwise(states)
    ]


def session(store: EventStore, module: str = "auth", *events: ev.Event, resumed_from: str = "") -> str:
    """A new session of ``module`` recorded through a journal (as a run records it); its id."""
    journal = Journal(store, PROJECT, module)
    sid = journal.open_session(ev.SessionStarted(resumed_from=resumed_from, lopen_version="0.1"), DAY)
    if events:
        journal.record(*events)
    return sid


def record(store: EventStore, sid: str, *events: ev.Event, module: str = "auth") -> None:
    Journal(store, PROJECT, module, sid).record(*events)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    s = EventStore.open(tmp_path)
    s.projections.for_project(PROJECT)
    yield s
    s.close()


# -- each read model ---------------------------------------------------------------------------------------


def test_session_state_follows_the_lifecycle(store: EventStore) -> None:
    sid = session(store, "auth", ev.StepEntered(phase="planning", step=2), ev.SessionPaused(reason="budget"))
    views = store.projections
    views.catch_up()
    s = views.sessions.get(sid)
    assert s is not None
    assert (s.module, s.project, s.phase, s.step, s.status, s.reason) == (
        "auth",
        PROJECT,
        "planning",
        2,
        "paused",
        "budget",
    )
    record(
        store,
        sid,
        ev.SessionResumed(),
        *plan_events(),
        ev.ComponentSelected(component="tokens"),
        *move("tokens/1", "pending", "in-progress"),
    )
    views.catch_up()
    s = views.sessions.get(sid)
    assert s is not None and (s.status, s.component, s.task) == ("running", "tokens", "tokens/1")
    record(store, sid, *move("tokens/1", "in-progress", "complete"), ev.SessionCompleted())
    views.catch_up()
    s = views.sessions.get(sid)
    assert s is not None and (s.status, s.task) == ("completed", "") and s.ended_at > 0
    other = session(store, "auth", ev.SessionFailed(reason="auth expired", error_kind="auth"))
    views.catch_up()
    failed = views.sessions.get(other)
    assert failed is not None and failed.error_kind == "auth"
    latest = views.sessions.latest()
    assert latest is not None and latest.id == other and views.sessions.latest("billing") is None
    record(store, other, ev.SessionDeleted())
    views.catch_up()
    assert [s.id for s in views.sessions.all()] == [sid]
    latest = views.sessions.latest()
    assert latest is not None and latest.id == sid
    assert len(views.sessions.all(include_deleted=True)) == 2
    assert views.sessions.get(sid, project="another") is None


def test_token_totals_per_invocation_session_and_module(store: EventStore) -> None:
    def invocation(name: str, *usage: tuple[int, int, float], kind: str = "task") -> list[ev.Event]:
        return [
            ev.InvocationStarted(invocation_id=name, kind=kind),
            *(
                ev.TokensUsed(invocation_id=name, input=i, output=o, cache_read=10, premium=p, call_id=f"{name}{n}")
                for n, (i, o, p) in enumerate(usage)
            ),
            ev.ContextWindowMeasured(invocation_id=name, used=5000, limit=200000),
            ev.InvocationFinished(invocation_id=name),
        ]

    first = session(
        store,
        "auth",
        *invocation("a", (100, 10, 1.0), (50, 5, 0.0)),
        ev.TokensUsed(invocation_id="a", input=3, output=2, agent_id="sub-1", call_id="a-sub"),  # a sub-agent's call
        *invocation("o", (40, 4, 0.0), kind="oracle"),
        *invocation("b", (7, 1, 0.33)),
    )
    second = session(store, "auth", *invocation("c", (1000, 100, 1.0)), resumed_from=first)
    session(store, "billing", *invocation("d", (1, 1, 1.0)))
    views = store.projections
    views.catch_up()
    a = views.tokens.invocation("a")
    assert a is not None
    assert (a.input, a.output, a.cache_read, a.premium, a.invocations, a.calls, a.total) == (
        153,
        17,
        20,
        1.0,
        1,
        3,
        170,
    )
    assert (a.context_used, a.context_limit) == (5000, 200000)
    oracle = views.tokens.invocation("o")
    assert oracle is not None and (oracle.invocations, oracle.oracle_invocations, oracle.input) == (0, 1, 40)
    s1 = views.tokens.session(first)
    assert s1 is not None
    assert (s1.input, s1.output, s1.premium, s1.invocations, s1.oracle_invocations, s1.calls) == (
        200,
        22,
        1.33,
        2,
        1,
        5,
    )
    m = views.tokens.module("auth")  # survives resume: both sessions of the module add up exactly
    assert m is not None and (m.input, m.output, m.premium, m.invocations, m.calls) == (1200, 122, 2.33, 3, 6)
    s2 = views.tokens.session(second)
    assert s2 is not None and s2.input == 1000
    billing = views.tokens.module("billing")
    assert billing is not None and billing.invocations == 1
    assert views.tokens.module("nothing") is None and views.tokens.module("auth", project="another") is None


def test_plan_tree_states_and_plan_md(store: EventStore, tmp_path: Path) -> None:
    sid = session(
        store,
        "auth",
        ev.DependenciesRecorded(dependencies=(ev.Dependency(name="pyjwt", kind="library", reason="signing"),)),
        *plan_events(n=3),
        ev.ComponentSelected(component="tokens"),
        *move("tokens/1", "pending", "in-progress", "complete"),
        *move("tokens/2", "pending", "in-progress"),
    )
    views = store.projections
    views.catch_up()
    plan = views.plan.get("auth")
    assert plan is not None and list(plan.components) == ["tokens", "cli"]  # in plan order
    assert [t.state for t in plan.component_tasks("tokens")] == ["complete", "in-progress", "pending"]
    assert (plan.component_state("tokens"), plan.component_state("cli"), plan.state, plan.selected) == (
        "in-progress",
        "complete",
        "in progress",
        "tokens",
    )
    text = plan_path(tmp_path, "auth").read_text()
    assert text == views.plan.markdown("auth")
    assert "- [ ] **tokens** `tokens` — in-progress (selected)" in text
    assert "  - [x] `tokens/1` Task 1" in text and "    - [x] step 1a" in text
    assert "  - [ ] `tokens/2` Task 2 — in-progress" in text
    assert "- [x] **cli** `cli` — complete" in text and "- pyjwt (library): signing" in text
    assert "State: in progress — 1 of 3 tasks complete" in text
    assert text.index("**tokens**") < text.index("**cli**")
    # re-recording the tasks keeps the states of the tasks that stay
    record(store, sid, plan_events(n=4)[1], *move("tokens/2", "in-progress", "failed"))
    views.catch_up()
    plan = views.plan.get("auth")
    assert plan is not None
    assert [t.state for t in plan.component_tasks("tokens")] == ["complete", "failed", "pending", "pending"]
    assert plan.component_state("tokens") == "failed"
    record(store, sid, ev.TaskReopened(task_id="tokens/1", reason="commit gone"))
    views.catch_up()
    plan = views.plan.get("auth")
    assert plan is not None and plan.tasks["tokens/1"].state == "pending"
    assert "  - [ ] `tokens/1` Task 1" in plan_path(tmp_path, "auth").read_text()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (ev.TaskStatusChanged(task_id="tokens/1", from_state="pending", to_state="complete"), "not a valid transition"),
        (ev.TaskStatusChanged(task_id="tokens/1", from_state="in-progress", to_state="complete"), "is 'pending'"),
        (ev.TaskStatusChanged(task_id="tokens/9", from_state="pending", to_state="in-progress"), "not in the plan"),
    ],
)
def test_an_event_the_fold_cannot_apply_is_skipped_and_reported_with_its_seq(
    store: EventStore, bad: ev.Event, message: str
) -> None:
    """Stored by hand or by an older Lopen (the journal would refuse it): the projections go on."""
    sid = session(store, "auth", *plan_events())
    store.append(
        AUTH,
        [
            ev.StepEntered(phase="building", step=6, session_id=sid),
            msgspec.structs.replace(bad, session_id=sid),
            ev.StepEntered(phase="x", step=7, session_id=sid),
        ],
    )
    bad_seq = store.last_seq() - 1
    views = store.projections
    assert views.catch_up() == store.last_seq()
    plan = views.plan.get("auth")
    assert plan is not None and len(plan.problems) == 1
    assert plan.problems[0].startswith(f"event #{bad_seq} TaskStatusChanged skipped: ") and message in plan.problems[0]
    s = views.sessions.get(sid)
    assert s is not None and s.step == 7  # the events after it are applied
    assert [t.state for t in plan.ordered_tasks()] == ["pending", "pending"]  # and it is not
    assert views.catch_up() == 0
    result = views.rebuild()
    assert result["problems"] == plan.problems and result["events"] == store.last_seq()


@pytest.mark.parametrize("by", ["event", "run"])
def test_a_projection_handler_that_raises_is_reported_and_the_others_go_on(store: EventStore, by: str) -> None:
    """A bug in one projection's code makes it stale for that event, never stops a command — whether the
    projection takes its events one by one or a run at a time."""

    def broken(table: object, seq: int, event: ev.Event) -> None:
        raise KeyError("boom")

    def broken_run(table: object, records: Sequence[Recorded], skip: Skip) -> None:
        for rec in records:
            try:
                if isinstance(rec.event, ev.StepEntered):
                    broken(table, rec.seq, rec.event)
            except Exception as exc:
                skip(rec.seq, rec.event, exc)

    row = PROJECTIONS[0].row
    extra = (
        Projection(name="broken", row=row, handlers={ev.StepEntered: broken})
        if by == "event"
        else Projection(name="broken", row=row, run=broken_run)
    )
    views = Projections(store, (*PROJECTIONS, extra), project=PROJECT)
    sid = session(store, "auth", ev.StepEntered(phase="planning", step=2), ev.ProgressReported(progress="x"))
    assert views.catch_up() == 3
    seq = next(r.seq for r in store.read_all() if isinstance(r.event, ev.StepEntered))
    assert views.problems == [f"projection 'broken' skipped event #{seq} (StepEntered): KeyError: 'boom'"]
    s = views.sessions.get(sid)
    assert s is not None and s.step == 2
    result = views.rebuild()
    assert result["problems"] == views.problems[-1:] and result["rows"]["sessions"] == 1


def test_the_resume_point_comes_from_the_module_history(store: EventStore) -> None:
    """Where a session would resume (phase, step, component, task, last good commit), for the session that
    paused and for the next one: a session is a view of its module's history."""
    first = session(
        store,
        "auth",
        ev.BranchEnsured(branch="lopen/auth", base="base0"),
        *plan_events(),
        ev.StepEntered(phase="building", step=6),
        ev.ComponentSelected(component="tokens"),
        *move("tokens/1", "pending", "in-progress", "complete"),
        ev.CommitRecorded(sha="aaa111", task_id="tokens/1", tree="t"),
        *move("tokens/2", "pending", "in-progress", "failed"),
        ev.SessionPaused(reason="churn"),
    )
    views = store.projections
    views.catch_up()
    report = session_report(views, first)
    assert report is not None
    assert (report["phase"], report["step"], report["status"]) == ("building", 6, "paused")
    assert report["resume"] == {"step": 6, "component": "tokens", "task": "tokens/2", "last_good_commit": "aaa111"}
    plan = views.plan.get("auth")
    assert plan is not None and plan.unfinished_session() == first
    second = session(store, "auth", ev.CommitRecorded(sha="bbb222", message="chore: no task"), resumed_from=first)
    views.catch_up()
    report = session_report(views, second)
    assert report is not None and report["resume"]["task"] == "tokens/2" and report["resume"]["component"] == "tokens"
    assert report["resume"]["last_good_commit"] == "bbb222"
    record(store, second, ev.Reverted(from_sha="bbb222", to_sha="aaa111"))
    views.catch_up()
    report = session_report(views, second)
    assert report is not None and report["resume"]["last_good_commit"] == "aaa111"
    old = session_report(views, first)  # the same module history, seen from the first session
    assert old is not None and old["resume"]["last_good_commit"] == "aaa111"
    assert [c["state"] for c in old["components"]] == ["failed", "complete"]


def test_module_progress(store: EventStore) -> None:
    store.append(AUTH, [ev.SpecApproved(spec_hash="h1")])
    views = store.projections
    views.catch_up()
    plan = views.plan.get("auth")
    assert plan is not None and plan.state == "not started"
    sid = session(store, "auth")
    views.catch_up()
    assert views.plan.get("auth").state == "in progress"  # type: ignore[union-attr]
    record(
        store,
        sid,
        *plan_events(n=1),
        *move("tokens/1", "pending", "in-progress", "complete"),
        ev.OracleVerdictRecorded(scope="component", target="tokens", passed=True),
        ev.SessionCompleted(),
    )
    views.catch_up()
    assert views.plan.get("auth").state == "in progress"  # type: ignore[union-attr]  # not verified as a module yet
    record(store, sid, ev.OracleVerdictRecorded(scope="module", target="auth", passed=True))
    views.catch_up()
    assert views.plan.get("auth").state == "complete"  # type: ignore[union-attr]
    store.append(AUTH, [ev.SpecDriftDetected(changed_sections=("Overview",), reentry_step=2)])
    views.catch_up()
    progress = views.plan.get("auth")
    assert progress is not None and (progress.state, progress.replan_from, progress.last_session()) == (
        "in progress",
        2,
        sid,
    )
    assert [m.module for m in views.plan.all()] == ["auth"]


def test_follow_keeps_projections_and_plan_md_current(store: EventStore, tmp_path: Path) -> None:
    views = store.projections
    views.follow()
    sid = session(store, "auth", *plan_events())
    s = views.sessions.get(sid)
    assert s is not None and s.status == "running"  # no catch_up() needed
    assert "`tokens/1` Task 1" in plan_path(tmp_path, "auth").read_text()
    record(store, sid, *move("tokens/1", "pending", "in-progress"))
    assert "`tokens/1` Task 1 — in-progress" in plan_path(tmp_path, "auth").read_text()
    before = views.digest()
    views.rebuild()
    assert views.digest() == before


def test_queries_read_this_projects_rows_unless_told_otherwise(tmp_path: Path) -> None:
    with EventStore.open(tmp_path) as store:
        sid = session(store, "auth", *plan_events())
        Journal(store, "other", "auth").open_session(ev.SessionStarted(), DAY)
        views = store.projections  # no project chosen yet
        views.catch_up()
        assert views.sessions.all() == [] and views.sessions.get(sid) is None
        assert [s.project for s in views.sessions.all(every_project=True)] == [PROJECT, "other"]
        assert views.sessions.get(sid, project=PROJECT) is not None
        views.for_project(PROJECT)
        assert [s.id for s in views.sessions.all()] == [sid]
        assert [p.project for p in views.plan.all()] == [PROJECT]
        assert views.plan.get("auth", project="other") is not None


def test_a_failed_save_does_not_count_events_twice(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: the projections' write fails once (as on a full disk); the retry starts
    from what was saved, not from the half-applied state in memory."""
    sid = session(store, "auth")
    views = store.projections
    views.catch_up()
    record(store, sid, ev.InvocationStarted(invocation_id="a"), ev.TokensUsed(invocation_id="a", input=5))
    real_save = store.backend.views.save

    def failing_save(*args: object) -> None:
        monkeypatch.setattr(store.backend.views, "save", real_save)
        raise StoreWriteError("disk full")

    monkeypatch.setattr(store.backend.views, "save", failing_save)
    with pytest.raises(StoreWriteError):
        views.catch_up()
    views.catch_up()
    totals = views.tokens.session(sid)
    assert totals is not None and (totals.input, totals.invocations, totals.calls) == (5, 1, 1)


def test_a_rebuild_adds_the_money_as_it_was_kept_call_by_call(store: EventStore) -> None:
    """A rebuild adds an invocation's calls to its rows a run at a time; the premium requests and the money
    still round call by call (0.1 + 0.2 + 0.3 is not 0.1 + 0.5), so the rebuilt rows are the ones kept
    after every append, byte for byte."""
    views = store.projections
    views.follow()  # one call per append: the rows are kept call by call
    sid = session(store, "auth", ev.InvocationStarted(invocation_id="a"))
    for invocation, money in (("a", 0.1), ("b", 0.2), ("b", 0.3)):
        if invocation == "b" and money == 0.2:
            record(store, sid, ev.InvocationStarted(invocation_id="b"))
        record(store, sid, ev.TokensUsed(invocation_id=invocation, input=1, premium=money, cost=money, priced=True))
    kept = views.digest()
    totals = views.tokens.session(sid)
    assert totals is not None and (totals.premium, totals.cost, totals.calls) == (0.1 + 0.2 + 0.3,) * 2 + (3,)
    assert views.rebuild()["problems"] == []
    assert views.digest() == kept


def test_a_rebuild_of_rows_already_right_writes_nothing(store: EventStore, tmp_path: Path) -> None:
    """``lopen projections rebuild`` on a healthy store (its check, mostly) changes nothing in the database —
    neither a row nor a position — so it has nothing to commit to disk; a row edited by hand is written back."""
    sid = session(store, "auth", ev.StepEntered(phase="planning", step=2))
    views = store.projections
    views.rebuild()
    other = sqlite3.connect(tmp_path / ".lopen" / "store.sqlite")  # sees every commit of another connection
    before = other.execute("PRAGMA data_version").fetchone()
    assert views.rebuild()["problems"] == []
    assert other.execute("PRAGMA data_version").fetchone() == before
    sessions = next(s.tracking_name for s in PROJECTIONS if s.name == "sessions")
    store.backend.views.save([(sessions, f"{PROJECT}/{sid}", b'{"id":"x","module":"y"}')], [])
    changed = other.execute("PRAGMA data_version").fetchone()
    views.rebuild()
    assert other.execute("PRAGMA data_version").fetchone() != changed
    row = views.sessions.get(sid)
    assert row is not None and row.step == 2
    other.close()


# -- on every backend ------------------------------------------------------------------------------------------


class ProjectionsContract(BackendFixtures):
    def test_kept_incrementally_by_two_updaters_equals_a_rebuild(
        self, store: EventStore, connect: Connect, root: Path
    ) -> None:
        views = store.projections.for_project(PROJECT)
        views.follow()  # kept current after every append
        updater = connect()  # and a second updater (another process) catching up now and then
        updater.projections.for_project(PROJECT)
        sids = []
        for module in ("auth", "billing"):
            store.append(module_stream(PROJECT, module), [ev.SpecApproved(spec_hash=f"{module}-hash")])
            journal = Journal(store, PROJECT, module)
            sids.append(journal.open_session(ev.SessionStarted(lopen_version="0.1"), DAY))
            journal.record(*plan_events("core", 3), ev.ComponentSelected(component="core"))
            for i in range(1, 4):
                inv = f"inv-{len(sids)}-{i}"
                journal.record(
                    ev.StepEntered(phase="building", step=6),
                    *move(f"core/{i}", "pending", "in-progress"),
                    ev.InvocationStarted(invocation_id=inv, model="gpt-5", kind="task"),
                    ev.TokensUsed(invocation_id=inv, input=1000 + len(sids), output=100, cache_read=10, premium=1.0),
                    ev.ContextWindowMeasured(invocation_id=inv, used=5000, limit=200000),
                    ev.InvocationFinished(invocation_id=inv),
                    *move(f"core/{i}", "in-progress", "complete"),
                    ev.CommitRecorded(sha=f"{len(sids)}{i}".ljust(40, "0"), task_id=f"core/{i}", tree="t"),
                )
                updater.projections.catch_up()
        Journal(store, PROJECT, "auth", sids[0]).record(ev.SessionCompleted())
        billing = Journal(store, PROJECT, "billing")
        resumed = billing.open_session(ev.SessionStarted(resumed_from=sids[1]), DAY)
        billing.record(ev.SessionPaused(reason="budget"))
        assert views.catch_up() == 0  # follow() already applied everything
        updater.projections.catch_up()
        incremental = views.digest()
        assert updater.projections.digest() == incremental

        first = views.sessions.get(sids[0])
        paused = views.sessions.get(resumed)
        assert first is not None and first.status == "completed"
        assert paused is not None and (paused.status, paused.reason, paused.resumed_from) == (
            "paused",
            "budget",
            sids[1],
        )
        tokens = views.tokens.module("auth")
        assert tokens is not None and (tokens.input, tokens.output, tokens.premium, tokens.invocations) == (
            3003,
            300,
            3.0,
            3,
        )
        billing_plan = views.plan.get("billing")
        assert billing_plan is not None and [t.state for t in billing_plan.component_tasks("core")] == ["complete"] * 3
        assert billing_plan.tip == "2300000000000000000000000000000000000000"
        assert "`core/3` Task 3" in plan_path(root, "billing").read_text()

        result = views.rebuild()
        assert result["events"] == len(list(store.read_all())) and result["problems"] == []
        assert views.digest() == incremental  # byte-identical
        fresh = connect()  # another process starts from the saved rows
        assert fresh.projections.catch_up() == 0 and fresh.projections.digest() == incremental

    def test_a_stream_no_projection_reads_is_never_decoded(self, store: EventStore, url: str) -> None:
        """Issue 22, benchmarks: a catch-up and a rebuild pass over the events of the streams they do not
        project — the transcript's blobs, the meta streams — before decoding them. A blob written by a newer
        Lopen (a schema this one cannot read) therefore stops neither, and the rows are the same."""
        views = store.projections.for_project(PROJECT)
        journal = Journal(store, PROJECT, "auth")
        sid = journal.open_session(ev.SessionStarted(lopen_version="0.1"), DAY)
        assert views.catch_up() == 1
        key = store.keep_blob(PROJECT, "14 passed in 0.31s\n" * 200)
        journal.record(ev.ToolCalled(invocation_id="inv-1", tool="bash", result_blob=key))
        blob = f"blob:{PROJECT}:{key}"
        _sql(url, "UPDATE stored_events SET topic = ? WHERE originator_id = ?", ("BlobStored@99", blob))
        with pytest.raises(NewerSchemaVersion):
            list(store.read_all())  # what decoding every event would meet
        assert views.catch_up() == 2  # the blob and the event naming it read, the blob not decoded
        session = views.sessions.get(sid)
        assert session is not None and session.last_seq == 3 and not views.problems
        kept = views.digest()
        result = views.rebuild()
        assert result["events"] == 3 and not result["problems"]
        assert views.digest() == kept

    def test_a_rebuild_restores_rows_changed_or_added_by_hand(self, store: EventStore) -> None:
        """A rebuild writes only the rows that differ from the saved ones (a rebuild of rows already right
        writes none): an edited row is written back and a row no projection makes is removed."""
        views = store.projections.for_project(PROJECT)
        journal = Journal(store, PROJECT, "auth")
        journal.open_session(ev.SessionStarted(lopen_version="0.1"), DAY)
        journal.record(
            ev.InvocationStarted(invocation_id="inv-1", kind="task"), ev.TokensUsed(invocation_id="inv-1", input=1000)
        )
        views.rebuild()
        kept = views.saved()
        tokens = next(s.tracking_name for s in PROJECTIONS if s.name == "tokens")
        edited, value = next((k, v) for k, v in kept["tokens"].items() if k.startswith("module:"))
        store.backend.views.save([(tokens, edited, value.replace(b"1000", b"10")), (tokens, "module:x/y", b"{}")], [])
        assert views.saved() != kept
        views.rebuild()
        assert views.saved() == kept

    def test_two_updaters_in_parallel_agree(self, connect: Connect) -> None:
        """Two processes' projection updaters over one store never double-count."""
        a, b = connect(), connect()
        journal = Journal(a, PROJECT, "auth")
        sid = journal.open_session(ev.SessionStarted(), DAY)
        for i in range(30):
            journal.record(ev.InvocationStarted(invocation_id=f"i{i}"), ev.TokensUsed(invocation_id=f"i{i}", input=1))
            (a if i % 2 else b).projections.catch_up()
            if i % 3 == 0:
                a.projections.catch_up()
        b.projections.catch_up()
        totals = a.projections.tokens.session(sid, PROJECT)
        assert totals is not None and (totals.input, totals.invocations, totals.calls) == (30, 30, 30)
        digest = a.projections.digest()
        a.projections.rebuild()
        assert a.projections.digest() == digest == b.projections.digest()

    def test_a_store_holding_a_contradiction_keeps_every_query_working(self, store: EventStore) -> None:
        """Issue 15: one contradicting event made every command fail. Built from raw events (a task moved
        from 'pending' after it was 'complete'), it is skipped, reported with its seq, and nothing else is lost."""
        sid = session(store, "auth", *plan_events("core", 1), *move("core/1", "pending", "in-progress", "complete"))
        store.append(
            AUTH,
            [
                ev.TaskStatusChanged(task_id="core/1", from_state="pending", to_state="in-progress", session_id=sid),
                ev.InvocationStarted(invocation_id="i1", session_id=sid),
                ev.TokensUsed(invocation_id="i1", input=9, session_id=sid),
                ev.SessionPaused(reason="x", session_id=sid),
            ],
        )
        bad = store.last_seq() - 3
        views = store.projections.for_project(PROJECT)
        views.catch_up()
        problem = (
            f"event #{bad} TaskStatusChanged skipped: task core/1 is 'complete', but the event moves it from 'pending'"
        )
        plan = views.plan.get("auth")
        assert plan is not None and plan.problems == [problem] and plan.tasks["core/1"].state == "complete"
        s = views.sessions.get(sid)
        assert s is not None and s.status == "paused" and [x.id for x in views.sessions.all()] == [sid]
        assert views.sessions.latest("auth") is not None
        tokens = views.tokens.session(sid)
        assert tokens is not None and tokens.input == 9
        assert views.tokens.module("auth") is not None and views.tokens.invocation("i1") is not None
        assert [p.module for p in views.plan.all()] == ["auth"]
        assert "- [x] `core/1` Task 1" in views.plan.markdown("auth")
        report = session_report(views, sid)
        assert report is not None and report["problems"] == [problem]
        assert f"- {problem}" in to_markdown(report, plan)
        assert len(list(session_records(store, PROJECT, sid))) == store.last_seq()
        result = views.rebuild()
        assert result["problems"] == [problem] and result["events"] == store.last_seq()


class TestSQLiteProjections(SQLiteBackend, ProjectionsContract):
    pass


class TestPostgresProjections(PostgresBackend, ProjectionsContract):
    pass
