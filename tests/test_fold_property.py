"""The property behind S5 and S8, on random histories (hypothesis), against a real SQLite store.

Two journals (two workers, each with its own store connection) record random sequences of plan
events — components with ``depends_on`` (cycles too), selections, tasks, status changes valid and
invalid, verdicts, reopenings, scopes, commits, approvals, drift, re-planning, sessions and usage.
Then:

- an event the fold rejects is never stored: every refusal is a batch that really contradicts the
  stored history (an independent fold says so), every acceptance is stored whole, and the stored
  history folds without a single problem;
- the plan projection kept incrementally (following the bus, or caught up now and then) equals a
  ``rebuild()`` byte for byte, equals each journal's own fold, and ``plan.md`` is its rendering;
- the token totals are the sums of the stored per-call usage.
"""

from __future__ import annotations

import tempfile
from datetime import date
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import event as statistic
from hypothesis import strategies as st

from events import catalogue as ev
from events.fold import ModuleState, render_plan, slugify
from events.journal import Contradiction, Journal
from events.projections.plan import plan_path
from events.recorded import module_stream
from events.store import EventStore

PROJECT, MODULE = "proj", "auth"
STREAM = module_stream(PROJECT, MODULE)
DAY = date(2026, 11, 26)
NAMES = ["Token Issuer", "Store", "CLI", "Audit Log"]
SPELLINGS = [*NAMES, "token issuer", "TOKEN-ISSUER", "nope"]
HASHES = [{"Overview": "h1", "Password Hashing": "h2"}, {"Overview": "h1", "Password Hashing": "h3"}]
_ENCODE = msgspec.json.Encoder(order="deterministic").encode


def draw_batch(draw: st.DrawFn, state: ModuleState) -> list[ev.Event]:
    """One batch (mostly one event) shaped by the current state, so that many are valid and many are not."""
    tasks = sorted(state.tasks)
    slugs = sorted(state.components)
    kind = draw(st.integers(0, 17), label="kind")
    if kind == 0:
        names = draw(st.lists(st.sampled_from([*NAMES, "token issuer"]), min_size=1, max_size=4, unique=True))
        specs = tuple(
            ev.ComponentSpec(
                name=name,
                status=draw(st.sampled_from(["missing", "missing", "partial", "done"])),
                depends_on=tuple(draw(st.lists(st.sampled_from([*names, "pyjwt"]), max_size=2, unique=True))),
            )
            for name in names
        )
        return [ev.ComponentsRecorded(components=specs)]
    if kind == 1:
        return [ev.ComponentSelected(component=draw(st.sampled_from(SPELLINGS)))]
    if kind == 2:
        name = draw(st.sampled_from(SPELLINGS))
        prefix = slugify(name) if draw(st.integers(0, 9)) else "other"
        numbers = draw(st.lists(st.integers(1, 4), max_size=3, unique=True))
        return [
            ev.TasksRecorded(component=name, tasks=tuple(ev.TaskSpec(id=f"{prefix}/{n}", name="t") for n in numbers))
        ]
    if kind in (3, 4, 5, 6):
        task = draw(st.sampled_from([*tasks, "store/9"]))
        current = state.tasks[task].state if task in state.tasks else "pending"
        from_state = current if draw(st.integers(0, 4)) else draw(st.sampled_from(ev.TASK_STATES))
        options = [b for a, b in sorted(ev.TASK_TRANSITIONS) if a == from_state]
        to_state = (
            draw(st.sampled_from(options))
            if options and draw(st.integers(0, 4))
            else draw(st.sampled_from(ev.TASK_STATES))
        )
        tree = f"tree{draw(st.integers(0, 3))}" if to_state == "complete" else ""
        return [ev.TaskStatusChanged(task_id=task, from_state=from_state, to_state=to_state, tree=tree)]
    if kind == 7:
        return [ev.TaskReopened(task_id=draw(st.sampled_from([*tasks, "cli/7"])), reason="commit gone")]
    if kind in (8, 9):
        scope = draw(st.sampled_from(["task", "component", "module"]))
        targets = {"task": [*tasks, "cli/1"], "component": [*slugs, "cli"], "module": [MODULE]}[scope]
        return [
            ev.OracleVerdictRecorded(
                scope=scope,
                target=draw(st.sampled_from(targets)),
                passed=draw(st.booleans()),
                tree=f"tree{draw(st.integers(0, 3))}",
            )
        ]
    if kind == 10:
        target = draw(st.sampled_from([*tasks, MODULE]))
        scope = "module" if target == MODULE else "task"
        return [ev.ScopeStarted(scope=scope, target=target, base_commit=f"base{draw(st.integers(0, 3))}")]
    if kind == 11:
        task_id = draw(st.sampled_from(["", *tasks]))
        return [ev.CommitRecorded(sha=f"{draw(st.integers(0, 999)):040x}", task_id=task_id, tree="t")]
    if kind == 12:
        return [ev.SpecApproved(spec_hash="s", section_hashes=draw(st.sampled_from(HASHES)), approver="ana")]
    if kind == 13:
        return [
            ev.SpecDriftDetected(
                changed_sections=("Password Hashing",),
                reentry_step=draw(st.integers(0, 3)),
                section_hashes=draw(st.sampled_from(HASHES)),
            )
        ]
    if kind == 14:
        return [ev.ReplanRequested(step=draw(st.integers(2, 4)), requested_by="ana")]
    if kind == 15:
        invocation = f"i{draw(st.integers(0, 3))}"
        out: list[ev.Event] = [
            ev.InvocationStarted(invocation_id=invocation, kind=draw(st.sampled_from(["planning", "task", "oracle"])))
        ]
        out += [
            ev.TokensUsed(
                invocation_id=invocation,
                input=draw(st.integers(0, 10**6)),
                output=draw(st.integers(0, 10**4)),
                premium=draw(st.sampled_from([0.0, 0.33, 1.0])),
                call_id=f"c{n}",
            )
            for n in range(draw(st.integers(0, 2)))
        ]
        if draw(st.booleans()):
            out.append(ev.InvocationFinished(invocation_id=invocation, outcome=draw(st.sampled_from(["ok", "error"]))))
        return out
    if kind == 16:
        return [ev.BranchEnsured(branch="lopen/auth", base=f"base{draw(st.integers(0, 3))}")]
    # a batch whose later events lean on its earlier ones (the journal checks a batch in order)
    name = draw(st.sampled_from(NAMES))
    slug = slugify(name)
    return [
        ev.ComponentsRecorded(components=tuple(ev.ComponentSpec(name=n) for n in NAMES)),
        ev.TasksRecorded(component=name, tasks=(ev.TaskSpec(id=f"{slug}/1", name="t"),)),
        ev.TaskStatusChanged(task_id=f"{slug}/1", from_state="pending", to_state="in-progress"),
    ]


