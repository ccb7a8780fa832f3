"""The one fold (``events.fold.ModuleState``) on its own: the plan keyed by slug, the one completion
rule, dependency order, W5 transitions, verdicts and their attempts, commits owed, drift and
re-planning, sessions — and how it refuses (``check``) or skips (``apply``) a contradicting event.

Pure: no store. The store, the journal and the projections use this same fold (tests/test_journal.py,
tests/test_fold_property.py)."""

from __future__ import annotations

import itertools

import pytest

from events import catalogue as ev
from events.fold import ModuleState, aggregate, render_plan, slugify


def fold(*events: ev.Event, module: str = "auth") -> ModuleState:
    """Fold ``events`` in order; every one of them must be accepted."""
    state = ModuleState(project="proj", module=module)
    for seq, event in enumerate(events, 1):
        assert state.apply(event, seq) is None, (seq, event)
    return state


def components(*specs: ev.ComponentSpec | str) -> ev.ComponentsRecorded:
    return ev.ComponentsRecorded(components=tuple(ev.ComponentSpec(name=s) if isinstance(s, str) else s for s in specs))


def tasks(component: str, *numbers: int) -> ev.TasksRecorded:
    slug = slugify(component)
    return ev.TasksRecorded(
        component=component, tasks=tuple(ev.TaskSpec(id=f"{slug}/{n}", name=f"Task {n}") for n in numbers)
    )


def move(task: str, *states: str, tree: str = "") -> list[ev.Event]:
    return [
        ev.TaskStatusChanged(task_id=task, from_state=a, to_state=b, tree=tree if b == "complete" else "")
        for a, b in itertools.pairwise(states)
    ]


def verdict(scope: str, target: str, passed: bool = True, tree: str = "t1") -> ev.OracleVerdictRecorded:
    return ev.OracleVerdictRecorded(scope=scope, target=target, passed=passed, tree=tree)


def finish(component: str, *numbers: int) -> list[ev.Event]:
    """Every task of ``component`` complete and verified, then the component verified."""
    slug = slugify(component)
    out: list[ev.Event] = []
    for n in numbers:
        out += [
            *move(f"{slug}/{n}", "pending", "in-progress", "complete", tree=f"tree{n}"),
            verdict("task", f"{slug}/{n}"),
        ]
    return [*out, verdict("component", slug)]


# -- the plan is keyed by slug --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Token Issuer", "token-issuer"),
        ("  token   issuer ", "token-issuer"),
        ("CLI/Parser v2", "cli-parser-v2"),
        ("***", "component"),
    ],
)
def test_slugify(name: str, slug: str) -> None:
    assert slugify(name) == slug


def test_a_component_recorded_twice_appears_once() -> None:
    """Issue 15: "Token Issuer" appeared twice in the plan and plan.md."""
    state = fold(
        components("Token Issuer"),
        tasks("token issuer", 1, 2),  # the model spelled it another way
        ev.ComponentSelected(component="TOKEN ISSUER"),
        components("Token Issuer", "Audit Log"),  # recorded again, with another component
        tasks("Token Issuer", 1, 2, 3),
    )
    assert list(state.components) == ["token-issuer", "audit-log"]
    issuer = state.components["token-issuer"]
    assert (issuer.name, issuer.tasks, state.selected) == (
        "Token Issuer",
        ["token-issuer/1", "token-issuer/2", "token-issuer/3"],
        "token-issuer",
    )
    text = render_plan(state)
    assert text.count("Token Issuer") == 1 and text.count("`token-issuer/1`") == 1
    assert "- [ ] **Token Issuer** `token-issuer` — pending (selected)" in text


def test_two_spellings_of_one_component_in_one_plan_are_refused() -> None:
    state = fold()
    problem = state.check(components("Token Issuer", "token-issuer"))
    assert problem is not None and "component names must be distinct" in problem


# -- one completion rule ---------------------------------------------------------------------------------


