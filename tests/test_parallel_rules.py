"""Parallel work's rules without a run (issue 14): the one fold's claim rules (a claim under another
worker's live lease is refused; renewals and releases only by the holder; an expired lease is anyone's),
component branches and their merges, and the pure scheduling (``lopen.workflow.schedule``)."""

from __future__ import annotations

import pytest
from test_fold import components, finish, fold, move, tasks, verdict

from events import catalogue as ev
from events.fold import MODULE_ITEM, PLAN_ITEM, ModuleState
from lopen.workflow import schedule

NOW = 1_000_000.0
A, B = "host:1/1", "host:2/1"


def four_and_one() -> list[ev.Event]:
    """Components a, b, c, d (independent) and e (depends on a and b), each with one task."""
    return [
        ev.BranchEnsured(branch="lopen/auth", base="base0", worktree="/w/auth"),
        components(*"abcd", ev.ComponentSpec(name="e", depends_on=("a", "b"))),
        *(tasks(c, 1) for c in "abcde"),
    ]


def lane(component: str, base: str = "base0") -> ev.BranchEnsured:
    return ev.BranchEnsured(
        branch=f"lopen/auth--{component}", base=base, worktree=f"/w/{component}", component=component, created=True
    )


def claim(component: str, worker: str = A, at: float = NOW, lease: float = 60) -> ev.ComponentClaimed:
    return ev.ComponentClaimed(component=component, worker=worker, lease_until=at + lease, at=at)


# -- claims -------------------------------------------------------------------------------------------


def test_a_claim_under_another_workers_live_lease_is_refused() -> None:
    state = fold(*four_and_one(), claim("a", A))
    problem = state.check(claim("a", B, at=NOW + 30))
    assert problem is not None and "claimed by host:1/1" in problem and "live lease" in problem


def test_an_expired_lease_can_be_claimed_by_another_worker() -> None:
    state = fold(*four_and_one(), claim("a", A, lease=60), claim("a", B, at=NOW + 61))
    assert state.claims["a"].worker == B


def test_the_holder_may_claim_again_and_renew_and_release() -> None:
    state = fold(
        *four_and_one(),
        claim("a", A),
        claim("a", A, at=NOW + 10),
        ev.ComponentLeaseRenewed(component="a", worker=A, lease_until=NOW + 200),
    )
    assert state.live_claim("a", NOW + 150) is not None
    assert state.check(ev.ComponentLeaseRenewed(component="a", worker=B, lease_until=NOW + 300)) is not None
    assert state.check(ev.ComponentReleased(component="a", worker=B)) is not None
    state.apply(ev.ComponentReleased(component="a", worker=A, reason="merged"))
    assert "a" not in state.claims and state.check(claim("a", B, at=NOW + 1)) is None


def test_a_claim_of_an_unknown_or_complete_component_is_refused_but_plan_and_module_can_be_claimed() -> None:
    state = fold(*four_and_one())
    assert "no component" in (state.check(claim("zz")) or "")
    assert state.check(claim(PLAN_ITEM)) is None and state.check(claim(MODULE_ITEM)) is None
    done = fold(*four_and_one(), *finish("a", 1))
    assert "already complete" in (done.check(claim("a")) or "")


def test_two_workers_racing_for_one_component_one_wins() -> None:
    """What the journal does with optimistic concurrency: the second claim is checked against the first."""
    state = fold(*four_and_one())
    first, second = claim("c", A), claim("c", B, at=NOW + 0.001)
    assert state.check(first) is None and state.check(second) is None  # each alone would be fine
    state.apply(first)
    assert state.check(second) is not None


# -- lanes and merges ------------------------------------------------------------------------------------


def test_a_component_on_its_own_branch_is_done_only_once_merged_at_its_tip() -> None:
    commit = ev.CommitRecorded(sha="c1", task_id="a/1", tree="tree1", parent="base0", branch="lopen/auth--a")
    state = fold(*four_and_one(), lane("a"), *finish("a", 1)[:-1], commit, verdict("component", "a"))
    assert state.lanes["a"].tip == "c1" and state.tip == "base0"  # the module branch did not move
    assert not state.component_done("a") and state.tip_of("a") == "c1" and state.tip_of("b") == "base0"
    merged = ev.ComponentMerged(component="a", sha="c1", parent="base0", component_tip="c1", fast_forward=True)
    state.apply(merged)
    assert state.component_done("a") and state.tip == "c1"


