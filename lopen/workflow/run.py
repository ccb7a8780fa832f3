"""One module run: the session's stream in the store, the repository, the spec — what the
actors and Lopen's tools share. Every change goes through `record`, which appends to the store
(optimistic concurrency on the session stream) and folds the event into the run's view."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from events import catalogue as ev
from events.recorded import module_stream, session_stream
from events.store import EventStore
from lopen.config import Settings
from lopen.documents.criteria import acceptance_criteria, skills_and_hooks
from lopen.documents.hashing import compare, section_hashes
from lopen.documents.section_cache import load_spec
from lopen.git import Repository
from lopen.workflow.oracle import CommandResult, Evidence, Verdict, run_command
from lopen.workflow.state import RunState
from lopen.workflow.toolbox import PlanView, TaskView

VERIFY_TESTS = "verify-tests"


class ModuleRun:
    def __init__(
        self, root: Path, module: str, session_id: str, settings: Settings, store: EventStore, repo: Repository
    ) -> None:
        self.root = root
        self.module = module
        self.session_id = session_id
        self.settings = settings
        self.store = store
        self.repo = repo
        self.stream = session_stream(session_id)
        self.state = RunState(module)
        self._lock = threading.RLock()
        self._version = 0
        self.verifier: Callable[[str, str, str, str], Verdict] | None = None
        for recorded in store.read_stream(self.stream):
            self.state.apply(recorded.event)
            self._version = recorded.version
        if not self.state.spec_baseline:
            self.state.spec_baseline = self._approved_hashes()

    def _approved_hashes(self) -> dict[str, str]:
        """The section hashes of the approval this session started from (the latest before it began)."""
        started = next((r.event.at for r in self.store.read_stream(self.stream)), None)
        approvals = [
            r.event for r in self.store.read_stream(module_stream(self.module)) if isinstance(r.event, ev.SpecApproved)
        ]
        before = [a for a in approvals if started is None or a.at <= started] or approvals
        return dict(before[-1].section_hashes) if before else {}

    def check_drift(self) -> ev.SpecDriftDetected | None:
        """W8: compare the spec's sections with the baseline; record and return the drift, if any."""
        if not self.state.spec_baseline:
            return None
        _, doc = load_spec(self.root, self.module)
        current = section_hashes(doc)
        drift = compare(self.state.spec_baseline, current)
        if not (drift.changed or drift.added or drift.removed):
            return None
        event = ev.SpecDriftDetected(
            changed_sections=tuple(drift.changed),
            added_sections=tuple(drift.added),
            removed_sections=tuple(drift.removed),
            reentry_step=drift.reentry_step or 0,
            section_hashes=current,
        )
        events: list[ev.Event] = [event]
        if event.reentry_step:
            sections = ", ".join((*drift.changed, *drift.added, *drift.removed))
            events.append(
                ev.CorrectiveInstructionIssued(
                    category="drift",
                    instruction=f"The specification changed since it was approved ({sections}). Re-plan from step "
                    f"{event.reentry_step}: record the components and tasks the changed specification needs; "
                    "work already complete stays complete unless it no longer meets the specification.",
                )
            )
        self.record(*events)
        return event

    # recording -----------------------------------------------------------------------------------

    def record(self, *events: ev.Event) -> None:
        with self._lock:
            self._version = self.store.append(self.stream, events, expected_version=self._version)
            for event in events:
                self.state.apply(event)

    # views ---------------------------------------------------------------------------------------

    def plan(self) -> PlanView:
        with self._lock:
            return self.state.plan()

    def verified(self) -> set[tuple[str, str]]:
        with self._lock:
            return set(self.state.verified)

    def invocation_count(self) -> int:
        return self.state.invocations

    def task_failures(self, task_id: str) -> int:
        task = self.state.tasks.get(task_id)
        return task.failures if task else 0

    def failure_reasons(self, task_id: str) -> list[str]:
        task = self.state.tasks.get(task_id)
        return [r for r in task.reasons if r] if task else []

    def current_step(self) -> int:
        return self.state.step

    def pending_notes(self) -> tuple[str, ...]:
        """Corrective instructions and queued user messages for the next invocation (W11), once each."""
        with self._lock:
            notes, self.state.notes = list(self.state.notes), []
            queued = dict(self.state.queued)
        if queued:
            self.record(*(ev.UserMessageDelivered(message_id=mid) for mid in queued))
        return (*notes, *(f"Message from the user: {text}" for text in queued.values()))

    def queue_message(self, text: str) -> None:
        self.record(
            ev.UserMessageQueued(message_id=f"msg-{self.state.invocations}-{len(self.state.queued) + 1}", text=text)
        )

    def documents(self) -> ModuleRun:
        return self

    # the spec --------------------------------------------------------------------------------------

    def hooks(self) -> dict[str, str]:
        _, doc = load_spec(self.root, self.module)
        return {h.name: h.command for h in skills_and_hooks(doc) if h.command}

    def untested(self) -> str:
        """B4: the spec's test command when this invocation never ran it, else "".

        A bash command counts as running the tests when it contains the test runner of `verify-tests`:
        the module after `-m`, else the first word (`python -m pytest -q` → `pytest`, `npm test` → `npm`).
        """
        command = self.hooks().get(VERIFY_TESTS)
        if not command:
            return ""
        words = command.split()
        runner = words[words.index("-m") + 1] if "-m" in words[:-1] else words[0]
        with self._lock:
            ran = any(runner in c for c in self.state.commands)
        return "" if ran else command

    def task_text(self, task: TaskView) -> str:
        lines = [f"Task {task.id}: {task.name}", "", task.description]
        if task.subtasks:
            lines += ["", "Subtasks:", *(f"- [ ] {s}" for s in task.subtasks)]
        if task.acceptance:
            lines += ["", "Acceptance:", *(f"- {a}" for a in task.acceptance)]
        return "\n".join(lines).strip()

    # the repository --------------------------------------------------------------------------------

    def start_scope(self, scope: str, target: str, head: str) -> None:
        with self._lock:
            self.state.baselines.setdefault((scope, target), head)
            task = self.state.tasks.get(target) if scope == "task" else None
            if task is not None:
                self.state.baselines.setdefault(("component", task.component), head)
                self.state.baselines.setdefault(("module", self.module), head)

    def baseline(self, scope: str, target: str) -> str | None:
        return self.state.baselines.get((scope, target)) or self.state.branch_base or None

    def reopen_lost_tasks(self) -> None:
        """A task recorded complete whose commit is no longer on the branch is re-opened (W3)."""
        for task in list(self.state.tasks.values()):
            if task.state == "complete" and task.commit and not self.repo.is_ancestor(task.commit):
                self.record(ev.TaskReopened(task_id=task.spec.id, reason=f"commit {task.commit[:8]} is gone"))

    def evidence(self, scope: str, target: str, notes: str) -> Evidence:
        plan = self.plan()
        hooks = self.hooks()
        if scope == "task":
            task = plan.task(target)
            acceptance = list(task.acceptance) if task else []
            component, task_id = (task.component if task else ""), target
            commands = [(VERIFY_TESTS, hooks[VERIFY_TESTS])] if VERIFY_TESTS in hooks else []
        else:
            _, doc = load_spec(self.root, self.module)
            acceptance = [f"[{c.id}] {c.text}" if c.id else c.text for c in acceptance_criteria(doc)]
            component, task_id = (target if scope == "component" else ""), ""
            commands = [
                (name, command)
                for name, command in hooks.items()
                if name.startswith("verify-") and name != "verify-commit"
            ]
        base = self.baseline(scope, target)
        results: list[CommandResult] = [run_command(name, command, self.root) for name, command in commands]
        return Evidence(
            module=self.module,
            scope=scope,
            target=target,
            component=component,
            task=task_id,
            diff=self.repo.diff_since(base),
            changed_files=self.repo.changed_files(base),
            acceptance=acceptance,
            commands=results,
            notes=notes,
        )

    def verify(self, scope: str, target: str, notes: str, invocation_id: str) -> Verdict:
        assert self.verifier is not None, "the oracle is not wired"
        return self.verifier(scope, target, notes, invocation_id)
