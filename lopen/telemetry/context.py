"""The gateway's side: make the Copilot CLI's spans children of Lopen's invocation span.

The Copilot SDK sends the W3C trace context of OpenTelemetry's *current context* with
``session.create`` and ``session.send`` (``copilot._telemetry.get_trace_context``); the CLI parents
its own ``invoke_agent``/``chat``/``execute_tool`` spans under it. ``remote_parent(traceparent)``
makes Lopen's invocation span (ids from ``lopen.telemetry.ids``: nothing is started or recorded
here, the span itself is built from events) the current context::

    parent = attach_parent(request.traceparent)     # or: with remote_parent(traceparent): …
    try:
        session = await client.create_session(...)
        await session.send_and_wait(...)
    finally:
        detach_parent(parent)

With an empty ``traceparent`` they do nothing and import nothing.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

__all__ = ["attach_parent", "detach_parent", "remote_parent"]

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def attach_parent(traceparent: str) -> object | None:
    """Make the (non-recording) span ``traceparent`` names the current context; return the token
    for ``detach_parent``, or None when there is nothing to attach (nothing is imported then)."""
    match = _TRACEPARENT.match(traceparent) if traceparent else None
    if match is None or not int(match[1], 16) or not int(match[2], 16):
        return None
    from opentelemetry import context, trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    parent = SpanContext(
        int(match[1], 16), int(match[2], 16), is_remote=True, trace_flags=TraceFlags(int(match[3], 16))
    )
    return context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))


def detach_parent(token: object | None) -> None:
    """Undo ``attach_parent`` (in the same task or thread)."""
    if token is not None:
        from opentelemetry import context

        context.detach(token)  # type: ignore[arg-type]


@contextlib.contextmanager
def remote_parent(traceparent: str) -> Iterator[None]:
    """``attach_parent`` for the block."""
    token = attach_parent(traceparent)
    try:
        yield
    finally:
        detach_parent(token)