def test_a_component_recorded_done_with_no_tasks_is_complete() -> None:
    """Issue 15: shown complete in the plan, but "remaining" for the run forever."""
    state = fold(
        components(ev.ComponentSpec(name="CLI", status="done"), ev.ComponentSpec(name="Core", depends_on=("CLI",)))
    )
    assert state.component_done("cli") and state.component_state("cli") == "complete"
    assert state.blocked_by("core") == []  # a done dependency does not block
    assert state.check(ev.ComponentSelected(component="Core")) is None
    problem = state.check(ev.ComponentSelected(component="CLI"))
    assert problem is not None and "already complete" in problem
    assert "- [x] **CLI** `cli` — complete" in render_plan(state)


def test_done_status_does_not_override_recorded_tasks() -> None:
    """A component with tasks is done when they are all complete and the component verified — not because
    the planner said "done"."""
    state = fold(components(ev.ComponentSpec(name="Core", status="done")), tasks("Core", 1))
    assert not state.component_done("core")
    for event in finish("Core", 1)[:-1]:
        state.apply(event)
    assert not state.component_done("core") and state.component_state("core") == "in-progress"
    state.apply(verdict("component", "core"))
    assert state.component_done("core") and state.component_state("core") == "complete"


def test_a_component_is_complete_only_while_its_verdict_stands() -> None:
    state = fold(components("Core"), tasks("Core", 1, 2), *finish("Core", 1, 2))
    assert state.component_done("core")
    restart = ev.TaskStatusChanged(task_id="core/2", from_state="complete", to_state="in-progress")
    assert "not a valid transition" in (state.check(restart) or "")  # a finished task stays finished
    state.apply(ev.TaskReopened(task_id="core/2", reason="its commit left the branch"))
    assert state.tasks["core/2"].state == "pending" and not state.verified("task", "core/2")
    assert not state.component_done("core") and not state.verified("component", "core")
    assert state.component_state("core") == "in-progress"


def test_module_complete_needs_every_component_and_the_module_verdict() -> None:
    state = fold(components(ev.ComponentSpec(name="CLI", status="done"), "Core"), tasks("Core", 1), *finish("Core", 1))
    assert not state.complete and state.state == "in progress"
    state.apply(verdict("module", "auth"))
    assert state.complete and state.state == "complete"
    state.apply(ev.ReplanRequested(step=3, requested_by="ana", reason="new idea"))
    assert not state.complete and state.replan_from == 3 and state.replan_why == "ana asked to re-plan (new idea)"
    assert not state.verified("module", "auth") and not state.component_done("core")


# -- dependency order ----------------------------------------------------------------------------------


def test_selecting_a_component_whose_dependencies_are_not_complete_is_refused() -> None:
    state = fold(
        components(
            "Store",
            ev.ComponentSpec(name="Token Issuer", depends_on=("store", "pyjwt")),  # pyjwt: not a component
        ),
        tasks("Store", 1),
    )
    assert state.blocked_by("token-issuer") == ["store"]
    problem = state.check(ev.ComponentSelected(component="Token Issuer"))
    assert problem == "component token-issuer depends on store, which are not complete yet"
    assert state.apply(ev.ComponentSelected(component="Token Issuer"), 7) is not None
    assert state.selected == "" and state.problems == [f"event #7 ComponentSelected skipped: {problem}"]
    for event in [ev.ComponentSelected(component="Store"), *finish("Store", 1)]:
        assert state.apply(event) is None
    assert state.blocked_by("token-issuer") == []
    assert state.apply(ev.ComponentSelected(component="Token Issuer")) is None and state.selected == "token-issuer"


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ((ev.ComponentSpec(name="A", depends_on=("a",)),), "component a depends on itself"),
        (
            (ev.ComponentSpec(name="A", depends_on=("B",)), ev.ComponentSpec(name="B", depends_on=("A",))),
            "form a cycle: a → b → a",
        ),
        (
            (
                ev.ComponentSpec(name="A", depends_on=("C",)),
                ev.ComponentSpec(name="B", depends_on=("A",)),
                ev.ComponentSpec(name="C", depends_on=("B", "libfoo")),
            ),
            "form a cycle",
        ),
    ],
)
def test_cycles_in_depends_on_are_refused(specs: tuple[ev.ComponentSpec, ...], message: str) -> None:
    state = fold()
    problem = state.check(ev.ComponentsRecorded(components=specs))
    assert problem is not None and message in problem
    state.apply(ev.ComponentsRecorded(components=specs), 3)
    assert not state.planned and state.problems[0].startswith("event #3 ComponentsRecorded skipped")


