"""The actors of one module run, composed: the module's own (its Git actor, evidence, Oracle, invoker,
TaskRunner, Planner, Assessor, Guardrail, Metrics) and, for parallel work, a lane per component (its
worktree ``<worktree>.components/<component>`` on ``lopen/<module>--<component>``, with a Git actor,
evidence collector, Oracle, invoker and TaskRunner of its own) and the Foreman that hands them out.

Every lane shares the module's journal, the one gateway (one Copilot CLI), the Guardrail and the store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pykka

from actors.assessor import AssessorActor
from actors.foreman import ForemanActor
from actors.git import GitActor
from actors.guardrail import GuardrailActor
from actors.lane import LaneActor, LaneHandle, Tally
from actors.messages import VerifyRequest
from actors.metrics import MetricsActor
from actors.oracle import OracleActor
from actors.planner import PlannerActor
from actors.task_runner import TaskRunnerActor
from events.journal import Journal
from events.locks import worker_alive
from events.store import EventStore
from lopen.config import Settings
from lopen.copilot.gateway import Gateway
from lopen.copilot.results import StreamEvent
from lopen.documents.paths import spec_path
from lopen.git import Worktree
from lopen.workflow.budgets import Limit, Totals
from lopen.workflow.evidence import EvidenceCollector
from lopen.workflow.invoke import Invoker
from lopen.workflow.oracle import Verdict
from lopen.workflow.schedule import lane_branch
from lopen.workflow.spec_watch import SpecWatcher
from lopen.workflow.toolbox import Toolbox

if TYPE_CHECKING:
    from lopen.telemetry.live import Telemetry

STOP_TIMEOUT = 3.0


def lanes_dir(worktree: Path) -> Path:
    """Where a module's component worktrees go: beside its own, ``<worktree>.components/``."""
    return worktree.with_name(f"{worktree.name}.components")


class Parts(NamedTuple):
    """What a run is made of, before its actors start."""

    root: Path
    module: str
    settings: Settings
    store: EventStore
    project: str
    journal: Journal
    watcher: SpecWatcher
    worktree: Worktree
    gateway: Gateway
    telemetry: Telemetry


