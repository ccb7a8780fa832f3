"""Headless output (X4): one line per verdict, refusal, commit, fallback and warning, as recorded."""

from __future__ import annotations

from collections.abc import Callable

from events import catalogue as ev
from events.recorded import Recorded


def line_for(event: ev.Event) -> str | None:
    match event:
        case ev.OracleVerdictRecorded():
            mark = "✓" if event.passed else "✗"
            return f"  {mark} oracle on {event.scope} {event.target}: {event.summary}"
        case ev.CompletionRefused():
            return f"  ! refused completion of {event.scope} {event.target}: {event.why}"
        case ev.ModelFellBack():
            return f"  ! model {event.from_model} unavailable, falling back to {event.to_model}"
        case ev.GuardrailTripped() if event.level == "warn":
            return f"  ! {event.category}: {event.detail}"
        case ev.SpecDriftDetected():
            sections = (*event.changed_sections, *event.added_sections, *event.removed_sections)
            return f"  ! spec changed: {', '.join(sections)}"
        case ev.PermissionDecided() if not event.allowed:
            return f"  ! refused {event.kind} {event.target}: {event.reason}"
        case ev.CommitRecorded() if event.task_id:
            return f"  ✓ committed {event.task_id} as {event.sha[:8]} on {event.branch}"
    return None


def renderer(say: Callable[[str], None], stream: str) -> Callable[[Recorded], None]:
    """Lines for the events of one module history (``stream``): another module's run in another
    process, which the bus catches up from the store, is not this run's story."""

    def render(recorded: Recorded) -> None:
        if recorded.stream_id != stream:
            return
        line = line_for(recorded.event)
        if line:
            say(line)

    return render
