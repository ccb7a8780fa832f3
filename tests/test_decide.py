"""The Conductor's choice as pure functions: ``assess`` (where the module stands, from the one fold),
``decide`` (what to do before an invocation) and ``after`` (what an invocation's outcome means)."""

from __future__ import annotations

import pytest

from events import catalogue as ev
from events.fold import ModuleState
from lopen.workflow.decide import Action, Assessment, GuardDecision, after, assess, decide

MODULE = "auth"
ALLOW = GuardDecision(action="allow")


def folded(*events: ev.Event) -> ModuleState:
    state = ModuleState(project="p", module=MODULE)
    for event in events:
        problem = state.apply(event)
        assert problem is None, problem
    return state


def components(*specs: tuple[str, tuple[str, ...]]) -> ev.ComponentsRecorded:
    return ev.ComponentsRecorded(components=tuple(ev.ComponentSpec(name=n, depends_on=d) for n, d in specs))


def tasks(component: str, n: int) -> ev.TasksRecorded:
    specs = tuple(ev.TaskSpec(id=f"{component}/{i}", name=f"Task {i}") for i in range(1, n + 1))
    return ev.TasksRecorded(component=component, tasks=specs)


def complete(task_id: str) -> list[ev.Event]:
    return [
        ev.TaskStatusChanged(task_id=task_id, from_state="pending", to_state="in-progress"),
        ev.TaskStatusChanged(task_id=task_id, from_state="in-progress", to_state="complete", tree="t" * 40),
    ]


def verified(scope: str, target: str) -> ev.OracleVerdictRecorded:
    return ev.OracleVerdictRecorded(scope=scope, target=target, passed=True, tree="t" * 40)  # type: ignore[arg-type]


def done(component: str, n: int = 1) -> list[ev.Event]:
    """``component`` selected, its ``n`` tasks complete and the component verified."""
    events: list[ev.Event] = [ev.ComponentSelected(component=component), tasks(component, n)]
    for i in range(1, n + 1):
        events += complete(f"{component}/{i}")
    return [*events, verified("component", component)]


TWO = components(("store", ()), ("api", ("store",)))


# -- assess --------------------------------------------------------------------------------------


def test_no_plan_starts_at_step_2() -> None:
    found = assess(folded())
    assert (found.step, found.kind, found.complete) == (2, "planning", False)
    assert "no components" in found.why


TOPICS = ("[RFC 6749](https://www.rfc-editor.org/rfc/rfc6749)", "JWT signing key rotation")


def test_topics_to_research_come_before_the_first_planning() -> None:
    found = assess(folded(), TOPICS)
    assert (found.step, found.kind, found.topics) == (2, "research", TOPICS)
    assert found.why == "the specification names 2 topics to research before planning"
    assert assess(folded(), ()).kind == "planning"  # no topics: no research


def test_researched_topics_are_never_researched_again_only_new_ones() -> None:
    state = folded(ev.ResearchCompleted(invocation_id="research-1", topics=TOPICS[:1]))
    assert assess(state, TOPICS).topics == TOPICS[1:]
    state.apply(ev.ResearchCompleted(invocation_id="research-2", topics=TOPICS[1:]))
    assert assess(state, TOPICS).kind == "planning"  # a resumed run goes straight to planning


def test_a_planned_module_is_not_held_up_by_research_unless_it_is_re_planned_from_step_2() -> None:
    assert assess(folded(TWO), TOPICS).kind == "planning"
    criteria = ev.SpecDriftDetected(changed_sections=("Acceptance Criteria",), reentry_step=3)
    assert assess(folded(TWO, criteria), TOPICS).kind == "planning"
    dependencies = ev.SpecDriftDetected(changed_sections=("Dependencies",), reentry_step=2)
    assert assess(folded(TWO, dependencies), TOPICS).kind == "research"


def test_a_replan_request_re_enters_planning_at_its_step_whatever_the_progress() -> None:
    state = folded(TWO, *done("store"), ev.ReplanRequested(step=2, requested_by="Ann", reason="new idea"))
    found = assess(state)
    assert (found.step, found.kind) == (2, "planning")
    assert "Ann asked to re-plan" in found.why and "new idea" in found.why


