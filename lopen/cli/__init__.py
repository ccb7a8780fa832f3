"""The `lopen` command line. The only place that wires everything together.

Each command group lives in its own module beside this one and is registered below.
Heavy imports (the Copilot SDK, actors) happen inside command functions, never at import time.
"""

from __future__ import annotations

import os
import sys

import typer

from lopen import __version__
from lopen.errors import LopenError

app = typer.Typer(
    name="lopen",
    help="Build a software module from its specification by driving GitHub Copilot.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lopen {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show Python tracebacks for errors."),
) -> None:
    if debug:
        os.environ["LOPEN_DEBUG"] = "1"


def main() -> None:
    """Console entry point: user errors print what/why/how on stderr, never a traceback."""
    try:
        app(standalone_mode=False)
    except LopenError as exc:
        if os.environ.get("LOPEN_DEBUG"):
            raise
        print(exc.render(), file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # click usage errors and the like
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
