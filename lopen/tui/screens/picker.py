"""The module picker (plain ``lopen``): every module with its state, its unfinished session and its
spec check; Enter picks one (a module with an unfinished session asks: resume or start anew?).

The rows are the one door's (``lopen.app.queries.modules``, the same as ``lopen modules`` and MCP's
``list_modules``), shown as picker rows (:class:`ModuleRow`, ``rows_of``). The screen's result is a :class:`Pick`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from lopen.tui.dialogs.resume import ResumeDialog
from lopen.tui.widgets import glyphs

if TYPE_CHECKING:
    from lopen.app.queries import ModuleRow as Module

STATE_MARK = {"complete": "complete", "in progress": "in-progress", "not started": "pending"}


@dataclass(frozen=True)
class ModuleRow:
    """One row as the picker shows it."""

    name: str
    state: str  # not started | in progress | complete
    check: str  # the spec check's summary
    unfinished: str = ""  # an unfinished session id, if any
    tasks: str = ""  # "2/3 tasks"


@dataclass(frozen=True)
class Pick:
    """The person's choice: a module, and whether to resume its unfinished session."""

    module: str
    resume: str | None = None
    new_session: bool = False


def rows_of(modules: Sequence[Module]) -> list[ModuleRow]:
    """The picker's rows for the one door's module list."""
    return [
        ModuleRow(
            name=m.module,
            state=m.state,
            check=m.spec_check,
            unfinished=m.unfinished_session,
            tasks=f"{m.tasks_complete}/{m.tasks} tasks" if m.tasks else "",
        )
        for m in modules
    ]


class PickerScreen(Screen[Pick]):
    BINDINGS = [
        Binding("enter", "pick", "Open", priority=True),
        Binding("q", "app.quit", "Quit"),
        Binding("question_mark", "app.keys", "Keys"),
    ]

    def __init__(self, rows: Sequence[ModuleRow], root: Path | None = None) -> None:
        super().__init__()
        self.rows = list(rows)
        self.root = root

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(Content.assemble(("Modules", "bold"), ("  pick one with Enter", "dim")), id="picker-title")
            yield DataTable(id="modules", cursor_type="row", zebra_stripes=True)
            if not self.rows:
                yield Static(
                    "No modules yet: write docs/requirements/<module>/SPECIFICATION.md (see docs/specifications.md).",
                    id="picker-empty",
                )
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        symbols = glyphs(self)
        table.add_columns("", "Module", "State", "Progress", "Unfinished session", "Spec check")
        for row in self.rows:
            mark = symbols.task(STATE_MARK.get(row.state, "pending"))
            table.add_row(mark, row.name, row.state, row.tasks, row.unfinished or "-", row.check, key=row.name)
        table.focus()

    def action_pick(self) -> None:
        if not self.rows:
            return
        row = self.rows[self.query_one(DataTable).cursor_row]
        if not row.unfinished:
            self.dismiss(Pick(row.name))
            return

        def answered(answer: str | None) -> None:
            if answer == "resume":
                self.dismiss(Pick(row.name, resume=row.unfinished))
            elif answer == "new":
                self.dismiss(Pick(row.name, new_session=True))

        self.app.push_screen(ResumeDialog(row.name, row.unfinished, row.tasks), answered)
