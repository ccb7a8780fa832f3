"""`lopen replay`, `lopen log`, `lopen projections rebuild` and `lopen session list|show|delete|prune`.

Everything here reads the event store (`events`); store errors become `LopenError`s.
Deleting or pruning a session records `SessionDeleted`: the session leaves the lists, its
events stay in the store (the audit trail is never rewritten) and `lopen replay` still shows it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Iterator
from enum import StrEnum
from typing import TYPE_CHECKING

import typer

from lopen.cli.group import WholeHelpGroup

if TYPE_CHECKING:
    from events.projections import SessionView
    from events.store import EventStore

DEFAULT_RETENTION = 10

session_app = typer.Typer(
    cls=WholeHelpGroup, name="session", help="List, show, resume, delete and prune sessions.", no_args_is_help=True
)
projections_app = typer.Typer(
    cls=WholeHelpGroup, name="projections", help="Maintain the read models built from events.", no_args_is_help=True
)


class Format(StrEnum):
    md = "md"
    json = "json"
    yaml = "yaml"


FORMAT_OPTION = typer.Option(Format.md, "--format", "-f", help="md, json or yaml.")


def register(app: typer.Typer) -> None:
    """Add `replay`, `log`, `projections` and `session` to the `lopen` app."""
    app.command("replay")(replay)
    app.command("log")(log)
    app.add_typer(projections_app, name="projections")
    app.add_typer(session_app, name="session")


# -- helpers -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def _store() -> Iterator[EventStore]:
    """The project's store, for reading (its projections read this project's rows; a read-only
    `.lopen` is read from a private copy); its errors print like every user error (`lopen.cli.main`)."""
    from lopen.app.context import Project

    store, _ = Project.here().open(read_only=True)
    with store:
        yield store


def _warn_problems(store: EventStore) -> None:
    """Say once, on stderr, which stored events a projection could not apply (it skipped them)."""
    for problem in store.projections.problems:
        typer.echo(f"warning: {problem} (`lopen projections rebuild` lists every such event)", err=True)


def _session_or_fail(store: EventStore, session_id: str | None) -> SessionView:
    from lopen.app.commands import session_view

    store.projections.catch_up()
    _warn_problems(store)
    return session_view(store, session_id)


def _when(at: float) -> str:
    """``2026-11-26 09:12Z`` (UTC, to the minute); "-" when never."""
    if not at:
        return "-"
    day, seconds = divmod(int(at), 86_400)
    return f"{_day(day)} {seconds // 3600:02}:{seconds % 3600 // 60:02}Z"


@functools.lru_cache(maxsize=64)
def _day(day: int) -> str:
    """A UTC day's date: a list of a thousand sessions formats each day once."""
    return time.strftime("%Y-%m-%d", time.gmtime(day * 86_400))


def _write(lines: Iterator[bytes]) -> None:
    """Stream lines to stdout; a closed pipe (e.g. `| head`) ends quietly."""
    out = sys.stdout.buffer
    try:
        for line in lines:
            out.write(line)
        out.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        raise typer.Exit(0) from None


# -- commands ------------------------------------------------------------------------------------------


TYPES_HELP = "Only events of this type (repeatable), e.g. --type OracleVerdictRecorded --type CommitRecorded."
TYPES_OPTION = typer.Option(None, "--type", help=TYPES_HELP)
BOUND_HELP = "an event number (1234 or #1234) or an ISO-8601 time (2026-11-26T14:05Z; a date alone = that day)"


def _view_options(width: int | None, full: bool) -> dict[str, object]:
    """Width (the terminal's, else COLUMNS, else a wide default) and symbols for the text view."""
    import shutil

    from lopen.app.views.replay import WIDTH
    from lopen.cli.output import Console

    return {
        "width": width or shutil.get_terminal_size((WIDTH, 24)).columns,
        "full": full,
        "ascii": Console.for_settings().ascii,  # display.ascii, or an output that cannot show ✓ ✗ │
    }


