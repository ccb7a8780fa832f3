"""`lopen export <session>`: an auditor's bundle of one session (lopen.app.export, docs/audit.md)."""

from __future__ import annotations

from pathlib import Path

import typer


def export(
    session: str = typer.Argument(..., help="The session, as `lopen session list` names it."),
    out: str = typer.Option(
        "", "--out", "-o", help="Where to write the bundle (default: <session>.lopen-audit.zip here)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as one JSON object."),
) -> None:
    """Write one file an auditor checks elsewhere with `lopen verify --bundle`: the session's events as
    stored, the chain heads, the approved spec and the commits Lopen made."""
    from lopen.app import export as bundle
    from lopen.app.context import Project

    result = bundle.export(Project.here(), session, Path(out) if out else None)
    if as_json:
        import msgspec

        typer.echo(msgspec.json.encode(result).decode())
        return
    typer.echo(
        f"wrote {result['out']}: {result['events']:,} events in {result['streams']} stream"
        f"{'s' * (result['streams'] != 1)}, {result['commits']} commit{'s' * (result['commits'] != 1)}, "
        f"{result['specs']} approved spec{'s' * (result['specs'] != 1)} ({result['bytes']:,} bytes); "
        f"check it anywhere with `lopen verify --bundle {result['out']}`"
    )