class Crew:
    """Starts the actors of a run and stops them all (``close``), lanes included."""

    def __init__(
        self,
        parts: Parts,
        say: Callable[[str], None],
        ask: Callable[[str], bool] | None,
        watch: Callable[[str, StreamEvent], None] | None,
        worker: str,
    ) -> None:
        self.parts = parts
        self.say = say
        self.watch = watch
        self.worker = worker
        self.started: list[pykka.ActorRef] = []
        self.lanes: list[Callable[[], None]] = []  # how to stop each lane started
        root, module, settings, store, project, journal, watcher, worktree, _, _ = parts
        self.tally = Tally()
        spec = spec_path(root, module).relative_to(root).as_posix()
        self.git = self.start(
            GitActor,
            journal,
            worktree,
            store,
            auto_commit=settings.git.auto_commit,
            spec=(root, spec),
            remote=settings.git.remote,
        )
        invoker, verify = self.invoking(worktree, self.started)
        self.metrics = self.start(MetricsActor, store, project, module)
        self.assessor = self.start(AssessorActor, journal, watcher, worktree)
        self.guardrail = self.start(GuardrailActor, journal, settings, self.metrics, ask)
        self.planner = self.start(PlannerActor, journal, invoker, self.git)
        self.task_runner = self.start(TaskRunnerActor, journal, invoker, self.git, verify)

    def start(self, cls: type[pykka.ThreadingActor], *args: object, **kwargs: object) -> pykka.ActorProxy[Any]:
        return self._start(self.started, cls, *args, **kwargs)

    @staticmethod
    def _start(
        refs: list[pykka.ActorRef], cls: type[pykka.ThreadingActor], *args: object, **kwargs: object
    ) -> pykka.ActorProxy[Any]:
        ref = cls.start(*args, **kwargs)
        refs.append(ref)
        return ref.proxy()

    def invoking(
        self, worktree: Worktree, refs: list[pykka.ActorRef]
    ) -> tuple[Invoker, Callable[[VerifyRequest], Verdict]]:
        """The invoker of one worktree (the module's or a lane's), with its own evidence and Oracle, and
        how that Oracle is asked for a verdict directly (component and module boundaries)."""
        root, _, settings, _, _, journal, watcher, _, gateway, telemetry = self.parts
        collector = EvidenceCollector(
            journal,
            worktree,
            watcher,
            root,
            timeout=settings.copilot.invocation_timeout,
            confine=gateway.confined,
            instructions=settings.copilot.repository_instructions,
        )
        oracle: list[pykka.ActorProxy[Any]] = []

        def ask(request: VerifyRequest) -> Verdict:
            return oracle[0].verify(request).get()

        def verify(scope: str, target: str, notes: str, invocation_id: str) -> Verdict:
            return ask(VerifyRequest(scope=scope, target=target, notes=notes, invocation_id=invocation_id))

        def tools_for(invocation_id: str, step: int, component: str, task: str) -> Toolbox:
            return Toolbox(
                journal,
                invocation_id=invocation_id,
                step=step,
                component=component,
                task=task,
                documents_root=worktree.path,
                verifier=verify,
                tree=worktree.tree,
                untested=collector.untested,
            )

        invoker = Invoker(
            journal,
            gateway.invoke,
            settings,
            worktree.path,
            tools_for,
            watch=self.watch,
            traceparent=lambda invocation_id: telemetry.traceparent(journal.session_id, invocation_id),
            project_root=root,
            limits=self._limits,
            spending=self._spending,
        )
        oracle.append(self._start(refs, OracleActor, journal, collector, invoker))
        return invoker, ask

    def _limits(self, task: str) -> tuple[Limit, ...]:
        """The budgets the Guardrail stops the next invocation of ``task`` inside at (a quick ask)."""
        return self.guardrail.limits(task).get()

    def _spending(self, task: str) -> tuple[Totals, Totals]:
        """The module's and ``task``'s totals now: asked after each model call, from the gateway's thread,
        of the Metrics actor (never of the Guardrail, which may be waiting on a person)."""
        return self.metrics.spending(task).get()

    def lane(self, component: str, tally: Tally) -> LaneHandle:
        """Start the lane of ``component``: its worktree, Git actor, Oracle, TaskRunner and LaneActor."""
        root, module, settings, store, _, journal, _, worktree, _, _ = self.parts
        path = lanes_dir(worktree.path) / component
        tree = Worktree(
            root,
            path,
            lane_branch(module, component),
            ignore=settings.git.ignore,
            max_file_bytes=settings.git.max_file_mb * 1024 * 1024,
        )
        refs: list[pykka.ActorRef] = []
        git = self._start(
            refs,
            GitActor,
            journal,
            tree,
            store,
            auto_commit=settings.git.auto_commit,
            lane=component,
            remote=settings.git.remote,
        )
        invoker, verify = self.invoking(tree, refs)
        runner = self._start(refs, TaskRunnerActor, journal, invoker, git, verify)
        stop = threading.Event()
        say = self.say
        lane = self._start(
            refs,
            LaneActor,
            journal,
            component,
            git=git,
            module_git=self.git,
            task_runner=runner,
            guardrail=self.guardrail,
            tally=tally,
            say=lambda line: say(f"[{component}] {line}"),
            stop=stop,
        )

        def close() -> None:
            for ref in reversed(refs):
                ref.stop(block=False)
            for ref in refs:
                ref.actor_stopped.wait(STOP_TIMEOUT)

        self.lanes.append(close)
        return LaneHandle(lane, stop, close)

    def foreman(
        self, interrupt: Any, *, lanes: bool = True, worker_mode: bool = False, stop_before: str = ""
    ) -> pykka.ActorProxy[ForemanActor]:
        """The run's one loop (``actors.foreman``): its steps on the module branch through the module's
        Planner and TaskRunner, and, with ``lanes``, a lane per component built in parallel."""
        settings = self.parts.settings
        return self.start(
            ForemanActor,
            self.parts.journal,
            assessor=self.assessor,
            guardrail=self.guardrail,
            planner=self.planner,
            task_runner=self.task_runner,
            lanes=self.lane if lanes else None,
            module_git=self.git,
            worker=self.worker,
            parallelism=settings.workflow.parallelism,
            lease=settings.workflow.lease,
            say=self.say,
            interrupt=interrupt,
            tally=self.tally,
            stop_before=stop_before,
            worker_mode=worker_mode,
            alive=lambda worker: worker_alive(self.parts.root, worker),
        )

    def close(self) -> None:
        for close in self.lanes:
            close()
        for ref in reversed(self.started):
            ref.stop(block=False)
        for ref in self.started:
            ref.actor_stopped.wait(STOP_TIMEOUT)
