"""The fold's guards, one refusal at a time (bin/mutate-guards, module ``fold``): what ``ModuleState.check``
refuses and the exact reason it gives (a refused event's text is what a person reads in ``lopen`` and in
the record), and what the queries the checks lean on answer — stale commit parents on the module branch
and on a component's own branch, leases, merges, plans that contradict started work.

Pure: no store (tests/test_journal.py drives the same fold through the journal)."""

from __future__ import annotations

import collections
import itertools

import pytest

from events import catalogue as ev
from events.fold import Fence, ModuleState, aggregate, render_plan, slugify
from events.folds import plan

MODULE_TIP = "1111111111aaaa"  # longer than the 10 characters a refusal shows
LANE_BASE = "2222222222bbbb"
LANE_TIP = "3333333333cccc"
STALE = "9999999999ffff"


def fold(*events: ev.Event, module: str = "auth") -> ModuleState:
    state = ModuleState(project="proj", module=module)
    for seq, event in enumerate(events, 1):
        assert state.apply(event, seq) is None, (seq, event)
    return state


def refused(state: ModuleState, event: ev.Event) -> str:
    """The reason ``state`` refuses ``event``; the event is skipped with that reason and changes nothing."""
    before = state.copy()
    problem = state.check(event)
    assert problem is not None, event
    assert state.apply(event, 7) == f"event #7 {type(event).__name__} skipped: {problem}"
    assert state.problems[-1] == f"event #7 {type(event).__name__} skipped: {problem}"
    state.problems = before.problems
    assert state == before
    return problem


def components(*specs: ev.ComponentSpec | str) -> ev.ComponentsRecorded:
    return ev.ComponentsRecorded(components=tuple(ev.ComponentSpec(name=s) if isinstance(s, str) else s for s in specs))


def dep(name: str, *depends_on: str, status: str = "missing") -> ev.ComponentSpec:
    return ev.ComponentSpec(name=name, depends_on=depends_on, status=status)  # type: ignore[arg-type]


def tasks(component: str, *numbers: int) -> ev.TasksRecorded:
    slug = slugify(component)
    return ev.TasksRecorded(
        component=component, tasks=tuple(ev.TaskSpec(id=f"{slug}/{n}", name=f"Task {n}") for n in numbers)
    )


def move(task: str, *states: str, tree: str = "t") -> list[ev.Event]:
    return [
        ev.TaskStatusChanged(task_id=task, from_state=a, to_state=b, tree=tree if b == "complete" else "")  # type: ignore[arg-type]
        for a, b in itertools.pairwise(states)
    ]


def done(task: str) -> list[ev.Event]:
    return move(task, "pending", "in-progress", "complete")


def verdict(scope: str, target: str, passed: bool = True) -> ev.OracleVerdictRecorded:
    return ev.OracleVerdictRecorded(scope=scope, target=target, passed=passed, tree="t")  # type: ignore[arg-type]


def module_branch() -> ev.BranchEnsured:
    return ev.BranchEnsured(branch="lopen/auth", base=MODULE_TIP, created=True)


def lane(component: str = "core", base: str = LANE_BASE) -> ev.BranchEnsured:
    return ev.BranchEnsured(branch=f"lopen/auth--{component}", base=base, created=True, component=component)


# -- the plan ---------------------------------------------------------------------------------------------


def test_two_components_with_one_slug_are_refused_naming_every_slug() -> None:
    state = fold()
    assert refused(state, components("Core", "API", "core")) == "component names must be distinct; got core, api, core"


def test_a_component_depending_on_itself_is_refused() -> None:
    state = fold()
    assert refused(state, components(dep("API", "Core"), dep("Core", "core"))) == "component core depends on itself"


@pytest.mark.parametrize(
    ("specs", "cycle"),
    [
        ((dep("A", "B"), dep("B", "A")), "a → b → a"),
        ((dep("A", "B"), dep("B", "C"), dep("C", "B")), "b → c → b"),  # reached from a, which is not in it
        ((dep("X", "Lib"), dep("A", "X", "B"), dep("B", "A")), "a → b → a"),  # after a finished dependency
        ((dep("A", "Z", "B"), dep("Z"), dep("B", "A")), "a → b → a"),  # z, finished inside it, is not on it
    ],
)
def test_a_cycle_is_refused_and_shown_from_where_it_closes(specs: tuple[ev.ComponentSpec, ...], cycle: str) -> None:
    assert refused(fold(), components(*specs)) == f"the components' depends_on form a cycle: {cycle}"


def test_shared_and_external_dependencies_are_no_cycle() -> None:
    # d is reached twice (from b and from c): visited once; "Postgres" is not a component (external)
    state = fold(components(dep("A", "B", "C"), dep("B", "D"), dep("C", "D"), dep("D", "Postgres")))
    assert list(state.components) == ["a", "b", "c", "d"]
    assert state.components["d"].depends_on == ["postgres"]


def test_a_component_with_started_work_cannot_be_dropped_but_an_unstarted_one_can() -> None:
    state = fold(
        components("Core", "API", "Docs"),
        tasks("Core", 1, 2),
        tasks("API", 1),
        *move("core/2", "pending", "in-progress"),
    )
    assert refused(state, components("API")) == "component core has started work (core/2) and cannot be dropped"
    assert state.apply(components("Core")) is None  # api's task never started: it goes, with its tasks
    assert list(state.components) == ["core"]
    assert sorted(state.tasks) == ["core/1", "core/2"]


def test_a_dropped_component_names_every_task_with_started_work() -> None:
    state = fold(
        components("Core", "API"),
        tasks("Core", 1, 2, 3),
        *done("core/1"),
        *move("core/3", "pending", "in-progress"),
    )
    assert refused(state, components("API")) == (
        "component core has started work (core/1, core/3) and cannot be dropped"
    )


def test_the_cycle_check_walks_each_component_once() -> None:
    """Shared dependencies (a diamond under a diamond…) are walked once each, not once per path to them:
    a plan of n stacked diamonds has 2^n paths, and a walk along every path would hang the fold."""
    reads: collections.Counter[str] = collections.Counter()

    class Graph(dict[str, list[str]]):
        def __getitem__(self, slug: str) -> list[str]:
            reads[slug] += 1
            return super().__getitem__(slug)

    layers = 6  # top → a1, b1 → d1 → a2, b2 → d2 → … : 2^6 paths from top to d6
    graph = Graph(top=["a1", "b1"])
    for n in range(1, layers + 1):
        below = [f"a{n + 1}", f"b{n + 1}"] if n < layers else []
        graph.update({f"a{n}": [f"d{n}"], f"b{n}": [f"d{n}"], f"d{n}": below})
    assert plan._cycle(graph) == []
    assert set(reads.values()) == {1} and len(reads) == len(graph)


