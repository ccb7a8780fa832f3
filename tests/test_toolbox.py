"""Lopen's tools for one invocation (T1–T12), with the completion gate (B2, B4, G6), on a real git
worktree and a real SQLite store. Verification is the real thing except for the model: the Oracle
actor collects the evidence itself (the worktree's tree, the diff, the spec's verify-tests command run
in the worktree) and asks a stand-in gateway that answers with a verdict."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from actors.messages import VerifyRequest
from actors.oracle import OracleActor
from events import catalogue as ev
from events.fold import ModuleState
from events.journal import Journal
from lopen.app.engine import worktree_for
from lopen.config import Settings
from lopen.copilot import InvocationRequest, InvocationResult, LopenTool
from lopen.copilot.results import ContextWindow, Usage
from lopen.documents.tools import LogResearchArgs, ReadPlanArgs, ReadResearchArgs, ReadSpecArgs
from lopen.project import ensure_lopen_dir, open_store
from lopen.workflow.approval import approve_spec
from lopen.workflow.evidence import EvidenceCollector
from lopen.workflow.invoke import Invoker
from lopen.workflow.oracle import Verdict
from lopen.workflow.spec_watch import SpecWatcher
from lopen.workflow.steps import TOOLSETS
from lopen.workflow.toolbox import (
    DESCRIPTIONS,
    ComponentArg,
    RecordComponentsArgs,
    RecordTasksArgs,
    SelectComponentArgs,
    TaskArg,
    Toolbox,
    ToolError,
    UpdateTaskStatusArgs,
    VerifyComponentArgs,
    VerifyModuleArgs,
    VerifyTaskArgs,
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

## Dependencies

None.

## Skills & Hooks

- verify-tests: `{TESTS}` — the unit tests

## Notes

None.

## References

None.
"""
CITES = ["[AUTH-01] sign() returns a signed token"]  # acceptance items cite the spec's criteria
PASS = {
    "passed": True,
    "confidence": "high",
    "summary": "looks complete",
    "criteria": [{"id": "AUTH-01", "met": True, "evidence": "tokens.py:2, test_tokens.py:6"}],
    "findings": [],
}
FAIL = {"passed": False, "confidence": 0.8, "summary": "not signed", "findings": []}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


