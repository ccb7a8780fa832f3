"""The run's own view of its session: queued user messages and the completion gate."""

from __future__ import annotations

import subprocess

import pytest
from lopen.workflow.run import ModuleRun

from events import catalogue as ev
from events.recorded import session_stream
from events.store import EventStore
from lopen.git import Repository
from lopen.workflow.toolbox import (
    ComponentArg,
    RecordComponentsArgs,
    RecordTasksArgs,
    TaskArg,
    Toolbox,
    ToolError,
    UpdateTaskStatusArgs,
)


@pytest.fixture
def run(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    store = EventStore.open(tmp_path)
    session_id = store.new_session_id("auth")
    yield ModuleRun(tmp_path, "auth", session_id, None, store, Repository(tmp_path))
    store.close()


def test_a_queued_message_is_delivered_once_in_the_next_invocation(run):
    run.queue_message("use argon2, not bcrypt")
    assert run.pending_notes() == ("Message from the user: use argon2, not bcrypt",)
    assert run.pending_notes() == ()
    kinds = [type(r.event).__name__ for r in run.store.read_stream(session_stream(run.session_id))]
    assert kinds[-2:] == ["UserMessageQueued", "UserMessageDelivered"]


def test_completing_a_task_without_a_passing_verification_is_refused_and_recorded(run):
    box = Toolbox(run, invocation_id="task-1", step=6)
    box.record_components(RecordComponentsArgs(components=[ComponentArg(name="Token Service")]))
    box.record_tasks(RecordTasksArgs(component="token-service", tasks=[TaskArg(name="Sign tokens")]))
    with pytest.raises(ToolError, match="verify_task_completion"):
        box.update_task_status(UpdateTaskStatusArgs(task_id="token-service/1", status="complete"))
    refused = [
        r.event
        for r in run.store.read_stream(session_stream(run.session_id))
        if isinstance(r.event, ev.CompletionRefused)
    ]
    assert [(e.scope, e.target) for e in refused] == [("task", "token-service/1")]
    assert run.plan().task("token-service/1").state == "pending"
