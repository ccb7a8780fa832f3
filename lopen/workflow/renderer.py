"""Headless output (X4): one line per verdict, refusal, commit, fallback and warning, as recorded — and
the research notes at the change from research to planning (W9), one line each."""

from __future__ import annotations

from collections.abc import Callable

from events import catalogue as ev
from events.recorded import Recorded
from lopen.text import lines_changed, plural


def research_lines(event: ev.ResearchCompleted) -> list[str]:
    """The research summary shown at the phase change: how much was researched, then each note by its
    topic (``read_research``'s id), title and first line."""
    head = f"research on {plural(len(event.topics), 'topic')}: " + (
        f"{plural(len(event.notes), 'note')} for planning and the tasks" if event.notes else "no notes recorded"
    )
    notes = [f"{n.topic}: {n.title}" + (f" — {n.summary}" if n.summary else "") for n in event.notes]
    return [head, *notes]


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
        case ev.ResearchCompleted():
            head, *notes = research_lines(event)
            return "\n".join([f"  ✓ {head}", *(f"    - {note}" for note in notes)])
        case ev.CommitRecorded() if event.task_id:
            return (
                f"  ✓ committed {event.task_id} as {event.sha[:8]} on {event.branch} "
                f"({lines_changed(event.added, event.removed, event.files)})"
            )
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