def test_selecting_is_refused_for_an_unknown_a_complete_and_a_blocked_component() -> None:
    state = fold(components(dep("Core"), dep("API", "Core", "Redis"), dep("Docs", status="done")))
    assert refused(state, ev.ComponentSelected(component="Nope")) == "no component 'Nope' in the plan"
    assert refused(state, ev.ComponentSelected(component="docs")) == "component docs is already complete"
    assert refused(state, ev.ComponentSelected(component="API")) == (
        "component api depends on core, which are not complete yet"
    )
    assert state.check(ev.ComponentSelected(component="Core")) is None
    state.apply(ev.ComponentSelected(component="Core"))
    assert state.selected == "core"


def test_selecting_names_every_dependency_not_complete_yet() -> None:
    state = fold(components(dep("Core"), dep("Store"), dep("Docs", status="done"), dep("API", "Core", "Docs", "Store")))
    assert refused(state, ev.ComponentSelected(component="API")) == (
        "component api depends on core, store, which are not complete yet"
    )


def test_a_component_whose_dependencies_are_done_can_be_selected() -> None:
    state = fold(components(dep("Core", status="done"), dep("API", "Core")))
    assert state.blocked_by("api") == []
    assert state.check(ev.ComponentSelected(component="API")) is None
    assert state.blocked_by("nope") == []


def test_tasks_are_refused_for_an_unknown_component_and_duplicate_ids() -> None:
    state = fold(components("Core"))
    assert refused(state, tasks("Nope", 1)) == "no component 'Nope' in the plan"
    assert refused(state, tasks("Core", 1, 2, 1)) == "task ids must be distinct; got core/1, core/2, core/1"


def test_a_task_id_of_another_component_or_of_another_form_is_refused() -> None:
    state = fold(components("Core", "API"), tasks("Core", 1))
    stolen = ev.TasksRecorded(component="API", tasks=(ev.TaskSpec(id="core/1", name="x"),))
    assert refused(state, stolen) == "task core/1 already belongs to component 'core'"
    odd = ev.TasksRecorded(component="API", tasks=(ev.TaskSpec(id="api-1", name="x"),))
    assert refused(state, odd) == "task id api-1 is not of the form api/<n>"
    prefix = ev.TasksRecorded(component="API", tasks=(ev.TaskSpec(id="apix/1", name="x"),))
    assert refused(state, prefix) == "task id apix/1 is not of the form api/<n>"
    again = ev.TasksRecorded(component="Core", tasks=(ev.TaskSpec(id="core/1", name="renamed"),))
    assert state.check(again) is None  # its own known task, recorded again


def test_recording_a_plan_again_keeps_started_tasks_and_refuses_to_drop_them() -> None:
    state = fold(components("Core"), tasks("Core", 1, 2, 3), *done("core/1"), *move("core/2", "pending", "in-progress"))
    assert refused(state, tasks("Core", 3)) == "tasks with started or finished work cannot be dropped: core/1, core/2"
    state.apply(tasks("Core", 1, 2, 4))  # core/3 (pending) dropped, core/4 added
    assert [t.id for t in state.component_tasks("core")] == ["core/1", "core/2", "core/4"]
    assert (state.tasks["core/1"].state, state.tasks["core/1"].tree) == ("complete", "t")
    assert state.tasks["core/2"].state == "in-progress"
    assert "core/3" not in state.tasks
    assert state.next_task_id("core") == "core/5"
    assert state.next_task_id("core", used=9) == "core/10"


def test_a_status_change_is_refused_for_an_unknown_task_a_wrong_from_state_and_an_invalid_transition() -> None:
    state = fold(components("Core"), tasks("Core", 1))
    unknown = ev.TaskStatusChanged(task_id="core/9", from_state="pending", to_state="in-progress")
    assert refused(state, unknown) == "task core/9 is not in the plan of module 'auth'"
    wrong = ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="complete")
    assert refused(state, wrong) == "task core/1 is 'pending', but the event moves it from 'in-progress'"
    skip = ev.TaskStatusChanged(task_id="core/1", from_state="pending", to_state="complete")
    assert refused(state, skip) == "task core/1: pending → complete is not a valid transition (W5)"
    assert refused(state, ev.TaskReopened(task_id="core/9")) == "task core/9 is not in the plan of module 'auth'"
    assert state.check(ev.TaskReopened(task_id="core/1")) is None


def test_a_session_id_is_used_once() -> None:
    state = fold(ev.SessionStarted(session_id="s1"))
    assert refused(state, ev.SessionStarted(session_id="s1")) == "session s1 already exists"
    assert state.check(ev.SessionStarted(session_id="s2")) is None


# -- commits: one writer per tip ---------------------------------------------------------------------------


def test_a_commit_on_a_stale_module_tip_is_refused() -> None:
    state = fold(module_branch())
    stale = ev.CommitRecorded(sha="c1", parent=STALE, branch="lopen/auth")
    assert refused(state, stale) == (
        "lopen/auth is at 1111111111 in the history, not 9999999999: another commit came first"
    )
    nameless = ev.CommitRecorded(sha="c1", parent=STALE)
    assert refused(state, nameless) == (
        "the branch is at 1111111111 in the history, not 9999999999: another commit came first"
    )
    state.apply(ev.CommitRecorded(sha="c1", parent=MODULE_TIP, branch="lopen/auth"))
    assert state.tip == "c1"
    # the base is no longer the tip: a second commit on it came second
    assert "another commit came first" in refused(state, ev.CommitRecorded(sha="c2", parent=MODULE_TIP))
    assert state.check(ev.CommitRecorded(sha="c2", parent="c1")) is None


def test_before_any_commit_the_branch_base_is_the_tip() -> None:
    state = fold(module_branch())
    state.tip = ""  # a history from before the tip was recorded
    assert "is at 1111111111" in refused(state, ev.CommitRecorded(sha="c1", parent=STALE))
    assert state.check(ev.CommitRecorded(sha="c1", parent=MODULE_TIP)) is None


def test_a_commit_with_no_parent_or_no_known_tip_is_not_checked_for_staleness() -> None:
    assert fold(module_branch()).check(ev.CommitRecorded(sha="c1")) is None
    assert fold().check(ev.CommitRecorded(sha="c1", parent=STALE)) is None


