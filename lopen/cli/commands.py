"""The `lopen` command tree: every command group registered on one Typer app.

Each command group lives in its own module beside this one. Heavy imports (the Copilot SDK, actors,
the MCP SDK) happen inside command functions, never at import time. ``lopen.cli.main`` is the entry
point; it loads this module only when a command runs (``--help`` is answered from ``lopen.cli._help``).
"""

from __future__ import annotations

import os

# Plain (click-style) help and errors unless the user asks for rich's: rich costs ~50 ms on every --help.
os.environ.setdefault("TYPER_USE_RICH", "0")

import typer

from lopen.cli import workflow
from lopen.cli.auth_cmd import auth_app
from lopen.cli.config_cmd import config_app
from lopen.cli.do_cmd import do
from lopen.cli.doctor import doctor
from lopen.cli.export_cmd import export
from lopen.cli.group import WholeHelpGroup
from lopen.cli.init_cmd import init
from lopen.cli.mcp_cmd import mcp
from lopen.cli.modules import modules
from lopen.cli.playbook_cmd import playbook
from lopen.cli.pr_cmd import pr
from lopen.cli.revert import revert
from lopen.cli.sessions import register as register_sessions
from lopen.cli.sessions import session_app
from lopen.cli.setup_cmd import setup
from lopen.cli.spec import spec_app
from lopen.cli.trace import trace
from lopen.cli.tui_cmd import tui_app
from lopen.cli.tui_cmd import watch as watch_cmd
from lopen.cli.verify_cmd import verify
from lopen.cli.worker_cmd import worker

app = typer.Typer(
    cls=WholeHelpGroup,
    name="lopen",
    help="Build a software module from its specification by driving GitHub Copilot.",
    invoke_without_command=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from lopen.app.setup import versions

        typer.echo(versions())
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show Python tracebacks for errors."),
    no_color: bool = typer.Option(False, "--no-color", help="No colour, in lines and in the TUI (as NO_COLOR)."),
) -> None:
    """With no command: the module picker in a terminal (the TUI), this help otherwise."""
    if debug:
        os.environ["LOPEN_DEBUG"] = "1"
    if no_color:
        os.environ["NO_COLOR"] = "1"
    if ctx.invoked_subcommand is None:
        from lopen.term import use_tui

        if not use_tui(setting=_tui_setting()):
            typer.echo(ctx.get_help())
            raise typer.Exit()
        from lopen.cli.tui_cmd import picker

        raise typer.Exit(picker(no_color=no_color))


def _tui_setting() -> bool:
    """`display.tui` (true unless configured off; a broken configuration is reported by the picker)."""
    from lopen.config import load_settings
    from lopen.errors import LopenError
    from lopen.project import nearest_root

    try:
        return load_settings(nearest_root()).display.tui
    except LopenError:
        return True


app.command("init")(init)
app.command("run")(workflow.run)
app.command("do")(do)
app.command("plan")(workflow.plan)
app.command("build")(workflow.build)
app.command("demo")(workflow.demo)
app.command("worker")(worker)
spec_app.command("approve")(workflow.approve)
spec_app.command("draft")(workflow.draft)
app.command("modules")(modules)
app.command("doctor")(doctor)
app.command("setup")(setup)
app.command("revert")(revert)
app.command("pr")(pr)
app.command("verify")(verify)
app.command("export")(export)
app.command("playbook")(playbook)
app.command("mcp")(mcp)
app.command("trace")(trace)
app.add_typer(tui_app, name="tui")
app.command("watch")(watch_cmd)
app.add_typer(spec_app, name="spec")
app.add_typer(config_app, name="config")
app.add_typer(auth_app, name="auth")
register_sessions(app)  # replay, projections, session
session_app.command("resume")(workflow.resume_session)
