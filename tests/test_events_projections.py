"""Projections: each read model on its own, plan.md, errors with seq numbers, incremental vs
rebuilt (including a hypothesis property test), following the bus, and concurrent updaters."""

from __future__ import annotations

import itertools
import tempfile
from datetime import date
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import catalogue as ev
from events.errors import ProjectionError
from events.projections import Projections
from events.projections.plan import aggregate, plan_path
from events.recorded import module_stream, session_stream
from events.store import EventStore

DAY = date(2026, 11, 26)


@pytest.fixture
def store(tmp_path: Path):
    s = EventStore.open(tmp_path)
    yield s
    s.close()


def session(store: EventStore, module: str = "auth", *events: ev.Event, resumed_from: str = "") -> str:
    sid = store.new_session_id(module, DAY, ev.SessionStarted(resumed_from=resumed_from, lopen_version="0.1"))
    if events:
        store.append(session_stream(sid), list(events))
    return sid


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
    return [ev.TaskStatusChanged(task_id=task, from_state=a, to_state=b) for a, b in itertools.pairwise(states)]


def test_session_state_follows_the_lifecycle(store: EventStore) -> None:
    sid = session(store, "auth", ev.StepEntered(phase="planning", step=2), ev.SessionPaused(reason="budget"))
    views = store.projections
    views.catch_up()
    s = views.sessions.get(sid)
    assert (s.module, s.phase, s.step, s.status, s.reason) == ("auth", "planning", 2, "paused", "budget")
    store.append(
        session_stream(sid),
        [
            ev.SessionResumed(),
            *plan_events(),
            ev.ComponentSelected(component="tokens"),
            *move("tokens/1", "pending", "in-progress"),
        ],
    )
    views.catch_up()
    s = views.sessions.get(sid)
    assert (s.status, s.component, s.task) == ("running", "tokens", "tokens/1")
    store.append(session_stream(sid), [*move("tokens/1", "in-progress", "complete"), ev.SessionCompleted()])
    views.catch_up()
    s = views.sessions.get(sid)
    assert (s.status, s.task) == ("completed", "") and s.ended_at > 0
    other = session(store, "auth", ev.SessionFailed(reason="auth expired", error_kind="auth"))
    views.catch_up()
    assert views.sessions.get(other).error_kind == "auth"
    assert views.sessions.latest().id == other and views.sessions.latest("billing") is None
    store.append(session_stream(other), [ev.SessionDeleted()])
    views.catch_up()
    assert [s.id for s in views.sessions.all()] == [sid]
    assert views.sessions.latest().id == sid
    assert len(views.sessions.all(include_deleted=True)) == 2