class Oracle:
    """The stand-in for the oracle's model: answers each request with the next scripted verdict."""

    def __init__(self) -> None:
        self.answers: list[dict] = []
        self.requests: list[tuple[InvocationRequest, list[LopenTool]]] = []

    def __call__(self, request: InvocationRequest, tools: Sequence[LopenTool], on_event) -> InvocationResult:
        self.requests.append((request, list(tools)))
        answer = self.answers.pop(0) if self.answers else PASS
        return InvocationResult(
            model=request.models[0],
            final_message=json.dumps(answer),
            tool_calls=[],
            usage=Usage(),
            context=ContextWindow(),
            duration=0.0,
            attempts=[],
        )


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.name", "Test")
        git(root, "config", "user.email", "test@example.com")
        write(root / "docs" / "requirements" / MODULE / "SPECIFICATION.md", SPEC)
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", "spec")
        ensure_lopen_dir(root)
        self.store, self.project = open_store(root)
        approve_spec(root, MODULE, self.store, self.project, approver="Ann")
        self.journal = Journal(self.store, self.project, MODULE)
        self.session = self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        self.worktree = worktree_for(root, MODULE, Settings())  # as `lopen run` makes it
        _, base = self.worktree.ensure()
        self.journal.record(ev.BranchEnsured(branch=self.worktree.branch, created=True, base=base))
        self.collector = EvidenceCollector(self.journal, self.worktree, SpecWatcher(root, MODULE), root, timeout=60)
        self.model = Oracle()
        invoker = Invoker(self.journal, self.model, Settings(), self.worktree.path)
        self.oracle_ref = OracleActor.start(self.journal, self.collector, invoker)
        self.invocations = 0

    def verify(self, scope: str, target: str, notes: str, invocation_id: str) -> Verdict:
        request = VerifyRequest(scope=scope, target=target, notes=notes, invocation_id=invocation_id)
        return self.oracle_ref.proxy().verify(request).get(timeout=120)

    def toolbox(self, kind: str = "task", step: int = 6, component: str = "", task: str = "") -> Toolbox:
        """A fresh invocation (recorded as started, as the Invoker does) and its toolbox."""
        self.invocations += 1
        invocation_id = f"{kind}-{self.invocations}"
        self.journal.record(
            ev.InvocationStarted(invocation_id=invocation_id, kind=kind, step=step, component=component, task=task)
        )
        return Toolbox(
            self.journal,
            invocation_id=invocation_id,
            step=step,
            component=component,
            task=task,
            documents_root=self.worktree.path,
            verifier=self.verify,
            tree=self.worktree.tree,
            untested=self.collector.untested,
        )

    def plan(self, *tasks: str) -> None:
        box = self.toolbox("planning", 3)
        box.record_components(RecordComponentsArgs(components=[ComponentArg(name="Core")]))
        box.select_component(SelectComponentArgs(component="core"))
        box.record_tasks(RecordTasksArgs(component="core", tasks=[TaskArg(name=t, acceptance=CITES) for t in tasks]))

    def ran_tests(self, box: Toolbox, command: str = TESTS) -> None:
        """The model ran a bash command in the invocation (what the Invoker records as it streams)."""
        self.journal.record(ev.ToolCalled(invocation_id=box.invocation_id, tool="bash", arguments={"command": command}))

    def work(self, text: str = "def sign():\n    return 'signed'\n") -> None:
        write(self.worktree.path / "tokens.py", text)
        write(
            self.worktree.path / "test_tokens.py",
            "import unittest\nimport tokens\n\n\nclass T(unittest.TestCase):\n"
            "    def test_sign(self):\n        self.assertTrue(tokens.sign())\n",
        )

    def events(self, kind: type[ev.Event]) -> list:
        return [r.event for r in self.store.read_stream(self.journal.stream) if isinstance(r.event, kind)]

    def state(self) -> ModuleState:
        return self.journal.snapshot()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    try:
        yield w
    finally:
        w.oracle_ref.stop()
        w.store.close()


COMPLETED = "core/1 is now complete; Lopen commits the verified files."


def complete(box: Toolbox, task_id: str = "core/1") -> str:
    return box.update_task_status(UpdateTaskStatusArgs(task_id=task_id, status="complete"))


def verify(box: Toolbox, task_id: str = "core/1") -> dict:
    return json.loads(box.verify_task(VerifyTaskArgs(task_id=task_id)))


# -- the completion gate ------------------------------------------------------------------------------


def test_completing_without_a_passing_verification_is_refused_and_recorded(world: World) -> None:
    world.plan("Sign tokens")
    box = world.toolbox(component="core", task="core/1")
    world.work()
    world.ran_tests(box)

    with pytest.raises(ToolError, match=r"verify_task_completion\('core/1'\)"):
        complete(box)

    (refused,) = world.events(ev.CompletionRefused)
    assert (refused.scope, refused.target, refused.invocation_id) == ("task", "core/1", box.invocation_id)
    assert "no passing verify_task_completion" in refused.why
    assert world.state().tasks["core/1"].state == "pending"


def test_a_verification_in_an_earlier_invocation_does_not_count(world: World) -> None:
    world.plan("Sign tokens")
    world.work()
    earlier = world.toolbox(component="core", task="core/1")
    world.ran_tests(earlier)
    assert verify(earlier)["passed"]

    box = world.toolbox(component="core", task="core/1")
    world.ran_tests(box)
    with pytest.raises(ToolError, match="no passing verify_task_completion"):
        complete(box)


def test_a_failing_verdict_does_not_open_the_gate(world: World) -> None:
    world.plan("Sign tokens")
    world.work()
    box = world.toolbox(component="core", task="core/1")
    world.ran_tests(box)
    world.model.answers = [PASS, FAIL]
    assert verify(box)["passed"] and not verify(box)["passed"]  # the last verdict is the one that counts

    with pytest.raises(ToolError, match="no passing"):
        complete(box)