def test_drift_of_the_acceptance_criteria_re_enters_at_step_3() -> None:
    state = folded(TWO, *done("store"), ev.SpecDriftDetected(changed_sections=("Acceptance Criteria",), reentry_step=3))
    found = assess(state)
    assert (found.step, found.kind) == (3, "planning") and "specification changed" in found.why


def test_a_plan_without_a_selection_selects_at_step_4_naming_what_is_ready() -> None:
    found = assess(folded(TWO))
    assert (found.step, found.kind, found.component) == (4, "planning", "")
    assert found.why == "no component selected yet; 2 remain (store ready)"


def test_the_selected_component_done_goes_back_to_step_4() -> None:
    found = assess(folded(TWO, *done("store")))
    assert (found.step, found.kind) == (4, "planning")
    assert found.why == "component store is complete; 1 remains (api ready)"


def test_a_selection_blocked_by_a_re_opened_dependency_goes_back_to_step_4() -> None:
    state = folded(
        TWO, *done("store"), ev.ComponentSelected(component="api"), ev.TaskReopened(task_id="store/1", reason="revert")
    )
    found = assess(state)
    assert (found.step, found.kind) == (4, "planning") and "api waits for store" in found.why


def test_a_selected_component_without_tasks_breaks_it_into_tasks() -> None:
    found = assess(folded(TWO, ev.ComponentSelected(component="store")))
    assert (found.step, found.kind, found.component) == (4, "planning", "store")
    assert "has no tasks yet" in found.why


def test_the_first_open_task_is_next_and_the_last_one_is_marked() -> None:
    state = folded(TWO, ev.ComponentSelected(component="store"), tasks("store", 3), *complete("store/1"))
    found = assess(state)
    assert (found.step, found.kind, found.component, found.task) == (6, "task", "store", "store/2")
    assert not found.last_task_of_component and found.why == "task store/2 is pending"

    state.apply(ev.TaskStatusChanged(task_id="store/2", from_state="pending", to_state="in-progress"))
    state.apply(ev.TaskStatusChanged(task_id="store/2", from_state="in-progress", to_state="failed", reason="x"))
    found = assess(state)
    assert found.task == "store/2" and found.why == "task store/2 is failed" and not found.last_task_of_component

    for event in complete("store/3"):
        state.apply(event)
    assert assess(state).last_task_of_component  # store/2 is the only open task left


def test_all_tasks_complete_asks_for_the_component_verification() -> None:
    state = folded(TWO, ev.ComponentSelected(component="store"), tasks("store", 1), *complete("store/1"))
    found = assess(state)
    assert (found.step, found.kind, found.component, found.task) == (6, "component-verification", "store", "")


def test_a_failed_component_verification_is_still_the_next_step() -> None:
    state = folded(
        TWO,
        ev.ComponentSelected(component="store"),
        tasks("store", 1),
        *complete("store/1"),
        ev.OracleVerdictRecorded(scope="component", target="store", passed=False),
    )
    assert assess(state).kind == "component-verification"


def test_every_component_done_asks_for_the_module_verification() -> None:
    state = folded(TWO, *done("store"), *done("api", 2))
    found = assess(state)
    assert (found.step, found.kind) == (7, "module-verification") and not found.complete


def test_a_component_recorded_done_without_tasks_counts_as_done() -> None:
    state = folded(
        ev.ComponentsRecorded(
            components=(
                ev.ComponentSpec(name="store", status="done"),
                ev.ComponentSpec(name="api", depends_on=("store",)),
            )
        ),
        *done("api"),
    )
    assert assess(state).kind == "module-verification"


def test_a_verified_module_is_complete() -> None:
    state = folded(TWO, *done("store"), *done("api"), verified("module", MODULE))
    found = assess(state)
    assert (found.step, found.kind, found.complete) == (7, "complete", True)


def test_a_re_opened_task_makes_a_complete_module_incomplete_again() -> None:
    state = folded(TWO, *done("store"), *done("api"), verified("module", MODULE))
    state.apply(ev.TaskReopened(task_id="api/1", reason="revert"))
    found = assess(state)
    assert (found.kind, found.task) == ("task", "api/1") and not found.complete


# -- decide --------------------------------------------------------------------------------------

TASK = Assessment(step=6, kind="task", why="task a/1 is pending", component="a", task="a/1")
PLANNING = Assessment(step=4, kind="planning", why="no component selected yet")
DONE = Assessment(step=7, kind="complete", why="every component is complete and the module is verified")
GUARD_PAUSE = GuardDecision(action="pause", category="budget", detail="tokens: 950 of 1000 (95%)")


