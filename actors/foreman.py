"""The Foreman: the one run loop of a module run, with N slots (N = parallelism; 1 is a plain run).

It does no work itself and never waits on another actor for a whole step. It is driven by messages —
``Begin`` (the run starts), ``JobEnded`` (the Planner, a TaskRunner or a lane told it how its job
ended: ``actors.jobs``), ``Tick`` (time passed: ``actors.ticker``; an interruption ticks too) — and
at each it takes a turn: it asks the quick questions (the Assessor: where does the module stand; the
Guardrail: may we go on), lets the pure rules decide (``lopen.workflow.cycle``, ``decide``,
``schedule``), records what they decided and hands the next job out with a tell.

Two kinds of turn, chosen by ``lopen.workflow.schedule.fan_out``:

- **On the module branch** (parallelism 1, and a lone component at any parallelism): one step at a
  time — planning, a task, a component's or the module's verification — through the module's Planner
  and TaskRunner; its outcome decides the next turn (``cycle.settle``, then the Guardrail's churn).
- **In lanes** (P1, issue 14): ``schedule.next_work`` says what to start — components ready to build
  (each claimed — ``ComponentClaimed`` with a lease, refused by the history when another worker holds
  it — and built by a lane of its own: ``actors.lane``), a planning invocation when ready components
  have no tasks yet (``:plan``, one at a time across workers), and, as a `lopen worker`, the module's
  verification (``:module``). It renews its leases every third of a lease, releases each claim when
  the work ends, and takes over claims whose lease ran out — or whose process on this machine is
  gone. When lane work is over, a `lopen run` goes on on the module branch; a `lopen worker` ends.
- **Fences**: each claim's token (``events.folds.claims``) goes to its lane as a ``Fence``. A claim the
  Foreman finds lost at a renewal — another worker's now, or its lease ran out before it could renew
  (this process was paused) — is never renewed: its lane is told ``lose`` (its invocation aborted,
  nothing more recorded or touched) and the Foreman goes on with other work.

The run ends once (``end_session``: its last event, then the journal closes) and ``Begin.done`` is set
to its ``RunResult``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec
import pykka

from actors.assessor import AssessorActor
from actors.git import GitActor
from actors.guardrail import GuardrailActor
from actors.jobs import hand
from actors.lane import LaneFactory, LaneHandle, LaneResult, Tally
from actors.messages import Assessment, Begin, GuardDecision, JobEnded, RunResult, StepOutcome, Stop, Tick
from actors.planner import PlannerActor
from actors.task_runner import TaskRunnerActor
from actors.ticker import After, TickerActor
from events import catalogue as ev
from events.fold import MODULE_ITEM, PLAN_ITEM, Fence, ModuleState
from events.journal import Contradiction, Fenced, Journal, JournalClosed
from lopen.workflow.cycle import churn_stop, given_up, guard_stop, interrupted, settle, spec_stop, turn
from lopen.workflow.decide import Action
from lopen.workflow.schedule import Work, fan_out, next_work, ready, waiting_on
from lopen.workflow.steps import STEP_NAMES, Kind, phase_of

POLL = 0.5  # seconds between looks at the store while other workers hold what is left
STEP = "step"  # the job key of a step on the module branch


class Interrupt:
    """Set from a signal handler or another thread (the TUI's Ctrl+C): which signal stopped the run
    ("" while it runs). ``on_set`` callbacks run once, when it is first set (abort the gateway …)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal = ""
        self._callbacks: list[Callable[[], None]] = []

    def on_set(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def set(self, signal: str) -> None:
        first = not self.event.is_set()
        self.signal = self.signal or signal
        self.event.set()
        if first:
            for callback in self._callbacks:
                callback()

    def __bool__(self) -> bool:
        return self.event.is_set()


def end_session(journal: Journal, action: Action, stop_before: str = "") -> RunResult:
    """Record how the session ended (once) and close the journal: nothing lands after it."""
    if not journal.closed:
        event: ev.Event
        if action.kind == "complete":
            event = ev.SessionCompleted(reason=action.reason)
        elif action.kind == "fail":
            event = ev.SessionFailed(reason=action.reason, error_kind=action.error_kind)
        else:
            event = ev.SessionPaused(reason=action.reason, error_kind=action.error_kind)
        if action.kind != "pause" or action.error_kind != "spec":  # a spec stop recorded its own pause
            journal.record(event)
        journal.close()
    status = {"complete": "complete", "fail": "failed"}.get(action.kind, "paused")
    if action.kind == "pause" and stop_before and action.exit_code == 0:
        detail = f"{stop_before} is next: run `lopen build {journal.module}`"
    else:
        detail = action.reason
    return RunResult(exit_code=action.exit_code, status=status, detail=detail, session_id=journal.session_id)


def begin(foreman: pykka.ActorProxy[Any] | pykka.ActorRef[Any]) -> pykka.Future[Any]:
    """Start the run; the future holds how it ended (the caller — the app layer — waits on it)."""
    ref = foreman.actor_ref if isinstance(foreman, pykka.ActorProxy) else foreman
    done: pykka.Future[Any] = pykka.ThreadingFuture()
    ref.tell(Begin(done))
    return done


class ForemanActor(pykka.ThreadingActor):
    def __init__(
        self,
        journal: Journal,
        *,
        assessor: pykka.ActorProxy[AssessorActor],
        guardrail: pykka.ActorProxy[GuardrailActor],
        planner: pykka.ActorProxy[PlannerActor],
        task_runner: pykka.ActorProxy[TaskRunnerActor] | None = None,
        lanes: LaneFactory | None = None,
        module_git: pykka.ActorProxy[GitActor] | None = None,
        worker: str = "",
        parallelism: int = 1,
        lease: float = 60.0,
        say: Callable[[str], None],
        interrupt: Any = None,
        tally: Tally | None = None,
        stop_before: str = "",
        worker_mode: bool = False,
        alive: Callable[[str], bool | None] = lambda worker: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``task_runner`` builds on the module branch (and verifies the module); ``lanes`` starts the
        lane of a component (None: no lanes — `lopen plan`, or parallelism 1 with no lane work under
        way). ``alive(worker)``: whether another worker's process is alive (None: unknown, its lease
        tells). ``tally`` counts the run's invocations across its lanes."""
        super().__init__()
        self.journal = journal
        self.assessor = assessor
        self.guardrail = guardrail
        self.planner = planner
        self.task_runner = task_runner
        self.lanes = lanes
        self.module_git = module_git
        self.worker = worker
        self.parallelism = max(parallelism, 1)
        self.lease = lease
        self.say = say
        self.interrupt = interrupt if interrupt is not None else Interrupt()
        self.tally = tally if tally is not None else Tally()
        self.stop_before = stop_before
        self.worker_mode = worker_mode
        self.alive = alive
        self.clock = clock
        self.done: pykka.Future[Any] | None = None
        self.mode = ""  # "", "place" (a step on the module branch), "lanes", "ended"
        self.last_step = 0  # the step last entered on the module branch
        self.researching = False  # that step was entered for research (step 2 is entered again to plan)
        self.pending: tuple[Assessment, GuardDecision] | None = None  # the turn that handed the module to lanes
        self.ticker: pykka.ActorRef[Any] | None = None
        self.halt = threading.Event()  # cuts the ticker's wait short when the run ends
        self.ticks = 0  # the last tick asked for (older ticks are stale)
        self.ticking = False
        self._lanes_reset()

    # -- messages -------------------------------------------------------------------------------------

    def on_receive(self, message: Any) -> None:
        if self.mode == "ended":
            return
        try:
            if isinstance(message, Begin):
                self._begin(message.done)
            elif isinstance(message, JobEnded):
                self._ended(message)
            elif isinstance(message, Tick):
                if message.n == self.ticks:
                    self.ticking = False
                if self.mode == "lanes":
                    self._lanes_turn()
        except JournalClosed:
            self._finish(interrupted(self.interrupt.signal))
        except BaseException as exc:  # the run's caller hears it; the lanes are asked to stop
            if self.mode == "lanes" and self.running:
                self.error = self.error or exc
                with contextlib.suppress(BaseException):
                    self._lanes_turn()
            else:
                self._fail(exc)

    def on_stop(self) -> None:
        self.halt.set()
        if self.ticker is not None:
            self.ticker.stop(block=False)
        for handle in self.running.values():
            handle.stop.set()

    def _begin(self, done: pykka.Future[Any]) -> None:
        self.done = done
        with contextlib.suppress(AttributeError):  # an interruption is a reason to look at once
            ref = self.actor_ref
            self.interrupt.on_set(lambda: _tell(ref, Tick(-1)))
        if self.worker_mode:
            self._lanes_begin()
        else:
            self._place_turn()

    def _ended(self, message: JobEnded) -> None:
        if message.key == STEP and self.mode == "place":
            self._step_ended(message)
        elif self.mode == "lanes":
            self._job_ended(message)
            self._lanes_turn()

    def _finish(self, action: Action | None) -> None:
        """The run ends: lanes are asked to stop, claims released, the session's end recorded once."""
        for handle in self.running.values():
            handle.stop.set()
        self._release_all("stopped")
        self._stop_ticker()
        self.mode = "ended"
        result = end_session(self.journal, action, self.stop_before) if action is not None else None
        if self.done is not None:
            self.done.set(result)

    def _fail(self, exc: BaseException) -> None:
        for handle in self.running.values():
            handle.stop.set()
        with contextlib.suppress(BaseException):
            self._release_all("stopped")
        self._stop_ticker()
        self.mode = "ended"
        if self.done is not None:
            self.done.set_exception((type(exc), exc, exc.__traceback__))

    # -- a step on the module branch ---------------------------------------------------------------------

    def _place_turn(self) -> None:
        """Assess → Guardrail → decide (``cycle.turn``) → hand the step out, or hand the module to lanes."""
        self.mode = "place"
        if self.interrupt:
            return self._finish(interrupted(self.interrupt.signal))
        found: Assessment | Stop = self.assessor.assess().get()
        if isinstance(found, Stop):
            self.journal.record(ev.SessionPaused(reason=found.reason, error_kind="spec"))
            return self._finish(spec_stop(found.exit_code, found.reason, found.how))
        assessment = found
        self.journal.refresh()  # a pause asked for by another writer (the TUI, an MCP client)
        guard = GuardDecision(action="allow")
        if not assessment.complete:
            guard = self.guardrail.before(self.tally.value, assessment.task).get()
        action = turn(
            assessment,
            guard,
            stop_before=self.stop_before,
            pause_requested=self.journal.read(lambda s: s.pause_requested),
            signal=self.interrupt.signal if self.interrupt else "",
        )
        if action.kind != "invoke":
            return self._finish(action)
        if self.lanes is not None and self.journal.read(lambda s: fan_out(s, self.parallelism)):
            self.pending = (assessment, guard)
            return self._lanes_begin()
        return self._dispatch(assessment, guard)

    def _dispatch(self, assessment: Assessment, guard: GuardDecision) -> None:
        researching = assessment.kind == Kind.RESEARCH.value
        if assessment.step != self.last_step or researching != self.researching:
            if self.last_step == 6 and assessment.step == 4:
                self._enter(7, "components remain")
            self._enter(assessment.step, assessment.why)  # research, then planning, each enter step 2
            self.last_step, self.researching = assessment.step, researching
        self.pending = (assessment, guard)
        notes: tuple[str, ...] = ()  # the invoker adds what the history holds for the next invocation
        hint = guard.budget_hint
        self.tally.add()
        kind = Kind(assessment.kind)
        me = self.actor_ref
        if kind is Kind.RESEARCH:
            hand(self.planner, STEP, "research", assessment, hint, notes, reply_to=me)
            return
        if kind is Kind.PLANNING:
            if self.parallelism > 1:  # the prompt says how many components are built at once
                hand(self.planner, STEP, "plan", assessment, hint, notes, parallel=self.parallelism, reply_to=me)
            else:
                hand(self.planner, STEP, "plan", assessment, hint, notes, reply_to=me)
            return
        assert self.task_runner is not None
        if kind is Kind.TASK:
            self.say(f"▶ task {assessment.task} ({assessment.why})")
            hand(self.task_runner, STEP, "run_task", assessment, hint, notes, reply_to=me)
        else:
            hand(self.task_runner, STEP, "verify_scope", assessment, hint, notes, reply_to=me)

    def _step_ended(self, message: JobEnded) -> None:
        if message.error is not None:
            raise message.error
        assert self.pending is not None
        assessment, _ = self.pending
        outcome: StepOutcome = message.result
        self.say(("✓ " if outcome.ok else "✗ ") + outcome.detail)
        stop = settle(outcome.ok, outcome.error_kind, outcome.detail, signal=self.interrupt.signal)
        if stop is not None:
            return self._finish(stop)
        churn = self.guardrail.after(assessment, outcome).get()
        if churn.action == "pause":
            return self._finish(churn_stop(churn))
        return self._place_turn()

    def _enter(self, step: int, why: str) -> None:
        phase = phase_of(step).value
        self.journal.record(ev.StepEntered(phase=phase, step=step, why=why))
        self.say(f"→ step {step}/7 {STEP_NAMES[step]} ({phase}): {why}")

    # -- lanes --------------------------------------------------------------------------------------------

    def _lanes_reset(self) -> None:
        self.slots: list[str | None] = [None] * self.parallelism
        self.running: dict[str, LaneHandle] = {}
        self.held: dict[str, Fence] = {}  # claimed item → the claim as held: worker name and token
        self.jobs: dict[str, Assessment] = {}  # planning / module verification under way
        self.given_up: dict[str, str] = {}
        self.stopping: Action | None = None
        self.draining = False
        self.error: BaseException | None = None
        self.step = 0
        self.version = 0

    def _lanes_begin(self) -> None:
        self.mode = "lanes"
        self._lanes_reset()
        self.version = self.journal.version
        self.renew_at = self.clock() + self.lease / 3
        self._lanes_turn()

    def _lanes_over(self, action: Action | None) -> None:
        """Lane work is over (``action``: how the run ends; None: it goes on)."""
        self._release_all("stopped")
        if self.error is not None:
            return self._fail(self.error)
        if action is not None or self.worker_mode:
            return self._finish(action)
        if self.journal.version != self.version:  # lanes did work: the next turn is on the module branch
            self.last_step = 6
            return self._place_turn()
        assert self.pending is not None  # nothing could be done in lanes: this turn's step goes on here
        self.mode = "place"
        return self._dispatch(*self.pending)

    def _lanes_turn(self) -> None:
        while True:
            if self.interrupt and (self.stopping is None or self.stopping.error_kind != "interrupted"):
                self.stopping = interrupted(self.interrupt.signal or "SIGINT")
            if self.stopping is None and not self.draining and self.error is None:
                self._look()
            self._renew()
            waiting = False
            if self.stopping is not None or self.draining or self.error is not None:
                for handle in self.running.values():
                    handle.stop.set()
                if not self._busy():
                    return self._lanes_over(self.stopping)
            else:
                work = self._start()
                if self.stopping is not None or self.draining:
                    continue
                if not self._busy():
                    end = self._idle(work)
                    if end is not None or not work.held:
                        return self._lanes_over(end)
                    waiting = True
            return self._tick(POLL if waiting else min(POLL, max(self.renew_at - self.clock(), 0.05)))

    def _tick(self, seconds: float) -> None:
        """Look again in ``seconds`` unless a message comes first (one tick asked for at a time)."""
        if self.ticking:
            return
        if self.ticker is None:
            self.ticker = TickerActor.start(self.actor_ref, self.halt)
        self.ticks += 1
        self.ticking = True
        self.ticker.tell(After(seconds, self.ticks))

    def _stop_ticker(self) -> None:
        self.halt.set()
        if self.ticker is not None:
            self.ticker.stop(block=False)
            self.ticker = None

    def _look(self) -> None:
        """The spec (the Assessor: an unapproved edit stops, an approved change is drift), a person's
        pause request, a re-plan (lanes stop, then planning comes first)."""
        found = self.assessor.assess().get()
        if isinstance(found, Stop):
            with contextlib.suppress(JournalClosed):
                self.journal.record(ev.SessionPaused(reason=found.reason, error_kind="spec"))
            self.stopping = spec_stop(found.exit_code, found.reason, found.how)
            return
        requested, replan = self.journal.read(lambda s: (s.pause_requested, s.replan_from))
        if requested:
            self.stopping = Action(kind="pause", exit_code=2, reason=f"paused at the request of {requested}")
        elif replan and self.running:
            for handle in self.running.values():
                handle.stop.set()  # planning comes first: the lanes stop after their current step
        elif replan and not self.worker_mode:
            self.draining = True  # the module branch plans again

    def _busy(self) -> bool:
        return bool(self.running or self.jobs)

    def _mine(self, worker: str) -> bool:
        return worker == self.worker or worker.startswith(f"{self.worker}/")

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
                self.stopping = guard_stop(guard)
                return work
            hint = guard.budget_hint
        else:
            hint = ""
        me = self.actor_ref
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
            self._enter_once(
                6, f"building {names} in parallel lanes" if len(claimed) > 1 else f"building {names} in a lane"
            )
        for slug, k in claimed:
            self.slots[k] = slug
            assert self.lanes is not None
            handle = self.lanes(slug, self.tally, self.held[slug])
            self.running[slug] = handle
            hand(handle.lane, f"lane:{slug}", "build", reply_to=me)
        planning_claimed = work.plan and self._claim(PLAN_ITEM, self.worker)
        if work.plan and not planning_claimed:
            lost.append(PLAN_ITEM)
        if planning_claimed:
            step = state.replan_from or (4 if state.planned else 2)
            planning = Assessment(step=step, kind=Kind.PLANNING.value, why=work.why)
            self._enter_once(step, work.why)
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
            self.jobs[PLAN_ITEM] = planning
            hand(
                self.planner,
                PLAN_ITEM,
                "plan",
                planning,
                hint,
                notes,
                parallel=self.parallelism,
                lanes=lanes,
                reply_to=me,
            )
        verifying_claimed = (
            work.verify_module
            and self.task_runner is not None
            and MODULE_ITEM not in self.jobs  # one verification of the module at a time
            and self._claim(MODULE_ITEM, self.worker)
        )
        if work.verify_module and self.task_runner is not None and not verifying_claimed:
            lost.append(MODULE_ITEM)
        if verifying_claimed:
            assert self.module_git is not None and self.task_runner is not None
            self.module_git.sync().get()
            verifying = Assessment(step=7, kind=Kind.MODULE_VERIFICATION.value, why="every component is complete")
            self._enter_once(7, verifying.why)
            self.tally.add()
            self.jobs[MODULE_ITEM] = verifying
            hand(self.task_runner, MODULE_ITEM, "verify_scope", verifying, hint, (), reply_to=me)
        if lost:
            return msgspec.structs.replace(work, held=(*work.held, *lost))
        return work

    def _idle(self, work: Work) -> Action | None:
        """Nothing runs and nothing could start: how this ends (None: the caller goes on)."""
        if self.given_up:
            return given_up(self.given_up, self.journal.read(lambda s: waiting_on(s, self.given_up)))
        if work.held or not self.worker_mode:
            return None
        return Action(kind="pause", exit_code=2, reason=f"nothing this worker can do now ({work.why})")

    def _enter_once(self, step: int, why: str) -> None:
        if step != self.step:
            self.step = step
            self._enter(step, why)

    def _job_ended(self, message: JobEnded) -> None:
        key, result = message.key, message.result
        if message.error is not None:
            self.error = self.error or message.error
            result = message.error
        if key.startswith("lane:"):
            self._lane_ended(key.removeprefix("lane:"), result)
            return
        job = self.jobs.pop(key, None)
        self._release(key, "done")
        if job is None or not isinstance(result, StepOutcome):  # a result this loop no longer waits for
            return
        self.say(("✓ " if result.ok else "✗ ") + result.detail)
        stop = settle(result.ok, result.error_kind, result.detail, signal=self.interrupt.signal)
        if stop is not None:
            self._halt(stop)
            return
        churn = self.guardrail.after(job, result).get()
        if churn.action == "pause":
            self._halt(churn_stop(churn))

    def _lane_ended(self, slug: str, result: object) -> None:
        handle = self.running.pop(slug, None)
        if handle is None:
            return
        self.slots[self.slots.index(slug)] = None
        handle.close()
        outcome = result.outcome if isinstance(result, LaneResult) else "failed"
        self._release(slug, outcome)
        if not isinstance(result, LaneResult):
            return
        if result.outcome == "lost":
            self.say(f"✗ [{slug}] this lane stopped and left {slug} alone: {result.detail}")
        elif result.outcome == "gave-up":
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
        # The claim just recorded is the item's (a live lease: nobody else's can follow it yet): its token.
        token = self.journal.read(lambda s: s.claims[item].token)
        self.held[item] = Fence(item=item, worker=worker, token=token)
        return True

    def _release(self, item: str, reason: str) -> None:
        fence = self.held.pop(item, None)
        if fence is not None:
            with contextlib.suppress(Contradiction, JournalClosed):
                self.journal.record(ev.ComponentReleased(component=item, worker=fence.worker, reason=reason))

    def _release_all(self, reason: str) -> None:
        for item in list(self.held):
            self._release(item, reason)

    def _renew(self) -> None:
        """Every third of a lease: renew every claim held, under its fence. A claim lost — another worker
        took it over, or its lease ran out before this renewal (the process was paused: anyone may have
        taken it) — is not renewed: its lane is told ``lose`` (its invocation aborted, nothing more recorded
        or touched) and stops."""
        now = self.clock()
        if now < self.renew_at:
            return
        self.renew_at = now + self.lease / 3
        for item, fence in list(self.held.items()):
            try:
                self.journal.refresh()
                problem = self.journal.read(lambda s, f=fence: f.problem(s, now))
                if problem is not None:
                    raise Fenced(fence, problem)
                self.journal.record(
                    ev.ComponentLeaseRenewed(component=item, worker=fence.worker, lease_until=now + self.lease),
                    fence=fence,
                )
            except (Contradiction, Fenced) as lost:
                self.held.pop(item, None)
                why = lost.problem
                if item in self.running:
                    handle = self.running[item]
                    handle.lose(why)
                    handle.stop.set()
                    self.say(f"! [{item}] another worker took it over or its lease ran out ({why}): this lane stops")
            except JournalClosed:
                return

    def _break_dead_claims(self, now: float) -> None:
        """Every live claim of a process on this machine that is gone (killed) is released at once — the
        process is asked after once, whatever number of lanes it held — and its running session ends,
        ``SessionAbandoned``: its work resumes here."""

        def stale(state: ModuleState) -> list[tuple[str, str]]:
            return [
                (item, claim.worker)
                for item, claim in state.claims.items()
                if claim.until > now and not self._mine(claim.worker)
            ]

        verdicts: dict[str, bool | None] = {}
        for item, worker in self.journal.read(stale):
            process = worker.split("/", 1)[0]
            if process not in verdicts:
                verdicts[process] = self.alive(process)
            if verdicts[process] is False:
                with contextlib.suppress(Contradiction):
                    self.journal.record(
                        ev.ComponentReleased(
                            component=item, worker=worker, reason=f"its process {process} is gone", by=self.worker
                        )
                    )
        for process in (p for p, alive in verdicts.items() if alive is False):
            self._abandon_sessions_of(process)

    def _abandon_sessions_of(self, process: str) -> None:
        def running(state: ModuleState) -> list[str]:
            return [
                sid
                for sid, node in state.sessions.items()
                if node.worker == process and node.status == "running" and sid != self.journal.session_id
            ]

        for session_id in self.journal.read(running):
            with contextlib.suppress(Contradiction):
                self.journal.record(
                    ev.SessionAbandoned(
                        session_id=session_id, reason=f"its process {process} is gone; {self.worker} took its work over"
                    )
                )


def _tell(ref: pykka.ActorRef[Any], message: object) -> None:
    with contextlib.suppress(pykka.ActorDeadError):
        ref.tell(message)
