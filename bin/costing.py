"""Lopen's own cost in a run (not part of the product: for the benchmarks bin/bench-workflow,
bin/bench-parallel) — what Lopen adds to a run that is neither the model, nor the Copilot CLI's own
processing, nor the project's commands.

``OwnCost`` times, while it is entered:

- each streamed event Lopen handles on the gateway's loop (recording ``ToolCalled``, ``TokensUsed``,
  ``PermissionDecided`` …): the CLI waits for it;
- each of Lopen's tool handlers (read_plan, record_tasks, update_task_status, the verify tools …), less
  what runs inside them that is not Lopen's: the verify commands (the project's test suite) and the
  oracle's session on the gateway (the CLI and the model);
- the end of each invocation (``Invoker._finish``: discipline findings, ``InvocationFinished``).

``own(events)`` adds the gaps between one invocation's end and the next one's start (Lopen's loop:
assessing, guardrails, git commits and resets, the next prompt), from the recorded events.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from events import catalogue as ev
from lopen.copilot.tools import LopenTool
from lopen.workflow.invoke import Invoker
from lopen.workflow.toolbox import Toolbox


class OwnCost:
    def __init__(self) -> None:
        self.stream = 0.0  # streamed events of main invocations
        self.tools = 0.0  # Lopen's tool handlers, whole
        self.oracle = 0.0  # oracle sessions on the gateway, less their own streamed events
        self.finish = 0.0
        self._lock = threading.Lock()
        self._saved: list[tuple[Any, str, Any]] = []
        self._oracles: set[str] = set()
        self._oracle_of: dict[str, float] = {}  # the same, session by session (its invocation id)

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + seconds)

    def add_oracle(self, session: str, seconds: float) -> None:
        with self._lock:
            self._oracle_of[session] = self._oracle_of.get(session, 0.0) + seconds

    def __enter__(self) -> OwnCost:
        cost = self
        streamer, finish, oracle, tools = Invoker._streamer, Invoker._finish, Invoker.invoke_oracle, Toolbox.tools

        def timed_streamer(invoker: Invoker, invocation_id: str) -> Callable[[Any], None]:
            inner = streamer(invoker, invocation_id)

            def on_event(event: Any) -> None:
                begun = time.perf_counter()
                try:
                    inner(event)
                finally:
                    spent = time.perf_counter() - begun
                    cost.add("stream", spent)
                    if invocation_id in cost._oracles:
                        cost.add("oracle", -spent)  # it is inside the oracle's gateway time: Lopen's after all
                        cost.add_oracle(invocation_id, -spent)

            return on_event

        def timed_finish(invoker: Invoker, *args: Any, **kwargs: Any) -> None:
            begun = time.perf_counter()
            try:
                finish(invoker, *args, **kwargs)
            finally:
                cost.add("finish", time.perf_counter() - begun)

        def timed_oracle(invoker: Invoker, *args: Any, **kwargs: Any) -> Any:
            gateway = invoker.invoke_gateway

            def on_gateway(request: Any, tools: Any, on_event: Any) -> Any:
                cost._oracles.add(request.conversation_id)
                begun = time.perf_counter()
                try:
                    return gateway(request, tools, on_event)
                finally:
                    cost.add("oracle", time.perf_counter() - begun)
                    cost.add_oracle(request.conversation_id, time.perf_counter() - begun)

            invoker.invoke_gateway = on_gateway
            try:
                return oracle(invoker, *args, **kwargs)
            finally:
                invoker.invoke_gateway = gateway

        def timed_tools(box: Toolbox, names: tuple[str, ...]) -> list[LopenTool]:
            return [_timed(tool, cost) for tool in tools(box, names)]

        for owner, name, patched in (
            (Invoker, "_streamer", timed_streamer),
            (Invoker, "_finish", timed_finish),
            (Invoker, "invoke_oracle", timed_oracle),
            (Toolbox, "tools", timed_tools),
        ):
            self._saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, patched)
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()

    def own(self, events: Iterable[ev.Event], lanes: bool = False) -> tuple[float, dict[str, float]]:
        """(Lopen's own seconds, by part) for a run whose events these are (one run, one lane at a time;
        ``lanes``: a parallel run, whose gaps between invocations are taken component by component)."""
        events = list(events)
        finished = {e.invocation_id: e.at for e in events if isinstance(e, ev.InvocationFinished)}
        main = [e for e in events if isinstance(e, ev.InvocationStarted) and e.kind != "oracle"]
        if lanes:  # each start after the last end in its lane, or else of the module's own invocations
            ends = [(finished[e.invocation_id], e.component) for e in main if e.invocation_id in finished]
            gaps = 0.0
            for started in main:
                before = [at for at, lane in ends if at <= started.at and lane in ("", started.component)]
                if not started.component:
                    before = [at for at, _lane in ends if at <= started.at]
                gaps += started.at - max(before) if before else 0.0
        else:
            pairs = [(a, b) for a, b in itertools.pairwise(main) if a.invocation_id in finished]
            gaps = sum(max(b.at - finished[a.invocation_id], 0.0) for a, b in pairs)
        commands = sum(e.duration for e in events if isinstance(e, ev.VerificationEvidenceRecorded) and not e.reused)
        oracle = self.oracle
        if lanes:  # only what ran inside a tool handler: a component's verification (asked by its lane, not by a
            # tool, after its last invocation) is in no gap between invocations, so it is not subtracted either
            asked = {
                e.invocation_id
                for e in events
                if isinstance(e, ev.InvocationStarted) and e.kind == "oracle" and e.parent_invocation
            }
            oracle = sum(seconds for session, seconds in self._oracle_of.items() if session in asked)
            commands = sum(
                e.duration
                for e in events
                if isinstance(e, ev.VerificationEvidenceRecorded) and not e.reused and e.invocation_id
            )
        tools = self.tools - commands - oracle
        parts = {"between invocations": gaps, "streamed events": self.stream, "tools": tools, "ends": self.finish}
        return sum(parts.values()), parts


def _timed(tool: LopenTool, cost: OwnCost) -> LopenTool:
    handler = tool.handler

    def timed(args: Any) -> Any:
        begun = time.perf_counter()
        try:
            return handler(args)
        finally:
            cost.add("tools", time.perf_counter() - begun)

    return LopenTool(tool.name, tool.description, tool.arguments, timed)
