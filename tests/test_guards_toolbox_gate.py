"""The completion gate and the tools' refusals, one guard at a time (bin/mutate-guards, module ``toolbox``):
what ``update_task_status(complete)`` refuses and records, which tree a completion binds to, what each
verify tool answers and remembers, and the exact texts the model reads.

Real parts: a git repository and Lopen's worktree of it (the trees), a SQLite store and the module's
journal (the fold checks every event), the spec's real verify-tests command for B4. Only the oracle's
verdict is scripted (``Gate.verdicts``): tests/test_toolbox.py runs the real Oracle actor."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from events import catalogue as ev
from events.journal import Journal
from lopen.app.engine import worktree_for
from lopen.config import Settings
from lopen.copilot.tools import NoArguments
from lopen.documents.tools import LogResearchArgs, ReadPlanArgs, ReadResearchArgs, ReadSpecArgs
from lopen.project import ensure_lopen_dir, open_store
from lopen.workflow.approval import approve_spec
from lopen.workflow.evidence import EvidenceCollector
from lopen.workflow.oracle import Verdict
from lopen.workflow.spec_watch import SpecWatcher
from lopen.workflow.steps import STEP_NAMES, phase_of
from lopen.workflow.toolbox import (
    ComponentArg,
    DependencyArg,
    RecordComponentsArgs,
    RecordDependenciesArgs,
    RecordTasksArgs,
    ReportProgressArgs,
    SelectComponentArgs,
    TaskArg,
    Toolbox,
    ToolError,
    UpdateTaskStatusArgs,
    VerifyComponentArgs,
    VerifyModuleArgs,
    VerifyTaskArgs,
    _citations,
)

MODULE = "auth"
TESTS = "python -m unittest -q"
SPEC = f"""---
name: {MODULE}
description: Tokens
---

# Auth

## Overview

Sign and check tokens.

## Acceptance Criteria

- [ ] [AUTH-01] tokens are signed
- [ ] [AUTH-02] tokens are checked

## Dependencies

None.

## Skills & Hooks

- verify-tests: `{TESTS}` — the unit tests

## Notes

None.

## References

