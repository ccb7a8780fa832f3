"""`lopen verify`: is every recorded event as it was recorded? (the store's hash chain, docs/store.md)

Exit 0 with one line — what was checked, how fast, and since when — when the chain holds; exit 1 naming
the first event that does not fit (stream, version, ``#seq``, type, what its hash should be) otherwise.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import typer


def verify(
    session: str = typer.Option("", "--session", "-s", help="Only the module history holding this session."),
    full: bool = typer.Option(False, "--full", help="Check every event again, not only those since the last check."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
    bundle: str = typer.Option(
        "", "--bundle", help="Check this `lopen export` bundle instead, on its own (no project or repository)."
    ),
) -> None:
    """Check that no recorded event was rewritten, inserted or deleted (the event store's hash chain), and
    that every commit Lopen recorded is in git with the chain head its trailer names."""
    if bundle:
        from lopen.app.export import verify_bundle

        checked = verify_bundle(Path(bundle))
        typer.echo(msgspec.json.encode(checked).decode() if as_json else bundle_summary(checked))
        return
    from lopen.app import integrity
    from lopen.app.context import Project

    result = integrity.verify(Project.here(), session, full=full)
    typer.echo(msgspec.json.encode(result).decode() if as_json else summary(result))


def bundle_summary(result: dict[str, object]) -> str:
    """``bundle intact: 412 events in 1 stream, 4 commits witnessed, 1 approved spec (session …)``."""
    from lopen.term import plural

    events, streams, witnessed, specs = result["events"], result["streams"], result["witnessed"], result["specs"]
    unwitnessed = result["not_witnessed"]
    assert isinstance(events, int) and isinstance(streams, int) and isinstance(witnessed, int)
    assert isinstance(specs, int) and isinstance(unwitnessed, list)
    line = (
        f"bundle intact: {plural(events, 'event')} in {plural(streams, 'stream')} of session {result['session']}, "
        f"{plural(witnessed, 'commit')} witnessed"
    )
    if unwitnessed:
        line += f", {len(unwitnessed)} not witnessed (made before Lopen-Chain trailers)"
    return line + f", {plural(specs, 'approved spec')} matching its approval"


def summary(result: dict[str, object]) -> str:
    """``chain intact: 1,204 events in 3 streams checked in 0.01 s (120,400 events/s), since the last check``."""
    from datetime import UTC, datetime

    from lopen.term import plural

    events, streams, seconds, rate = result["events"], result["streams"], result["seconds"], result["rate"]
    assert isinstance(events, int) and isinstance(streams, int) and isinstance(seconds, float)
    assert isinstance(rate, float)
    where = f" of {result['scope']}" if result["scope"] else ""
    since = "every event" if result["full"] else "since the last check"
    line = (
        f"chain intact: {plural(events, 'event')} in {plural(streams, 'stream')}{where} checked in {seconds:.2f} s "
        f"({rate:,.0f} events/s), {since}"
    )
    sealed = result["sealed_at"]
    if isinstance(sealed, float) and sealed:
        line += f"; events older than the chain sealed on {datetime.fromtimestamp(sealed, UTC):%Y-%m-%d %H:%M} UTC"
    witnessed, unwitnessed = result.get("witnessed"), result.get("not_witnessed")
    if isinstance(witnessed, int) and isinstance(unwitnessed, list) and (witnessed or unwitnessed):
        line += f"; {plural(witnessed, 'commit')} witnessed by git"
        if unwitnessed:
            line += f", {len(unwitnessed)} not witnessed (made before Lopen-Chain trailers)"
    return line