def _selection(task: str | None, invocation: str | None, types: list[str] | None, since: str | None, until: str | None):
    from lopen.app.views.replay import Selection, event_type_names, parse_bound
    from lopen.errors import LopenError

    try:
        chosen = event_type_names(types or [])
    except ValueError as exc:
        raise LopenError("unknown --type", str(exc), "`docs/events.md` lists every event type") from None
    bounds = {}
    for flag, text in (("--since", since), ("--until", until)):
        if text:
            try:
                bounds[flag] = parse_bound(text, upper=flag == "--until")
            except ValueError as exc:
                raise LopenError(f"{flag} {text!r} is not understood", str(exc), f"give {flag} {BOUND_HELP}") from None
    from lopen.app.views.replay import Bound

    return Selection(
        task=task or "",
        invocation=invocation or "",
        types=chosen,
        since=bounds.get("--since", Bound()),
        until=bounds.get("--until", Bound()),
    )


def replay(
    session_id: str | None = typer.Argument(
        None, metavar="SESSION", help="The session id, e.g. auth-20261126-1 (default: the latest)."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="One JSON object per line: seq, type, at (ISO-8601, UTC) and every field."
    ),
    full: bool = typer.Option(False, "--full", help="Cut nothing: every value whole, hashes unabbreviated."),
    tree: bool = typer.Option(
        False, "--tree", help="Group by invocation: its tool calls, its oracle invocations and their verdicts."
    ),
    task: str | None = typer.Option(None, "--task", help="Only this task's events, e.g. core/1."),
    invocation: str | None = typer.Option(
        None, "--invocation", help="Only this invocation's events (with its oracle invocations)."
    ),
    types: list[str] | None = TYPES_OPTION,
    since: str | None = typer.Option(None, "--since", help=f"From {BOUND_HELP}."),
    until: str | None = typer.Option(None, "--until", help=f"Up to {BOUND_HELP}."),
    width: int | None = typer.Option(None, "--width", min=40, help="Columns (default: the terminal's)."),
    transcript: bool = typer.Option(
        False,
        "--transcript",
        help="The conversation as it happened: each invocation's exact prompt, what the model said, every "
        "tool call with its whole arguments and result, the oracle's verdicts.",
    ),
) -> None:
    """Print a session's history, one event per line, in order (for audit).

    The story starts with the spec approval the session worked from (who approved, the approved
    hashes). Oracle findings and failure causes are shown under their event. `--transcript` shows the
    conversation instead, every text whole.
    """
    from lopen.app.queries import module_of_session
    from lopen.app.views import replay as rp
    from lopen.errors import LopenError

    if session_id is not None:
        module_of_session(session_id)  # a malformed id is refused before the store is opened
    if as_json and tree:
        raise LopenError("--tree and --json do not go together", "the tree is a text view", "leave one of them out")
    if transcript and tree:
        raise LopenError(
            "--tree and --transcript do not go together",
            "the transcript shows each invocation's conversation in order, not as a tree",
            "leave one of them out",
        )
    selection = _selection(task, invocation, types, since, until)
    with _store() as store:
        views = store.projections
        views.catch_up()
        session = views.sessions.get(session_id) if session_id else views.sessions.latest()
        if session is None:
            raise LopenError(
                f"no session {session_id}" if session_id else "no sessions yet",
                f"the event store at {store.location} has no events for it in this project"
                if session_id
                else "nothing has been run in this project",
                "see `lopen session list`" if session_id else "`lopen run <module>` starts one",
            )
        records = rp.select(
            rp.session_records(store, views.project, session.id, selection.first_seq, selection.last_seq), selection
        )
        shown = [0]

        def counted(recs):
            for rec in recs:
                shown[0] += 1
                yield rec

        if transcript:
            from lopen.app.views import transcript as tr

            blobs = tr.Blobs(store, views.project)
            if as_json:
                _write(tr.json_transcript(counted(records), blobs))
            else:
                options = _view_options(width, full)
                said = tr.TranscriptView(blobs, width=int(options["width"]), ascii=bool(options["ascii"]))
                _write(_lines(said, tr.conversation(counted(records))))
        elif as_json:
            _write(rp.json_line(rec) for rec in counted(records))
        else:
            view = rp.TextView(**_view_options(width, full), tree=tree, seq_width=len(str(session.last_seq)))
            _write(_lines(view, counted(records)))
        if not shown[0]:
            flags = [
                f"{flag} {value}"
                for flag, value in (
                    ("--task", task),
                    ("--invocation", invocation),
                    ("--since", since),
                    ("--until", until),
                )
                if value
            ] + [f"--type {t}" for t in types or []]
            print(
                f"no event of session {session.id} matches {' '.join(flags)}"
                + (
                    f" (its tasks: {', '.join(session_tasks)})"
                    if task and (session_tasks := _tasks_of(views, session))
                    else ""
                ),
                file=sys.stderr,
            )


