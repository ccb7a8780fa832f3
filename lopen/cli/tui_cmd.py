"""The TUI's commands: `lopen watch <session>`, `lopen tui gallery`, and plain `lopen` (the picker).

Textual is imported only inside these functions (through `lopen.tui`'s entry points), never when
`lopen --help` or any other command runs.
"""

from __future__ import annotations

import typer

from lopen.cli.group import WholeHelpGroup

tui_app = typer.Typer(cls=WholeHelpGroup, help="The terminal UI: its component gallery.", no_args_is_help=True)

NO_COLOR = typer.Option(False, "--no-color", help="Draw without colour (as NO_COLOR does).")


def _settings(root):
    from lopen.config import load_settings

    return load_settings(root)


@tui_app.command("gallery")
def gallery(no_color: bool = NO_COLOR) -> None:
    """Show every widget of the TUI with stub data (and open each dialog from it)."""
    from lopen.project import nearest_root
    from lopen.tui import TuiOptions, gallery_tui

    settings = _settings(nearest_root())
    raise typer.Exit(gallery_tui(settings=settings, options=TuiOptions.resolve(settings, no_color=no_color)))


def watch(
    session_id: str = typer.Argument(
        "",
        metavar="[SESSION]",
        help="The session to follow, e.g. slugify-20261126-1; default: the running one (else the latest).",
    ),
    no_color: bool = NO_COLOR,
) -> None:
    """Follow a session live in the TUI, read-only — also one running on another machine (PostgreSQL store)."""
    from lopen.project import find_root
    from lopen.tui import TuiOptions, watch_tui

    root = find_root()
    settings = _settings(root)
    if not session_id:
        from lopen.app.context import Project
        from lopen.app.queries import session_to_watch

        session_id = session_to_watch(Project(root, configured=settings))
    options = TuiOptions.resolve(settings, no_color=no_color, read_only=True)
    raise typer.Exit(watch_tui(root, session_id, settings=settings, options=options))


def picker(no_color: bool = False) -> int:
    """Plain `lopen` in a terminal: the module picker (modules, their state, resume an unfinished session)."""
    from lopen.project import find_root
    from lopen.tui import TuiOptions, pick_tui

    root = find_root()
    settings = _settings(root)
    return pick_tui(root, settings=settings, options=TuiOptions.resolve(settings, no_color=no_color))
