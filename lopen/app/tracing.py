"""A trace for each use case that changes state, whichever face asked (``lopen.telemetry.commands``).

::

    with traced(project, "lopen revert", actor, module=module) as span:
        ...                         # every store the project opens meanwhile reports its appends
        span["lopen.session"] = …   # attributes known on the way

When telemetry is off (no ``OTEL_EXPORTER_OTLP_ENDPOINT`` nor ``otel.endpoint``, or disabled) this
costs a dictionary lookup or two and imports nothing of OpenTelemetry. When it is on, the command's
span (and its appends') is exported when the outermost traced use case returns; one inside another
(``lopen do`` approving its spec) is its child.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from events.store import EventStore
    from lopen.app.context import Project
    from lopen.telemetry.commands import CommandTrace

__all__ = ["observe", "traced"]

_current: contextvars.ContextVar[CommandTrace | None] = contextvars.ContextVar("lopen_command_trace", default=None)


def _off(project: Project) -> bool:
    """True when nothing is exported (checked before loading any settings module beyond ``resolve``)."""
    from lopen.telemetry.settings import resolve

    try:
        otel = project.settings().otel
    except Exception:  # settings that cannot be read: the use case says so itself
        return True
    return resolve(otel, project.env).export is None


@contextlib.contextmanager
def traced(project: Project, name: str, actor: str, **attributes: Any) -> Iterator[dict[str, Any]]:
    """Trace the block as command ``name`` asked by ``actor`` (``lopen.actor``); ``attributes`` (and
    what the block puts into the yielded dict) go on its span. Exported at the end of the outermost."""
    outer = _current.get()
    if outer is None and _off(project):
        yield {}
        return
    trace = outer
    if trace is None:
        from lopen.telemetry.commands import CommandTrace
        from lopen.telemetry.settings import resolve

        export = resolve(project.settings().otel, project.env).export
        assert export is not None
        trace = CommandTrace(export, project=project.settings().project.id, environ=project.env)
        if project.opened is not None:
            trace.project = project.opened[1]
    extra: dict[str, Any] = {}
    span = trace.enter(name, actor, {f"lopen.{k}": v for k, v in attributes.items()})
    token = _current.set(trace)
    error: BaseException | None = None
    try:
        yield extra
    except BaseException as exc:
        error = exc if _failed(exc) else None
        raise
    finally:
        _current.reset(token)
        span.attributes.update({k: v for k, v in extra.items() if v not in ("", None)})
        trace.leave(span, error)
        if outer is None:
            trace.finish()


def _failed(exc: BaseException) -> bool:
    """A face's exit (``SystemExit``, typer's ``Exit``) is a failure unless its code is 0."""
    if isinstance(exc, SystemExit):
        return exc.code not in (0, None)
    if type(exc).__name__ == "Exit":
        return getattr(exc, "exit_code", 1) != 0
    return True


def observe(store: EventStore, project_id: str) -> Any:
    """Report ``store``'s appends to the command being traced, if any; returns the function that stops
    it (None when no command is traced)."""
    trace = _current.get()
    if trace is None:
        return None
    trace.project = trace.project or project_id
    return store.observe_appends(trace.on_append)