def test_token_totals_per_invocation_session_and_module(store: EventStore) -> None:
    def invocation(name: str, *usage: tuple[int, int, float]) -> list[ev.Event]:
        return [
            ev.InvocationStarted(invocation_id=name),
            *(ev.TokensUsed(invocation_id=name, input=i, output=o, cache_read=10, premium=p) for i, o, p in usage),
            ev.ContextWindowMeasured(invocation_id=name, used=5000, limit=200000),
            ev.InvocationFinished(invocation_id=name),
        ]

    first = session(store, "auth", *invocation("a", (100, 10, 1.0), (50, 5, 0.0)), *invocation("b", (7, 1, 0.33)))
    second = session(store, "auth", *invocation("c", (1000, 100, 1.0)), resumed_from=first)
    session(store, "billing", *invocation("d", (1, 1, 1.0)))
    views = store.projections
    views.catch_up()
    a = views.tokens.invocation("a")
    assert (a.input, a.output, a.cache_read, a.premium, a.invocations, a.total) == (150, 15, 20, 1.0, 1, 165)
    assert (a.context_used, a.context_limit) == (5000, 200000)
    s1 = views.tokens.session(first)
    assert (s1.input, s1.output, s1.premium, s1.invocations) == (157, 16, 1.33, 2)
    m = views.tokens.module("auth")  # survives resume: both sessions of the module add up exactly
    assert (m.input, m.output, m.premium, m.invocations) == (1157, 116, 2.33, 3)
    assert views.tokens.session(second).input == 1000
    assert views.tokens.module("billing").invocations == 1
    assert views.tokens.module("nothing") is None


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
    tokens, cli = plan.components
    assert [t.state for t in tokens.tasks] == ["complete", "in-progress", "pending"]
    assert (tokens.state, cli.state, plan.state, plan.selected) == ("in-progress", "complete", "in-progress", "tokens")
    text = plan_path(tmp_path, "auth").read_text()
    assert text == views.plan.markdown("auth")
    assert "- [ ] **tokens** — in-progress (selected)" in text
    assert "  - [x] `tokens/1` Task 1" in text and "    - [x] step 1a" in text
    assert "  - [ ] `tokens/2` Task 2 — in-progress" in text
    assert "- [x] **cli** — complete" in text and "- pyjwt (library): signing" in text
    assert "State: in-progress — 1 of 3 tasks complete" in text
    # re-recording the tasks keeps the states of the tasks that stay
    store.append(session_stream(sid), [plan_events(n=4)[1], *move("tokens/2", "in-progress", "failed")])
    views.catch_up()
    tasks = views.plan.get("auth").components[0].tasks
    assert [t.state for t in tasks] == ["complete", "failed", "pending", "pending"]
    assert views.plan.get("auth").components[0].state == "failed"
    store.append(session_stream(sid), [ev.TaskReopened(task_id="tokens/1", reason="commit gone")])
    views.catch_up()
    assert views.plan.get("auth").components[0].tasks[0].state == "pending"


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([], "pending"),
        (["pending", "pending"], "pending"),
        (["complete", "complete"], "complete"),
        (["complete", "failed", "in-progress"], "failed"),
        (["complete", "pending"], "in-progress"),
        (["in-progress"], "in-progress"),
    ],
)
def test_parent_state_aggregation(states: list[str], expected: str) -> None:
    assert aggregate(states) == expected


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (ev.TaskStatusChanged(task_id="tokens/1", from_state="pending", to_state="complete"), "not a valid transition"),
        (ev.TaskStatusChanged(task_id="tokens/1", from_state="in-progress", to_state="complete"), "is 'pending'"),
        (ev.TaskStatusChanged(task_id="tokens/9", from_state="pending", to_state="in-progress"), "not in the plan"),
    ],
)
def test_an_event_a_projection_cannot_apply_is_reported_with_its_seq(
    store: EventStore, bad: ev.Event, message: str
) -> None:
    sid = session(store, "auth", *plan_events())
    store.append(
        session_stream(sid), [ev.StepEntered(phase="building", step=6), bad, ev.StepEntered(phase="x", step=7)]
    )
    bad_seq = store.last_seq() - 1
    views = store.projections
    with pytest.raises(ProjectionError) as caught:
        views.catch_up()
    assert caught.value.seq == bad_seq and caught.value.projection == "plan"
    assert message in caught.value.what and f"#{bad_seq}" in caught.value.what
    # the events before it are applied and saved; it is not skipped
    assert views.sessions.get(sid).step == 6
    with pytest.raises(ProjectionError):
        views.catch_up()
    with pytest.raises(ProjectionError):
        views.rebuild()


def test_resume_points(store: EventStore) -> None:
    first = session(
        store,
        "auth",
        *plan_events(),
        ev.StepEntered(phase="building", step=6),
        ev.ComponentSelected(component="tokens"),
        *move("tokens/1", "pending", "in-progress", "complete"),
        ev.CommitRecorded(sha="aaa111", task_id="tokens/1"),
        ev.CommitRecorded(sha="bbb222", message="chore: no task"),
        *move("tokens/2", "pending", "in-progress", "failed"),
        ev.SessionPaused(reason="churn"),
    )
    views = store.projections
    views.catch_up()
    point = views.resume.get(first)
    assert (point.phase, point.step, point.component, point.task, point.last_good_commit) == (
        "building",
        6,
        "tokens",
        "tokens/2",
        "aaa111",
    )
    second = session(store, "auth", resumed_from=first)
    views.catch_up()
    inherited = views.resume.get(second)
    assert (inherited.session_id, inherited.step, inherited.task, inherited.last_good_commit) == (
        second,
        6,
        "tokens/2",
        "aaa111",
    )
    store.append(session_stream(second), [ev.Reverted(from_sha="ccc", to_sha="999fff")])
    views.catch_up()
    assert views.resume.get(second).last_good_commit == "999fff"
    assert views.resume.get(first).last_good_commit == "aaa111"


