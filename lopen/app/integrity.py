"""Is the history as it was recorded? `lopen verify` and `lopen projections rebuild`.

- :func:`verify` checks the store's hash chain (``events.verify``): every stream's events since the
  last verification, or all of them (``full``), or only the module stream holding one session. A
  rewritten, inserted or deleted event is ``ChainBroken`` (exit 1) naming it; an intact chain returns
  what was checked, for the one-line summary.
- :func:`rebuild` first checks the whole chain (a rewritten event is named and the projections are left
  as they were), then rebuilds the projections and compares them with the ones kept incrementally, row
  by row: :func:`require_identical` turns a difference into an error naming the projection and its rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lopen.app import queries
from lopen.errors import LopenError

if TYPE_CHECKING:
    from pathlib import Path

    from events.store import EventStore
    from lopen.app.context import Project
    from lopen.app.witness import Witnessed

SHOWN = 5  # differing rows named per projection


def verify(project: Project, session: str = "", *, full: bool = False) -> dict[str, Any]:
    """Check the hash chain, then every recorded commit against git (``witness_commits``): ``{"streams",
    "events", "seconds", "rate", "full", "scope", "sealed_at", "commits", "witnessed", "not_witnessed"}``
    (the last three None without a repository)."""
    from events.recorded import module_stream
    from events.verify import sealed_at

    stream = None
    store, project_id = project.opened or project.open(read_only=True)
    try:
        if session:
            stream = module_stream(project_id, queries.module_of_session(session))
        report = store.verify(stream, full=full)
        if session:  # looked up once its history is known to be intact
            views = store.projections
            views.catch_up()
            if views.sessions.get(session) is None:
                raise queries.no_session(session)
        sealed = sealed_at(store)
        witnessed = witness_commits(store, project.root, stream)
    finally:
        if project.opened is None:
            store.close()
    return {
        "streams": report.streams,
        "events": report.events,
        "seconds": report.seconds,
        "rate": report.rate,
        "full": full,
        "scope": stream or "",
        "sealed_at": sealed,
        "commits": None if witnessed is None else witnessed.commits,
        "witnessed": None if witnessed is None else witnessed.witnessed,
        "not_witnessed": None if witnessed is None else witnessed.unwitnessed,
    }


def witness_commits(store: EventStore, root: Path, stream: str | None) -> Witnessed | None:
    """Every commit the history (or ``stream``) records, checked against the repository at ``root`` and
    the chain (``lopen.app.witness``); None when ``root`` is not a git repository (nothing to check
    against: an auditor's copy of the store)."""
    from events.chain import digest
    from lopen.app import witness
    from lopen.git import Repository
    from lopen.git.witness import read_commits

    found = witness.facts(store.of_types(witness.TYPES, stream))
    if not Repository(root).is_repository():
        return None
    commits = read_commits(root, [f.sha for f in found])

    def digest_at(stream_id: str, version: int) -> str | None:
        row = store.chain_event(stream_id, version)
        return digest(row[3], row[4], row[5]).decode() if row is not None else None

    return witness.check(found, commits, digest_at, f"the repository {root}")


def rebuild(project: Project, actor: str = "") -> dict[str, Any]:
    """Verify the whole chain, rebuild every projection from event #1 and compare the result with the
    rows kept incrementally: ``Projections.rebuild``'s result plus ``identical`` and ``differences``
    (``{projection: [row keys]}``, the first few of each). ``actor``: who asked (default ``cli:<user>``)."""
    from lopen.app.commands import cli_actor
    from lopen.app.tracing import traced

    with traced(project, "lopen projections rebuild", actor or cli_actor()) as span:
        store, _ = project.opened or project.open()
        try:
            store.verify(full=True)  # a rewritten event is named here, before anything is rebuilt from it
            views = store.projections
            views.catch_up()
            before = views.saved()
            result = views.rebuild()
            after = views.saved()
        finally:
            if project.opened is None:
                store.close()
        differences = {name: _differing(before[name], after.get(name, {})) for name in before}
        differences = {name: keys for name, keys in differences.items() if keys}
        span.update({"lopen.projections.events": result["events"], "lopen.projections.identical": not differences})
        return {**result, "identical": not differences, "differences": differences}


def require_identical(result: dict[str, Any]) -> None:
    """A ``LopenError`` naming each projection whose rebuilt rows differ from the ones kept incrementally."""
    differences: dict[str, list[str]] = result["differences"]
    if not differences:
        return
    named = "; ".join(
        f"{name!r}: {', '.join(keys[:SHOWN])}{' …' if len(keys) > SHOWN else ''}" for name, keys in differences.items()
    )
    raise LopenError(
        f"the rebuilt projection{'s' if len(differences) > 1 else ''} {', '.join(map(repr, differences))} "
        "differ from the ones kept incrementally",
        f"rows that differ — {named}. The events' hash chain is intact, so the stored rows were changed outside "
        "Lopen, or a projection is not a pure function of the events (a bug)",
        "the rebuilt rows are in place now, computed from the recorded events; report it if nobody edited the "
        "store's projection_rows table",
    )


def _differing(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    return sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))
