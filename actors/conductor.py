"""The Conductor: a module run with one slot, for callers that want to ask for a run and wait.

The loop itself is the Foreman's (``actors.foreman``): a run with parallelism 1 is the same code as a
Foreman with one slot. ``ConductorActor.run_module()`` starts that Foreman, begins the run and waits
for its end — the wait of a caller (the app layer, a test), not of the loop. ``Interrupt`` and
``end_session`` live with the Foreman and are importable from here as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pykka

from actors.assessor import AssessorActor
from actors.foreman import ForemanActor, Interrupt, begin, end_session
from actors.guardrail import GuardrailActor
from actors.lane import Tally
from actors.messages import RunResult
from actors.planner import PlannerActor
from actors.task_runner import TaskRunnerActor
from events.journal import Journal

__all__ = ["ConductorActor", "Interrupt", "end_session"]


class ConductorActor(pykka.ThreadingActor):
    def __init__(
        self,
        journal: Journal,
        *,
        assessor: pykka.ActorProxy[AssessorActor],
        guardrail: pykka.ActorProxy[GuardrailActor],
        planner: pykka.ActorProxy[PlannerActor],
        task_runner: pykka.ActorProxy[TaskRunnerActor],
        say: Callable[[str], None],
        stop_before: str = "",
        interrupt: Interrupt | None = None,
        parallelism: int = 1,
        tally: Tally | None = None,
        **foreman: Any,
    ) -> None:
        """The Foreman's arguments; ``foreman`` passes on the rest (``lanes``, ``module_git``, …)."""
        super().__init__()
        self.options = dict(
            assessor=assessor,
            guardrail=guardrail,
            planner=planner,
            task_runner=task_runner,
            say=say,
            stop_before=stop_before,
            interrupt=interrupt if interrupt is not None else Interrupt(),
            parallelism=parallelism,
            tally=tally if tally is not None else Tally(),
            **foreman,
        )
        self.journal = journal
        self.foreman: pykka.ActorRef[ForemanActor] | None = None

    def run_module(self) -> RunResult:
        self.foreman = ForemanActor.start(self.journal, **self.options)
        try:
            return begin(self.foreman).get()
        finally:
            self.foreman.stop()

    def on_stop(self) -> None:
        if self.foreman is not None:
            self.foreman.stop(block=False)
