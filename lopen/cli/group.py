"""The command groups' help lists each command with its whole first sentence (wrapped under it), where
Click cuts it to one line with "…" — so `lopen --help` says what each command does."""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup

WHOLE = 400  # characters of a command's first sentence shown: in practice all of it


class WholeHelpGroup(TyperGroup):
    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(WHOLE)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