def test_a_commit_on_a_components_branch_is_checked_against_that_branchs_tip() -> None:
    state = fold(module_branch(), components("Core"), lane())
    on_lane = ev.CommitRecorded(sha=LANE_TIP, parent=MODULE_TIP, branch="lopen/auth--core")
    assert refused(state, on_lane) == (
        "lopen/auth--core is at 2222222222 in the history, not 1111111111: another commit came first"
    )
    state.apply(ev.CommitRecorded(sha=LANE_TIP, parent=LANE_BASE, branch="lopen/auth--core"))
    assert state.lanes["core"].tip == LANE_TIP
    assert state.tip == MODULE_TIP  # the module branch did not move
    assert state.tip_of("core") == LANE_TIP
    assert state.tip_of() == MODULE_TIP
    stale = ev.CommitRecorded(sha="c3", parent=LANE_BASE, branch="lopen/auth--core")
    assert "is at 3333333333" in refused(state, stale)
    # the module branch keeps its own tip
    assert state.check(ev.CommitRecorded(sha="c4", parent=MODULE_TIP, branch="lopen/auth")) is None


def test_a_lane_with_no_commit_yet_is_at_its_base() -> None:
    state = fold(module_branch(), components("Core"), lane())
    state.lanes["core"].tip = ""  # an older record: only the base
    assert state.tip_of("core") == LANE_BASE
    assert "is at 2222222222" in refused(state, ev.CommitRecorded(sha="x", parent=STALE, branch="lopen/auth--core"))
    assert state.check(ev.CommitRecorded(sha="x", parent=LANE_BASE, branch="lopen/auth--core")) is None
    state.tip = ""
    assert state.tip_of() == MODULE_TIP  # the module's branch base


def test_a_commit_completing_a_task_needs_a_complete_task_of_the_plan() -> None:
    state = fold(components("Core"), tasks("Core", 1), *move("core/1", "pending", "in-progress"))
    assert refused(state, ev.CommitRecorded(sha="c", task_id="core/9")) == (
        "task core/9 is not in the plan of module 'auth'"
    )
    assert refused(state, ev.CommitRecorded(sha="c", task_id="core/1")) == (
        "task core/1 is in-progress: only a complete task is committed"
    )
    state.apply(move("core/1", "in-progress", "complete")[0])
    assert state.owed_commits() == [state.tasks["core/1"]]
    assert state.apply(ev.CommitRecorded(sha="c", task_id="core/1")) is None
    assert state.tasks["core/1"].commit == "c"
    assert state.owed_commits() == []


# -- claims and leases -------------------------------------------------------------------------------------


def claim(component: str, worker: str, until: float, at: float) -> ev.ComponentClaimed:
    return ev.ComponentClaimed(component=component, worker=worker, lease_until=until, at=at)


def test_a_claim_of_something_not_in_the_plan_is_refused_but_the_reserved_items_can_be_claimed() -> None:
    state = fold(components("Core"))
    assert refused(state, claim("nope", "w1", 100, 10)) == "no component 'nope' in the plan"
    assert state.check(claim(":plan", "w1", 100, 10)) is None
    assert state.check(claim(":module", "w1", 100, 10)) is None


def test_a_complete_component_cannot_be_claimed() -> None:
    state = fold(components(dep("Core", status="done")))
    assert refused(state, claim("core", "w1", 100, 10)) == "component core is already complete"


def test_a_live_lease_refuses_another_worker_until_it_runs_out() -> None:
    state = fold(components("Core"), claim("core", "w1", until=3600, at=10))
    assert refused(state, claim("core", "w2", 7200, at=3599)) == (
        "core is claimed by w1 until 01:00:00Z (a live lease)"
    )
    assert state.check(claim("core", "w1", 7200, at=3599)) is None  # its holder claims again
    assert state.live_claim("core", 3599) == state.claims["core"]
    assert state.live_claim("core", 3600) is None  # ran out at that very second
    state.apply(claim("core", "w2", 7200, at=3600))
    assert state.claims["core"].worker == "w2"
    assert (state.claims["core"].until, state.claims["core"].at) == (7200, 3600)


def test_only_the_holder_renews_or_releases_a_claim() -> None:
    state = fold(components("Core"), claim("core", "w1", 100, 10))
    renew = ev.ComponentLeaseRenewed(component="core", worker="w2", lease_until=200)
    assert refused(state, renew) == "core is claimed by w1, not w2"
    assert refused(state, ev.ComponentReleased(component="core", worker="w2")) == "core is claimed by w1, not w2"
    assert refused(state, ev.ComponentReleased(component=":plan", worker="w1")) == ":plan is not claimed"
    state.apply(ev.ComponentLeaseRenewed(component="core", worker="w1", lease_until=200))
    assert state.claims["core"].until == 200
    state.apply(ev.ComponentReleased(component="core", worker="w1"))
    assert state.claims == {}
    assert refused(state, ev.ComponentLeaseRenewed(component="core", worker="w1", lease_until=300)) == (
        "core is not claimed"
    )


# -- branches and merges -----------------------------------------------------------------------------------


def test_a_branch_for_a_component_not_in_the_plan_is_refused() -> None:
    state = fold(components("Core"))
    assert refused(state, lane("nope")) == "no component 'nope' in the plan"
    assert state.check(ev.BranchEnsured(branch="lopen/auth")) is None


def test_ensuring_a_branch_again_keeps_its_tip_and_a_recreated_lane_keeps_its_conflicts() -> None:
    state = fold(module_branch(), components("Core"), lane())
    state.apply(ev.CommitRecorded(sha=LANE_TIP, parent=LANE_BASE, branch="lopen/auth--core"))
    state.apply(ev.ComponentMergeConflicted(component="core", into="m2", redo=True))
    state.apply(ev.BranchEnsured(branch="lopen/auth--core", component="core", worktree="/wt/core"))
    assert (state.lanes["core"].tip, state.lanes["core"].worktree) == (LANE_TIP, "/wt/core")
    state.apply(ev.BranchEnsured(branch="lopen/auth--core", component="core"))
    assert state.lanes["core"].worktree == "/wt/core"
    state.apply(lane(base="newbase"))  # built again from the module's tip
    assert (state.lanes["core"].base, state.lanes["core"].tip, state.lanes["core"].conflicts) == (
        "newbase",
        "newbase",
        1,
    )
    state.apply(ev.BranchEnsured(branch="lopen/auth", base="other", worktree="/wt"))
    assert (state.branch_base, state.tip, state.worktree) == (MODULE_TIP, MODULE_TIP, "/wt")
    state.apply(ev.BranchEnsured(branch="lopen/auth", base="other"))
    assert state.worktree == "/wt"


