"""The folds of ``events.folds``: one token fold, one session-status fold, and the per-concern rules
of ``ModuleState`` composed by one dispatcher (each event's check beside its effect).

Pure: no store. ``tests/test_fold.py`` tests ``ModuleState`` itself; ``tests/test_fold_property.py``
that the projections fold the same."""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec
import pytest

from events import catalogue as ev
from events.fold import DISPATCH, FOLDED, ModuleState, scope_key
from events.folds import approval, claims, git, invocations, messages, plan, research, scopes, sessions
from events.folds.rules import Rule, compose
from events.folds.sessions import STATUS, SessionNode, status_after
from events.folds.tokens import TokenTotals, add_calls

ROOT = Path(__file__).resolve().parent.parent
CONCERNS = (sessions, approval, plan, scopes, git, claims, invocations, messages, research)
TOKEN_FIELDS = {"input", "output", "cache_read", "cache_write", "premium"}

# -- tokens ----------------------------------------------------------------------------------------


def test_token_totals_add_every_field_of_a_call() -> None:
    totals = TokenTotals()
    totals.add(ev.TokensUsed(input=1000, output=100, cache_read=10, cache_write=5, premium=1.0))
    totals.add(ev.TokensUsed(input=200, output=20, premium=0.33))
    assert (totals.input, totals.output, totals.cache_read, totals.cache_write) == (1200, 120, 10, 5)
    assert (totals.total, totals.premium, totals.calls) == (1320, 1.0 + 0.33, 2)


def test_calls_added_at_once_are_exactly_the_calls_added_one_by_one() -> None:
    """The tokens projection adds a run of an invocation's calls at once (a rebuild, every call): the money and
    premium requests still round call by call, as the live path adds them (0.1 + 0.2 + 0.3, not 0.1 + 0.5),
    so a rebuilt row is byte-identical to the one kept call by call."""
    calls = [
        ev.TokensUsed(input=7, output=1, cache_read=3, cache_write=2, premium=0.2, cost=0.2, priced=True),
        ev.TokensUsed(input=5, output=2, premium=0.3, cost=0.3, priced=True),
        ev.TokensUsed(model="my-own-model", input=1, output=1),
    ]
    at_once, one_by_one = TokenTotals(premium=0.1, cost=0.1), TokenTotals(premium=0.1, cost=0.1)
    add_calls([at_once], calls)
    for call in calls:
        one_by_one.add(call)
    assert msgspec.json.encode(at_once) == msgspec.json.encode(one_by_one)
    assert (at_once.premium, at_once.cost) == (0.1 + 0.2 + 0.3, 0.1 + 0.2 + 0.3) != (0.6, 0.6)
    assert (at_once.input, at_once.cache_write, at_once.calls, at_once.unpriced) == (13, 2, 3, 1)


def test_the_gateways_tally_is_the_token_fold_per_model_too() -> None:
    from lopen.copilot.results import Usage

    usage = Usage()
    usage.record("a", 10, 1, 2, 3)
    usage.record("b", 5, 1, 0, 0)
    usage.record("a", 1, 1, 0, 0)
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.calls) == (16, 3, 2, 3, 3)
    assert (usage.per_model["a"].input, usage.per_model["a"].calls, usage.per_model["b"].total) == (11, 2, 6)