def test_tests_that_fail_fail_the_verdict_whatever_the_oracle_says(world: World) -> None:
    world.plan("Sign tokens")
    world.work("def sign():\n    return ''\n")  # the unit test fails
    box = world.toolbox(component="core", task="core/1")
    world.ran_tests(box)

    found = verify(box)

    assert not found["passed"] and f"`{TESTS}` failed" in found["summary"]
    (evidence,) = world.events(ev.VerificationEvidenceRecorded)
    assert evidence.command == TESTS and evidence.exit_code != 0 and evidence.tree == world.worktree.tree()
    with pytest.raises(ToolError, match="no passing"):
        complete(box)


def test_completing_when_the_tests_were_never_run_is_refused(world: World) -> None:
    world.plan("Sign tokens")
    world.work()
    box = world.toolbox(component="core", task="core/1")
    world.ran_tests(box, "ls -la")  # something else
    assert verify(box)["passed"]

    with pytest.raises(ToolError, match=r"the tests were never run in this invocation .*python -m unittest -q"):
        complete(box)
    (refused,) = world.events(ev.CompletionRefused)
    assert "never run" in refused.why and world.state().tasks["core/1"].state == "pending"

    world.ran_tests(box)
    assert complete(box).startswith(COMPLETED)


def test_completing_after_the_files_changed_since_the_passing_verdict_is_refused(world: World) -> None:
    """Verify, then sabotage: the tree the oracle judged is not the tree that would be committed."""
    world.plan("Sign tokens")
    world.work()
    box = world.toolbox(component="core", task="core/1")
    world.ran_tests(box)
    assert verify(box)["passed"]
    judged = world.events(ev.OracleVerdictRecorded)[-1].tree
    assert judged == world.worktree.tree()

    write(world.worktree.path / "backdoor.py", "OPEN = True\n")
    with pytest.raises(ToolError, match="the files changed after the passing verification") as caught:
        complete(box)

    assert "verify_task_completion('core/1') again" in str(caught.value)
    (refused,) = world.events(ev.CompletionRefused)
    assert judged[:10] in refused.why and world.worktree.tree()[:10] in refused.why
    assert world.state().tasks["core/1"].state == "pending"

    (world.worktree.path / "backdoor.py").unlink()  # back to what was judged: the verdict holds again
    assert complete(box).startswith(COMPLETED)


def test_a_completion_records_the_verified_tree(world: World) -> None:
    world.plan("Sign tokens")
    world.work()
    box = world.toolbox(component="core", task="core/1")
    world.ran_tests(box)
    assert verify(box)["passed"]
    judged = world.events(ev.OracleVerdictRecorded)[-1]

    assert complete(box).startswith(COMPLETED)

    moves = [(e.from_state, e.to_state, e.tree, e.invocation_id) for e in world.events(ev.TaskStatusChanged)]
    assert moves == [
        ("pending", "in-progress", "", box.invocation_id),
        ("in-progress", "complete", judged.tree, box.invocation_id),
    ]
    task = world.state().tasks["core/1"]
    assert (task.state, task.tree, task.commit) == ("complete", judged.tree, "")
    assert [t.id for t in world.state().owed_commits()] == ["core/1"]  # the Git actor's to commit
    assert complete(box) == "core/1 is already complete"