def ready_to_merge() -> ModuleState:
    return fold(
        module_branch(),
        components("Core"),
        lane(),
        tasks("Core", 1),
        *done("core/1"),
        verdict("task", "core/1"),
        ev.CommitRecorded(sha=LANE_TIP, parent=LANE_BASE, task_id="core/1", branch="lopen/auth--core"),
        verdict("component", "core"),
    )


def merge(parent: str = MODULE_TIP, tip: str = LANE_TIP, component: str = "core") -> ev.ComponentMerged:
    return ev.ComponentMerged(component=component, sha="m1", parent=parent, component_tip=tip)


def test_a_verified_component_merges_at_its_tip_onto_the_current_module_tip() -> None:
    state = ready_to_merge()
    assert not state.merged("core") and not state.component_done("core")
    assert state.check(merge()) is None
    state.apply(merge())
    assert state.tip == "m1"
    assert (state.lanes["core"].merged_tip, state.lanes["core"].merged_as) == (LANE_TIP, "m1")
    assert state.merged("core") and state.component_done("core")
    assert state.component_state("core") == "complete"


def test_a_merge_is_refused_without_a_lane_or_on_a_stale_module_tip() -> None:
    state = ready_to_merge()
    assert refused(state, merge(component="api")) == "component api has no branch of its own to merge"
    assert refused(state, merge(parent=STALE)) == (
        "the module branch is at 1111111111, not 9999999999: another merge came first"
    )
    state.tip = ""
    assert state.check(merge()) is None  # the branch base, before any commit


def test_a_merge_is_refused_for_open_tasks_an_unverified_component_or_a_stale_component_tip() -> None:
    state = fold(module_branch(), components("Core"), lane(), tasks("Core", 1, 2), *done("core/1"))
    assert refused(state, merge(tip=LANE_BASE)) == "component core has tasks not complete: core/2"
    state.apply(tasks("Core", 1))
    assert refused(state, merge(tip=LANE_BASE)) == "component core is not verified"
    state.apply(verdict("component", "core", passed=False))
    assert refused(state, merge(tip=LANE_BASE)) == "component core is not verified"
    state.apply(verdict("component", "core"))
    assert refused(state, merge(tip=STALE)) == "component core's branch is at 2222222222, not 9999999999"
    assert state.check(merge(tip=LANE_BASE)) is None  # no commit on it yet: at its base
    state.lanes["core"].tip = ""
    assert state.check(merge(tip=LANE_BASE)) is None


def test_a_merge_waits_for_work_built_on_the_module_branch_itself() -> None:
    state = ready_to_merge()
    state.apply(components("Core", "API", "Docs"))
    state.apply(tasks("API", 1))
    state.apply(tasks("Docs", 1))
    assert state.started_in_place() == []
    state.apply(move("api/1", "pending", "in-progress")[0])
    assert state.started_in_place() == ["api"]
    assert refused(state, merge()) == "api is being built on the module branch itself: merge after it is done"


def test_a_merged_component_with_a_newer_commit_on_its_branch_is_not_done() -> None:
    state = ready_to_merge()
    state.apply(merge())
    state.apply(ev.CommitRecorded(sha="fix", parent=LANE_TIP, branch="lopen/auth--core"))
    assert not state.merged("core") and not state.component_done("core")
    assert state.component_state("core") == "in-progress"


def test_a_conflict_needs_a_lane_and_a_known_resolution_task() -> None:
    state = ready_to_merge()
    assert refused(state, ev.ComponentMergeConflicted(component="api", into="m")) == (
        "component api has no branch of its own"
    )
    assert refused(state, ev.ComponentMergeConflicted(component="core", into="m", task_id="core/9")) == (
        "task core/9 is not in the plan of module 'auth'"
    )
    state.apply(tasks("Core", 1, 2))
    state.apply(ev.ComponentMergeConflicted(component="core", into="m", task_id="core/2"))
    assert (state.lanes["core"].resolving, state.lanes["core"].resolution_task) == ("m", "core/2")
    state.apply(ev.ComponentMergeConflicted(component="core", into="m9", redo=True))
    assert state.lanes["core"].conflicts == 2
    assert state.lanes["core"].resolving == "m"  # a redo sets no resolution
    state.apply(ev.CommitRecorded(sha="x", parent=LANE_TIP, task_id="core/1", branch="lopen/auth--core"))
    assert state.lanes["core"].resolution_task == "core/2"  # another task's commit
    state.apply(move("core/2", "pending", "in-progress")[0])
    state.apply(move("core/2", "in-progress", "complete")[0])
    state.apply(ev.CommitRecorded(sha="y", parent="x", task_id="core/2", branch="lopen/auth--core"))
    assert (state.lanes["core"].resolving, state.lanes["core"].resolution_task) == ("", "")


# -- apply: what a skipped event leaves --------------------------------------------------------------------


def test_skipped_events_keep_the_latest_twenty_problems_and_a_problem_without_a_seq_is_bare() -> None:
    state = fold(components("Core"))
    for n in range(25):
        state.apply(ev.TaskReopened(task_id=f"core/{n}"), n + 1)
    assert len(state.problems) == 20
    assert state.problems[0] == "event #6 TaskReopened skipped: task core/5 is not in the plan of module 'auth'"
    assert state.problems[-1] == "event #25 TaskReopened skipped: task core/24 is not in the plan of module 'auth'"
    assert state.apply(ev.TaskReopened(task_id="x")) == "task x is not in the plan of module 'auth'"
    assert state.problems[-1] == "task x is not in the plan of module 'auth'"


def test_an_approval_remembers_where_it_is_in_the_store() -> None:
    state = fold()
    state.apply(ev.SpecApproved(spec_hash="h1", section_hashes={"a": "1"}), 5)
    state.apply(ev.SpecApproved(spec_hash="h2", section_hashes={"a": "2"}), 9)
    state.apply(ev.SpecApproved(spec_hash="h3", section_hashes={"a": "3"}))  # not from the store
    assert state.approval is not None and state.approval.seq == 0
    assert state.approval_seqs == [5, 9]
    assert state.baseline == {"a": "3"}  # no plan yet: the latest approval is the baseline


# -- what the fold remembers (the state the checks and the gate read) ----------------------------------------


def test_a_failed_task_keeps_its_latest_ten_reasons_and_a_reopened_one_starts_afresh() -> None:
    state = fold(components("Core"), tasks("Core", 1), *move("core/1", "pending", "in-progress"))
    for n in range(12):
        state.apply(ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="failed", reason=f"r{n}"))
        state.apply(ev.TaskStatusChanged(task_id="core/1", from_state="failed", to_state="in-progress"))
    task = state.tasks["core/1"]
    assert task.failures == 12
    assert task.reasons == [f"r{n}" for n in range(2, 12)]
    state.apply(ev.ScopeStarted(scope="task", target="core/1", base_commit="b"))
    state.apply(verdict("task", "core/1"))
    state.apply(ev.TaskReopened(task_id="core/1"))
    task = state.tasks["core/1"]
    assert (task.state, task.failures, task.reasons, task.tree, task.commit) == ("pending", 0, [], "", "")
    assert "task:core/1" not in state.scopes
    assert not state.verified("task", "core/1")


