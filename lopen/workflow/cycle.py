"""One turn of the run loop, as pure functions: assess → guardrail → dispatch → outcome.

The Foreman (``actors.foreman``) is the one loop of a run. Each time a message reaches it (the run
begins, a job or lane ended, a tick of time, an interruption) it takes a turn, and these functions
say what that turn does — the actor only asks the quick questions (where does the module stand, may
we go on), records what they decide, and hands work out:

- ``turn(...)``: before an invocation on the module branch — invoke, or how the run ends (complete,
  paused, failed, with its reason and exit code);
- ``settle(...)``: what an invocation's outcome means for the run (go on, or how it ends);
- ``guard_stop``, ``churn_stop``, ``spec_stop``, ``conflicts_stop``, ``interrupted``, ``given_up``:
  the run's endings, each built here and only here, so a pause reads the same wherever the loop
  meets it (a plain run, a lane, a `lopen worker`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lopen.workflow.decide import Action, Assessment, GuardDecision, after, decide

__all__ = [
    "churn_stop",
    "conflicts_stop",
    "given_up",
    "guard_stop",
    "how_to_go_on",
    "interrupted",
    "settle",
    "spec_stop",
    "turn",
]


def how_to_go_on(decision: GuardDecision) -> str:
    """The setting that lets a paused run go on: the budget that ran out, max_iterations, or the churn."""
    if decision.category == "max_iterations":
        return "raise workflow.max_iterations (lopen config set workflow.max_iterations N, or --max-iterations N)"
    if decision.category == "churn":
        return "fix the cause or edit the plan"
    key = "premium" if decision.detail.startswith(("premium", "budget.premium")) else "token"
    setting = decision.setting or f"budget.{key}_budget_per_module"
    return f"raise the budget (lopen config set {setting} N)"


def guard_stop(guard: GuardDecision) -> Action:
    """The Guardrail said pause (exit 2) or fail (exit 1) before an invocation: how the run ends."""
    return Action(
        kind="fail" if guard.action == "fail" else "pause",
        exit_code=1 if guard.action == "fail" else 2,
        reason=f"{guard.detail}; {how_to_go_on(guard)}, then run again to resume",
        error_kind=guard.category,
    )


def churn_stop(churn: GuardDecision) -> Action:
    """A step failed ``workflow.failure_threshold`` times (the Guardrail's churn): a person is asked."""
    return Action(
        kind="pause", exit_code=2, reason=f"{churn.detail}; {how_to_go_on(churn)}, then run again", error_kind="churn"
    )


def interrupted(signal: str) -> Action:
    """Ctrl+C (SIGINT, the default) or SIGTERM stopped the run: exit 130 or 143."""
    return Action(
        kind="pause", exit_code=143 if signal == "SIGTERM" else 130, reason="interrupted", error_kind="interrupted"
    )


def spec_stop(exit_code: int, reason: str, how: str) -> Action:
    """The Assessor found the spec unapproved or edited since its approval: a person acts first."""
    return Action(kind="pause", exit_code=exit_code, reason=f"{reason}; {how}", error_kind="spec")


def conflicts_stop(component: str, times: int, files: tuple[str, ...], branch: str) -> str:
    """Why a lane gives its component up after merging it conflicted again and again."""
    last = ", ".join(files)
    return (
        f"merging {component} conflicted {times} times (last in {last}); merge {branch} by hand or edit the plan, "
        "then run again"
    )


def given_up(components: Mapping[str, str], blocked: Mapping[str, Sequence[str]] | None = None) -> Action:
    """Lanes that gave up (churn, merge conflicts) pause the run once every other lane has ended; the
    reason names each component given up and why, then each one left waiting for them (``blocked``:
    component → the given-up ones it depends on, directly or not)."""
    detail = "; ".join(f"{slug}: {why}" for slug, why in components.items())
    waiting = [f"{slug} is blocked by {' and '.join(causes)}" for slug, causes in (blocked or {}).items()]
    if waiting:
        detail += f"; {', '.join(waiting)} (each starts once what it depends on is merged)"
    return Action(kind="pause", exit_code=2, reason=detail, error_kind="churn")


def turn(
    assessment: Assessment,
    guard: GuardDecision,
    *,
    stop_before: str = "",
    pause_requested: str = "",
    signal: str = "",
) -> Action:
    """Before an invocation: ``invoke``, or how the run ends. ``lopen.workflow.decide.decide`` orders
    the reasons (an interruption, completion, a person's pause, ``lopen plan``, the Guardrail); a
    Guardrail pause of a known category says how to go on — and that pause's text is the one given
    whenever the Guardrail paused and the turn does not go on, except for an interruption: Ctrl+C and
    SIGTERM end the run with their own exit codes (130, 143) whatever else holds."""
    action = decide(assessment, guard, stop_before=stop_before, pause_requested=pause_requested, interrupted=signal)
    if action.kind == "pause" and guard.action == "pause" and guard.category and action.error_kind != "interrupted":
        return guard_stop(guard)
    return action


def settle(ok: bool, error_kind: str, detail: str, *, signal: str | None = None) -> Action | None:
    """After an invocation: None goes on; else how the run ends (``decide.after``). With ``signal``
    (the run's interruption, "" when unknown) an interrupted invocation ends as that signal does."""
    stop = after(ok, error_kind, detail)
    if stop is not None and signal is not None and error_kind == "interrupted":
        return interrupted(signal or "SIGINT")
    return stop