def test_caches_the_test_run_writes_do_not_change_the_verified_tree(world: World, monkeypatch) -> None:
    """Verification runs the tests in the worktree; the bytecode and caches they leave (the project has
    no .gitignore) are not part of the tree, so the passing verdict still holds."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    world.plan("Sign tokens")
    world.work()
    box = world.toolbox(component="core", task="core/1")
    world.ran_tests(box)
    assert verify(box)["passed"]
    assert list((world.worktree.path / "__pycache__").glob("tokens.*.pyc"))  # the run left bytecode

    assert complete(box).startswith(COMPLETED)
    tree = world.state().tasks["core/1"].tree
    assert "__pycache__" not in git(world.root, "ls-tree", "-r", "--name-only", tree)


def test_completing_a_complete_task_again_says_it_is_complete(world: World) -> None:
    world.plan("Sign tokens")
    world.work()
    box = world.toolbox(component="core", task="core/1")
    world.ran_tests(box)
    verify(box)
    complete(box)
    write(world.worktree.path / "extra.py", "E = 1\n")  # the model goes on editing after completing

    assert complete(box) == "core/1 is already complete"
    assert world.events(ev.CompletionRefused) == []


def test_the_oracle_session_gets_no_tools_and_judges_lopen_s_evidence(world: World) -> None:
    world.plan("Sign tokens")
    world.work()
    box = world.toolbox(component="core", task="core/1")
    world.ran_tests(box)
    verify(box)

    ((request, tools),) = world.model.requests
    assert tools == [] and request.cli_tools == ()
    assert "tokens.py" in request.prompt and "+    return 'signed'" in request.prompt
    assert f"$ {TESTS}  (exit 0)" in request.prompt
    verdict = world.events(ev.OracleVerdictRecorded)[-1]
    assert verdict.confidence == pytest.approx(0.9)  # "high" is read as a number
    assert (verdict.parent_invocation, verdict.attempt, verdict.raw) == (box.invocation_id, 1, "")


def test_an_unreadable_verdict_fails_and_keeps_the_raw_answer(world: World) -> None:
    world.plan("Sign tokens")
    world.work()
    box = world.toolbox(component="core", task="core/1")
    world.model.answers = [{"verdict": "LGTM"}]
    assert not verify(box)["passed"]
    assert world.events(ev.OracleVerdictRecorded)[-1].raw == json.dumps({"verdict": "LGTM"})


def test_the_same_command_on_the_same_tree_is_not_run_twice(world: World) -> None:
    world.plan("Sign tokens")
    world.work()
    box = world.toolbox(component="core", task="core/1")
    verify(box)
    verify(box)
    assert [e.reused for e in world.events(ev.VerificationEvidenceRecorded)] == [False, True]


def test_a_task_of_another_invocation_is_refused(world: World) -> None:
    world.plan("Sign tokens", "Check tokens")
    box = world.toolbox(component="core", task="core/1")
    with pytest.raises(ToolError, match="this invocation works on task 'core/1', not 'core/2'"):
        box.update_task_status(UpdateTaskStatusArgs(task_id="core/2", status="in-progress"))
    with pytest.raises(ToolError, match="no task 'core/9'"):
        box.verify_task(VerifyTaskArgs(task_id="core/9"))


def test_component_and_module_verification_are_refused_until_their_parts_are_complete(world: World) -> None:
    world.plan("Sign tokens")
    box = world.toolbox("component-verification", component="core")
    with pytest.raises(ToolError, match="tasks not complete yet: core/1"):
        box.verify_component(VerifyComponentArgs(component="core"))
    with pytest.raises(ToolError, match="components not complete yet: core"):
        box.verify_module(VerifyModuleArgs(module=MODULE))
    refused = [(e.scope, e.target) for e in world.events(ev.CompletionRefused)]
    assert refused == [("component", "core"), ("module", MODULE)]
    assert world.model.requests == []  # nothing was judged


# -- the plan as the invocation records it ------------------------------------------------------------


def test_read_plan_returns_the_plan_recorded_in_this_invocation(world: World) -> None:
    box = world.toolbox("planning", 3)
    assert "_No components recorded yet._" in box.read_plan(ReadPlanArgs(module=MODULE))

    box.record_components(
        RecordComponentsArgs(components=[ComponentArg(name="Key Store"), ComponentArg(name="Token Issuer")])
    )
    after_components = box.read_plan(ReadPlanArgs(module=MODULE))
    box.select_component(SelectComponentArgs(component="Key Store"))
    box.record_tasks(
        RecordTasksArgs(
            component="key-store", tasks=[TaskArg(name="Store keys", subtasks=["rotate"], acceptance=CITES)]
        )
    )
    after_tasks = box.read_plan(ReadPlanArgs(module=MODULE))

    assert "**Key Store** `key-store`" in after_components and "**Token Issuer** `token-issuer`" in after_components
    assert "`key-store/1` Store keys" in after_tasks and "rotate" in after_tasks and "(selected)" in after_tasks
    with pytest.raises(ToolError, match="not 'billing'"):
        box.read_plan(ReadPlanArgs(module="billing"))


def test_a_component_recorded_twice_appears_once(world: World) -> None:
    box = world.toolbox("planning", 3)
    box.record_components(RecordComponentsArgs(components=[ComponentArg(name="Token Issuer")]))
    box.record_components(
        RecordComponentsArgs(
            components=[ComponentArg(name="Token Issuer", description="again"), ComponentArg(name="Key Store")]
        )
    )
    box.record_components(
        RecordComponentsArgs(components=[ComponentArg(name="token issuer"), ComponentArg(name="Key Store")])
    )

    plan = box.read_plan(ReadPlanArgs(module=MODULE))
    assert plan.lower().count("token issuer") == 1 and plan.count("`token-issuer`") == 1
    assert list(world.state().components) == ["token-issuer", "key-store"]
    with pytest.raises(ToolError, match="component names must be distinct"):
        box.record_components(
            RecordComponentsArgs(components=[ComponentArg(name="Token Issuer"), ComponentArg(name="token-issuer")])
        )


def test_select_component_refuses_one_whose_dependencies_are_not_complete(world: World) -> None:
    box = world.toolbox("planning", 4)
    box.record_components(
        RecordComponentsArgs(
            components=[
                ComponentArg(name="Key Store"),
                ComponentArg(name="Token Issuer", depends_on=["Key Store", "PyJWT"]),
            ]
        )
    )
    with pytest.raises(
        ToolError, match="depends on key-store, which are not complete yet; select one that is ready: key-store"
    ):
        box.select_component(SelectComponentArgs(component="Token Issuer"))
    assert world.events(ev.ComponentSelected) == [] and world.state().selected == ""
    with pytest.raises(ToolError, match="no component 'Nope'; components are: key-store, token-issuer"):
        box.select_component(SelectComponentArgs(component="Nope"))

    assert box.select_component(SelectComponentArgs(component="key-store")) == (
        "selected key-store; next: record_tasks for key-store"
    )


def test_a_component_recorded_done_counts_as_complete_for_its_dependents(world: World) -> None:
    """'done' is the planner's word (the module's verification still judges its criteria): no tasks of its own."""
    box = world.toolbox("planning", 4)
    box.record_components(
        RecordComponentsArgs(
            components=[
                ComponentArg(name="Key Store", status="done"),
                ComponentArg(name="Token Issuer", depends_on=["Key Store"]),
            ]
        )
    )
    with pytest.raises(ToolError, match="already complete"):
        box.select_component(SelectComponentArgs(component="Key Store"))
    assert box.select_component(SelectComponentArgs(component="Token Issuer")).startswith("selected token-issuer")


def tasks(*names: str, acceptance: list[str] = CITES) -> list[TaskArg]:
    return [TaskArg(name=n, acceptance=acceptance) for n in names]


def test_record_tasks_never_reuses_a_task_id_across_re_plans(world: World) -> None:
    world.plan("Sign tokens", "Check tokens")
    assert list(world.state().tasks) == ["core/1", "core/2"]
    world.work()
    runner = world.toolbox(component="core", task="core/1")
    runner.update_task_status(UpdateTaskStatusArgs(task_id="core/1", status="in-progress"))

    box = world.toolbox("planning", 5)
    said = box.record_tasks(RecordTasksArgs(component="core", tasks=tasks("Rotate keys"), replace=True))
    # core/1 was started: it stays; core/2 was pending and is gone; the new task does not take its id
    assert said.startswith(
        "the tasks of core are now: core/1 Sign tokens (in-progress), core/3 Rotate keys (pending). Next: record_tasks"
    )

    box.record_tasks(RecordTasksArgs(component="core", tasks=tasks("Rotate keys", "Check tokens"), replace=True))
    assert world.state().components["core"].tasks == ["core/1", "core/3", "core/4"]  # same name keeps its id

    later = Journal(world.store, world.project, MODULE)  # another session, another process
    toolbox = Toolbox(later, invocation_id="planning-x", step=5, documents_root=world.worktree.path)
    toolbox.record_tasks(RecordTasksArgs(component="core", tasks=tasks("Revoke"), replace=True))
    assert later.read(lambda s: s.components["core"].tasks) == ["core/1", "core/5"]


def test_a_contradiction_comes_back_as_a_refusal_the_model_can_read(world: World) -> None:
    world.plan("Sign tokens")
    runner = world.toolbox(component="core", task="core/1")
    runner.update_task_status(UpdateTaskStatusArgs(task_id="core/1", status="in-progress"))
    box = world.toolbox("planning", 3)
    version = world.journal.version

    with pytest.raises(ToolError, match=r"refused: component core has started work \(core/1\) and cannot be dropped"):
        box.record_components(RecordComponentsArgs(components=[ComponentArg(name="Other")], replace=True))

    assert world.journal.version == version and list(world.state().components) == ["core"]


# -- merging: one component or task per call keeps them all -------------------------------------------


def test_components_recorded_one_per_call_are_all_kept_and_replace_replaces(world: World) -> None:
    box = world.toolbox("planning", 3)
    box.record_components(RecordComponentsArgs(components=[ComponentArg(name="Key Store")]))
    said = box.record_components(
        RecordComponentsArgs(components=[ComponentArg(name="Token Issuer", depends_on=["Key Store"])])
    )
    assert said == (
        "the module's components are now: key-store (missing); token-issuer (missing, depends on key-store). "
        "Next: select_component"
    )
    box.select_component(SelectComponentArgs(component="key-store"))
    box.record_tasks(RecordTasksArgs(tasks=tasks("Store keys")))

    # named again: updated in place by slug, its tasks stay; the others stay
    box.record_components(RecordComponentsArgs(components=[ComponentArg(name="key store", status="partial")]))
    state = world.state()
    assert list(state.components) == ["key-store", "token-issuer"]
    assert (state.components["key-store"].status, state.components["key-store"].tasks) == ("partial", ["key-store/1"])

    box.record_components(RecordComponentsArgs(components=[ComponentArg(name="Verifier")], replace=True))
    assert list(world.state().components) == ["verifier"] and world.state().tasks == {}


def test_tasks_recorded_one_per_call_are_all_kept(world: World) -> None:
    world.plan("Sign tokens")
    box = world.toolbox("planning", 5)
    box.record_tasks(RecordTasksArgs(component="core", tasks=tasks("Check tokens")))
    said = box.record_tasks(RecordTasksArgs(component="core", tasks=tasks("Rotate keys")))
    assert said.startswith(
        "the tasks of core are now: core/1 Sign tokens (pending), core/2 Check tokens (pending), "
        "core/3 Rotate keys (pending). Next: "
    )

    # a pending task of the same name is updated in place and keeps its id
    box.record_tasks(
        RecordTasksArgs(
            component="core",
            tasks=[TaskArg(name="check tokens", description="verify signatures", acceptance=["[AUTH-01] checked"])],
        )
    )
    checked = world.state().tasks["core/2"]
    assert (checked.name, checked.description, checked.acceptance) == (
        "check tokens",
        "verify signatures",
        ["[AUTH-01] checked"],
    )
    assert world.state().components["core"].tasks == ["core/1", "core/2", "core/3"]

    # a started task stays as it is, whatever the call says
    world.toolbox(component="core", task="core/1").update_task_status(
        UpdateTaskStatusArgs(task_id="core/1", status="in-progress")
    )
    box.record_tasks(
        RecordTasksArgs(component="core", tasks=[TaskArg(name="Sign tokens", description="changed", acceptance=CITES)])
    )
    assert world.state().tasks["core/1"].description == "" and world.state().tasks["core/1"].state == "in-progress"

    # replace: the pending tasks are replaced by the list; the started one stays
    box.record_tasks(RecordTasksArgs(component="core", tasks=tasks("Revoke"), replace=True))
    assert world.state().components["core"].tasks == ["core/1", "core/4"]

    with pytest.raises(ToolError, match="task names must be distinct"):
        box.record_tasks(RecordTasksArgs(component="core", tasks=tasks("Audit", "audit")))


# -- ids Lopen knows default to the invocation's ----------------------------------------------------------


def test_missing_ids_default_to_the_invocation_s(world: World) -> None:
    world.plan("Sign tokens")
    world.work()
    box = world.toolbox(component="core", task="core/1")
    world.ran_tests(box)
    assert box.update_task_status(UpdateTaskStatusArgs(status="in-progress")).startswith("core/1 is now in-progress. ")
    assert json.loads(box.verify_task(VerifyTaskArgs()))["passed"]
    said = box.update_task_status(UpdateTaskStatusArgs(status="complete"))
    assert said == (
        f"{COMPLETED} Every task of core is complete: Lopen has the component verified next. "
        "Nothing else to do in this invocation: end it with a one-line summary"
    )
    box.verify_component(VerifyComponentArgs())  # the invocation's component
    assert world.events(ev.OracleVerdictRecorded)[-1].target == "core"

    box.read_plan(ReadPlanArgs())
    assert "Sign and check tokens." in box.tools(("read_spec",))[0].handler(ReadSpecArgs(section="Overview"))
    box.log_research(LogResearchArgs(topic="signing", content="HMAC."))
    assert box.tools(("read_research",))[0].handler(ReadResearchArgs(topic="signing")).startswith("# signing")
    box.verify_module(VerifyModuleArgs())  # the run's module
    assert world.events(ev.OracleVerdictRecorded)[-1].target == MODULE
    with pytest.raises(ToolError, match="not 'billing'"):
        box.verify_module(VerifyModuleArgs(module="billing"))


def test_a_failed_task_says_what_happens_next(world: World) -> None:
    world.plan("Sign tokens")
    box = world.toolbox(component="core", task="core/1")
    said = box.update_task_status(UpdateTaskStatusArgs(status="failed", reason="no key"))
    assert said.startswith("core/1 is now failed; Lopen retries it in a fresh invocation")


def test_record_tasks_and_verify_component_default_to_the_selected_component(world: World) -> None:
    box = world.toolbox("planning", 3)
    box.record_components(RecordComponentsArgs(components=[ComponentArg(name="Core")]))
    with pytest.raises(ToolError, match=r"pass component: .*none is selected"):
        box.record_tasks(RecordTasksArgs(tasks=tasks("Sign tokens")))
    with pytest.raises(ToolError, match="pass task_id: this invocation has no task"):
        box.update_task_status(UpdateTaskStatusArgs(status="in-progress"))
    box.select_component(SelectComponentArgs(component="core"))

    box.record_tasks(RecordTasksArgs(tasks=tasks("Sign tokens")))
    assert world.state().components["core"].tasks == ["core/1"]
    later = world.toolbox("component-verification")  # no component of its own: the selected one
    with pytest.raises(ToolError, match="tasks not complete yet: core/1"):
        later.verify_component(VerifyComponentArgs())


# -- acceptance items cite the spec's criteria ---------------------------------------------------------


def test_acceptance_must_cite_the_spec_s_criteria(world: World) -> None:
    world.plan("Sign tokens")
    box = world.toolbox("planning", 5)
    version = world.journal.version

    with pytest.raises(ToolError) as caught:
        box.record_tasks(
            RecordTasksArgs(
                component="core",
                tasks=[
                    TaskArg(name="Check tokens", acceptance=["tokens are checked"]),
                    TaskArg(name="Rotate keys", acceptance=["[AUTH-01] signed", "[AUTH-07] rotated yearly"]),
                    TaskArg(name="Revoke", acceptance=["AUTH-01: a revoked token is refused"]),
                ],
            )
        )

    said = str(caught.value)
    assert "'Check tokens' cites no criterion" in said
    assert "'Rotate keys' cites AUTH-07, which the spec does not have" in said
    assert "Revoke" not in said and "The spec's criteria are AUTH-01" in said
    assert world.journal.version == version  # nothing recorded
    with pytest.raises(ToolError, match="tasks without acceptance items: Empty"):
        box.record_tasks(RecordTasksArgs(component="core", tasks=[TaskArg(name="Empty", acceptance=[])]))


def test_acceptance_without_ids_is_fine_when_the_spec_has_none(world: World, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write(
        other / "docs" / "requirements" / MODULE / "SPECIFICATION.md",
        SPEC.replace("[AUTH-01] tokens are signed", "tokens are signed"),
    )
    world.plan("Sign tokens")
    box = Toolbox(world.journal, invocation_id="planning-x", step=5, documents_root=other)
    box.record_tasks(RecordTasksArgs(component="core", tasks=[TaskArg(name="Check", acceptance=["checked"])]))
    assert world.state().tasks["core/2"].acceptance == ["checked"]


def undescribed(node: object, path: str) -> list[str]:
    """The properties in a JSON schema, nested ones included, that have no description."""
    if not isinstance(node, dict):
        return []
    found: list[str] = []
    for name, prop in node.get("properties", {}).items():
        found += [f"{path}.{name}"] * (not prop.get("description")) + undescribed(prop, f"{path}.{name}")
    return found + undescribed(node.get("items"), f"{path}[]")


def test_the_tools_state_their_contracts() -> None:
    """Every tool says what it does in at least 100 characters, and every argument says what it is."""
    names = tuple(dict.fromkeys(name for toolset in TOOLSETS.values() for name in toolset))
    assert set(names) == set(DESCRIPTIONS)
    box = Toolbox.__new__(Toolbox)  # the table needs no journal
    for tool in Toolbox.tools(box, names):
        assert 100 <= len(tool.description) <= 600, (tool.name, len(tool.description))
        assert undescribed(tool.schema(), tool.name) == []
    schema = {t.name: t.schema() for t in Toolbox.tools(box, names)}
    assert schema["record_tasks"]["required"] == ["tasks"]
    assert schema["record_tasks"]["properties"]["tasks"]["items"]["properties"]["acceptance"]["minItems"] == 1
    assert schema["update_task_status"]["required"] == ["status"]
    assert set(schema["record_components"]["properties"]["components"]["items"]["properties"]["status"]["enum"]) == {
        "missing",
        "partial",
        "done",
    }


def test_a_pass_over_failing_tests_shows_the_model_the_failing_output(world: World) -> None:
    """The implementer sees why: the verdict it reads carries the end of the failing command's output."""
    world.plan("Sign tokens")
    world.work(text="def sign():\n    return ''\n")  # the test asserts a truthy signature: it fails
    box = world.toolbox(component="core", task="core/1")
    world.ran_tests(box)
    said = json.loads(box.verify_task(VerifyTaskArgs(task_id="core/1")))  # the oracle (scripted) says pass

    assert said["passed"] is False and said["summary"].startswith(f"`{TESTS}` failed (exit 1)")
    (failing,) = [f for f in said["findings"] if f["category"] == "verify-command"]
    assert "test_sign" in failing["description"] and "AssertionError" in failing["description"]
    assert said["next"].startswith("fix what the findings")
    assert "confidence" not in said


