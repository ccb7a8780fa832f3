"""The context pane's resources (keys 1–9) offer only what opens (lopen.tui.resources)."""

from __future__ import annotations

from pathlib import Path

import msgspec
from story import MODULE as STORY_MODULE
from story import PROJECT as STORY_PROJECT
from story import make_project

from events import catalogue as ev
from events.recorded import Recorded, module_stream
from lopen.tui.resources import load_resource, resources_of
from lopen.tui.state import ScreenState


def test_only_spec_sections_are_offered_and_each_opens(tmp_path: Path) -> None:
    """An invocation is sent the spec's sections and parts of its own (the task, a file's contents):
    those are not sections of the spec, and used to be offered and fail ("no section 'task'")."""
    root = make_project(tmp_path / "project")
    state = ScreenState(STORY_PROJECT, STORY_MODULE)
    started = ev.InvocationStarted(
        session_id="s-1", invocation_id="i1", kind="task", sections_sent=("task", "Acceptance Criteria", "contents")
    )
    stream = module_stream(STORY_PROJECT, STORY_MODULE)
    opened = ev.SessionStarted(session_id="s-1", lopen_version="test")
    for n, event in enumerate((opened, started), 1):
        state.apply(Recorded(n, stream, n, msgspec.structs.replace(event, project=STORY_PROJECT, module=STORY_MODULE)))
    offered = resources_of(state, root)
    assert [r.label for r in offered] == ["Plan", "Specification", "§ Acceptance Criteria"]
    for resource in offered:
        assert not load_resource(resource, state, root).startswith("_Cannot"), resource