def contradicts(state: ModuleState, batch: list[ev.Event]) -> bool:
    """Independently of the journal: would ``batch`` contradict ``state``?"""
    state = state.copy()
    for event in batch:
        if state.check(event) is not None:
            return True
        state.apply(event)
    return False


def stored_fold(store: EventStore) -> ModuleState:
    state = ModuleState(project=PROJECT, module=MODULE)
    for rec in store.read_stream(STREAM):
        state.apply(rec.event, rec.seq)
        state.version = rec.version
    return state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), steps=st.integers(1, 45), follow=st.booleans(), catch_up_every=st.integers(1, 5))
def test_journals_store_no_contradiction_and_every_fold_agrees(
    data: st.DataObject, steps: int, follow: bool, catch_up_every: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        store, other = EventStore.open(root), EventStore.open(root)
        views = store.projections.for_project(PROJECT)
        if follow:
            views.follow()
        journals = [Journal(store, PROJECT, MODULE), Journal(other, PROJECT, MODULE)]
        refused = accepted = 0
        for step in range(steps):
            writer = journals[data.draw(st.integers(0, 1), label="writer")]
            if data.draw(st.integers(0, 9), label="session") == 0:
                writer.open_session(ev.SessionStarted(), DAY)
            batch = draw_batch(data.draw, writer.snapshot())
            truth = stored_fold(store)
            before = store.version(STREAM)
            try:
                writer.record(*batch)
            except Contradiction:
                refused += 1
                assert contradicts(truth, batch), batch  # refused only what really contradicts
                assert store.version(STREAM) == before  # and nothing of it was stored
            else:
                accepted += 1
                assert not contradicts(truth, batch), batch
                assert store.version(STREAM) == before + len(batch)
            if not follow and step % catch_up_every == 0:
                views.catch_up()

        history = stored_fold(store)
        assert history.problems == []  # not one stored event is one the fold rejects
        views.catch_up()  # the other writer's last appends: it published on its own bus
        empty = ModuleState(project=PROJECT, module=MODULE)  # when every batch was refused
        incremental = views.plan.get(MODULE) or empty
        digest = views.digest()
        result = views.rebuild()
        assert result["problems"] == [] and result["events"] == len(list(store.read_all()))
        assert views.digest() == digest
        rebuilt = views.plan.get(MODULE) or empty
        for journal in journals:
            journal.refresh()
        assert _ENCODE(rebuilt) == _ENCODE(incremental) == _ENCODE(history)
        assert all(_ENCODE(j.snapshot()) == _ENCODE(history) for j in journals)
        assert views.plan.markdown(MODULE) == render_plan(history)
        if accepted:
            assert plan_path(root, MODULE).read_text() == render_plan(history)

        usage = [r.event for r in store.read_stream(STREAM) if isinstance(r.event, ev.TokensUsed)]
        totals = views.tokens.module(MODULE)
        if usage:
            assert totals is not None
            assert (totals.input, totals.output, totals.calls) == (
                sum(u.input for u in usage),
                sum(u.output for u in usage),
                len(usage),
            )
        assert [s.id for s in views.sessions.all()] == sorted(history.sessions, key=lambda s: int(s.rsplit("-", 1)[1]))
        fresh = EventStore.open(root)  # another process, starting from the saved rows
        assert fresh.projections.catch_up() == 0 and fresh.projections.digest() == digest
        fresh.close()
        store.close()
        other.close()
        assert accepted + refused == steps
        statistic(f"refused {10 * refused // steps}0%")
