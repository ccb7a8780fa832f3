"""Step 1, Draft Specification: one invocation writes the spec, then the human gate (W4).

Headless (``lopen spec draft --prompt``, ``lopen run <m> --prompt``): the model drafts from the prompt
and the run stops at the gate (exit 2) until `lopen spec approve`. In the TUI it is a conversation
(``conversation``): the model asks the person with its ``ask_user`` tool — each question and answer
recorded as that tool call — the draft and its spec-check gaps are shown as the model writes them,
and the person approves at the gate in the TUI.

The model drafts in the module's worktree like any other work (never in the user's checkout);
Lopen then copies the drafted spec into the checkout, where the person reviews and approves it.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from events import catalogue as ev
from events.journal import Journal
from events.locks import module_lock
from lopen.app.engine import gateway_config, open_session, worktree_for
from lopen.config import Settings
from lopen.copilot.gateway import Gateway
from lopen.copilot.results import StreamEvent, ToolFinished
from lopen.documents.paths import spec_path
from lopen.documents.spec_check import check_module
from lopen.project import ensure_lopen_dir, open_store
from lopen.workflow.approval import approve_spec
from lopen.workflow.invoke import Invoker
from lopen.workflow.renderer import renderer
from lopen.workflow.steps import Kind, Phase
from lopen.workflow.toolbox import Toolbox


class Talk(Protocol):
    """The person on the other end of a conversational draft (``lopen.tui.conversation.Conversation``)."""

    def ask(self, question: str) -> str: ...
    def say(self, text: str) -> None: ...
    def draft(self, markdown: str, section: str = "") -> None: ...
    def approve(self) -> bool: ...


def draft_spec(
    root: Path,
    module: str,
    settings: Settings,
    say: Callable[[str], None],
    prompt: str,
    conversation: Talk | None = None,
    *,
    notes: tuple[str, ...] = (),
    opening: tuple[ev.Event, ...] = (),
    command: str = "spec draft",
    actor: str = "",
) -> tuple[int, str, str]:
    """Have the model draft ``docs/requirements/<module>/SPECIFICATION.md``; returns (exit code, session, detail).

    ``notes`` go to the model with the instructions (a quick request asks for a one-task spec);
    ``opening`` is recorded first in the new session (``lopen do``: the request that asked for it);
    ``command`` and ``actor`` say what started the session and who asked."""
    if conversation is not None and not prompt:
        prompt = conversation.ask(f"What should the module {module} do? Say it in your own words.")
    worktree = worktree_for(root, module, settings)
    config = gateway_config(settings, root, worktree)
    ensure_lopen_dir(root)
    store, project = open_store(root, settings.store.url, settings.project.id)
    with store, module_lock(root, module):
        journal = Journal(store, project, module)
        journal.check_intact()  # a rewritten, inserted or deleted event: nothing is drafted
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
                command=command,
                actor=actor,
            )
            say(f"session {session_id}")
            subscription = store.subscribe(renderer(say, journal.stream))
            try:
                if opening:
                    journal.record(*opening)
                journal.record(
                    ev.StepEntered(phase=Phase.REQUIREMENT_GATHERING.value, step=1, why="no specification yet")
                )
                say("→ step 1/7 Draft Specification (requirement_gathering): no specification yet")

                def tools_for(invocation_id: str, step: int, component: str, task: str) -> Toolbox:
                    return Toolbox(journal, invocation_id=invocation_id, step=step, documents_root=worktree.path)

                drafted_path = spec_path(worktree.path, module)

                def watch(invocation_id: str, event: StreamEvent) -> None:
                    """Show the draft as the model writes it (the conversation's live view)."""
                    if conversation is None or not isinstance(event, ToolFinished):
                        return
                    arguments = event.record.arguments if isinstance(event.record.arguments, dict) else {}
                    if event.record.name in ("create", "edit") and str(arguments.get("path", "")).endswith(
                        f"{module}/SPECIFICATION.md"
                    ):
                        with contextlib.suppress(OSError):
                            conversation.draft(drafted_path.read_text(encoding="utf-8"))

                invoker = Invoker(journal, gateway.invoke, settings, worktree.path, tools_for, watch=watch)
                if conversation is None:
                    outcome = invoker.invoke(Kind.SPEC, 1, task_text=prompt, notes=notes)
                else:
                    here = (
                        *notes,
                        "A person is here to answer your questions: ask what you need to know with your "
                        "ask_user tool, one question at a time, then write the specification.",
                    )
                    outcome = invoker.invoke(Kind.SPEC, 1, task_text=prompt, notes=here, ask_user=conversation.ask)
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
        if conversation is not None:
            conversation.draft(target.read_text(encoding="utf-8"))
            if conversation.approve():  # the gate, in the TUI: the person read the draft and approved it
                approved, _ = approve_spec(root, module, store, project)
                journal.record(ev.SessionPaused(reason=f"specification drafted and approved by {approved.approver}"))
                return 0, session_id, f"approved {target.relative_to(root)}; next: `lopen run {module}`"
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
