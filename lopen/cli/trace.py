"""`lopen trace <session> [--endpoint URL | --file F]`: export a past session as OpenTelemetry.

The use case is `lopen.app.trace.export_trace`: the session is read back from the event store and
folded into the same spans and metrics a live export gives. This prints what it exported.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

SESSION = typer.Argument(..., metavar="SESSION", help="The session id, e.g. auth-20261126-1.")
ENDPOINT = typer.Option(
    None,
    "--endpoint",
    metavar="URL",
    help="OTLP/HTTP base URL, e.g. http://localhost:4318 (default: OTEL_EXPORTER_OTLP_ENDPOINT, then otel.endpoint).",
)
FILE = typer.Option(
    None, "--file", metavar="FILE", help="Write OTLP JSON lines to FILE instead of sending them ('-' = stdout)."
)


def trace(session_id: str = SESSION, endpoint: str | None = ENDPOINT, file: Path | None = FILE) -> None:
    """Export a session's spans and metrics (OpenTelemetry, OTLP) from the event store."""
    from lopen.app.context import Project
    from lopen.app.trace import export_trace
    from lopen.cli.output import Console

    try:
        done, destination = export_trace(Project.here(), session_id, endpoint, file)
    except BrokenPipeError:  # `lopen trace … --file - | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        raise typer.Exit(0) from None
    console = Console.for_settings()
    summary = (
        f"exported {session_id}: {done.events:,} events as {done.spans:,} spans and {done.points:,} metric points "
        f"in {done.seconds:.2f} s ({done.events_per_second:,.0f} events/s) to {destination}"
    )
    if destination == "stdout":
        typer.echo(summary, err=True)  # stdout holds the trace
    else:
        console.ok(summary)
    if done.metrics_refused:
        console.warn(f"{destination} does not take metrics ({done.metrics_refused}): only the spans were exported")
