"""`lopen watch` with no session: the running one that moved last, else the latest (lopen.app.queries)."""

from __future__ import annotations

from pathlib import Path

import pytest
from story import MODULE, PROJECT, SESSION_2, make_project, write_story

from events import catalogue as ev
from events.journal import Journal
from events.store import EventStore
from lopen.app.context import Project
from lopen.app.queries import session_to_watch
from lopen.errors import LopenError


def test_the_latest_session_when_none_runs_then_the_running_one(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    with pytest.raises(LopenError) as none:
        session_to_watch(Project(root))
    assert "no session to watch" in none.value.what and "lopen run" in none.value.how
    write_story(root)  # two sessions, both ended
    assert session_to_watch(Project(root)) == SESSION_2
    with EventStore.open(root) as store:
        journal = Journal(store, PROJECT, MODULE)
        running = journal.open_session(ev.SessionStarted(lopen_version="test"))
        journal.close()
        other = Journal(store, PROJECT, "other")
        later = other.open_session(ev.SessionStarted(lopen_version="test"))
        other.record(ev.SessionPaused(reason="paused by a person"))  # later, but not running
    assert later != running
    assert session_to_watch(Project(root)) == running