def test_a_merge_whose_parent_is_not_the_module_tip_is_refused() -> None:
    """Two merges computed on the same module tip: the second is refused (it is merged again on the new tip)."""
    events = [*four_and_one(), lane("a"), lane("b")]
    for c in "ab":
        events += [
            *move(f"{c}/1", "pending", "in-progress", "complete", tree="t"),
            ev.CommitRecorded(sha=f"{c}1", task_id=f"{c}/1", parent="base0", branch=f"lopen/auth--{c}"),
            verdict("component", c),
        ]
    state = fold(*events, ev.ComponentMerged(component="a", sha="a1", parent="base0", component_tip="a1"))
    late = ev.ComponentMerged(component="b", sha="m2", parent="base0", component_tip="b1")
    assert "another merge came first" in (state.check(late) or "")
    assert state.check(ev.ComponentMerged(component="b", sha="m2", parent="a1", component_tip="b1")) is None


def test_a_merge_of_an_unverified_component_or_a_stale_tip_is_refused() -> None:
    state = fold(
        *four_and_one(),
        lane("a"),
        *move("a/1", "pending", "in-progress", "complete", tree="t"),
        ev.CommitRecorded(sha="a1", task_id="a/1", parent="base0", branch="lopen/auth--a"),
    )
    assert "not verified" in (
        state.check(ev.ComponentMerged(component="a", sha="a1", parent="base0", component_tip="a1")) or ""
    )
    state.apply(verdict("component", "a"))
    assert "branch is at" in (
        state.check(ev.ComponentMerged(component="a", sha="x", parent="base0", component_tip="old")) or ""
    )


def test_the_dependent_is_ready_only_after_both_dependencies_merged() -> None:
    events = [*four_and_one(), lane("a"), lane("b")]
    tip = "base0"
    for c in "ab":
        events += [
            *move(f"{c}/1", "pending", "in-progress", "complete", tree="t"),
            ev.CommitRecorded(sha=f"{c}1", task_id=f"{c}/1", parent="base0", branch=f"lopen/auth--{c}"),
            verdict("component", c),
        ]
    state = fold(*events)
    assert "e" not in schedule.ready(state)  # verified on their branches, not merged
    state.apply(ev.ComponentMerged(component="a", sha="a1", parent=tip, component_tip="a1"))
    assert "e" not in schedule.ready(state)
    state.apply(ev.ComponentMerged(component="b", sha="m2", parent="a1", component_tip="b1"))
    assert "e" in schedule.ready(state)


def test_a_conflict_resolution_commit_clears_when_committed_and_the_component_can_then_merge() -> None:
    state = fold(
        *four_and_one(),
        lane("a"),
        *move("a/1", "pending", "in-progress", "complete", tree="t"),
        ev.CommitRecorded(sha="a1", task_id="a/1", parent="base0", branch="lopen/auth--a"),
        ev.TasksRecorded(
            component="a", tasks=(ev.TaskSpec(id="a/1", name="Task 1"), ev.TaskSpec(id="a/2", name="Merge"))
        ),
        ev.ComponentMergeConflicted(component="a", into="m9", files=("x.py",), task_id="a/2"),
    )
    assert state.lanes["a"].resolving == "m9" and state.lanes["a"].resolution_task == "a/2"
    assert schedule.component_step(state, "a").task == "a/2"
    state.apply(ev.TaskStatusChanged(task_id="a/2", from_state="pending", to_state="in-progress"))
    state.apply(ev.TaskStatusChanged(task_id="a/2", from_state="in-progress", to_state="complete", tree="t2"))
    state.apply(ev.CommitRecorded(sha="r1", task_id="a/2", parent="a1", merge_parent="m9", branch="lopen/auth--a"))
    assert state.lanes["a"].resolving == "" and state.lanes["a"].tip == "r1"
    assert schedule.component_step(state, "a").kind == "component-verification"
    state.apply(verdict("component", "a"))
    assert schedule.component_step(state, "a").kind == schedule.MERGE


def test_the_module_branch_commits_owed_leave_out_components_on_their_own_branch() -> None:
    state = fold(
        *four_and_one(),
        lane("a"),
        *move("a/1", "pending", "in-progress", "complete", tree="t"),
        *move("b/1", "pending", "in-progress", "complete", tree="t"),
    )
    assert [t.id for t in state.owed_commits()] == ["b/1"]
    assert [t.id for t in state.owed_commits("a")] == ["a/1"]


# -- scheduling ------------------------------------------------------------------------------------------


def test_fan_out_when_two_components_are_ready_not_for_one_and_never_with_parallelism_1() -> None:
    state = fold(*four_and_one())
    assert schedule.fan_out(state, 2) and not schedule.fan_out(state, 1)
    chain = fold(
        ev.BranchEnsured(branch="lopen/auth", base="base0"),
        components("core", ev.ComponentSpec(name="cli", depends_on=("core",))),
        tasks("core", 1),
    )
    assert not schedule.fan_out(chain, 4)  # one ready component: built on the module branch, as today