def test_work_started_again_unbinds_the_tree_and_voids_the_component_and_module_verdicts() -> None:
    state = fold(
        components("Core"), tasks("Core", 1), *done("core/1"), verdict("task", "core/1"), verdict("component", "core")
    )
    state.apply(verdict("module", "auth"))
    state.apply(ev.CommitRecorded(sha="c1", task_id="core/1"))
    assert state.tasks["core/1"].tree == "t" and state.complete and state.state == "complete"
    state.apply(ev.TaskReopened(task_id="core/1"))
    assert not state.verified("component", "core") and not state.verified("module", "auth")
    assert not state.complete and state.state == "in progress"
    state.apply(move("core/1", "pending", "in-progress")[0])
    state.apply(verdict("component", "core"))
    state.apply(verdict("module", "auth"))
    state.apply(ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="failed"))
    assert state.verified("component", "core")  # a failure voids the task's verdict only
    state.apply(ev.TaskStatusChanged(task_id="core/1", from_state="failed", to_state="in-progress"))
    assert not state.verified("component", "core") and not state.verified("module", "auth")
    assert (state.tasks["core/1"].tree, state.tasks["core/1"].commit) == ("", "")


def test_a_completion_remembers_its_tree_and_invocation() -> None:
    state = fold(components("Core"), tasks("Core", 1), *move("core/1", "pending", "in-progress"))
    state.apply(
        ev.TaskStatusChanged(
            task_id="core/1", from_state="in-progress", to_state="complete", tree="tx", invocation_id="i9"
        )
    )
    assert (state.tasks["core/1"].tree, state.tasks["core/1"].invocation) == ("tx", "i9")


def test_recording_tasks_voids_the_components_verdict_only() -> None:
    state = fold(components("Core"), tasks("Core", 1), verdict("task", "core/1"), verdict("component", "core"))
    state.apply(verdict("module", "auth"))
    state.apply(tasks("Core", 1, 2))
    assert not state.verified("component", "core")
    assert state.verified("task", "core/1") and state.verified("module", "auth")


def test_verdicts_count_attempts_and_only_the_latest_counts() -> None:
    state = fold(verdict("task", "x", passed=True), verdict("task", "x", passed=False))
    node = state.verdicts["task:x"]
    assert (node.attempts, node.passed, node.valid) == (2, False, False)
    state.apply(ev.OracleVerdictRecorded(scope="task", target="x", passed=True, tree="t2", summary="fine"))
    node = state.verdicts["task:x"]
    assert (node.attempts, node.passed, node.valid, node.tree, node.summary) == (3, True, True, "t2", "fine")
    assert state.attempts("task", "x") == 3 and state.attempts("task", "y") == 0


def test_drift_and_replanning_take_the_earliest_step_and_void_component_and_module_verdicts() -> None:
    state = fold(components("Core"), tasks("Core", 1), verdict("task", "core/1"), verdict("component", "core"))
    state.apply(ev.SpecDriftDetected(reentry_step=3, section_hashes={"a": "2"}))
    assert (state.replan_from, state.replan_why) == (3, "the approved specification changed: re-planning")
    assert state.baseline == {"a": "2"}
    assert state.verified("task", "core/1") and not state.verified("component", "core")
    state.apply(ev.SpecDriftDetected(reentry_step=4))
    assert state.replan_from == 3
    state.apply(ev.ReplanRequested(step=2, requested_by="Ann", reason="split core"))
    assert (state.replan_from, state.replan_why) == (2, "Ann asked to re-plan (split core)")
    state.apply(ev.ReplanRequested(step=5))
    assert (state.replan_from, state.replan_why) == (2, "a person asked to re-plan")
    fresh = fold(components("Core"), verdict("component", "core"))
    fresh.apply(ev.SpecDriftDetected(reentry_step=0, section_hashes={"b": "1"}))
    assert fresh.replan_from == 0 and fresh.verified("component", "core") and fresh.baseline == {"b": "1"}
    fresh.apply(ev.ReplanRequested(step=4))
    assert fresh.replan_from == 4


def test_only_a_planning_invocation_that_ends_ok_clears_the_replan() -> None:
    state = fold(ev.ReplanRequested(step=2))
    for kind, outcome in (("task", "ok"), ("planning", "error")):
        state.apply(ev.InvocationStarted(invocation_id="i", kind=kind))
        state.apply(ev.InvocationFinished(invocation_id="i", outcome=outcome))
        assert state.replan_from == 2 and state.invocations == {}
    state.apply(ev.InvocationFinished(invocation_id="never", outcome="ok"))
    assert state.replan_from == 2


def test_the_bash_commands_of_an_open_invocation_are_remembered() -> None:
    state = fold(ev.InvocationStarted(invocation_id="i1", kind="task", session_id="s", task="core/1"))
    state.apply(ev.ToolCalled(invocation_id="i1", tool="bash", arguments={"command": "pytest -q"}))
    state.apply(ev.ToolCalled(invocation_id="i1", tool="view", arguments={"command": "not bash"}))
    state.apply(ev.ToolCalled(invocation_id="i1", tool="bash", arguments={"command": ["a", "list"]}))
    state.apply(ev.ToolCalled(invocation_id="other", tool="bash", arguments={"command": "ls"}))
    opened = state.invocations["i1"]
    assert (opened.kind, opened.session_id, opened.task, opened.commands) == ("task", "s", "core/1", ["pytest -q"])


def test_notes_are_kept_for_the_next_non_oracle_invocation() -> None:
    state = fold(ev.CorrectiveInstructionIssued(instruction="a"), ev.CorrectiveInstructionIssued(instruction="b"))
    state.apply(ev.InvocationStarted(invocation_id="o", kind="oracle"))
    assert state.notes == ["a", "b"]
    state.apply(ev.InvocationStarted(invocation_id="t", kind="task"))
    assert state.notes == []


