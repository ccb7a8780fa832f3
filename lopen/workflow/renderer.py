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
            return f"  ! spec changed: {', '.join(event.changed_sections)}"
    return None


def renderer(say: Callable[[str], None]) -> Callable[[Recorded], None]:
    def render(recorded: Recorded) -> None:
        line = line_for(recorded.event)
        if line:
            say(line)

    return render