def test_module_progress(store: EventStore) -> None:
    store.append(module_stream("auth"), [ev.SpecApproved(spec_hash="h1")])
    views = store.projections
    views.catch_up()
    assert views.modules.get("auth").status == "not started"
    sid = session(store, "auth")
    views.catch_up()
    assert views.modules.get("auth").status == "in progress"
    store.append(session_stream(sid), [ev.SessionCompleted()])
    views.catch_up()
    assert views.modules.get("auth").status == "complete"
    store.append(module_stream("auth"), [ev.SpecDriftDetected(changed_sections=("Overview",), reentry_step=2)])
    views.catch_up()
    progress = views.modules.get("auth")
    assert (progress.status, progress.sessions, progress.last_session) == ("in progress", 1, sid)
    assert [m.module for m in views.modules.all()] == ["auth"]


def test_follow_keeps_projections_and_plan_md_current(store: EventStore, tmp_path: Path) -> None:
    views = store.projections
    views.follow()
    sid = session(store, "auth", *plan_events())
    assert views.sessions.get(sid).status == "running"  # no catch_up() needed
    assert "`tokens/1` Task 1" in plan_path(tmp_path, "auth").read_text()
    store.append(session_stream(sid), move("tokens/1", "pending", "in-progress"))
    assert "`tokens/1` Task 1 — in-progress" in plan_path(tmp_path, "auth").read_text()
    before = views.digest()
    views.rebuild()
    assert views.digest() == before


def test_two_updaters_in_parallel_agree(tmp_path: Path) -> None:
    """Two processes' projection updaters over one store (here two store objects) never double-count."""
    a, b = EventStore.open(tmp_path), EventStore.open(tmp_path)
    sid = session(a, "auth")
    for i in range(30):
        a.append(session_stream(sid), [ev.InvocationStarted(invocation_id=f"i{i}"), ev.TokensUsed(input=1, output=1)])
        (a if i % 2 else b).projections.catch_up()
        if i % 3 == 0:
            a.projections.catch_up()
    b.projections.catch_up()
    assert a.projections.tokens.session(sid).input == 30
    assert a.projections.tokens.session(sid).invocations == 30
    digest = a.projections.digest()
    a.projections.rebuild()
    assert a.projections.digest() == digest
    a.close()
    b.close()