def _tasks_of(views, session) -> list[str]:
    """The module's task ids, for a --task that matched nothing."""
    state = views.plan.get(session.module)
    return sorted(state.tasks) if state else []


def _lines(view, records) -> Iterator[bytes]:
    for rec in records:
        for line in view.render(rec):
            yield f"{line}\n".encode()


def log(
    task_id: str = typer.Argument(
        ..., metavar="TASK", help="The task id, e.g. core/1 (`lopen session show` lists them)."
    ),
    module: str | None = typer.Option(None, "--module", "-m", help="The task's module (needed when several have it)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line, as `lopen replay --json`."),
    full: bool = typer.Option(False, "--full", help="Cut nothing."),
    width: int | None = typer.Option(None, "--width", min=40, help="Columns (default: the terminal's)."),
) -> None:
    """One task's story across every session: its invocations (with their prompt headers), tool
    calls, oracle verdicts with their findings, status changes and commits."""
    from lopen.app.queries import task_owner
    from lopen.app.views import replay as rp
    from lopen.term import duration, lines_changed, number, plural

    with _store() as store:
        views = store.projections
        views.catch_up()
        state = task_owner(store, task_id, module)
        records = rp.task_records(store, views.project, state.module, task_id)
        if as_json:
            _write(rp.json_line(rec) for rec in records)
            return
        last = views.sessions.latest(state.module)
        seq_width = len(str(max(last.last_seq if last else 0, store.last_seq())))
        view = rp.TextView(**_view_options(width, full), tree=True, sessions=True, prompts=True, seq_width=seq_width)
        _write(_lines(view, records))
        spent = views.tokens.tasks(state.module).get(task_id)
        task = state.tasks[task_id]
        if spent is not None:  # the task's spend across sessions, its oracle checks included
            _write(
                [
                    f"spent: {plural(spent.total, 'token')}, {number(spent.premium)} premium "
                    f"request{'' if spent.premium == 1 else 's'}, {spent.money} "
                    f"in {plural(spent.calls, 'model call')}, {duration(task.seconds)} of invocations\n".encode()
                ]
            )
        if task.commit and task.files:  # what its verified tree changed: git diff --numstat of its commit (P2;
            # a commit recorded before Lopen counted its lines has none to show)
            _write([f"changed: {lines_changed(task.added, task.removed, task.files)} ({task.commit[:8]})\n".encode()])


