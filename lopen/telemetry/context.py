"""The gateway's side: make the Copilot CLI's spans children of Lopen's invocation span.

The Copilot SDK sends the W3C trace context of OpenTelemetry's *current context* with
``session.create`` and ``session.send`` (``copilot._telemetry.get_trace_context``); the CLI parents
its own ``invoke_agent``/``chat``/``execute_tool`` spans under it. ``remote_parent(traceparent)``
makes Lopen's invocation span (ids from ``lopen.telemetry.ids``: nothing is started or recorded
here, the span itself is built from events) the current context for the block::

    with remote_parent(request.traceparent):
        session = await client.create_session(...)
        await session.send_and_wait(...)

With an empty ``traceparent`` it does nothing and imports nothing.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

__all__ = ["remote_parent"]

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@contextlib.contextmanager
def remote_parent(traceparent: str) -> Iterator[None]:
    """Attach a context whose current span is the (non-recording) span ``traceparent`` names."""
    match = _TRACEPARENT.match(traceparent) if traceparent else None
    if match is None or not int(match[1], 16) or not int(match[2], 16):
        yield
        return
    from opentelemetry import context, trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    parent = SpanContext(
        int(match[1], 16), int(match[2], 16), is_remote=True, trace_flags=TraceFlags(int(match[3], 16))
    )
    token = context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))
    try:
        yield
    finally:
        context.detach(token)
