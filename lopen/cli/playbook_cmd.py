"""`lopen playbook <session>`: a recorded session as a scripted-model playbook (lopen.app.playbook_export,
docs/scripted-model.md "A session as a playbook")."""

from __future__ import annotations

from pathlib import Path

import typer


def playbook(
    session: str = typer.Argument(..., help="The session, as `lopen session list` names it."),
    out: str = typer.Option(
        "", "--out", "-o", help="Where to write the playbook (default: <session>.playbook.toml here)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as one JSON object."),
) -> None:
    """Turn a recorded session (a real model's too) into a playbook that plays it again offline: each
    invocation recognised by its prompt's header line, each model call answered with what the model said
    and the tool calls it made, each oracle verdict as it was given. Replay it with
    `lopen run <module> --playbook FILE`."""
    from lopen.app.context import Project
    from lopen.app.playbook_export import export_playbook

    result = export_playbook(Project.here(), session, Path(out) if out else None)
    if as_json:
        import msgspec

        typer.echo(msgspec.json.encode(result).decode())
        return
    typer.echo(
        f"wrote {result['out']}: {result['invocations']} invocation{'s' * (result['invocations'] != 1)}, "
        f"{result['turns']} model call{'s' * (result['turns'] != 1)}, "
        f"{result['tool_calls']} tool call{'s' * (result['tool_calls'] != 1)} "
        f"(models {', '.join(result['models'])}); play it again with "
        f"`lopen run {result['module']} --playbook {result['out']}`"
    )
    for note in result["notes"]:
        typer.echo(f"note: {note}")