None.
"""
CITES = ["[AUTH-01] sign() returns a signed token"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


class Gate:
    def __init__(self, root: Path) -> None:
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.name", "Test")
        git(root, "config", "user.email", "test@example.com")
        spec = root / "docs" / "requirements" / MODULE / "SPECIFICATION.md"
        spec.parent.mkdir(parents=True)
        spec.write_text(SPEC, encoding="utf-8")
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", "spec")
        ensure_lopen_dir(root)
        self.store, self.project = open_store(root)
        approve_spec(root, MODULE, self.store, self.project, approver="Ann")
        self.journal = Journal(self.store, self.project, MODULE)
        self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        self.worktree = worktree_for(root, MODULE, Settings())
        _, base = self.worktree.ensure()
        self.journal.record(ev.BranchEnsured(branch=self.worktree.branch, created=True, base=base))
        self.collector = EvidenceCollector(self.journal, self.worktree, SpecWatcher(root, MODULE), root)
        self.verdicts: list[Verdict] = []  # scripted: the oracle's answers, in order (default: a pass)
        self.asked: list[tuple[str, str, str, str]] = []
        self.count = 0

    def verify(self, scope: str, target: str, notes: str, invocation_id: str) -> Verdict:
        self.asked.append((scope, target, notes, invocation_id))
        tree = self.worktree.tree()
        verdict = self.verdicts.pop(0) if self.verdicts else Verdict(passed=True, confidence=1.0, summary="ok")
        return Verdict(**{**{f: getattr(verdict, f) for f in verdict.__struct_fields__}, "tree": verdict.tree or tree})

    def box(self, kind: str = "task", component: str = "", task: str = "", verifier: bool = True) -> Toolbox:
        self.count += 1
        invocation_id = f"{kind}-{self.count}"
        self.journal.record(ev.InvocationStarted(invocation_id=invocation_id, kind=kind, task=task))
        return Toolbox(
            self.journal,
            invocation_id=invocation_id,
            step=6 if kind == "task" else 3,
            component=component,
            task=task,
            documents_root=self.worktree.path,
            verifier=self.verify if verifier else None,
            tree=self.worktree.tree,
            untested=self.collector.untested,
        )

    def plan(self, *names: str, component: str = "Core") -> None:
        box = self.box("planning")
        box.record_components(RecordComponentsArgs(components=[ComponentArg(name=component)]))
        box.select_component(SelectComponentArgs(component=component))
        box.record_tasks(RecordTasksArgs(tasks=[TaskArg(name=n, acceptance=CITES) for n in names]))

    def ran_tests(self, box: Toolbox) -> None:
        self.journal.record(ev.ToolCalled(invocation_id=box.invocation_id, tool="bash", arguments={"command": TESTS}))

    def work(self, text: str = "def sign():\n    return 'signed'\n") -> None:
        (self.worktree.path / "tokens.py").write_text(text, encoding="utf-8")

    def refusals(self) -> list[ev.CompletionRefused]:
        return [
            r.event for r in self.store.read_stream(self.journal.stream) if isinstance(r.event, ev.CompletionRefused)
        ]

    def changes(self) -> list[ev.TaskStatusChanged]:
        return [
            r.event for r in self.store.read_stream(self.journal.stream) if isinstance(r.event, ev.TaskStatusChanged)
        ]


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    g = Gate(tmp_path)
    try:
        yield g
    finally:
        g.store.close()


def status(box: Toolbox, value: str, task_id: str = "", reason: str = "") -> str:
    return box.update_task_status(UpdateTaskStatusArgs(task_id=task_id, status=value, reason=reason))  # type: ignore[arg-type]


def verify(box: Toolbox, task_id: str = "") -> dict:
    return json.loads(box.verify_task(VerifyTaskArgs(task_id=task_id)))


NEXT_TASK = "mark core/1 complete with update_task_status now, without changing any file"
ENDS = "Nothing else to do in this invocation: end it with a one-line summary"


# -- the gate ------------------------------------------------------------------------------------------------


def test_no_passing_verification_refuses_the_completion_and_records_why(gate: Gate) -> None:
    gate.plan("Sign tokens")
    box = gate.box(component="core", task="core/1")
    with pytest.raises(ToolError) as refused:
        status(box, "complete")
    assert str(refused.value) == (
        "refused: no passing verify_task_completion for this task in this invocation. Call "
        "verify_task_completion('core/1') and fix what it reports; mark the task complete only after it passes."
    )
    (recorded,) = gate.refusals()
    assert (recorded.scope, recorded.target, recorded.invocation_id) == ("task", "core/1", box.invocation_id)
    assert recorded.why == "no passing verify_task_completion for this task in this invocation"
    assert gate.journal.snapshot().tasks["core/1"].state == "pending"
    assert gate.changes() == []


def test_tests_never_run_refuse_the_completion_even_after_a_pass(gate: Gate) -> None:
    gate.plan("Sign tokens")
    gate.work()
    box = gate.box(component="core", task="core/1")
    assert verify(box)["passed"]
    with pytest.raises(ToolError) as refused:
        status(box, "complete")
    why = f"the tests were never run in this invocation (the spec's verify-tests is `{TESTS}`)"
    assert str(refused.value) == f"refused: {why}. Run them with bash, fix what fails, then complete the task."
    assert [r.why for r in gate.refusals()] == [why]
    gate.ran_tests(box)
    assert status(box, "complete").startswith("core/1 is now complete")


def test_files_changed_after_the_pass_refuse_the_completion_naming_both_trees(gate: Gate) -> None:
    gate.plan("Sign tokens")
    gate.work()
    box = gate.box(component="core", task="core/1")
    gate.ran_tests(box)
    verify(box)
    judged = gate.worktree.tree()
    gate.work("def sign():\n    return 'changed'\n")
    now = gate.worktree.tree()
    with pytest.raises(ToolError) as refused:
        status(box, "complete")
    why = f"the files changed after the passing verification (tree {judged[:10]} → {now[:10]})"
    assert str(refused.value) == (
        f"refused: {why}. Lopen commits exactly what the reviewer judged: call verify_task_completion('core/1') "
        "again on the files as they are now, then complete the task."
    )
    assert [r.why for r in gate.refusals()] == [why]
    assert gate.journal.snapshot().tasks["core/1"].state == "pending"
    gate.work()  # back to the judged files: the same tree
    status(box, "complete")
    assert gate.journal.snapshot().tasks["core/1"].tree == judged


def test_a_completion_from_pending_starts_the_task_and_binds_the_judged_tree(gate: Gate) -> None:
    gate.plan("Sign tokens", "Check tokens")
    gate.work()
    box = gate.box(component="core", task="core/1")
    gate.ran_tests(box)
    verify(box)
    said = status(box, "complete", reason="done")
    assert said == f"core/1 is now complete; Lopen commits the verified files. {ENDS}"
    started, completed = gate.changes()
    assert (started.from_state, started.to_state, started.reason, started.tree) == (
        "pending",
        "in-progress",
        "work started",
        "",
    )
    assert started.invocation_id == completed.invocation_id == box.invocation_id
    assert (completed.from_state, completed.to_state, completed.reason) == ("in-progress", "complete", "done")
    assert completed.tree == gate.worktree.tree()
    assert status(box, "complete") == "core/1 is already complete"


def test_completing_the_last_task_says_the_component_is_verified_next(gate: Gate) -> None:
    gate.plan("Sign tokens")
    gate.work()
    box = gate.box(component="core", task="core/1")
    gate.ran_tests(box)
    status(box, "in-progress")
    verify(box)
    assert status(box, "complete") == (
        "core/1 is now complete; Lopen commits the verified files. Every task of core is complete: Lopen has the "
        f"component verified next. {ENDS}"
    )
    (change,) = [c for c in gate.changes() if c.to_state == "complete"]
    assert change.from_state == "in-progress"  # already started: no second start
    assert len(gate.changes()) == 2


def test_a_verdict_with_no_tree_binds_nothing_and_is_not_compared(gate: Gate) -> None:
    gate.plan("Sign tokens")
    box = gate.box(component="core", task="core/1")
    gate.ran_tests(box)
    box.passed[("task", "core/1")] = ""  # a pass whose verdict named no tree
    status(box, "complete")
    assert gate.journal.snapshot().tasks["core/1"].tree == ""


def test_without_a_tree_reader_the_verified_tree_is_bound_as_judged(gate: Gate) -> None:
    gate.plan("Sign tokens")
    gate.work()
    box = gate.box(component="core", task="core/1")
    box.current_tree = None
    gate.ran_tests(box)
    verify(box)
    judged = box.passed[("task", "core/1")]
    gate.work("def sign():\n    return 'changed'\n")
    status(box, "complete")
    assert gate.journal.snapshot().tasks["core/1"].tree == judged


def test_the_last_verdict_counts_a_failing_one_closes_the_gate(gate: Gate) -> None:
    gate.plan("Sign tokens")
    gate.work()
    box = gate.box(component="core", task="core/1")
    gate.ran_tests(box)
    verify(box)
    gate.verdicts = [Verdict(passed=False, confidence=0.9, summary="unsigned")]
    answer = verify(box)
    assert answer == {
        "passed": False,
        "summary": "unsigned",
        "criteria": [],
        "findings": [],
        "next": "fix what the findings and the unmet criteria say, run the tests, then verify again",
    }
    assert box.passed == {}
    with pytest.raises(ToolError, match="no passing verify_task_completion"):
        status(box, "complete")


def test_what_each_verdict_tells_the_model_to_do_next(gate: Gate) -> None:
    gate.plan("Sign tokens")
    box = gate.box(component="core", task="core/1")
    ok = verify(box)
    assert (ok["passed"], ok["summary"], ok["next"]) == (True, "ok", NEXT_TASK)
    assert gate.asked == [("task", "core/1", "", box.invocation_id)]
    gate.verdicts = [Verdict(passed=False, confidence=0.0, summary="x", reviewer_failed=True)]
    assert verify(box)["next"] == "the reviewer failed, not your code: call this verify tool again"
    box.verify_task(VerifyTaskArgs(notes="see tokens.py"))
    assert gate.asked[-1] == ("task", "core/1", "see tokens.py", box.invocation_id)


def test_no_verifier_no_verification(gate: Gate) -> None:
    gate.plan("Sign tokens")
    box = gate.box(component="core", task="core/1", verifier=False)
    with pytest.raises(ToolError) as refused:
        verify(box)
    assert str(refused.value) == "verification is not available in this invocation"


# -- status changes ----------------------------------------------------------------------------------------


def test_starting_and_failing_a_task_say_what_comes_next(gate: Gate) -> None:
    gate.plan("Sign tokens")
    box = gate.box(component="core", task="core/1")
    assert status(box, "in-progress") == (
        "core/1 is now in-progress. Build it with its tests, run the tests, then call verify_task_completion; "
        "complete it only after that passes"
    )
    assert status(box, "in-progress") == "core/1 is already in-progress"
    assert status(box, "failed", reason="no key") == (
        "core/1 is now failed; Lopen retries it in a fresh invocation that is shown your reason. " + ENDS
    )
    assert [(c.from_state, c.to_state, c.reason) for c in gate.changes()] == [
        ("pending", "in-progress", ""),
        ("in-progress", "failed", "no key"),
    ]
    assert gate.journal.snapshot().tasks["core/1"].reasons == ["no key"]


def test_failing_a_pending_task_starts_it_first(gate: Gate) -> None:
    gate.plan("Sign tokens")
    box = gate.box(component="core", task="core/1")
    status(box, "failed", reason="blocked")
    assert [(c.from_state, c.to_state) for c in gate.changes()] == [
        ("pending", "in-progress"),
        ("in-progress", "failed"),
    ]


def test_a_complete_task_cannot_go_back_to_in_progress(gate: Gate) -> None:
    gate.plan("Sign tokens")
    box = gate.box(component="core", task="core/1")
    gate.ran_tests(box)
    verify(box)
    status(box, "complete")
    with pytest.raises(ToolError) as refused:
        status(box, "in-progress")
    assert str(refused.value) == "core/1 cannot go from complete to in-progress"
    with pytest.raises(ToolError) as refused:
        status(box, "failed")
    assert str(refused.value) == (  # the fold refuses the implied start: nothing is recorded
        "refused: task core/1: complete → in-progress is not a valid transition (W5) "
        "(nothing was recorded; fix it and call again)"
    )
    assert gate.journal.snapshot().tasks["core/1"].state == "complete"


# -- which task, component, module ---------------------------------------------------------------------------


def test_the_task_defaults_to_the_invocations_and_another_is_refused(gate: Gate) -> None:
    gate.plan("Sign tokens", "Check tokens")
    box = gate.box(component="core", task="core/1")
    with pytest.raises(ToolError) as refused:
        status(box, "in-progress", task_id="core/2")
    assert str(refused.value) == "this invocation works on task 'core/1', not 'core/2'"
    with pytest.raises(ToolError) as refused:
        status(box, "in-progress", task_id="core/9")
    assert str(refused.value) == "no task 'core/9'; the current task is 'core/1' (see read_plan)"
    free = gate.box("planning")
    with pytest.raises(ToolError) as refused:
        status(free, "in-progress")
    assert str(refused.value) == (
        "pass task_id: this invocation has no task of its own; read_plan lists the ids ('<component>/<n>')"
    )
    with pytest.raises(ToolError) as refused:
        status(free, "in-progress", task_id="core/9")
    assert str(refused.value) == "no task 'core/9'; the current task is 'none' (see read_plan)"
    assert status(free, "in-progress", task_id="core/2").startswith("core/2 is now in-progress")


def test_a_component_is_verified_only_when_every_task_is_complete(gate: Gate) -> None:
    gate.plan("Sign tokens", "Check tokens")
    box = gate.box("component", component="core")
    with pytest.raises(ToolError) as refused:
        box.verify_component(VerifyComponentArgs())
    assert str(refused.value) == "refused: tasks not complete yet: core/1, core/2"
    (recorded,) = gate.refusals()
    assert (recorded.scope, recorded.target, recorded.why, recorded.invocation_id) == (
        "component",
        "core",
        "tasks not complete yet: core/1, core/2",
        box.invocation_id,
    )
    with pytest.raises(ToolError) as refused:
        box.verify_component(VerifyComponentArgs(component="Nope"))
    assert str(refused.value) == "no component 'Nope' in the plan"
    for task in ("core/1", "core/2"):
        worker = gate.box(component="core", task=task)
        gate.ran_tests(worker)
        verify(worker)
        status(worker, "complete")
    answer = json.loads(box.verify_component(VerifyComponentArgs(component="Core", notes="n")))
    assert answer["next"] == "nothing else to do for this verification"
    assert gate.asked[-1] == ("component", "core", "n", box.invocation_id)
    assert box.passed[("component", "core")] == gate.worktree.tree()


def test_a_component_defaults_to_the_selected_one_and_needs_one(gate: Gate) -> None:
    box = gate.box("component")
    with pytest.raises(ToolError) as refused:
        box.verify_component(VerifyComponentArgs())
    assert str(refused.value) == (
        "pass component: this invocation has no component of its own and none is selected; "
        "name one read_plan lists (or call select_component first)"
    )
    gate.plan("Sign tokens")
    with pytest.raises(ToolError, match=r"tasks not complete yet: core/1$"):
        box.verify_component(VerifyComponentArgs())


def test_the_module_is_verified_only_when_every_component_is_done(gate: Gate) -> None:
    gate.plan("Sign tokens")
    box = gate.box("module")
    with pytest.raises(ToolError) as refused:
        box.verify_module(VerifyModuleArgs(module="billing"))
    assert str(refused.value) == "this run builds module 'auth', not 'billing'"
    with pytest.raises(ToolError) as refused:
        box.verify_module(VerifyModuleArgs())
    assert str(refused.value) == "refused: components not complete yet: core"
    (recorded,) = gate.refusals()
    assert (recorded.scope, recorded.target, recorded.why) == ("module", "auth", "components not complete yet: core")
    with pytest.raises(ToolError):
        box.read_plan(ReadPlanArgs(module="billing"))
    assert box.read_plan(ReadPlanArgs()).startswith("# Plan: auth")


def test_a_module_whose_components_are_done_is_verified(gate: Gate) -> None:
    box = gate.box("planning")
    box.record_components(RecordComponentsArgs(components=[ComponentArg(name="Core", status="done")]))
    module = gate.box("module")
    answer = json.loads(module.verify_module(VerifyModuleArgs(notes="all")))
    assert answer["passed"] and answer["next"] == "nothing else to do for this verification"
    assert gate.asked[-1] == ("module", "auth", "all", module.invocation_id)
    json.loads(module.verify_module(VerifyModuleArgs(module="auth")))
    assert gate.asked[-1][1] == "auth"


# -- planning tools: what they record and answer ---------------------------------------------------------------


def test_the_context_names_the_step_and_the_invocations_ids(gate: Gate) -> None:
    gate.plan("Sign tokens")
    box = gate.box(component="core", task="core/1")
    assert box.get_current_context(NoArguments()) == {
        "phase": phase_of(6).value,
        "step": 6,
        "step_name": STEP_NAMES[6],
        "module": MODULE,
        "component": "core",
        "task": "Sign tokens",
        "task_id": "core/1",
    }
    free = gate.box("planning")
    context = free.get_current_context(NoArguments())
    assert (context["component"], context["task"], context["task_id"], context["step"]) == (None, None, None, 3)
    ghost = Toolbox(gate.journal, invocation_id="g", step=3, task="core/9", documents_root=gate.worktree.path)
    assert (ghost.get_current_context(NoArguments())["task"], ghost.get_current_context(NoArguments())["task_id"]) == (
        None,
        "core/9",
    )


def test_progress_and_dependencies_are_recorded_for_the_invocation(gate: Gate) -> None:
    box = gate.box("planning")
    assert box.report_progress(ReportProgressArgs(progress="half way")) == "noted"
    deps = [DependencyArg(name="PyJWT", kind="library", reason="tokens"), DependencyArg(name="Redis")]
    said = box.record_dependencies(RecordDependenciesArgs(dependencies=deps))
    assert said == "recorded 2 dependencies (the whole list); next: record_components"
    assert box.record_dependencies(RecordDependenciesArgs(dependencies=deps[:1])).startswith("recorded 1 dependency ")
    events = [r.event for r in gate.store.read_stream(gate.journal.stream)]
    (progress,) = [e for e in events if isinstance(e, ev.ProgressReported)]
    assert (progress.invocation_id, progress.progress) == (box.invocation_id, "half way")
    first = next(e for e in events if isinstance(e, ev.DependenciesRecorded))
    assert first.invocation_id == box.invocation_id
    assert first.dependencies == (
        ev.Dependency(name="PyJWT", kind="library", reason="tokens"),
        ev.Dependency(name="Redis"),
    )
    assert [d.name for d in gate.journal.snapshot().dependencies] == ["PyJWT"]


def test_research_is_logged_in_the_worktree_and_recorded_with_its_path(gate: Gate) -> None:
    box = gate.box("planning")
    box.log_research(LogResearchArgs(topic="signing", content="HMAC."))
    (logged,) = [r.event for r in gate.store.read_stream(gate.journal.stream) if isinstance(r.event, ev.ResearchLogged)]
    assert logged.topic == "signing"
    assert (gate.worktree.path / logged.path).read_text(encoding="utf-8").startswith("# signing")
    assert not Path(logged.path).is_absolute()
    read = box.tools(("read_research",))[0].handler(ReadResearchArgs(topic="signing"))
    assert "HMAC." in read
    with pytest.raises(ToolError, match="not 'billing'"):
        box.log_research(LogResearchArgs(topic="x", content="y", module="billing"))
    spec = box.tools(("read_spec",))[0].handler(ReadSpecArgs(section="Overview"))
    assert "Sign and check tokens." in spec


def test_components_merge_by_slug_and_the_answer_lists_them(gate: Gate) -> None:
    box = gate.box("planning")
    said = box.record_components(
        RecordComponentsArgs(components=[ComponentArg(name="Core", status="partial"), ComponentArg(name="API")])
    )
    assert said == "the module's components are now: core (partial); api (missing). Next: select_component"
    said = box.record_components(
        RecordComponentsArgs(components=[ComponentArg(name="api", description="d", depends_on=["Core", "Redis"])])
    )
    assert said == (
        "the module's components are now: core (partial); api (missing, depends on core, redis). Next: select_component"
    )
    state = gate.journal.snapshot()
    assert (state.components["api"].name, state.components["api"].description) == ("api", "d")
    assert state.components["core"].status == "partial"
    recorded = [
        r.event for r in gate.store.read_stream(gate.journal.stream) if isinstance(r.event, ev.ComponentsRecorded)
    ]
    assert {e.invocation_id for e in recorded} == {box.invocation_id}
    box.record_components(RecordComponentsArgs(components=[ComponentArg(name="Docs")], replace=True))
    assert list(gate.journal.snapshot().components) == ["docs"]
    with pytest.raises(ToolError) as refused:
        box.record_components(RecordComponentsArgs(components=[ComponentArg(name="A b"), ComponentArg(name="a-B")]))
    assert str(refused.value) == (
        "refused: component names must be distinct; got a-b, a-b (nothing was recorded; fix it and call again)"
    )
    with pytest.raises(ToolError) as refused:
        box.record_components(RecordComponentsArgs(components=[]))
    assert str(refused.value) == "pass at least one component in components"


def test_selecting_says_what_is_wrong_and_what_is_ready(gate: Gate) -> None:
    box = gate.box("planning")
    with pytest.raises(ToolError) as refused:
        box.select_component(SelectComponentArgs(component="core"))
    assert str(refused.value) == "no component 'core'; components are: none yet — call record_components first"
    box.record_components(
        RecordComponentsArgs(
            components=[
                ComponentArg(name="Core"),
                ComponentArg(name="API", depends_on=["Core"]),
                ComponentArg(name="Docs", status="done"),
                ComponentArg(name="CLI", depends_on=["API"]),
            ]
        )
    )
    with pytest.raises(ToolError) as refused:
        box.select_component(SelectComponentArgs(component="nope"))
    assert str(refused.value) == "no component 'nope'; components are: core, api, docs, cli"
    with pytest.raises(ToolError) as refused:
        box.select_component(SelectComponentArgs(component="Docs"))
    assert str(refused.value) == "component 'docs' is already complete; select one that is not"
    with pytest.raises(ToolError) as refused:
        box.select_component(SelectComponentArgs(component="API"))
    assert str(refused.value) == (
        "component 'api' depends on core, which are not complete yet; select one that is ready: core"
    )
    said = box.select_component(SelectComponentArgs(component="Core", reason="first"))
    assert said == "selected core; next: record_tasks for core"
    assert box.component == "core"
    (selected,) = [
        r.event for r in gate.store.read_stream(gate.journal.stream) if isinstance(r.event, ev.ComponentSelected)
    ]
    assert (selected.component, selected.reason, selected.invocation_id) == ("core", "first", box.invocation_id)
    box.record_tasks(RecordTasksArgs(tasks=[TaskArg(name="A", acceptance=CITES), TaskArg(name="B", acceptance=CITES)]))
    assert box.select_component(SelectComponentArgs(component="core")) == (
        "selected core; it has 2 tasks already (read_plan shows them). "
        "Next: record_tasks for core to add or update tasks, or end the invocation"
    )


def test_tasks_get_fresh_ids_merge_by_name_and_say_where_they_stand(gate: Gate) -> None:
    gate.plan("Sign tokens", "Check tokens")
    box = gate.box("planning", component="core")
    said = box.record_tasks(
        RecordTasksArgs(
            tasks=[
                TaskArg(name="check tokens", description="new", acceptance=CITES),
                TaskArg(name="Revoke", acceptance=CITES),
            ]
        )
    )
    assert said == (
        "the tasks of core are now: core/1 Sign tokens (pending), core/2 check tokens (pending), core/3 Revoke "
        "(pending). Next: record_tasks for another component you selected, or end the invocation with a one-line "
        "summary if planning is done"
    )
    assert gate.journal.snapshot().tasks["core/2"].description == "new"
    worker = gate.box(component="core", task="core/1")
    status(worker, "in-progress")
    box.record_tasks(RecordTasksArgs(tasks=[TaskArg(name="Sign tokens", description="changed", acceptance=CITES)]))
    state = gate.journal.snapshot()
    assert state.tasks["core/1"].description == "" and state.components["core"].tasks == ["core/1", "core/2", "core/3"]
    box.record_tasks(RecordTasksArgs(tasks=[TaskArg(name="Revoke", subtasks=["a"], acceptance=CITES)], replace=True))
    state = gate.journal.snapshot()
    assert state.components["core"].tasks == ["core/1", "core/3"]  # replace: the pending Revoke keeps its id
    assert state.tasks["core/3"].subtasks == ["a"]
    box.record_tasks(RecordTasksArgs(tasks=[TaskArg(name="Audit", acceptance=CITES)], replace=True))
    assert gate.journal.snapshot().components["core"].tasks == ["core/1", "core/4"]
    recorded = [r.event for r in gate.store.read_stream(gate.journal.stream) if isinstance(r.event, ev.TasksRecorded)]
    assert recorded[-1].invocation_id == box.invocation_id


def test_tasks_are_refused_for_an_unknown_component_or_repeated_names(gate: Gate) -> None:
    box = gate.box("planning")
    with pytest.raises(ToolError) as refused:
        box.record_tasks(RecordTasksArgs(component="core", tasks=[TaskArg(name="A", acceptance=CITES)]))
    assert str(refused.value) == (
        "no component 'core'; components are: none yet (record it with record_components first)"
    )
    gate.plan("Sign tokens")
    with pytest.raises(ToolError) as refused:
        box.record_tasks(RecordTasksArgs(component="api", tasks=[TaskArg(name="A", acceptance=CITES)]))
    assert str(refused.value) == "no component 'api'; components are: core (record it with record_components first)"
    with pytest.raises(ToolError) as refused:
        box.record_tasks(RecordTasksArgs(component="core", tasks=[]))
    assert str(refused.value) == "pass at least one task in tasks"
    with pytest.raises(ToolError) as refused:
        box.record_tasks(
            RecordTasksArgs(
                component="core", tasks=[TaskArg(name="A b", acceptance=CITES), TaskArg(name="a-B", acceptance=CITES)]
            )
        )
    assert str(refused.value) == (
        "refused: task names must be distinct within a call; got A b, a-B (nothing was recorded; fix it and call again)"
    )


def test_acceptance_items_must_cite_the_specs_criteria(gate: Gate) -> None:
    gate.plan("Sign tokens")
    box = gate.box("planning", component="core")
    version = gate.journal.version
    with pytest.raises(ToolError) as refused:
        box.record_tasks(
            RecordTasksArgs(tasks=[TaskArg(name="E", acceptance=["  ", ""]), TaskArg(name="F", acceptance=[" "])])
        )
    assert str(refused.value) == (
        "refused: tasks without acceptance items: E, F; give each task at least one check that proves it done "
        "(nothing was recorded; fix it and call again)"
    )
    with pytest.raises(ToolError) as refused:
        box.record_tasks(
            RecordTasksArgs(
                tasks=[
                    TaskArg(name="Rotate", acceptance=["[AUTH-07] yearly", "AUTH-9 too"]),
                    TaskArg(name="Check", acceptance=["checked"]),
                    TaskArg(name="Fine", acceptance=["auth-1: signed"]),
                ]
            )
        )
    assert str(refused.value) == (
        "refused: each task's acceptance items must cite the spec's acceptance criteria by id, e.g. '[AUTH-01] …': "
        "'Rotate' cites AUTH-07, AUTH-9, which the spec does not have; 'Check' cites no criterion. The spec's "
        "criteria are AUTH-01, AUTH-02 (read_spec 'Acceptance Criteria'). Nothing was recorded; fix the tasks and "
        "call again."
    )
    assert gate.journal.version == version


@pytest.mark.parametrize(
    ("items", "cited", "unknown"),
    [
        (["[AUTH-01] signed"], ["AUTH-01"], []),
        (["auth-1 and AUTH-02"], ["AUTH-01", "AUTH-02"], []),  # any case, leading zeros or not
        (["[AUTH-01] and again AUTH-01"], ["AUTH-01"], []),
        (["AUTH-03 is new", "[AUTH-03]"], [], ["AUTH-03"]),
        (["[NOTE-1] an upper-case bracketed id"], [], ["NOTE-1"]),
        (["[note-1] lower case is prose", "xAUTH-01 and AUTH-01x are words"], [], []),
        (["OAUTH-01"], [], []),
    ],
)
def test_which_criteria_an_item_cites(items: list[str], cited: list[str], unknown: list[str]) -> None:
    assert _citations(items, ["AUTH-01", "AUTH-02"]) == (cited, unknown)


def test_ids_with_other_separators_and_prefixes(gate: Gate) -> None:
    assert _citations(["SLUG.5 and SLUG_LONG_2"], ["SLUG.05", "SLUG_LONG_2", "X-1"]) == (["SLUG.05", "SLUG_LONG_2"], [])
    assert _citations(["SLUG_LONG_9"], ["SLUG_2", "SLUG_LONG_2"]) == ([], ["SLUG_LONG_9"])
    assert _citations(["V1 done"], ["V1"]) == (["V1"], [])


def test_the_tools_are_the_ones_named_with_their_contracts(gate: Gate) -> None:
    box = gate.box("planning")
    names = ("get_current_context", "read_plan", "record_components", "verify_module_completion")
    tools = box.tools(names)
    assert [t.name for t in tools] == list(names)
    assert all(t.description for t in tools)
    assert tools[1].handler(ReadPlanArgs()).startswith("# Plan: auth")


def test_merging_components_keeps_what_the_others_recorded(gate: Gate) -> None:
    box = gate.box("planning")
    box.record_components(
        RecordComponentsArgs(
            components=[
                ComponentArg(name="Core", description="the core", status="partial", depends_on=["Lib"]),
                ComponentArg(name="API"),
            ]
        )
    )
    box.record_components(RecordComponentsArgs(components=[ComponentArg(name="CLI"), ComponentArg(name="api")]))
    state = gate.journal.snapshot()
    assert list(state.components) == ["core", "api", "cli"]  # known ones first, in their order, then the new
    core = state.components["core"]
    assert (core.name, core.description, core.status, core.depends_on) == ("Core", "the core", "partial", ["lib"])
    assert state.components["api"].name == "api"


def test_without_a_readable_spec_acceptance_items_are_not_checked_for_ids(gate: Gate, tmp_path: Path) -> None:
    gate.plan("Sign tokens")
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    box = Toolbox(gate.journal, invocation_id="p", step=5, component="core", documents_root=empty)
    box.record_tasks(RecordTasksArgs(tasks=[TaskArg(name="Check", acceptance=["checked by hand"])]))
    assert gate.journal.snapshot().tasks["core/2"].acceptance == ["checked by hand"]


def test_a_first_verification_that_fails_leaves_the_gate_closed(gate: Gate) -> None:
    gate.plan("Sign tokens")
    box = gate.box(component="core", task="core/1")
    gate.verdicts = [Verdict(passed=False, confidence=0.5, summary="not yet")]
    assert verify(box)["passed"] is False
    assert box.passed == {}
    gate.ran_tests(box)
    with pytest.raises(ToolError, match="no passing verify_task_completion"):
        status(box, "complete")


def test_the_module_refusal_names_every_unfinished_component_and_the_invocation(gate: Gate) -> None:
    box = gate.box("planning")
    box.record_components(RecordComponentsArgs(components=[ComponentArg(name="Core"), ComponentArg(name="API")]))
    module = gate.box("module")
    with pytest.raises(ToolError) as refused:
        module.verify_module(VerifyModuleArgs())
    assert str(refused.value) == "refused: components not complete yet: core, api"
    (recorded,) = gate.refusals()
    assert (recorded.why, recorded.invocation_id) == ("components not complete yet: core, api", module.invocation_id)