def test_models_that_fell_back_are_listed_once_until_a_session_starts_or_resumes() -> None:
    state = fold(ev.SessionStarted(session_id="s1"))
    for model in ("m1", "m1", "m2"):
        state.apply(ev.ModelFellBack(from_model=model, to_model="x"))
    assert state.unavailable == ["m1", "m2"]
    state.apply(ev.SessionResumed(session_id="s1"))
    assert state.unavailable == []
    state.apply(ev.ModelFellBack(from_model="m3", to_model="x"))
    state.apply(ev.SessionStarted(session_id="s2"))
    assert state.unavailable == []


def test_a_pause_request_lasts_until_a_session_stops_running() -> None:
    state = fold(ev.SessionStarted(session_id="s1", at=5.0), ev.PauseRequested(requested_by="Ann"))
    assert state.pause_requested == "Ann"
    state.apply(ev.SessionResumed(session_id="s1"))
    assert state.pause_requested == "Ann"
    state.apply(ev.SessionPaused())  # not of a session
    assert state.pause_requested == "Ann"
    state.apply(ev.SessionPaused(session_id="s1"))
    assert state.pause_requested == "" and state.sessions["s1"].status == "paused"
    assert state.sessions["s1"].started_at == 5.0
    state.apply(ev.PauseRequested())
    assert state.pause_requested == "someone"
    state.apply(ev.SessionFailed(session_id="s1"))
    assert state.pause_requested == "" and state.sessions["s1"].status == "failed"
    state.apply(ev.SessionDeleted(session_id="s1"))
    state.apply(ev.SessionResumed(session_id="s1"))
    assert state.sessions["s1"].status == "deleted"  # a deleted session stays deleted
    state.apply(ev.SessionDeleted(session_id="nope"))
    assert "nope" not in state.sessions


def test_sessions_latest_unfinished_and_latest_not_deleted() -> None:
    state = fold(
        ev.SessionStarted(session_id="a", at=1.0),
        ev.SessionStarted(session_id="b", at=2.0),
        ev.SessionStarted(session_id="c", at=3.0),
    )
    assert (state.unfinished_session(), state.last_session()) == ("c", "c")
    state.apply(ev.SessionCompleted(session_id="c"))
    state.apply(ev.SessionPaused(session_id="a"))
    assert (state.unfinished_session(), state.last_session()) == ("b", "c")
    state.apply(ev.SessionDeleted(session_id="c"))
    state.apply(ev.SessionFailed(session_id="b"))
    assert (state.unfinished_session(), state.last_session()) == ("a", "b")
    assert fold().unfinished_session() is None and fold().last_session() is None
    assert fold().state == "not started" and state.state == "in progress"


def test_verification_evidence_is_kept_per_tree_and_command_the_latest_64() -> None:
    state = fold()
    record = ev.VerificationEvidenceRecorded
    state.apply(
        record(scope="task", target="x", command="pytest", exit_code=1, output_tail="E", duration=2.5, tree="t0")
    )
    state.apply(record(scope="task", target="x", command="pytest", exit_code=0, tree="t0", reused=True))
    state.apply(record(scope="task", target="x", command="pytest", exit_code=0, tree=""))
    assert list(state.evidence) == ["t0 pytest"]
    node = state.evidence["t0 pytest"]
    assert (node.exit_code, node.output_tail, node.duration) == (1, "E", 2.5)
    for n in range(1, 65):
        state.apply(record(scope="task", target="x", command="pytest", exit_code=0, tree=f"t{n}"))
    assert len(state.evidence) == 64
    assert "t0 pytest" not in state.evidence and "t1 pytest" in state.evidence and "t64 pytest" in state.evidence


def test_messages_are_queued_until_delivered() -> None:
    state = fold(ev.UserMessageQueued(message_id="m1", text="hi"), ev.UserMessageQueued(message_id="m2", text="yo"))
    state.apply(ev.UserMessageDelivered(message_id="m1"))
    state.apply(ev.UserMessageDelivered(message_id="m9"))
    assert state.queued == {"m2": "yo"}


def test_a_new_plan_keeps_known_components_tasks_and_numbers_and_forgets_the_selection_of_a_dropped_one() -> None:
    state = fold(ev.SpecApproved(spec_hash="h", section_hashes={"a": "1"}), components("Core", "API"))
    state.apply(tasks("API", 1, 2))
    state.apply(ev.ComponentSelected(component="API"))
    state.apply(components("Core"))
    assert state.selected == "" and "api/1" not in state.tasks
    state.apply(components(dep("Core", "Lib", "lib"), "API"))
    assert state.components["core"].depends_on == ["lib"]  # one dependency, spelled twice
    assert state.components["api"].last_n == 2 and state.next_task_id("api") == "api/3"  # never reused
    state.apply(tasks("Core", 1))
    state.apply(ev.ComponentSelected(component="Core"))
    state.apply(components(ev.ComponentSpec(name="Core", description="d", status="partial"), "API"))
    node = state.components["core"]
    assert (node.tasks, node.description, node.status, state.selected) == (["core/1"], "d", "partial", "core")


def test_a_plan_made_before_the_approval_takes_its_baseline_from_the_next_plan() -> None:
    state = fold(components("Core"))
    assert state.baseline == {}
    state.apply(ev.SpecApproved(spec_hash="h", section_hashes={"a": "1"}))
    assert state.baseline == {}  # planned already: the approval does not move the baseline
    assert state.pending_drift() is None
    state.apply(components("Core"))
    assert state.baseline == {"a": "1"}
    state.apply(ev.SpecApproved(spec_hash="h2", section_hashes={"a": "2"}))
    assert state.pending_drift() == ({"a": "1"}, {"a": "2"})
    state.apply(components("Core"))
    assert state.baseline == {"a": "1"}  # a baseline stays until the drift is recorded


def test_task_numbers_follow_the_highest_number_given_even_out_of_order() -> None:
    state = fold(components("Core"))
    state.apply(
        ev.TasksRecorded(
            component="Core", tasks=(ev.TaskSpec(id="core/7", name="a"), ev.TaskSpec(id="core/3", name="b"))
        )
    )
    assert state.components["core"].last_n == 7 and state.task_numbers == {"core": 7}
    state.apply(ev.TasksRecorded(component="Core", tasks=(ev.TaskSpec(id="core/x", name="odd"),)))
    assert state.task_numbers == {"core": 7} and state.next_task_id("core") == "core/8"


def test_a_known_component_recorded_again_keeps_numbering_after_its_last_task() -> None:
    state = fold(components("Core"), tasks("Core", 1, 2, 3))
    state.task_numbers = {}  # a plan row stored before the fold kept task_numbers: only last_n knows them
    state.apply(components("Core", "API"))
    assert state.components["core"].last_n == 3 and state.next_task_id("core") == "core/4"  # core/1 is taken


# -- the plan as people and the model read it (plan.md, read_plan) ---------------------------------------------


