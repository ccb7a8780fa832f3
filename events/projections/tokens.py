"""Token totals (L5): per invocation, per session and per module, from the per-call ``TokensUsed``.

Row keys: ``invocation:<project>/<id>``, ``session:<project>/<id>``, ``module:<project>/<name>``,
``task:<project>/<module>/<task id>`` (every invocation of the task, its oracle checks included, across
sessions: what ``budget.*_per_task`` count). Each row is the one token fold
(``events.folds.tokens.TokenTotals``): a call is added with ``add``. An invocation row keeps its task,
so the calls of an invocation started before a restart still reach the task's row.
``invocations`` counts the workflow's invocations (``InvocationStarted`` of every kind but the
oracle's, which ``oracle_invocations`` counts); the context window is the latest measurement.
"""

from __future__ import annotations

from collections.abc import Sequence

from events import catalogue as ev
from events.folds.tokens import TokenTotals, add_calls
from events.projections.base import Projection, Skip, Table
from events.recorded import Recorded

__all__ = ["KINDS", "PROJECTION", "TokenTotals", "Tokens", "apply_run", "task_key"]


Tokens = Table[TokenTotals]
KINDS = ("invocation", "session", "module")


def _rows(t: Tokens, e: ev.Event, invocation_id: str, with_module: bool = True) -> list[TokenTotals]:
    """The rows an event adds to (its invocation's, session's, module's, task's), marked changed."""
    memo_key = (e.project, invocation_id, e.session_id, e.module if with_module else "")
    found = t.memo.get(memo_key)
    if found is None:
        idents = (invocation_id, e.session_id, e.module if with_module else "")
        keys = [f"{kind}:{e.project}/{ident}" for kind, ident in zip(KINDS, idents, strict=True) if ident]
        opened = t.get(f"invocation:{e.project}/{invocation_id}") if invocation_id and with_module else None
        if opened is not None and opened.task:
            keys.append(task_key(e.project, e.module, opened.task))
        rows = []
        for key in keys:
            row = t.get(key)
            if row is None:
                row = TokenTotals()
                t.put(key, row)
            rows.append(row)
        found = t.memo[memo_key] = (keys, rows)
    t.dirty.update(found[0])
    return found[1]


def task_key(project: str, module: str, task: str) -> str:
    return f"task:{project}/{module}/{task}"


def _started(t: Tokens, seq: int, e: ev.InvocationStarted) -> None:
    oracle = e.kind == "oracle"
    if e.task:  # the invocation row knows its task before the rows are gathered
        key = f"invocation:{e.project}/{e.invocation_id}"
        row = t.get(key)
        if row is None:
            row = TokenTotals()
            t.put(key, row)
        row.task = e.task
    for row in _rows(t, e, e.invocation_id):
        if oracle:
            row.oracle_invocations += 1
        else:
            row.invocations += 1


def _window(t: Tokens, seq: int, e: ev.ContextWindowMeasured) -> None:
    # a per-invocation figure (and the session's latest); the module row keeps none
    for row in _rows(t, e, e.invocation_id, with_module=False):
        row.context_used, row.context_limit = e.used, e.limit


def apply_run(t: Tokens, records: Sequence[Recorded], skip: Skip) -> None:
    """A run of one stream's events: the calls (``TokensUsed``) of one invocation in a row are added to its
    rows (``_rows``) at once (``add_calls``: exactly as one by one); ``InvocationStarted`` and
    ``ContextWindowMeasured`` go to their handlers (neither reads the sums, so the calls can wait)."""
    calls: list[tuple[int, ev.TokensUsed]] = []
    invocation = session = project = module = ""
    for rec in records:
        e = rec.event
        kind = type(e)
        if kind is ev.TokensUsed:
            if calls and (
                e.invocation_id != invocation or e.session_id != session or e.module != module or e.project != project
            ):
                _add(t, calls, skip)
                calls = []
            if not calls:
                invocation, session, module, project = e.invocation_id, e.session_id, e.module, e.project
            calls.append((rec.seq, e))
        elif kind is ev.InvocationStarted or kind is ev.ContextWindowMeasured:
            if calls and kind is ev.InvocationStarted:  # it may give an invocation its task: its rows change
                _add(t, calls, skip)
                calls = []
            try:
                (_started if kind is ev.InvocationStarted else _window)(t, rec.seq, e)
            except Exception as exc:  # a bug: stale for this event
                skip(rec.seq, e, exc)
    if calls:
        _add(t, calls, skip)


def _add(t: Tokens, calls: list[tuple[int, ev.TokensUsed]], skip: Skip) -> None:
    """Add calls of one invocation (the same rows) in order."""
    first = calls[0][1]
    try:
        add_calls(_rows(t, first, first.invocation_id), [e for _, e in calls])
    except Exception as exc:  # a bug: stale for these events
        for seq, e in calls:
            skip(seq, e, exc)


PROJECTION = Projection(name="tokens", row=TokenTotals, run=apply_run, version=3)