@projections_app.command("rebuild")
def rebuild(as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON object.")) -> None:
    """Throw the projections away and rebuild them from every stored event (after checking the hash chain)."""
    import msgspec

    from lopen.app import integrity
    from lopen.app.context import Project

    result = integrity.rebuild(Project.here())
    identical = result["identical"]
    if as_json:
        typer.echo(msgspec.json.encode(result).decode())
        integrity.require_identical(result)  # exit 1 naming the projections and rows that differ
        return
    from lopen.term import plural

    for problem in result["problems"]:
        typer.echo(f"skipped: {problem}")
    seconds = result["seconds"]
    rate = result["events"] / seconds if seconds else 0.0
    typer.echo(
        f"rebuilt {plural(len(result['rows']), 'projection')} from {plural(result['events'], 'event')} "
        f"in {seconds:.2f} s ({rate:,.0f} events/s)"
    )
    width = max((len(f"{rows:,}") for rows in result["rows"].values()), default=1)
    for name, rows in result["rows"].items():
        count, noun = plural(rows, "row").split(" ")
        typer.echo(f"  {name:<10} {count:>{max(width, 7)}} {noun}")
    typer.echo(f"identical to the projections kept incrementally: {'yes' if identical else 'NO'}")
    integrity.require_identical(result)  # exit 1 naming the projections and rows that differ


@session_app.command("list")
def list_sessions(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
    every_project: bool = typer.Option(
        False, "--all-projects", help="Every project's sessions on this store (a shared PostgreSQL store)."
    ),
) -> None:
    """List this project's sessions (oldest first), with status, step and tokens."""
    import msgspec

    with _store() as store:
        views = store.projections
        views.catch_up()
        _warn_problems(store)
        totals = views.tokens.sessions(every_project=every_project)  # one query, not one per session
        listed = [(s, totals.get((s.project, s.id))) for s in views.sessions.all(every_project=every_project)]
    if as_json:
        rows = [
            {
                "id": s.id,
                "project": s.project,
                "module": s.module,
                "status": s.status,
                "phase": s.phase,
                "step": s.step,
                "started_at": s.started_at,
                "updated_at": s.updated_at,
                "resumed_from": s.resumed_from,
                "tokens": tokens.total if tokens else 0,
            }
            for s, tokens in listed
        ]
        typer.echo(msgspec.json.encode(rows).decode())
        return
    if not listed:
        typer.echo("no sessions yet: `lopen run <module>` starts one")
        return
    header = ("SESSION", "MODULE", "STATUS", "STEP", "STARTED", "TOKENS")
    if every_project:
        header = ("PROJECT", *header)
    table = [header] + [
        (
            *((s.project,) if every_project else ()),
            s.id,
            s.module,
            s.status,
            f"{s.step} {s.phase}".strip(),
            _when(s.started_at),
            f"{tokens.total if tokens else 0:,}",
        )
        for s, tokens in listed
    ]
    widths = [max(map(len, column)) for column in zip(*table, strict=True)]
    line = "  ".join(f"{{:<{w}}}" for w in widths).format
    typer.echo("\n".join(line(*row).rstrip() for row in table))  # one write: a thousand sessions, a thousand lines


@session_app.command("show")
def show(
    session_id: str | None = typer.Argument(None, metavar="SESSION", help="The session id (default: the latest)."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Show a session: phase, step, status, plan tree, tokens, a table of each task's tokens, premium
    requests, time and lines changed, and where it would resume."""
    import msgspec

    from lopen.app.queries import state_in
    from lopen.app.views.report import session_report, to_markdown, to_yaml

    with _store() as store:
        session = _session_or_fail(store, session_id)
        views = store.projections
        report = session_report(views, session.id)
        plan = state_in(store, session.module)
    assert report is not None
    if fmt is Format.json:
        typer.echo(msgspec.json.format(msgspec.json.encode(report)).decode())
    elif fmt is Format.yaml:
        typer.echo(to_yaml(report), nl=False)
    else:
        typer.echo(to_markdown(report, plan), nl=False)


@session_app.command("delete")
def delete(session_id: str = typer.Argument(..., metavar="SESSION", help="The session id.")) -> None:
    """Delete a session from the lists (its events stay in the store for audit)."""
    from lopen.app import commands
    from lopen.app.context import Project

    commands.delete_session(Project.here(), session_id, commands.cli_actor())
    typer.echo(f"deleted session {session_id} (its events stay in the store; `lopen replay {session_id}` shows them)")


@session_app.command("prune")
def prune(
    keep: int | None = typer.Option(
        None, "--keep", min=0, help="Completed sessions to keep per module (default: session.retention)."
    ),
) -> None:
    """Delete all but the newest completed sessions of each module (session.retention, default 10)."""
    from lopen.app import commands
    from lopen.app.context import Project
    from lopen.term import plural

    pruned, retention = commands.prune_sessions(Project.here(), commands.cli_actor(), keep)
    for session_id in pruned:
        typer.echo(f"deleted {session_id}")
    typer.echo(
        f"pruned {plural(len(pruned), 'session')}; kept the newest {retention} completed "
        f"{'one' if retention == 1 else 'ones'} of each module"
    )