def test_the_plan_renders_every_state_dependency_and_note() -> None:
    state = fold(
        ev.DependenciesRecorded(
            dependencies=(
                ev.Dependency(name="PyJWT", kind="library", reason="tokens"),
                ev.Dependency(name="Redis"),
                ev.Dependency(name="make", reason="builds"),
            )
        ),
        components(dep("Core"), dep("API", "Core"), dep("Docs", status="done")),
        ev.TasksRecorded(
            component="Core",
            tasks=(
                ev.TaskSpec(id="core/1", name="Sign", subtasks=("write", "test")),
                ev.TaskSpec(id="core/2", name="Check"),
                ev.TaskSpec(id="core/3", name="Revoke"),
            ),
        ),
        *done("core/1"),
        *move("core/2", "pending", "in-progress", "failed"),
        ev.TasksRecorded(component="API", tasks=(ev.TaskSpec(id="api/1", name="Serve"),)),
        *move("api/1", "pending", "in-progress"),
        ev.ComponentSelected(component="Core"),
    )
    assert render_plan(state) == (
        "# Plan: auth\n"
        "\n"
        "<!-- Rendered by lopen from the event store; edits here are overwritten. -->\n"
        "\n"
        "State: in progress — 1 of 4 tasks complete\n"
        "\n"
        "## Dependencies\n"
        "\n"
        "- PyJWT (library): tokens\n"
        "- Redis\n"
        "- make: builds\n"
        "\n"
        "## Components\n"
        "\n"
        "- [ ] **Core** `core` — failed (selected)\n"
        "  - [x] `core/1` Sign\n"
        "    - [x] write\n"
        "    - [x] test\n"
        "  - [ ] `core/2` Check — failed\n"
        "  - [ ] `core/3` Revoke\n"
        "- [ ] **API** `api` — in-progress (depends on core)\n"
        "  - [ ] `api/1` Serve — in-progress\n"
        "- [x] **Docs** `docs` — complete\n"
    )


def test_an_empty_plan_and_a_single_task() -> None:
    assert render_plan(fold()) == (
        "# Plan: auth\n\n<!-- Rendered by lopen from the event store; edits here are overwritten. -->\n\n"
        "State: not started — 0 of 0 tasks complete\n\n## Components\n\n_No components recorded yet._\n"
    )
    one = render_plan(fold(components("Core"), tasks("Core", 1), ev.ComponentSelected(component="core")))
    assert "State: in progress — 0 of 1 task complete\n" in one
    assert "- [ ] **Core** `core` — pending (selected)\n  - [ ] `core/1` Task 1\n" in one
    both = fold(components(dep("Core"), dep("API", "Core")), ev.ComponentSelected(component="core"))
    both.selected = "api"  # selected and with dependencies: both notes
    assert "- [ ] **API** `api` — pending (selected; depends on core)\n" in render_plan(both)


def test_the_plan_names_every_dependency_of_a_component() -> None:
    state = fold(components(dep("Core"), dep("API", "Core", "Redis")))
    assert "- [ ] **API** `api` — pending (depends on core, redis)\n" in render_plan(state)


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([], "pending"),
        (["pending", "pending"], "pending"),
        (["complete", "failed"], "failed"),
        (["pending", "failed"], "failed"),
        (["complete", "complete"], "complete"),
        (["complete", "pending"], "in-progress"),
        (["in-progress"], "in-progress"),
    ],
)
def test_a_parents_state_from_its_tasks(states: list[str], expected: str) -> None:
    assert aggregate(iter(states)) == expected


@pytest.mark.parametrize(("name", "slug"), [("Token Issuer", "token-issuer"), (" a--b ", "a-b"), ("", "component")])
def test_a_components_key(name: str, slug: str) -> None:
    assert slugify(name) == slug


# -- the queries the tools and the merge rely on ----------------------------------------------------------------


def test_a_components_tasks_recorded_again_from_the_fold_change_nothing() -> None:
    state = fold(
        components("Core"),
        ev.TasksRecorded(
            component="Core",
            tasks=(ev.TaskSpec(id="core/1", name="Sign", description="d", subtasks=("a", "b"), acceptance=("[X-1]",)),),
        ),
    )
    before = state.copy()
    specs = tuple(t.spec() for t in state.component_tasks("core"))
    assert specs == (
        ev.TaskSpec(id="core/1", name="Sign", description="d", subtasks=("a", "b"), acceptance=("[X-1]",)),
    )
    state.apply(ev.TasksRecorded(component="core", tasks=specs))
    assert state == before


def test_a_component_is_found_by_any_spelling_of_its_name() -> None:
    state = fold(components("Token Issuer"))
    found = state.component("token  ISSUER")
    assert found is not None and found.slug == "token-issuer"
    assert state.component("issuer") is None


def test_a_fresh_component_gives_its_first_task_number_one() -> None:
    state = fold(components("Core"))
    assert state.next_task_id("core") == "core/1"


def test_commits_owed_on_a_components_own_branch_are_apart_from_the_module_branchs() -> None:
    state = fold(
        module_branch(),
        components("Core", "API"),
        lane(),
        tasks("Core", 1),
        tasks("API", 1),
        *done("core/1"),
        *done("api/1"),
    )
    assert [t.id for t in state.owed_commits()] == ["api/1"]
    assert [t.id for t in state.owed_commits(lane="core")] == ["core/1"]
    assert state.owed_commits(lane="api") == [state.tasks["api/1"]]


def test_drift_recorded_without_an_approval_is_no_pending_drift() -> None:
    state = fold(components("Core"), ev.SpecDriftDetected(reentry_step=0, section_hashes={"a": "1"}))
    assert state.baseline == {"a": "1"} and state.approval is None
    assert state.pending_drift() is None


def test_a_merge_names_every_open_task_and_every_component_built_in_place() -> None:
    state = fold(module_branch(), components("Core"), lane(), tasks("Core", 1, 2, 3), *done("core/1"))
    assert refused(state, merge(tip=LANE_BASE)) == "component core has tasks not complete: core/2, core/3"
    state = ready_to_merge()
    state.apply(components("Core", "API", "Docs"))
    for name in ("API", "Docs"):
        state.apply(tasks(name, 1))
        state.apply(move(f"{slugify(name)}/1", "pending", "in-progress")[0])
    assert refused(state, merge()) == ("api, docs is being built on the module branch itself: merge after it is done")


def test_a_merge_at_a_stale_component_tip_names_the_branchs_last_commit() -> None:
    state = ready_to_merge()
    assert refused(state, merge(tip=STALE)) == "component core's branch is at 3333333333, not 9999999999"