def test_a_chain_of_dependencies_is_not_a_cycle() -> None:
    state = fold(
        components(
            ev.ComponentSpec(name="A"),
            ev.ComponentSpec(name="B", depends_on=("A",)),
            ev.ComponentSpec(name="C", depends_on=("A", "B")),
        )
    )
    assert state.components["c"].depends_on == ["a", "b"] and state.blocked_by("c") == ["a", "b"]


# -- tasks and W5 ---------------------------------------------------------------------------------------


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
        (ev.TaskStatusChanged(task_id="core/1", from_state="pending", to_state="complete"), "not a valid transition"),
        (ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="complete"), "is 'pending'"),
        (ev.TaskStatusChanged(task_id="core/9", from_state="pending", to_state="in-progress"), "not in the plan"),
        (ev.TaskReopened(task_id="core/9"), "not in the plan"),
        (ev.CommitRecorded(sha="abc", task_id="core/1"), "only a complete task is committed"),
        (ev.TasksRecorded(component="nope", tasks=()), "no component 'nope'"),
        (ev.TasksRecorded(component="core", tasks=(ev.TaskSpec(id="other/1", name="x"),)), "not of the form core/<n>"),
        (ev.ComponentSelected(component="nope"), "no component 'nope'"),
    ],
)
def test_contradicting_events_are_refused_and_skipped(bad: ev.Event, message: str) -> None:
    state = fold(components("Core"), tasks("Core", 1))
    before = state.copy()
    problem = state.check(bad)
    assert problem is not None and message in problem
    assert state.apply(bad, 42) == f"event #42 {type(bad).__name__} skipped: {problem}"
    state.problems = []
    assert state == before  # skipped: nothing else changed


def test_the_w5_lifecycle_with_a_retry_counts_failures() -> None:
    state = fold(
        components("Core"),
        tasks("Core", 1),
        *move("core/1", "pending", "in-progress", "failed", "in-progress", "failed", "in-progress"),
    )
    task = state.tasks["core/1"]
    assert (task.state, task.failures) == ("in-progress", 2)
    assert state.component_state("core") == "in-progress"
    state.apply(ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="failed", reason="boom"))
    assert state.component_state("core") == "failed" and state.tasks["core/1"].reasons[-1] == "boom"


def test_tasks_with_started_work_cannot_be_dropped_and_ids_are_never_reused() -> None:
    state = fold(components("Core", "Docs"), tasks("Core", 1, 2, 3), *move("core/1", "pending", "in-progress"))
    problem = state.check(tasks("Core", 2, 3))
    assert problem is not None and "cannot be dropped: core/1" in problem
    problem = state.check(components("Docs"))
    assert problem is not None and "component core has started work (core/1)" in problem
    state.apply(tasks("Core", 1, 2))  # core/3 (pending) is dropped
    assert state.components["core"].tasks == ["core/1", "core/2"] and "core/3" not in state.tasks
    assert state.tasks["core/1"].state == "in-progress"  # re-recording keeps the states of tasks that stay
    assert state.next_task_id("core") == "core/4"  # the dropped core/3 is never given again
    other = state.check(ev.TasksRecorded(component="Docs", tasks=(ev.TaskSpec(id="core/1", name="x"),)))
    assert other is not None and "already belongs to component 'core'" in other


# -- verdicts, scopes, commits ------------------------------------------------------------------------