def test_lane_work_under_way_is_finished_in_lanes_even_with_parallelism_1() -> None:
    """A run resumed with --parallel 1 after a parallel one: the component on its own branch is merged there."""
    state = fold(*four_and_one(), lane("a"), *move("a/1", "pending", "in-progress"))
    assert schedule.lanes_pending(state) and schedule.fan_out(state, 1)
    assert not schedule.fan_out(fold(*four_and_one()), 1)


def test_no_fan_out_while_a_component_is_being_built_on_the_module_branch() -> None:
    state = fold(*four_and_one(), *move("a/1", "pending", "in-progress"))
    assert state.started_in_place() == ["a"] and not schedule.fan_out(state, 4)


def test_next_work_starts_free_buildable_components_up_to_the_free_lanes() -> None:
    state = fold(*four_and_one(), claim("b", B))
    work = schedule.next_work(state, now=NOW + 1, mine=lambda w: w.startswith("host:1/"), slots=2)
    assert work.start == ("a", "c") and work.held == ("b",) and not work.plan and not work.verify_module
    later = schedule.next_work(state, now=NOW + 61, mine=lambda w: w.startswith("host:1/"), slots=4)
    assert later.start == ("a", "b", "c", "d")  # b's lease ran out: it is anyone's


def test_next_work_plans_ready_components_without_tasks_once() -> None:
    state = fold(ev.BranchEnsured(branch="lopen/auth", base="base0"), components("a", "b"), tasks("a", 1))
    mine = lambda w: w == A  # noqa: E731
    assert schedule.next_work(state, now=NOW, mine=mine, slots=2) == schedule.Work(
        start=("a",), plan=True, why="build a; plan b"
    )
    assert not schedule.next_work(state, now=NOW, mine=mine, planning=True).plan
    state.apply(claim(PLAN_ITEM, B))
    assert schedule.next_work(state, now=NOW, mine=mine).held == (PLAN_ITEM,)


@pytest.mark.parametrize("held", [False, True])
def test_next_work_verifies_the_module_when_every_component_is_done(held: bool) -> None:
    state = fold(ev.BranchEnsured(branch="lopen/auth", base="base0"), components("a"), tasks("a", 1), *finish("a", 1))
    if held:
        state.apply(claim(MODULE_ITEM, B))
    work = schedule.next_work(state, now=NOW, mine=lambda w: w == A)
    assert work.verify_module is not held and (work.held == (MODULE_ITEM,)) is held
    assert not schedule.next_work(state, now=NOW, mine=lambda w: w == A, verify_module=False).verify_module


def test_component_step_goes_tasks_in_order_then_verification_then_merge() -> None:
    state = fold(*four_and_one(), lane("a"), tasks("a", 1, 2))
    assert schedule.component_step(state, "a").task == "a/1"
    for event in move("a/1", "pending", "in-progress", "complete", tree="t"):
        state.apply(event)
    step = schedule.component_step(state, "a")
    assert step.task == "a/2" and step.last_task_of_component


def test_lane_branches_sit_beside_the_module_branch() -> None:
    assert schedule.lane_branch("auth", "token-issuer") == "lopen/auth--token-issuer"


def test_started_work_is_kept_in_a_fold_copy() -> None:
    state = fold(*four_and_one(), lane("a"), claim("a"))
    copied = state.copy()
    assert copied.lanes == state.lanes and copied.claims == state.claims
    assert isinstance(copied, ModuleState)


def test_components_behind_a_given_up_one_are_named_with_it_directly_or_through_others() -> None:
    """P1: a failure blocks only its dependents — e waits for a (directly), f for a through e; b, c, d
    and g (after b) wait for nothing given up."""
    state = fold(
        *four_and_one(),
        components(
            *"abcd",
            ev.ComponentSpec(name="e", depends_on=("a", "b")),
            ev.ComponentSpec(name="f", depends_on=("e",)),
            ev.ComponentSpec(name="g", depends_on=("b",)),
        ),
    )
    assert schedule.waiting_on(state, {"a"}) == {"e": ["a"], "f": ["a"]}
    assert schedule.waiting_on(state, {"a", "b"}) == {"e": ["a", "b"], "f": ["a", "b"], "g": ["b"]}
    assert schedule.waiting_on(state, set()) == {}
    from lopen.workflow.cycle import given_up

    action = given_up({"a": "a/1 failed 3 times"}, schedule.waiting_on(state, {"a"}))
    assert (action.kind, action.exit_code) == ("pause", 2)
    assert action.reason.startswith("a: a/1 failed 3 times; e is blocked by a, f is blocked by a")