def test_a_component_done_on_the_module_branch_does_not_hold_up_a_merge() -> None:
    state = ready_to_merge()
    state.apply(components("Core", "API"))
    state.apply(tasks("API", 1))
    for event in (*done("api/1"), verdict("task", "api/1"), verdict("component", "api")):
        state.apply(event)
    assert state.component_done("api") and state.started_in_place() == []
    assert state.check(merge()) is None


def test_a_lane_never_merged_is_not_merged_even_at_an_empty_tip() -> None:
    state = fold(components("Core"), ev.BranchEnsured(branch="lopen/auth--core", component="core", created=True))
    assert state.lanes["core"].tip == "" and not state.merged("core")


def test_a_replan_request_makes_a_complete_module_incomplete() -> None:
    state = fold(components(dep("Core", status="done")), verdict("module", "auth"))
    assert state.complete
    state.apply(ev.ReplanRequested(step=3))
    assert not state.complete and state.state == "in progress"


def test_a_task_completed_without_a_tree_is_owed_no_commit() -> None:
    state = fold(components("Core"), tasks("Core", 1), *move("core/1", "pending", "in-progress", "complete", tree=""))
    assert state.owed_commits() == []


def test_recording_tasks_again_keeps_their_commit_failures_and_reasons() -> None:
    state = fold(
        components("Core"),
        tasks("Core", 1, 2),
        *move("core/2", "pending", "in-progress", "failed"),
        *done("core/1"),
        ev.CommitRecorded(sha="c1", task_id="core/1"),
    )
    state.tasks["core/2"].reasons = ["why"]
    state.apply(tasks("Core", 1, 2))
    assert state.tasks["core/1"].commit == "c1"
    assert (state.tasks["core/2"].failures, state.tasks["core/2"].reasons) == (1, ["why"])


def test_the_module_branch_is_remembered_with_its_base() -> None:
    state = fold(ev.BranchEnsured(branch="lopen/auth", base="b0", worktree="/w"))
    assert (state.branch, state.branch_base, state.tip, state.worktree) == ("lopen/auth", "b0", "b0", "/w")
    state.apply(ev.ScopeStarted(scope="task", target="core/1", base_commit="b0"))
    assert state.scopes == {"task:core/1": "b0"}


def test_a_component_not_in_the_plan_has_no_tasks_and_is_not_done() -> None:
    state = fold(module_branch(), components("Core", "API"), lane("api"), tasks("API", 1))
    state.apply(components("Core"))  # api dropped (nothing started): its branch stays
    assert state.component_tasks("api") == [] and not state.component_done("api")
    assert refused(state, merge(component="api", tip=LANE_BASE)) == "component api is not verified"


def test_a_verified_component_with_a_failed_task_is_not_done_and_still_blocks() -> None:
    state = fold(
        components(dep("Core"), dep("API", "Core")),
        tasks("Core", 1, 2),
        *done("core/1"),
        *move("core/2", "pending", "in-progress"),
        verdict("component", "core"),
        *move("core/2", "in-progress", "failed"),
    )
    assert state.verified("component", "core") and state.merged("core")  # a failure voids the task's verdict only
    assert not state.component_done("core") and state.component_state("core") == "failed"
    assert refused(state, ev.ComponentSelected(component="API")) == (
        "component api depends on core, which are not complete yet"
    )


def test_the_lines_and_files_changed_are_summed_per_component_and_for_the_module_from_committed_tasks() -> None:
    """P2 (the plan tree and ``lopen report``): what each component's commits changed, and the module's."""
    state = fold(
        components("Core", "API"),
        tasks("Core", 1, 2),
        tasks("API", 1),
        module_branch(),
        *done("core/1"),
        ev.CommitRecorded(sha="c1", task_id="core/1", parent=MODULE_TIP, added=5, removed=1, files=2),
        *done("api/1"),
        ev.CommitRecorded(sha="c2", task_id="api/1", parent="c1", added=3, files=1),
        *done("core/2"),  # complete, not committed yet: it changed nothing on the branch
    )
    assert state.changes("core") == (5, 1, 2)
    assert state.changes("api") == (3, 0, 1)
    assert state.changes() == (8, 1, 3)
    assert state.changes("docs") == (0, 0, 0)  # no such component


def test_a_started_component_listed_after_a_kept_one_cannot_be_dropped() -> None:
    state = fold(components("Core", "API"), tasks("Core", 1), tasks("API", 1), *move("api/1", "pending", "in-progress"))
    assert refused(state, components("Core")) == "component api has started work (api/1) and cannot be dropped"


def test_a_fence_holds_only_while_its_own_claim_is_the_items_and_its_lease_runs() -> None:
    """Every claim gets the next token of the history; a holder's fence names why it no longer holds."""
    state = fold(components("Core"), claim("core", "w1", until=3600, at=10), claim("core", "w1", until=7200, at=20))
    first, again = Fence(item="core", worker="w1", token=1), Fence(item="core", worker="w1", token=2)
    assert (state.claims["core"].token, state.claims_made) == (2, 2)
    assert again.problem(state, 7199.5) is None
    assert first.problem(state, 100) == "core was claimed again, by w1 (claim #2, not #1)"  # the same worker
    assert Fence(item="core", worker="w2", token=2).problem(state, 100) == (
        "core was claimed again, by w1 (claim #2, not #2)"
    )
    assert again.problem(state, 7200) == "the lease of w1 on core ran out at 02:00:00Z"  # at its end, not after
    assert (
        Fence(item=":plan", worker="w1", token=2).problem(state, 100) == ":plan is no longer claimed by w1 (released)"
    )
    state.apply(ev.ComponentReleased(component="core", worker="w1", reason="done"))
    assert again.problem(state, 100) == "core is no longer claimed by w1 (released)"
    state.apply(claim("core", "w2", 9000, 30))  # a claim after a release: the next token, never one given before
    assert state.claims["core"].token == 3


def test_a_session_remembers_the_process_that_opened_it_and_an_abandoned_one_is_ended() -> None:
    """A worker whose process is gone has its running sessions abandoned by the one taking over
    (actors/foreman.py finds them by the process that opened them)."""
    state = fold(
        ev.SessionStarted(session_id="a", at=1.0, worker="host:1"),
        ev.SessionStarted(session_id="b", at=2.0, worker="host:2"),
    )
    assert [(n.worker, n.status) for n in state.sessions.values()] == [("host:1", "running"), ("host:2", "running")]
    state.apply(ev.SessionAbandoned(session_id="b", reason="its process host:2 is gone"))
    assert state.sessions["b"].status == "abandoned" and state.unfinished_session() == "a"
