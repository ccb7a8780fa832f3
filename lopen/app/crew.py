"""The actors of one module run, composed: the module's own (its Git actor, evidence, Oracle, invoker,
TaskRunner, Planner, Assessor, Guardrail, Metrics) and, for parallel work, a lane per component (its
worktree on ``lopen/<module>--<component>``, with a Git actor, evidence collector, Oracle, invoker and
TaskRunner of its own) and the Foreman that hands them out.

Every lane shares the module's journal, the one gateway (one Copilot CLI), the Guardrail and the store —
the journal through the lane's fence (``events.journal.FencedJournal``: its claim's token), the gateway
through the lane's ``Cancel`` (its invocation aborted when the claim is lost).

A lane's worktree is ``<worktree>.components/<component>`` in a `lopen run` (which holds the module
alone on its checkout), and ``<worktree>.components/<component>@<host>-<pid>`` in a `lopen worker`
(``lane_folder``): workers of one checkout never share a folder, so a worker paused past its lease and
taken over finds its own folder as it left it, and the one that took over starts in a folder of its own
from the component's recorded branch tip.
"""

from __future__ import annotations

import functools
import re
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
from events.fold import Fence, ModuleState
from events.journal import FencedJournal, Journal
from events.locks import worker_alive
from events.store import EventStore
from lopen.config import Settings
from lopen.copilot.gateway import Cancel, Gateway
from lopen.copilot.results import StreamEvent
from lopen.documents.paths import spec_path
from lopen.git import Worktree
from lopen.git.spares import Spares, spares_dir
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


def lane_folder(worktree: Path, component: str, worker: str = "") -> Path:
    """A component's worktree: ``<worktree>.components/<component>``, or — for ``worker`` (a `lopen worker`
    process, ``<host>:<pid>``) — ``<component>@<host>-<pid>``, a folder no other process uses."""
    if not worker:
        return lanes_dir(worktree) / component
    return lanes_dir(worktree) / f"{component}@{re.sub(r'[^A-Za-z0-9._-]', '-', worker)}"


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
        spares: Spares | None = None,
    ) -> None:
        self.parts = parts
        self.say = say
        self.watch = watch
        self.worker = worker
        self.own_folders = False  # a `lopen worker`: each lane's worktree is this process's own (lane_folder)
        self.spares = spares  # a `lopen run` in lanes: worktrees checked out while the model plans (closed here)
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
        self,
        worktree: Worktree,
        refs: list[pykka.ActorRef],
        journal: Journal | None = None,
        cancel: Cancel | None = None,
    ) -> tuple[Invoker, Callable[[VerifyRequest], Verdict]]:
        """The invoker of one worktree (the module's or a lane's), with its own evidence and Oracle, and
        how that Oracle is asked for a verdict directly (component and module boundaries). A lane's records
        through its fenced ``journal`` and its invocations end when ``cancel`` is set."""
        root, _, settings, _, _, module_journal, watcher, _, gateway, telemetry = self.parts
        journal = journal or module_journal
        invoke = functools.partial(gateway.invoke, cancel=cancel) if cancel is not None else gateway.invoke
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
                before_commit=collector.before_commit,
            )

        invoker = Invoker(
            journal,
            invoke,
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

    def lane(self, component: str, tally: Tally, fence: Fence) -> LaneHandle:
        """Start the lane of ``component`` under its claim (``fence``): its worktree, Git actor, Oracle,
        TaskRunner and LaneActor, all recording through the lane's fenced journal."""
        root, module, settings, store, _, module_journal, _, worktree, _, _ = self.parts
        path = lane_folder(worktree.path, component, self.worker if self.own_folders else "")
        tree = Worktree(
            root,
            path,
            lane_branch(module, component),
            ignore=settings.git.ignore,
            max_file_bytes=settings.git.max_file_mb * 1024 * 1024,
            shared_branch=True,
            take_spare=self.spares.take if self.spares is not None and not self.own_folders else None,
        )
        stop = threading.Event()
        cancel = Cancel()

        def lost(why: str) -> None:  # the claim is another's: the invocation in flight ends, the lane stops
            cancel.set()
            stop.set()

        journal = FencedJournal(module_journal, fence, on_lost=lost)
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
        invoker, verify = self.invoking(tree, refs, journal, cancel)
        runner = self._start(refs, TaskRunnerActor, journal, invoker, git, verify)
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
        return LaneHandle(lane, stop, close, journal.lose)

    def foreman(
        self, interrupt: Any, *, lanes: bool = True, worker_mode: bool = False, stop_before: str = ""
    ) -> pykka.ActorProxy[ForemanActor]:
        """The run's one loop (``actors.foreman``): its steps on the module branch through the module's
        Planner and TaskRunner, and, with ``lanes``, a lane per component built in parallel."""
        settings = self.parts.settings
        self.own_folders = worker_mode
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
        if self.spares is not None:
            self.spares.close()


def start_spares(root: Path, worktree: Worktree, journal: Journal, parallelism: int) -> Spares:
    """A `lopen run` that builds in lanes starts checking out their worktrees now, in the background, while
    the CLI starts and the model plans (``lopen.git.spares``); it holds the module alone, so the spares
    under ``<worktree>.spares/`` are its own."""
    spares = Spares(root, spares_dir(worktree.path))
    spares.fill(journal.read(lambda s: spares_wanted(s, parallelism, lanes_dir(worktree.path))), worktree.tip())
    return spares


def spares_wanted(state: ModuleState, parallelism: int, lanes: Path) -> int:
    """How many lanes will need a new worktree: as many as may run at once before the plan is known, then
    the components left to build that have no folder yet, up to that."""
    if not state.components:
        return parallelism
    left = [slug for slug in state.components if not state.component_done(slug) and not (lanes / slug).exists()]
    return min(parallelism, len(left))
