"""One turn of the run loop without a run (``lopen.workflow.cycle``): what a turn decides before an
invocation, what an outcome means, and every ending's text, built in one place."""

from __future__ import annotations

import pytest

from lopen.workflow import cycle
from lopen.workflow.decide import Action, Assessment, GuardDecision

TASK = Assessment(step=6, kind="task", why="task core/1 is pending", component="core", task="core/1")
DONE = Assessment(step=7, kind="complete", why="every component is complete and the module is verified")
ALLOW = GuardDecision(action="allow")
BUDGET = GuardDecision(action="pause", category="budget", detail="tokens: 95 of 100 (95%)")


def test_a_turn_invokes_when_nothing_stops_it() -> None:
    assert cycle.turn(TASK, ALLOW) == Action(kind="invoke")


def test_a_turn_orders_its_reasons_to_stop() -> None:
    assert cycle.turn(DONE, ALLOW, signal="SIGTERM") == cycle.interrupted("SIGTERM")
    assert cycle.turn(DONE, ALLOW, pause_requested="tui") == Action(kind="complete", reason=DONE.why)
    paused = cycle.turn(TASK, ALLOW, pause_requested="mcp:alice")
    assert (paused.exit_code, paused.reason) == (2, "paused at the request of mcp:alice")
    stopped = cycle.turn(TASK, ALLOW, stop_before="building")
    assert (stopped.kind, stopped.exit_code) == ("pause", 0)


def test_a_guardrail_pause_says_how_to_go_on() -> None:
    action = cycle.turn(TASK, BUDGET)
    assert action == cycle.guard_stop(BUDGET)
    assert action == Action(
        kind="pause",
        exit_code=2,
        reason="tokens: 95 of 100 (95%); raise the budget (lopen config set budget.token_budget_per_module N), "
        "then run again to resume",
        error_kind="budget",
    )
    failing = cycle.guard_stop(GuardDecision(action="fail", category="max_iterations", detail="9 invocations"))
    assert (failing.kind, failing.exit_code, failing.error_kind) == ("fail", 1, "max_iterations")
    assert "--max-iterations N), then run again to resume" in failing.reason


@pytest.mark.parametrize(
    ("error_kind", "expected"),
    [
        ("", None),
        (
            "auth",  # a key revoked mid-run: paused, with how to log in (the CLI retried it already)
            Action(
                kind="pause",
                exit_code=2,
                reason="authentication failed: boom — log in again (`lopen auth login` for GitHub Copilot, or a new "
                "key in LOPEN_PROVIDER__API_KEY for your own provider), then `lopen run` goes on where it stopped",
                error_kind="auth",
            ),
        ),
        ("fatal", Action(kind="fail", exit_code=1, reason="the model call failed: boom", error_kind="fatal")),
        (
            "rate_limited",
            Action(kind="pause", exit_code=2, reason="boom; run again later to resume", error_kind="rate_limited"),
        ),
    ],
)
def test_an_outcome_settles_the_run(error_kind: str, expected: Action | None) -> None:
    assert cycle.settle(False, error_kind, "boom") == expected
    assert cycle.settle(True, "", "ok") is None


def test_an_interrupted_invocation_ends_as_the_run_s_signal_did() -> None:
    assert cycle.settle(False, "interrupted", "cut off").exit_code == 130  # type: ignore[union-attr]
    assert cycle.settle(False, "interrupted", "cut off", signal="SIGTERM") == cycle.interrupted("SIGTERM")
    assert cycle.settle(False, "interrupted", "cut off", signal="") == cycle.interrupted("SIGINT")
    assert cycle.interrupted("SIGTERM").exit_code == 143


def test_every_ending_s_text() -> None:
    churn = GuardDecision(action="pause", category="churn", detail="core/1 failed 3 times")
    assert cycle.churn_stop(churn) == Action(
        kind="pause",
        exit_code=2,
        reason="core/1 failed 3 times; fix the cause or edit the plan, then run again",
        error_kind="churn",
    )
    spec = cycle.spec_stop(2, "the specification changed", "lopen spec approve auth")
    assert (spec.reason, spec.error_kind) == ("the specification changed; lopen spec approve auth", "spec")
    assert cycle.given_up({"a": "x", "b": "y"}) == Action(
        kind="pause", exit_code=2, reason="a: x; b: y", error_kind="churn"
    )
    assert cycle.conflicts_stop("a", 4, ("f.py", "g.py"), "lopen/auth--a") == (
        "merging a conflicted 4 times (last in f.py, g.py); merge lopen/auth--a by hand or edit the plan, "
        "then run again"
    )


def test_a_guardrail_pause_gives_its_text_when_the_turn_stops_for_another_reason_too() -> None:
    """As the Conductor always did: the Guardrail's pause (it was asked and recorded its trip) names the
    setting to change even when a person's pause request stopped the turn as well."""
    assert cycle.turn(TASK, BUDGET, pause_requested="tui") == cycle.guard_stop(BUDGET)


def test_an_interruption_wins_over_a_guardrail_pause() -> None:
    """Ctrl+C during a budget pause ends with 130 (SIGTERM 143), as a script waiting on Lopen expects."""
    for signal, code in (("SIGINT", 130), ("SIGTERM", 143)):
        action = cycle.turn(TASK, BUDGET, signal=signal)
        assert (action.kind, action.exit_code, action.error_kind) == ("pause", code, "interrupted")