def test_go_on_when_nothing_stops_the_run() -> None:
    assert decide(TASK, ALLOW) == Action(kind="invoke")
    assert decide(TASK, GuardDecision(action="warn", category="budget", detail="80%")) == Action(kind="invoke")


@pytest.mark.parametrize(("signal", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interruption_pauses_with_the_signal_s_exit_code_before_anything_else(signal: str, code: int) -> None:
    for assessment in (TASK, DONE):
        action = decide(assessment, GUARD_PAUSE, stop_before="building", pause_requested="ann", interrupted=signal)
        assert action == Action(kind="pause", exit_code=code, reason="interrupted", error_kind="interrupted")


def test_a_complete_module_completes_whatever_the_guardrail_says() -> None:
    action = decide(DONE, GUARD_PAUSE, stop_before="building", pause_requested="ann")
    assert (action.kind, action.exit_code, action.reason) == ("complete", 0, DONE.why)


def test_a_person_s_pause_request_pauses_with_exit_2_naming_them() -> None:
    action = decide(TASK, GUARD_PAUSE, pause_requested="mcp:alice")
    assert (action.kind, action.exit_code) == ("pause", 2) and "mcp:alice" in action.reason


def test_stop_before_pauses_cleanly_only_at_that_phase() -> None:
    action = decide(TASK, ALLOW, stop_before="building")
    assert (action.kind, action.exit_code) == ("pause", 0) and "building" in action.reason
    assert decide(PLANNING, ALLOW, stop_before="building") == Action(kind="invoke")
    assert decide(TASK, GUARD_PAUSE, stop_before="building").exit_code == 0  # before the guardrail


def test_the_guardrail_pauses_with_exit_2_or_fails_with_exit_1() -> None:
    paused = decide(TASK, GUARD_PAUSE)
    assert (paused.kind, paused.exit_code, paused.error_kind) == ("pause", 2, "budget")
    assert paused.reason == "budget: tokens: 950 of 1000 (95%)"
    failed = decide(TASK, GuardDecision(action="fail", category="store", detail="gone"))
    assert (failed.kind, failed.exit_code, failed.error_kind) == ("fail", 1, "store")


# -- after ---------------------------------------------------------------------------------------


def test_a_successful_or_failed_invocation_goes_on() -> None:
    assert after(True, "", "done") is None
    assert after(False, "", "the task failed: tests red") is None  # the model self-corrects (W7)
    assert after(False, "timeout", "ran past 900 s") is None


def test_an_interrupted_invocation_pauses_with_130() -> None:
    assert after(False, "interrupted", "aborted") == Action(
        kind="pause", exit_code=130, reason="interrupted", error_kind="interrupted"
    )


@pytest.mark.parametrize("kind", ["fatal", "model_unavailable"])
def test_critical_errors_fail_the_run(kind: str) -> None:
    action = after(False, kind, "500 from the provider")
    assert action is not None
    assert (action.kind, action.exit_code, action.error_kind) == ("fail", 1, kind)
    assert "500 from the provider" in action.reason


def test_credentials_refused_mid_run_pause_it_with_how_to_log_in_again() -> None:
    action = after(
        False, "auth", "Authentication failed with provider (HTTP 401).\n  Check your COPILOT_PROVIDER_API_KEY"
    )
    assert action is not None
    assert (action.kind, action.exit_code, action.error_kind) == ("pause", 2, "auth")
    assert action.reason.startswith("authentication failed: Authentication failed with provider (HTTP 401). — ")
    assert "COPILOT_PROVIDER_API_KEY" not in action.reason  # the CLI's own variable is not Lopen's
    assert "`lopen auth login`" in action.reason and "LOPEN_PROVIDER__API_KEY" in action.reason


@pytest.mark.parametrize("kind", ["rate_limited", "transient"])
def test_rate_limits_and_transient_errors_pause_to_resume_later(kind: str) -> None:
    action = after(False, kind, "429 too many requests")
    assert action is not None
    assert (action.kind, action.exit_code, action.error_kind) == ("pause", 2, kind)
    assert "429 too many requests" in action.reason and "run again later" in action.reason
