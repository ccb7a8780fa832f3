"""The store notices tampering (issue 10, item 6): the event store deleted or rows removed under a
running Lopen is a critical error naming what happened — never a success that lost the history."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from e2e.scenario import about, approved_project, playbook, rule, run_here, wait_for
from events.errors import StoreTampered
from lopen.scripted_model import Turn

pytestmark = pytest.mark.e2e

PAUSE = rule(
    "core-1-waits",
    [Turn(text="(a slow answer while the store is tampered with)", fault="slow", delay=3)],
    max_uses=1,
    from_turn=1,
    kind="task",
    task="core/1",
)


def delete_rows(store: Path) -> None:
    with sqlite3.connect(store) as db:
        db.execute("DELETE FROM stored_events WHERE rowid IN (SELECT rowid FROM stored_events ORDER BY rowid LIMIT 3)")


def unlink(store: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)


@pytest.mark.parametrize(("tamper", "said"), [(unlink, "was deleted"), (delete_rows, "are missing")])
def test_tampering_with_the_store_mid_run_stops_it_with_a_clear_error(tmp_path, cli_path, scripted, tamper, said):
    server = scripted(playbook(PAUSE))
    root = approved_project(tmp_path)
    store = root / ".lopen" / "store.sqlite"

    def meddle() -> None:
        if wait_for(lambda: server.uses("core-1-waits") == 1, 120):
            tamper(store)

    meddler = threading.Thread(target=meddle)
    meddler.start()
    try:
        with pytest.raises(StoreTampered) as caught:
            run_here(root, server, cli_path, no_resume=True)
    finally:
        meddler.join()
    assert said in caught.value.what and caught.value.how
    assert not any(about(r, kind="task", task="core/2") for r in server.chat_requests)  # stopped at once