# -- the property: random valid histories give the same projections incrementally and rebuilt ----------


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, list[ev.Event]]]:
    """Batches of (stream, events) that respect W5 and the session lifecycle."""
    out: list[tuple[str, list[ev.Event]]] = []
    tasks: dict[str, dict[str, str]] = {}  # module -> task -> state
    sessions: list[tuple[str, str]] = []
    counter = 0
    for _ in range(draw(st.integers(1, 25))):
        module = draw(st.sampled_from(["auth", "billing"]))
        if not sessions or draw(st.integers(0, 5)) == 0:
            counter += 1
            sid = f"{module}-20261126-{counter}"
            resumed = draw(st.sampled_from(["", *[s for s, _ in sessions]]))
            resumed = resumed if resumed.startswith(module) else ""
            out.append((session_stream(sid), [ev.SessionStarted(resumed_from=resumed)]))
            sessions.append((sid, module))
        sid, module = draw(st.sampled_from(sessions))
        states = tasks.setdefault(module, {})
        batch: list[ev.Event] = []
        for _ in range(draw(st.integers(1, 6))):
            kind = draw(st.integers(0, 9))
            if kind == 0:
                comp = draw(st.sampled_from(["tokens", "cli"]))
                n = draw(st.integers(0, 3))
                both = (ev.ComponentSpec(name="tokens", status="partial"), ev.ComponentSpec(name="cli"))
                batch.append(ev.ComponentsRecorded(components=both))
                batch.append(
                    ev.TasksRecorded(
                        component=comp,
                        tasks=tuple(ev.TaskSpec(id=f"{comp}/{i}", name=f"t{i}", subtasks=("s",)) for i in range(n)),
                    )
                )
                for task in [t for t in states if t.startswith(f"{comp}/")]:
                    if int(task.split("/")[1]) >= n:
                        del states[task]
                for i in range(n):
                    states.setdefault(f"{comp}/{i}", "pending")
            elif kind in (1, 2) and states:
                task = draw(st.sampled_from(sorted(states)))
                options = sorted(b for a, b in ev.TASK_TRANSITIONS if a == states[task])
                if options:
                    to = draw(st.sampled_from(options))
                    batch.append(ev.TaskStatusChanged(task_id=task, from_state=states[task], to_state=to))
                    states[task] = to
                else:
                    batch.append(ev.TaskReopened(task_id=task))
                    states[task] = "pending"
            elif kind == 3:
                inv = f"inv{draw(st.integers(0, 4))}"
                batch.append(ev.InvocationStarted(invocation_id=inv))
                batch.append(
                    ev.TokensUsed(
                        invocation_id=inv,
                        input=draw(st.integers(0, 10**6)),
                        output=draw(st.integers(0, 10**4)),
                        premium=draw(st.sampled_from([0.0, 0.33, 1.0])),
                    )
                )
            elif kind == 4:
                batch.append(
                    ev.StepEntered(phase=draw(st.sampled_from(["planning", "building"])), step=draw(st.integers(1, 7)))
                )
            elif kind == 5:
                batch.append(ev.ComponentSelected(component=draw(st.sampled_from(["tokens", "cli"]))))
            elif kind == 6:
                batch.append(
                    ev.CommitRecorded(
                        sha=f"{draw(st.integers(0, 999)):040x}", task_id=draw(st.sampled_from(["", "tokens/0"]))
                    )
                )
            elif kind == 7:
                batch.append(
                    draw(
                        st.sampled_from(
                            [ev.SessionPaused(), ev.SessionResumed(), ev.SessionCompleted(), ev.SessionFailed()]
                        )
                    )
                )
            elif kind == 8:
                batch.append(ev.ContextWindowMeasured(invocation_id="inv0", used=draw(st.integers(0, 9)), limit=10))
            else:
                batch.append(ev.ProgressReported(progress="working"))
        stream = session_stream(sid) if draw(st.booleans()) else module_stream(module)
        if stream.startswith("module:"):
            batch = [
                e
                for e in batch
                if not isinstance(e, (ev.SessionPaused, ev.SessionResumed, ev.SessionCompleted, ev.SessionFailed))
            ]
            batch = [ev.SpecDriftDetected(), *batch]
        out.append((stream, batch))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history=histories(), catch_up_every=st.integers(1, 4), follow=st.booleans())
def test_incremental_projections_equal_a_rebuild(
    history: list[tuple[str, list[ev.Event]]], catch_up_every: int, follow: bool
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        store = EventStore.open(root)
        views = Projections(store)
        if follow:
            views.follow()
        for i, (stream, batch) in enumerate(history):
            store.append(stream, batch)
            if not follow and i % catch_up_every == 0:
                views.catch_up()
        views.catch_up()
        incremental = views.digest()
        plans = {p: p.read_bytes() for p in sorted((root / ".lopen" / "modules").glob("*/plan.md"))}
        result = views.rebuild()
        assert result["events"] == store.last_seq()
        assert views.digest() == incremental
        assert {p: p.read_bytes() for p in plans} == plans
        other = EventStore.open(root)  # another process, starting from the saved rows
        assert other.projections.catch_up() == 0 and other.projections.digest() == incremental
        other.close()
        store.close()


def test_a_failed_save_does_not_count_events_twice(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: the projections' write fails once (as on a full disk); the retry starts
    from what was saved, not from the half-applied state in memory."""
    from events.errors import StoreWriteError

    sid = session(store, "auth")
    views = store.projections
    views.catch_up()
    store.append(session_stream(sid), [ev.InvocationStarted(invocation_id="a"), ev.TokensUsed(input=5)])
    real_save = store.backend.views.save

    def failing_save(*args: object) -> None:
        monkeypatch.setattr(store.backend.views, "save", real_save)
        raise StoreWriteError("disk full")

    monkeypatch.setattr(store.backend.views, "save", failing_save)
    with pytest.raises(StoreWriteError):
        views.catch_up()
    views.catch_up()
    assert views.tokens.session(sid).input == 5 and views.tokens.session(sid).invocations == 1
