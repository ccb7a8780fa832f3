"""The Foreman (P1, issue 14): the parallel work of one process, handed out through the module's history.

Each turn it folds in what other writers recorded, asks the Assessor about the spec, and lets
``lopen.workflow.schedule.next_work`` (pure) say what to start: components ready to build (each claimed —
``ComponentClaimed`` with a lease, refused by the history when another worker holds it — and built by a
lane of its own: ``actors.lane``), a planning invocation when ready components have no tasks yet
(``:plan``, one at a time across workers), and, as a `lopen worker`, the module's verification
(``:module``). It renews its leases while the work goes on (``ComponentLeaseRenewed``), releases each
claim when the work ends (``ComponentReleased``), and takes over claims whose lease ran out — or whose
process on this machine is gone — so another worker's component resumes from its events.

Under `lopen run` the Conductor hands it the module when more than one component can be built at
once (``schedule.fan_out``) and it returns (None) when that is over: the Conductor builds a lone
component on the module branch and verifies the module, as with parallelism 1. As `lopen worker` it is
the whole loop and returns how the session ends.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec
import pykka

from actors.assessor import AssessorActor
from actors.git import GitActor
from actors.guardrail import GuardrailActor, how_to_go_on
from actors.lane import LaneFactory, LaneHandle, LaneResult, Tally
from actors.messages import Assessment, StepOutcome, Stop
from actors.planner import PlannerActor
from actors.task_runner import TaskRunnerActor
from events import catalogue as ev
from events.fold import MODULE_ITEM, PLAN_ITEM, ModuleState
from events.journal import Contradiction, Journal, JournalClosed
from lopen.workflow.decide import Action, after
from lopen.workflow.schedule import Work, next_work, ready
from lopen.workflow.steps import STEP_NAMES, Kind, phase_of

POLL = 0.5  # seconds between looks at the store while other workers hold what is left


def interrupted(signal: str) -> Action:
    return Action(
        kind="pause", exit_code=143 if signal == "SIGTERM" else 130, reason="interrupted", error_kind="interrupted"
    )


class ForemanActor(pykka.ThreadingActor):
    def __init__(
        self,
        journal: Journal,
        *,
        assessor: pykka.ActorProxy[AssessorActor],
        guardrail: pykka.ActorProxy[GuardrailActor],
        planner: pykka.ActorProxy[PlannerActor],
        lanes: LaneFactory,
        module_git: pykka.ActorProxy[GitActor],
        module_runner: pykka.ActorProxy[TaskRunnerActor] | None = None,
        worker: str,
        parallelism: int,
        lease: float,
        say: Callable[[str], None],
        interrupt: Any,
        tally: Tally,
        worker_mode: bool = False,
        alive: Callable[[str], bool | None] = lambda worker: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``alive(worker)``: whether another worker's process is alive (None: unknown, its lease tells)."""
        super().__init__()
        self.journal = journal
        self.assessor = assessor
        self.guardrail = guardrail
        self.planner = planner
        self.lanes = lanes
        self.module_git = module_git
        self.module_runner = module_runner
        self.worker = worker
        self.parallelism = max(parallelism, 1)
        self.lease = lease
        self.say = say
        self.interrupt = interrupt
        self.tally = tally
        self.worker_mode = worker_mode
        self.alive = alive
        self.clock = clock

    # -- the loop ---------------------------------------------------------------------------------------

    def run(self) -> Action | None:
        """Work until parallel work is over (None: the caller goes on) or the run must stop (its Action)."""
        self.slots: list[str | None] = [None] * self.parallelism
        self.running: dict[str, LaneHandle] = {}
        self.held: dict[str, str] = {}  # claimed item → the worker name it was claimed under
        self.jobs: dict[str, tuple[Assessment, StepOutcome | None]] = {}  # planning / module verification
        self.given_up: dict[str, str] = {}
        self.done: queue.Queue[tuple[str, object]] = queue.Queue()
        self.stopping: Action | None = None
        self.draining = False
        self.error: BaseException | None = None
        self.step = 0
        self.renew_at = self.clock() + self.lease / 3
        try:
            return self._loop()
        finally:
            for handle in self.running.values():
                handle.stop.set()
            self._release_all("stopped")

    def _loop(self) -> Action | None:
        while True:
            if self.interrupt and (self.stopping is None or self.stopping.error_kind != "interrupted"):
                self.stopping = interrupted(getattr(self.interrupt, "signal", "") or "SIGINT")
            if self.stopping is None and not self.draining and self.error is None:
                self._look()
            self._renew()
            waiting = False
            if self.stopping is not None or self.draining or self.error is not None:
                for handle in self.running.values():
                    handle.stop.set()
                if not self._busy():
                    if self.error is not None:
                        raise self.error
                    return self.stopping
            else:
                work = self._start()
                if self.stopping is not None or self.draining:
                    continue
                if not self._busy():
                    end = self._idle(work)
                    if end is not None or not work.held:
                        return end
                    waiting = True
            self._wait(POLL if waiting else min(POLL, max(self.renew_at - self.clock(), 0.05)))

    def _look(self) -> None:
        """The spec (the Assessor: an unapproved edit stops, an approved change is drift), a person's
        pause request, a re-plan (lanes stop, then planning comes first)."""
        found = self.assessor.assess().get()
        if isinstance(found, Stop):
            with contextlib.suppress(JournalClosed):
                self.journal.record(ev.SessionPaused(reason=found.reason, error_kind="spec"))
            reason = f"{found.reason}; {found.how}"
            self.stopping = Action(kind="pause", exit_code=found.exit_code, reason=reason, error_kind="spec")
            return
        requested, replan = self.journal.read(lambda s: (s.pause_requested, s.replan_from))
        if requested:
            self.stopping = Action(kind="pause", exit_code=2, reason=f"paused at the request of {requested}")
        elif replan and self.running:
            for handle in self.running.values():
                handle.stop.set()  # planning comes first: the lanes stop after their current step
        elif replan and not self.worker_mode:
            self.draining = True  # the Conductor plans again

    def _busy(self) -> bool:
        return bool(self.running or self.jobs)

    def _mine(self, worker: str) -> bool:
        return worker == self.worker or worker.startswith(f"{self.worker}/")

    # -- starting work -------------------------------------------------------------------------------------

    def _start(self) -> Work:
        now = self.clock()
        self._break_dead_claims(now)
        state = self.journal.snapshot()
        free = [k for k, slug in enumerate(self.slots) if slug is None]
        running = frozenset(self.running)
        work = next_work(
            state,
            now=now,
            mine=self._mine,
            running=running,
            planning=bool(self.jobs),
            slots=len(free),
            given_up=frozenset(self.given_up),
            verify_module=self.worker_mode,
        )
        if state.replan_from and self.running:
            return Work(why="lanes stop before re-planning")
        if self.parallelism < 2 and not self.worker_mode:  # parallelism 1: only lane work under way is finished
            work = Work(start=tuple(s for s in work.start if s in state.lanes), held=work.held, why=work.why)
        if work.complete:
            if self.worker_mode:
                self.stopping = Action(kind="complete", reason="every component is complete and the module is verified")
            else:
                self.draining = True
            return work
        if work.plan or work.verify_module:
            guard = self.guardrail.before(self.tally.value).get()
            if guard.action in ("pause", "fail"):
                detail = f"{guard.detail}; {how_to_go_on(guard)}, then run again to resume"
                code = 2 if guard.action == "pause" else 1
                self.stopping = Action(kind=guard.action, exit_code=code, reason=detail, error_kind=guard.category)
                return work
            hint = guard.budget_hint
        else:
            hint = ""
        claimed = []
        lost: list[str] = []  # claims another worker won a moment ago: held by it now, so wait for it
        for slug in work.start:
            worker = f"{self.worker}/{free[0] + 1}"
            if self._claim(slug, worker):
                claimed.append((slug, free.pop(0)))
            else:
                lost.append(slug)
        if claimed:
            names = ", ".join(slug for slug, _ in claimed)
            self._enter(6, f"building {names} in parallel lanes" if len(claimed) > 1 else f"building {names} in a lane")
        for slug, k in claimed:
            self.slots[k] = slug
            handle = self.lanes(slug, self.tally)
            self.running[slug] = handle
            self._watch(f"lane:{slug}", handle.lane.build())
        planning_claimed = work.plan and self._claim(PLAN_ITEM, self.worker)
        if work.plan and not planning_claimed:
            lost.append(PLAN_ITEM)
        if planning_claimed:
            step = state.replan_from or (4 if state.planned else 2)
            planning = Assessment(step=step, kind=Kind.PLANNING.value, why=work.why)
            self._enter(step, work.why)
            self.tally.add()
            lanes = state.planned and not state.replan_from
            unplanned = [s for s in ready(state) if not state.components[s].tasks and s not in self.given_up]
            notes = (
                (
                    "Ready now and without tasks: "
                    + ", ".join(f"«{slug}»" for slug in unplanned)
                    + " — select each of them and record its tasks.",
                )
                if lanes and unplanned
                else ()
            )
            self.jobs[PLAN_ITEM] = (planning, None)
            self._watch(PLAN_ITEM, self.planner.plan(planning, hint, notes, parallel=self.parallelism, lanes=lanes))
        verifying_claimed = (
            work.verify_module
            and self.module_runner is not None
            and MODULE_ITEM not in self.jobs  # one verification of the module at a time
            and self._claim(MODULE_ITEM, self.worker)
        )
        if work.verify_module and self.module_runner is not None and not verifying_claimed:
            lost.append(MODULE_ITEM)
        if verifying_claimed:
            self.module_git.sync().get()
            verifying = Assessment(step=7, kind=Kind.MODULE_VERIFICATION.value, why="every component is complete")
            self._enter(7, verifying.why)
            self.tally.add()
            self.jobs[MODULE_ITEM] = (verifying, None)
            self._watch(MODULE_ITEM, self.module_runner.verify_scope(verifying, hint, ()))
        if lost:
            return msgspec.structs.replace(work, held=(*work.held, *lost))
        return work

    def _idle(self, work: Work) -> Action | None:
        """Nothing runs and nothing could start: how this ends (None: the caller goes on)."""
        if self.given_up:
            detail = "; ".join(f"{slug}: {why}" for slug, why in self.given_up.items())
            return Action(kind="pause", exit_code=2, reason=detail, error_kind="churn")
        if work.held or not self.worker_mode:
            return None
        return Action(kind="pause", exit_code=2, reason=f"nothing this worker can do now ({work.why})")

    def _enter(self, step: int, why: str) -> None:
        if step != self.step:
            self.step = step
            self.journal.record(ev.StepEntered(phase=phase_of(step).value, step=step, why=why))
            self.say(f"→ step {step}/7 {STEP_NAMES[step]} ({phase_of(step).value}): {why}")

    def _watch(self, key: str, future: pykka.Future[Any]) -> None:
        """Post ``future``'s result (or its exception) to the loop's queue when it comes."""

        def wait() -> None:
            try:
                result: object = future.get()
            except BaseException as exc:  # handed to the loop, which stops the lanes and re-raises it
                result = exc
            self.done.put((key, result))

        threading.Thread(target=wait, name=f"foreman-{key}", daemon=True).start()

    # -- results ---------------------------------------------------------------------------------------

    def _wait(self, timeout: float) -> None:
        try:
            key, result = self.done.get(timeout=timeout)
        except queue.Empty:
            return
        self._finished(key, result)
        while True:  # everything else that finished meanwhile
            try:
                key, result = self.done.get_nowait()
            except queue.Empty:
                return
            self._finished(key, result)

    def _finished(self, key: str, result: object) -> None:
        if isinstance(result, BaseException):
            self.error = self.error or result
        if key.startswith("lane:"):
            self._lane_ended(key.removeprefix("lane:"), result)
            return
        job = self.jobs.pop(key, None)
        self._release(key, "done")
        if job is None:  # a result this loop no longer waits for
            return
        planning, _ = job
        if not isinstance(result, StepOutcome):
            return
        self.say(("✓ " if result.ok else "✗ ") + result.detail)
        stop = after(result.ok, result.error_kind, result.detail)
        if stop is not None:
            self._halt(interrupted(self.interrupt.signal) if result.error_kind == "interrupted" else stop)
            return
        churn = self.guardrail.after(planning, result).get()
        if churn.action == "pause":
            reason = f"{churn.detail}; {how_to_go_on(churn)}, then run again"
            self._halt(Action(kind="pause", exit_code=2, reason=reason, error_kind="churn"))

    def _lane_ended(self, slug: str, result: object) -> None:
        handle = self.running.pop(slug)
        self.slots[self.slots.index(slug)] = None
        handle.close()
        outcome = result.outcome if isinstance(result, LaneResult) else "failed"
        self._release(slug, outcome)
        if not isinstance(result, LaneResult):
            return
        if result.outcome == "gave-up":
            self.given_up[slug] = result.detail
            self.say(f"✗ [{slug}] {result.detail}")
        elif result.outcome == "stop-run" and result.action is not None:
            self._halt(result.action)

    def _halt(self, action: Action) -> None:
        """The first reason to stop wins, except that an interruption wins over everything."""
        if self.stopping is None or action.error_kind == "interrupted":
            self.stopping = action

    # -- claims ------------------------------------------------------------------------------------------

    def _claim(self, item: str, worker: str) -> bool:
        try:
            self.journal.record(
                ev.ComponentClaimed(component=item, worker=worker, lease_until=self.clock() + self.lease)
            )
        except Contradiction:
            return False  # another worker got there first
        self.held[item] = worker
        return True

    def _release(self, item: str, reason: str) -> None:
        worker = self.held.pop(item, None)
        if worker is not None:
            with contextlib.suppress(Contradiction, JournalClosed):
                self.journal.record(ev.ComponentReleased(component=item, worker=worker, reason=reason))

    def _release_all(self, reason: str) -> None:
        for item in list(self.held):
            self._release(item, reason)

    def _renew(self) -> None:
        """Every third of a lease: renew every claim held; a claim lost (another worker took it over after
        the lease ran out) stops its lane."""
        now = self.clock()
        if now < self.renew_at:
            return
        self.renew_at = now + self.lease / 3
        for item, worker in list(self.held.items()):
            try:
                self.journal.record(
                    ev.ComponentLeaseRenewed(component=item, worker=worker, lease_until=now + self.lease)
                )
            except Contradiction:
                self.held.pop(item, None)
                if item in self.running:
                    self.running[item].stop.set()
                    self.say(f"! [{item}] another worker took it over: this lane stops")
            except JournalClosed:
                return

    def _break_dead_claims(self, now: float) -> None:
        """A live claim of a process on this machine that is gone (killed) is released: its work resumes."""

        def stale(state: ModuleState) -> list[tuple[str, str]]:
            return [
                (item, claim.worker)
                for item, claim in state.claims.items()
                if claim.until > now and not self._mine(claim.worker)
            ]

        for item, worker in self.journal.read(stale):
            if self.alive(worker) is False:
                process = worker.split("/", 1)[0]
                with contextlib.suppress(Contradiction):
                    self.journal.record(
                        ev.ComponentReleased(
                            component=item, worker=worker, reason=f"its process {process} is gone", by=self.worker
                        )
                    )
