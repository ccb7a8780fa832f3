"""Step 1, Draft Specification: one invocation writes the spec from the user's prompt, then the
run stops at the human gate (exit 2) until `lopen spec approve`.

The model drafts in the module's worktree like any other work (never in the user's checkout);
Lopen then copies the drafted spec into the checkout, where the person reviews and approves it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from events import catalogue as ev
from events.journal import Journal
from events.locks import module_lock
from lopen.app.engine import gateway_config, open_session, worktree_for
from lopen.config import Settings
from lopen.copilot.gateway import Gateway
from lopen.documents.paths import spec_path
from lopen.documents.spec_check import check_module
from lopen.project import ensure_lopen_dir, open_store
from lopen.workflow.invoke import Invoker
from lopen.workflow.renderer import renderer
from lopen.workflow.steps import Kind, Phase
from lopen.workflow.toolbox import Toolbox


def draft_spec(
    root: Path, module: str, settings: Settings, say: Callable[[str], None], prompt: str
) -> tuple[int, str, str]:
    """Have the model draft ``docs/requirements/<module>/SPECIFICATION.md``; returns (exit code, session, detail)."""
    worktree = worktree_for(root, module, settings)
    config = gateway_config(settings, root, worktree)
    ensure_lopen_dir(root)
    store, project = open_store(root, settings.store.url, settings.project.id)
    with store, module_lock(root, module):
        journal = Journal(store, project, module)
        worktree.ensure(journal.read(lambda s: s.tip))  # before the CLI starts: its sandbox binds the worktree
        with Gateway(config) as gateway:
            protection = gateway.protection.kind if gateway.protection else "policy"
            session_id = open_session(
                journal,
                settings,
                resume=None,
                no_resume=True,
                protection=protection,
                worktree=worktree.path,
                command="spec draft",
            )
            say(f"session {session_id}")
            subscription = store.subscribe(renderer(say, journal.stream))
            try:
                journal.record(
                    ev.StepEntered(phase=Phase.REQUIREMENT_GATHERING.value, step=1, why="no specification yet")
                )
                say("→ step 1/7 Draft Specification (requirement_gathering): no specification yet")

                def tools_for(invocation_id: str, step: int, component: str, task: str) -> Toolbox:
                    return Toolbox(journal, invocation_id=invocation_id, step=step, documents_root=worktree.path)

                invoker = Invoker(journal, gateway.invoke, settings, worktree.path, tools_for)
                outcome = invoker.invoke(Kind.SPEC, 1, task_text=prompt)
            finally:
                subscription.cancel()
        drafted = spec_path(worktree.path, module)
        target = spec_path(root, module)
        if not outcome.ok or not drafted.is_file():
            why = (
                outcome.detail if not outcome.ok else f"the invocation ended without writing {target.relative_to(root)}"
            )
            journal.record(ev.SessionFailed(reason=why, error_kind=outcome.error_kind))
            return 1, session_id, f"no specification was drafted: {why}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(drafted, target)
        gaps = check_module(root, module).gaps
        journal.record(ev.SessionPaused(reason="specification drafted; waiting for approval"))
        noun = "gap" if len(gaps) == 1 else "gaps"
        return (
            2,
            session_id,
            (
                f"drafted {target.relative_to(root)} ({len(gaps)} {noun} in the spec check); review it, then "
                f"`lopen spec approve {module}` and `lopen run {module}`"
            ),
        )
