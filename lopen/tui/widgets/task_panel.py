"""The current task (context pane): its id, name and state, its subtasks and acceptance items."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from lopen.app.views.live import TaskNode
from lopen.tui.widgets import glyphs

STATE_STYLE = {"complete": "$text-success", "in-progress": "$text-accent", "failed": "$text-error", "pending": "dim"}


def task_content(task: TaskNode | None, symbols: object, finished: bool = False) -> Content:
    """``finished``: every task of the plan is complete (no task is current because none is left)."""
    if task is None and finished:
        return Content.assemble((f"{symbols.task('complete')} ", "bold $text-success"), "every task is complete")  # type: ignore[attr-defined]
    if task is None:
        return Content.styled("no task yet: the plan is being made", "dim")
    mark = symbols.task(task.state)  # type: ignore[attr-defined]
    style = STATE_STYLE.get(task.state, "")
    parts: list[str | tuple[str, str]] = [
        (f"{mark} ", f"bold {style}"),
        (task.id, "dim"),
        " ",
        (task.name, "bold"),
        (f"  {task.state}", style),
    ]
    if task.failures:
        parts += [(f"  {task.failures} failed attempt{'s' * (task.failures != 1)}", "$text-warning")]
    for sub in task.subtasks:
        parts += ["\n", (f"  {symbols.task(task.state if task.state == 'complete' else 'pending')} ", "dim"), sub]  # type: ignore[attr-defined]
    if task.acceptance:
        parts += ["\n", ("Acceptance", "bold underline")]
        for item in task.acceptance:
            parts += ["\n", (f"  {symbols.dot_off} ", "dim"), item]  # type: ignore[attr-defined]
    return Content.assemble(*parts)


class TaskPanel(Static):
    DEFAULT_CSS = """
    TaskPanel { height: auto; max-height: 12; padding: 0 1; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.border_title = "Current task"
        self._key: object = None

    def show(self, task: TaskNode | None, finished: bool = False) -> None:
        key = (
            finished
            if task is None
            else (task.id, task.name, task.state, task.failures, tuple(task.subtasks), tuple(task.acceptance))
        )
        if key != self._key:
            self._key = key
            self.update(task_content(task, glyphs(self), finished))
