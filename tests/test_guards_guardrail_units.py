"""The Guardrail's decisions, one rule at a time (actors/guardrail.py): what ``before`` and ``after``
answer for a given spend, budget, iteration count and failure history, and what a paused person is told.

Written against the decisions (and the GuardrailTripped events they record), not against how a run loop
calls them. A real Metrics actor on a real SQLite store supplies the spend; the Guardrail is used as a
plain object (its methods are what the actor runs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from actors.guardrail import GuardrailActor, check_budget, how_to_go_on
from actors.messages import Assessment, GuardDecision, StepOutcome
from actors.metrics import MetricsActor
from events import catalogue as ev
from events.journal import Journal
from lopen.config import Budget, Settings, Workflow
from lopen.project import open_store
from lopen.workflow.budgets import Limit, applying

MODULE = "auth"
TASK = Assessment(step=6, kind="task", why="", component="core", task="core/1")
VERIFY = Assessment(step=6, kind="component-verification", why="", component="core")
FAILED = StepOutcome(ok=False, detail="tests red")
OK = StepOutcome(ok=True)


class Asker:
    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.questions: list[str] = []

    def __call__(self, question: str) -> bool:
        self.questions.append(question)
        return self.answers.pop(0)


class World:
    def __init__(self, root: Path) -> None:
        (root / ".lopen").mkdir()
        self.store, self.project = open_store(root)
        self.journal = Journal(self.store, self.project, MODULE)
        self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        self.journal.record(
            ev.ComponentsRecorded(components=(ev.ComponentSpec(name="core"),)),
            ev.ComponentSelected(component="core"),
            ev.TasksRecorded(component="core", tasks=(ev.TaskSpec(id="core/1", name="One"),)),
        )
        self.refs: list[pykka.ActorRef] = []
        self.calls = 0

    def guardrail(self, settings: Settings, ask: Asker | None = None) -> GuardrailActor:
        ref = MetricsActor.start(self.store, self.project, MODULE)
        self.refs.append(ref)
        return GuardrailActor(self.journal, settings, ref.proxy(), ask)

    def spend(self, tokens: int, premium: float = 0.0) -> None:
        self.calls += 1
        self.journal.record(
            ev.TokensUsed(invocation_id="i", model="m", input=tokens, premium=premium, call_id=f"c{self.calls}")
        )

    def fail(self, reason: str) -> None:
        state = self.journal.read(lambda s: s.tasks["core/1"].state)
        self.journal.record(
            ev.TaskStatusChanged(task_id="core/1", from_state=state, to_state="in-progress"),
            ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="failed", reason=reason),
        )

    def trips(self) -> list[tuple[str, str, str]]:
        return [
            (r.event.category, r.event.level, r.event.detail)
            for r in self.store.read_stream(self.journal.stream)
            if isinstance(r.event, ev.GuardrailTripped)
        ]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    try:
        yield w
    finally:
        for ref in w.refs:
            ref.stop()
        w.store.close()


def budget(tokens: int = 0, premium: int = 0) -> Settings:
    return Settings(budget=Budget(token_budget_per_module=tokens, premium_budget_per_module=premium))


def threshold(n: int) -> Settings:
    return Settings(workflow=Workflow(failure_threshold=n))


# -- check_budget ----------------------------------------------------------------------------------


TOKENS = Limit("budget.token_budget_per_module", "module", "tokens", 100)
PREMIUM = Limit("budget.premium_budget_per_module", "module", "premium", 2)


def test_a_budget_warns_at_exactly_the_warning_share_and_pauses_at_exactly_the_confirmation_share():
    assert check_budget(TOKENS, 79, 0.8, 0.9) is None
    assert check_budget(TOKENS, 80, 0.8, 0.9) == GuardDecision(
        action="warn",
        category="budget",
        detail="budget.token_budget_per_module: 80 of 100 (80%)",
        setting="budget.token_budget_per_module",
    )
    assert check_budget(TOKENS, 89, 0.8, 0.9).action == "warn"
    assert check_budget(TOKENS, 90, 0.8, 0.9) == GuardDecision(
        action="pause",
        category="budget",
        detail="budget.token_budget_per_module: 90 of 100 (90%)",
        setting="budget.token_budget_per_module",
    )
    assert check_budget(PREMIUM, 2.5, 0.8, 0.9).detail == "budget.premium_budget_per_module: 2.5 of 2 (125%)"


def test_no_budget_or_a_negative_one_never_stops_anything():
    assert applying(Budget(token_budget_per_module=0)) == ()
    assert check_budget(Limit("budget.token_budget_per_module", "module", "tokens", 0), 10**9, 0.8, 0.9) is None
    assert check_budget(Limit("budget.token_budget_per_module", "module", "tokens", -1), 10**9, 0.8, 0.9) is None


# -- how_to_go_on ----------------------------------------------------------------------------------


def test_each_pause_names_the_setting_that_lets_the_run_go_on():
    assert how_to_go_on(GuardDecision(action="pause", category="max_iterations")) == (
        "raise workflow.max_iterations (lopen config set workflow.max_iterations N, or --max-iterations N)"
    )
    assert how_to_go_on(GuardDecision(action="pause", category="churn")) == "fix the cause or edit the plan"
    premium = GuardDecision(action="pause", category="budget", detail="budget.premium_budget_per_module: 9 of 10 (90%)")
    tokens = GuardDecision(
        action="pause", category="budget", detail="budget.token_budget_per_module: 950 of 1,000 (95%)"
    )
    assert how_to_go_on(premium) == "raise the budget (lopen config set budget.premium_budget_per_module N)"
    assert how_to_go_on(tokens) == "raise the budget (lopen config set budget.token_budget_per_module N)"


# -- before ----------------------------------------------------------------------------------------


def test_below_the_iteration_limit_the_run_goes_on_with_the_spend_so_far(world):
    world.spend(120, premium=1.5)
    decision = world.guardrail(Settings(workflow=Workflow(max_iterations=5))).before(4)
    assert decision == GuardDecision(
        action="allow", budget_hint="Budget so far for this module: 120 tokens, 1.5 premium requests."
    )


def test_figures_are_printed_as_people_write_them(world):
    """No "1 invocations", no "of 1e+06", no "1 premium requests": counts agree, thousands are separated."""
    world.spend(1_250_000, premium=1)
    settings = Settings(workflow=Workflow(max_iterations=1), budget=Budget(token_budget_per_module=1_000_000))
    assert world.guardrail(settings).before(1).detail == "1 invocation in this run reached workflow.max_iterations"
    paused = world.guardrail(Settings(budget=Budget(token_budget_per_module=1_000_000))).before(0)
    assert "1,250,000 of 1,000,000 (125%)" in paused.detail and "e+" not in paused.detail
    allowed = world.guardrail(Settings()).before(0)
    assert allowed.budget_hint == "Budget so far for this module: 1,250,000 tokens, 1 premium request."
    premium = world.guardrail(Settings(budget=Budget(premium_budget_per_module=1_000_000))).before(0)
    assert premium.budget_hint.endswith("1 premium request.") and "e+" not in premium.budget_hint


def test_the_iteration_limit_pauses_with_the_count(world):
    decision = world.guardrail(Settings(workflow=Workflow(max_iterations=5))).before(7)
    assert (decision.action, decision.category) == ("pause", "max_iterations")
    assert decision.detail == "7 invocations in this run reached workflow.max_iterations"
    assert world.trips() == [("max_iterations", "pause", decision.detail)]


def test_a_pause_on_one_budget_wins_over_a_warning_on_the_other(world):
    world.spend(850, premium=9)  # tokens warn (85 %), premium pauses (90 %)
    decision = world.guardrail(budget(tokens=1000, premium=10)).before(0)
    assert (decision.action, decision.detail) == ("pause", "budget.premium_budget_per_module: 9 of 10 (90%)")
    assert decision.budget_hint == "Budget so far for this module: 850 tokens, 9 premium requests."


def test_when_both_budgets_pause_the_token_budget_is_named(world):
    world.spend(950, premium=10)
    decision = world.guardrail(budget(tokens=1000, premium=10)).before(0)
    assert (decision.action, decision.category, decision.detail) == (
        "pause",
        "budget",
        "budget.token_budget_per_module: 950 of 1,000 (95%)",
    )


def test_a_warning_carries_the_budget_hint_and_is_recorded_once(world):
    world.spend(0, premium=8)
    guard = world.guardrail(budget(premium=10))
    first, again = guard.before(0), guard.before(1)
    assert (
        first
        == again
        == GuardDecision(
            action="warn",
            category="budget",
            detail="budget.premium_budget_per_module: 8 of 10 (80%)",
            budget_hint="Budget so far for this module: 0 tokens, 8 premium requests.",
        )
    )
    assert world.trips() == [("budget", "warn", "budget.premium_budget_per_module: 8 of 10 (80%)")]


def test_a_budget_pause_a_person_goes_on_past_stays_allowed_with_its_category_and_hint(world):
    world.spend(950)
    person = Asker(True)
    guard = world.guardrail(budget(tokens=1000), person)
    hint = "Budget so far for this module: 950 tokens, 0 premium requests."
    assert guard.before(0) == GuardDecision(action="allow", category="budget", budget_hint=hint)
    assert guard.before(1) == GuardDecision(action="allow", category="budget", budget_hint=hint)
    assert person.questions == ["budget.token_budget_per_module: 950 of 1,000 (95%). Continue?"]


def test_a_person_who_says_stop_is_asked_again_next_time(world):
    world.spend(950)
    person = Asker(False, False)
    guard = world.guardrail(budget(tokens=1000), person)
    assert guard.before(0).action == "pause"
    assert guard.before(1).action == "pause"
    assert len(person.questions) == 2
    assert world.trips() == [("budget", "pause", "budget.token_budget_per_module: 950 of 1,000 (95%)")]  # recorded once


def test_a_warning_is_never_a_question(world):
    world.spend(850)
    person = Asker()
    assert world.guardrail(budget(tokens=1000), person).before(0).action == "warn"
    assert person.questions == []


# -- after (churn) -----------------------------------------------------------------------------------


def test_a_success_clears_a_steps_failures(world):
    guard = world.guardrail(threshold(2))
    assert guard.after(VERIFY, FAILED).action == "allow"
    assert guard.after(VERIFY, OK) == GuardDecision(action="allow")
    assert guard.after(VERIFY, FAILED).action == "allow"  # one failure since the success
    decision = guard.after(VERIFY, FAILED)
    assert decision.action == "pause"
    assert decision.detail == "component-verification:core failed 2 times (workflow.failure_threshold=2): tests red"


def test_a_success_also_clears_what_a_person_went_on_past(world):
    person = Asker(True, False)
    guard = world.guardrail(threshold(2), person)
    guard.after(VERIFY, FAILED)
    assert guard.after(VERIFY, FAILED).action == "allow"  # the person said go on
    guard.after(VERIFY, OK)
    assert guard.after(VERIFY, FAILED).action == "allow"
    assert guard.after(VERIFY, FAILED).action == "pause"  # two failures after the success: asked, said stop
    assert len(person.questions) == 2


def test_a_paused_tasks_detail_names_only_the_last_threshold_reasons(world):
    guard = world.guardrail(threshold(2))
    world.fail("r1")
    guard.after(TASK, FAILED)
    world.fail("")  # a failure without a reason is not named
    world.fail("r3")
    decision = guard.after(TASK, FAILED)
    assert decision.action == "pause"
    assert decision.detail == "core/1 failed 3 times (workflow.failure_threshold=2): r1; r3"
    world.fail("r4")
    assert guard.after(TASK, FAILED).detail == "core/1 failed 4 times (workflow.failure_threshold=2): r3; r4"


def test_a_task_without_recorded_reasons_is_paused_with_the_outcomes_detail(world):
    guard = world.guardrail(threshold(1))
    world.fail("")
    assert guard.after(TASK, FAILED).detail == "core/1 failed 1 times (workflow.failure_threshold=1): tests red"


def test_a_churn_question_names_the_failures_and_a_yes_goes_on(world):
    person = Asker(True)
    guard = world.guardrail(threshold(1), person)
    decision = guard.after(VERIFY, FAILED)
    assert decision == GuardDecision(action="allow", category="churn")
    assert person.questions == [
        "component-verification:core failed 1 times (workflow.failure_threshold=1): tests red. Continue?"
    ]
    assert world.trips() == [
        ("churn", "pause", "component-verification:core failed 1 times (workflow.failure_threshold=1): tests red"),
        (
            "churn",
            "warn",
            "component-verification:core failed 1 times (workflow.failure_threshold=1): tests red; "
            "the user chose to continue",
        ),
    ]


def test_going_on_past_one_steps_churn_does_not_go_on_past_anothers(world):
    person = Asker(True, False)
    guard = world.guardrail(threshold(1), person)
    assert guard.after(VERIFY, FAILED).action == "allow"
    other = Assessment(step=6, kind="component-verification", why="", component="api")
    assert guard.after(other, FAILED).action == "pause"
    assert len(person.questions) == 2


def test_a_budget_yes_does_not_go_on_past_churn(world):
    world.spend(950)
    person = Asker(True, False)
    guard = world.guardrail(
        Settings(budget=Budget(token_budget_per_module=1000), workflow=Workflow(failure_threshold=1)), person
    )
    assert guard.before(0).action == "allow"
    assert guard.after(VERIFY, FAILED).action == "pause"


def test_a_budget_of_one_is_a_budget():
    assert check_budget(Limit("budget.premium_budget_per_module", "module", "premium", 1), 1, 0.8, 0.9).action == (
        "pause"
    )


def test_a_first_success_is_simply_allowed(world):
    assert world.guardrail(threshold(2)).after(VERIFY, OK) == GuardDecision(action="allow")


def test_a_yes_to_the_budget_does_not_go_on_past_the_iteration_limit(world):
    world.spend(950)
    person = Asker(True)
    guard = world.guardrail(
        Settings(budget=Budget(token_budget_per_module=1000), workflow=Workflow(max_iterations=3)), person
    )
    assert guard.before(0).action == "allow"
    assert guard.before(3).action == "pause"
    assert [(c, level) for c, level, _ in world.trips()] == [
        ("budget", "pause"),
        ("budget", "warn"),
        ("max_iterations", "pause"),
    ]


def test_the_iteration_limit_and_a_budget_pause_are_each_recorded(world):
    world.spend(950)
    guard = world.guardrail(Settings(budget=Budget(token_budget_per_module=1000), workflow=Workflow(max_iterations=3)))
    assert guard.before(3).category == "max_iterations"
    assert guard.before(0).category == "budget"
    assert [(c, level) for c, level, _ in world.trips()] == [("max_iterations", "pause"), ("budget", "pause")]


# -- limits: the budgets inside a call -------------------------------------------------------------


def test_the_limits_are_the_budgets_set_the_tasks_only_with_a_task(world: World) -> None:
    settings = Settings(budget=Budget(token_budget_per_module=1000, money_budget_per_task=2.0))
    guard = world.guardrail(settings)
    assert [limit.setting for limit in guard.limits("core/1")] == [
        "budget.token_budget_per_module",
        "budget.money_budget_per_task",
    ]
    assert [limit.setting for limit in guard.limits()] == ["budget.token_budget_per_module"]
    assert world.guardrail(budget()).limits("core/1") == ()


def test_no_limit_once_the_person_chose_to_go_on_past_the_budget(world: World) -> None:
    world.spend(950)
    guard = world.guardrail(budget(tokens=1000), Asker(True))
    assert guard.before(0).action == "allow"  # the pause was asked and the person said go on
    assert guard.limits("core/1") == ()


# -- a task's budgets and money (issue 23) ----------------------------------------------------------


def spend_on(world: World, task: str, tokens: int = 0, cost: float = 0.0) -> None:
    """One model call of an invocation of ``task`` ("" = an invocation for no task, e.g. planning)."""
    world.calls += 1
    invocation = f"inv-{world.calls}"
    world.journal.record(
        ev.InvocationStarted(invocation_id=invocation, kind="task" if task else "planning", task=task),
        ev.TokensUsed(invocation_id=invocation, model="m", input=tokens, cost=cost, priced=cost > 0),
    )


def test_a_tasks_token_budget_counts_only_that_tasks_invocations(world: World) -> None:
    world.journal.record(ev.TasksRecorded(component="core", tasks=(ev.TaskSpec(id="core/2", name="Two"),)))
    spend_on(world, "", tokens=5000)  # planning: the module's spend, no task's
    spend_on(world, "core/2", tokens=5000)
    spend_on(world, "core/1", tokens=400)
    guard = world.guardrail(Settings(budget=Budget(token_budget_per_task=1000)))
    assert guard.before(0, "core/1").action == "allow"
    assert guard.before(0).action == "allow"  # no task: a task's budget does not apply
    decision = guard.before(0, "core/2")
    assert decision.action == "pause" and decision.category == "budget"
    assert decision.detail == "budget.token_budget_per_task (core/2): 5,000 of 1,000 (500%)"


def test_a_yes_to_one_tasks_budget_does_not_go_on_past_another_tasks(world: World) -> None:
    world.journal.record(ev.TasksRecorded(component="core", tasks=(ev.TaskSpec(id="core/2", name="Two"),)))
    spend_on(world, "core/1", tokens=2000)
    spend_on(world, "core/2", tokens=2000)
    asker = Asker(True, False)
    guard = world.guardrail(Settings(budget=Budget(token_budget_per_task=1000)), asker)
    assert guard.before(0, "core/1").action == "allow"  # asked, and the person went on
    assert guard.limits("core/1") == () and guard.limits("core/2") != ()
    assert guard.before(0, "core/2").action == "pause"  # asked again for the other task: no
    assert guard.before(0, "core/1").action == "allow"  # not asked again
    assert [q.split(":")[0] for q in asker.questions] == [
        "budget.token_budget_per_task (core/1)",
        "budget.token_budget_per_task (core/2)",
    ]


def test_a_money_budget_pauses_in_dollars_and_the_hint_says_what_was_spent(world: World) -> None:
    spend_on(world, "core/1", tokens=100, cost=1.5)
    guard = world.guardrail(Settings(budget=Budget(money_budget_per_module=1.0)))
    decision = guard.before(0, "core/1")
    assert decision.action == "pause"
    assert decision.detail == "budget.money_budget_per_module: $1.50 of $1.00 (150%)"
    assert decision.budget_hint == "Budget so far for this module: 100 tokens, 0 premium requests, $1.50."


def test_the_hint_names_no_money_when_nothing_was_priced(world: World) -> None:
    spend_on(world, "core/1", tokens=1)
    decision = world.guardrail(budget()).before(0, "core/1")
    assert decision.action == "allow"
    assert decision.budget_hint == "Budget so far for this module: 1 token, 0 premium requests."


def test_a_money_budget_per_task_warns_before_it_pauses(world: World) -> None:
    spend_on(world, "core/1", cost=0.85)
    guard = world.guardrail(Settings(budget=Budget(money_budget_per_task=1.0, warning_threshold=0.8)))
    decision = guard.before(0, "core/1")
    assert (decision.action, decision.detail) == ("warn", "budget.money_budget_per_task (core/1): $0.85 of $1.00 (85%)")


def test_a_pause_after_an_invocation_stopped_inside_says_so_once(world: World) -> None:
    spend_on(world, "core/1", tokens=1200)
    guard = world.guardrail(budget(tokens=1000))
    stopped = StepOutcome(ok=False, detail="budget.token_budget_per_module: 1,200 of 1,000", error_kind="budget")
    assert guard.after(TASK, stopped).action == "allow"  # no failure counted: the next before pauses
    assert guard.before(0, "core/1").detail.endswith(" — stopped inside the invocation")
    assert not guard.before(0, "core/1").detail.endswith(" — stopped inside the invocation")
    assert world.journal.read(lambda s: s.tasks["core/1"].failures) == 0