# -- Lopen's own failures -----------------------------------------------------------------------------


def test_an_internal_error_never_reaches_the_model_as_it_is(world: World, caplog) -> None:
    """Issue 21: "OracleActor (urn:uuid:…) not found" reached the model as a tool result. A stopped
    Oracle (as when its lane or run is closed while the invocation still runs) is Lopen's failure: the
    model reads that the tool could not run and not to call it again; Lopen's log has the error."""
    import asyncio

    world.plan("Sign tokens")
    box = world.toolbox(task="core/1", component="core")
    (tool,) = box.tools(("verify_task_completion",))
    world.oracle_ref.stop()
    ok, text = asyncio.run(tool.call({"task_id": "core/1"}))
    assert not ok
    assert "not found" not in text and "OracleActor" not in text and "urn:uuid" not in text, text
    assert text.startswith("verify_task_completion could not run: Lopen had an internal error")
    assert "Do not call verify_task_completion again in this invocation" in text
    assert any("OracleActor" in r.getMessage() and r.name == "lopen.tools" for r in caplog.records)
    # a refusal meant for the model still reads as it is
    (status,) = box.tools(("update_task_status",))
    ok, text = asyncio.run(status.call({"task_id": "core/1", "status": "complete"}))
    assert not ok and text.startswith("update_task_status failed: refused: no passing verify_task_completion")
