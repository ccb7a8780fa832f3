"""Step 1, Draft Specification: one invocation writes the spec from the user's prompt, then the
run stops at the human gate (exit 2) until `lopen spec approve`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from events import catalogue as ev
from events.locks import module_lock
from events.store import EventStore
from lopen.config import Settings
from lopen.copilot.gateway import Gateway
from lopen.documents.paths import spec_path
from lopen.documents.spec_check import check_module
from lopen.git import Repository
from lopen.workflow.engine import gateway_config, open_session
from lopen.workflow.invoke import Invoker
from lopen.workflow.renderer import renderer
from lopen.workflow.run import ModuleRun
from lopen.workflow.steps import Kind, Phase


def draft_spec(
    root: Path, module: str, settings: Settings, say: Callable[[str], None], prompt: str
) -> tuple[int, str, str]:
    """Have the model draft ``docs/requirements/<module>/SPECIFICATION.md``; returns (exit code, session, detail)."""
    with EventStore.open(root, settings.store.url) as store, module_lock(root, module):
        repo = Repository(root)
        if not repo.is_repository():
            repo.init()
        session_id = open_session(store, module, settings, resume=None, no_resume=True)
        say(f"session {session_id}")
        run = ModuleRun(root, module, session_id, settings, store, repo)
        store.subscribe(renderer(say))
        run.record(ev.StepEntered(phase=Phase.REQUIREMENT_GATHERING.value, step=1, why="no specification yet"))
        say("→ step 1/7 Draft Specification (requirement_gathering): no specification yet")
        with Gateway(gateway_config(settings, root)) as gateway:
            outcome, _ = Invoker(run, gateway.invoke, settings).invoke(Kind.SPEC, 1, task_text=prompt)
        path = spec_path(root, module)
        if not outcome.ok or not path.is_file():
            why = outcome.detail if not outcome.ok else f"the invocation ended without writing {path.relative_to(root)}"
            run.record(ev.SessionFailed(reason=why, error_kind=outcome.error_kind))
            return 1, session_id, f"no specification was drafted: {why}"
        gaps = check_module(root, module).gaps
        run.record(ev.SessionPaused(reason="specification drafted; waiting for approval"))
        return (
            2,
            session_id,
            (
                f"drafted {path.relative_to(root)} ({len(gaps)} gaps in the spec check); review it, then "
                f"`lopen spec approve {module}` and `lopen run {module}`"
            ),
        )