def test_verdict_attempts_accumulate_and_are_tied_to_a_tree() -> None:
    state = fold(
        components("Core"),
        tasks("Core", 1),
        *move("core/1", "pending", "in-progress"),
        ev.ScopeStarted(scope="task", target="core/1", base_commit="base1"),
        verdict("task", "core/1", passed=False, tree="ta"),
        verdict("task", "core/1", passed=True, tree="tb"),
    )
    assert state.attempts("task", "core/1") == 2 and state.verified("task", "core/1")
    assert state.verdicts["task:core/1"].tree == "tb" and state.scopes["task:core/1"] == "base1"
    state.apply(ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="failed"))
    assert not state.verified("task", "core/1") and state.attempts("task", "core/1") == 2


def test_commits_owed_and_the_tip() -> None:
    state = fold(
        ev.BranchEnsured(branch="lopen/auth", base="base0", worktree="/w"),
        components("Core"),
        tasks("Core", 1, 2),
        *move("core/1", "pending", "in-progress", "complete", tree="tree1"),
        *move("core/2", "pending", "in-progress", "complete", tree="tree2"),
    )
    assert state.tip == "base0" and [t.id for t in state.owed_commits()] == ["core/1", "core/2"]
    state.apply(ev.CommitRecorded(sha="c1", task_id="core/1", tree="tree1", parent="base0"))
    assert state.tip == "c1" and [t.id for t in state.owed_commits()] == ["core/2"]
    assert state.tasks["core/1"].commit == "c1"
    state.apply(ev.Reverted(from_sha="c1", to_sha="base0"))
    assert state.tip == "base0"


# -- approval, drift, re-planning ---------------------------------------------------------------------


def test_drift_is_pending_until_the_plan_is_remade_from_the_new_approval() -> None:
    first = {"Overview": "h1", "Password Hashing": "h2"}
    state = fold(ev.SpecApproved(spec_hash="s1", section_hashes=first), components("Core"))
    assert state.baseline == first and state.pending_drift() is None
    second = {"Overview": "h1", "Password Hashing": "h3"}
    state.apply(ev.SpecApproved(spec_hash="s2", section_hashes=second), 9)
    assert state.pending_drift() == (first, second) and state.approval_seqs == [1, 9]
    state.apply(ev.SpecDriftDetected(changed_sections=("Password Hashing",), reentry_step=3, section_hashes=second))
    assert state.pending_drift() is None and state.replan_from == 3
    state.apply(ev.InvocationStarted(invocation_id="p1", kind="planning"))
    state.apply(ev.InvocationFinished(invocation_id="p1", outcome="ok"))
    assert state.replan_from == 0 and state.replan_why == ""


# -- sessions, messages, notes --------------------------------------------------------------------------


def test_sessions_messages_and_notes() -> None:
    state = fold(
        ev.SessionStarted(session_id="auth-20261126-1", at=1.0),
        ev.SessionPaused(session_id="auth-20261126-1", at=2.0),
        ev.SessionStarted(session_id="auth-20261126-2", at=3.0),
        ev.SessionCompleted(session_id="auth-20261126-2", at=4.0),
        ev.UserMessageQueued(message_id="m1", text="use argon2"),
        ev.UserMessageQueued(message_id="m2", text="and tests"),
        ev.UserMessageDelivered(message_id="m1"),
        ev.CorrectiveInstructionIssued(instruction="stop re-reading"),
    )
    assert state.unfinished_session() == "auth-20261126-1" and state.last_session() == "auth-20261126-2"
    assert state.queued == {"m2": "and tests"} and state.notes == ["stop re-reading"]
    problem = state.check(ev.SessionStarted(session_id="auth-20261126-1"))
    assert problem == "session auth-20261126-1 already exists"
    state.apply(ev.SessionDeleted(session_id="auth-20261126-1"))
    assert state.unfinished_session() is None and state.sessions["auth-20261126-1"].status == "deleted"
    state.apply(ev.InvocationStarted(invocation_id="i1", kind="task"))
    assert state.notes == []  # given to the invocation that started