def _sums_of_token_fields(path: Path) -> list[int]:
    """Lines where ``path`` adds to a token field (``x.input += …``, ``… += e.premium``) or adds two."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
            named = [n for n in (node.target, node.value) if isinstance(n, ast.Attribute) and n.attr in TOKEN_FIELDS]
            if named:
                found.append(node.lineno)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            sides = (node.left, node.right)
            if all(isinstance(n, ast.Attribute) and n.attr in TOKEN_FIELDS for n in sides):
                found.append(node.lineno)
    return found


def test_one_place_sums_token_fields() -> None:
    where = {
        str(path.relative_to(ROOT)): lines
        for package in ("events", "lopen", "actors")
        for path in sorted((ROOT / package).rglob("*.py"))
        if (lines := _sums_of_token_fields(path))
    }
    assert list(where) == ["events/folds/tokens.py"], where


# -- session status --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "kind", "after"),
    [
        ("running", ev.SessionPaused, "paused"),
        ("paused", ev.SessionResumed, "running"),
        ("running", ev.SessionCompleted, "completed"),
        ("completed", ev.SessionResumed, "running"),
        ("running", ev.SessionFailed, "failed"),
        ("failed", ev.SessionDeleted, "deleted"),
        ("deleted", ev.SessionResumed, "deleted"),  # a deleted session stays deleted
        ("deleted", ev.SessionDeleted, "deleted"),
        ("paused", ev.PauseRequested, "paused"),  # not a lifecycle event: unchanged
    ],
)
def test_status_after(before: str, kind: type, after: str) -> None:
    assert status_after(before, kind()) == after


def test_a_session_node_moves_by_the_same_rule() -> None:
    node = SessionNode()
    for kind in (ev.SessionPaused, ev.SessionResumed, ev.SessionCompleted, ev.SessionDeleted, ev.SessionResumed):
        node.apply(kind())
    assert node.status == "deleted"
    assert set(STATUS) == set(sessions.LIFECYCLE)


# -- the dispatcher --------------------------------------------------------------------------------


def test_every_concern_speaks_of_recorded_event_types_only() -> None:
    known = set(ev.EVENT_TYPES.values())
    for concern in CONCERNS:
        assert set(concern.RULES) <= known, concern.__name__
        assert all(isinstance(rule, Rule) for rule in concern.RULES.values())


def test_the_dispatcher_holds_every_concerns_rules_in_order() -> None:
    folded = set().union(*(concern.RULES for concern in CONCERNS))
    assert FOLDED == folded == DISPATCH.folded
    # an event several concerns care about has one effect per concern, in the concerns' order
    effects = [effect for effect, _ in DISPATCH.effects[ev.TaskReopened]]
    assert effects == [plan.RULES[ev.TaskReopened].effect, scopes.RULES[ev.TaskReopened].effect]
    # and, today, at most one check: what makes an event a contradiction is in one place
    assert all(len(checks) == 1 for checks in DISPATCH.checks.values())


def test_compose_keeps_every_check_and_effect_in_order() -> None:
    def passes(s: ModuleState, e: ev.Event) -> None:
        return None

    def refuses(s: ModuleState, e: ev.Event) -> str:
        return "no"

    def effect(s: ModuleState, e: ev.Event, seq: int) -> None:
        return None

    dispatch = compose({ev.Reverted: Rule(passes)}, {ev.Reverted: Rule(refuses, effect, stamped=True)})
    assert dispatch.checks[ev.Reverted] == (passes, refuses) and dispatch.effects[ev.Reverted] == ((effect, True),)


def test_an_approval_is_stamped_with_its_seq() -> None:
    state = ModuleState(module="auth")
    state.apply(ev.SpecApproved(spec_hash="h", section_hashes={"a": "1"}), seq=7)
    state.apply(ev.SpecApproved(spec_hash="h2", section_hashes={"a": "2"}), seq=9)
    assert state.approval is not None and state.approval.seq == 9 and state.approval_seqs == [7, 9]
    assert state.baseline == {"a": "2"}  # not planned yet: the latest approval is the baseline


def test_an_approval_keeps_who_approved_and_when() -> None:
    state = ModuleState(module="auth")
    state.apply(ev.SpecApproved(spec_hash="h", section_hashes={"a": "1"}, approver="ada", at=1234.5), seq=3)
    assert state.approval is not None
    assert (state.approval.approver, state.approval.at, state.approval.spec_hash) == ("ada", 1234.5, "h")


def test_a_completed_task_keeps_its_verdict_and_a_failed_one_loses_it() -> None:
    """The Git actor commits the tree a task's valid verdict judged: completing must not void it."""
    state = ModuleState(module="auth")
    state.apply(ev.ComponentsRecorded(components=(ev.ComponentSpec(name="core"),)))
    state.apply(
        ev.TasksRecorded(
            component="core", tasks=(ev.TaskSpec(id="core/1", name="one"), ev.TaskSpec(id="core/2", name="two"))
        )
    )
    for task in ("core/1", "core/2"):
        state.apply(ev.TaskStatusChanged(task_id=task, from_state="pending", to_state="in-progress"))
        state.apply(ev.ScopeStarted(scope="task", target=task, base_commit="b"))
        state.apply(ev.OracleVerdictRecorded(scope="task", target=task, passed=True, tree="t"))  # type: ignore[arg-type]
    state.apply(ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="complete"))
    state.apply(ev.TaskStatusChanged(task_id="core/2", from_state="in-progress", to_state="failed"))
    assert state.verdicts[scope_key("task", "core/1")].valid
    assert not state.verdicts[scope_key("task", "core/2")].valid
