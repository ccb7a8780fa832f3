"""Deterministic trace and span ids: the same session always gets the same ids.

OpenTelemetry SDKs draw ids at random when a span starts. Lopen's spans are *derived from events*
instead (``lopen.telemetry.spans``), so their ids are derived too, from what the events name:

- the trace id from the project and the session id (one trace per session);
- an invocation's span id from its ``invocation_id`` — known before the invocation's first event is
  stored, so the workflow can hand it to the Copilot CLI as the W3C ``traceparent`` of its session
  (``traceparent``) and the CLI's own spans hang under Lopen's invocation span;
- every other span id from what identifies it in the store (the ``seq`` of the event that opened it,
  or an invocation id and a tool call id).

Spans exported live (from the bus, as events are appended) and spans rebuilt later by
``lopen trace`` therefore carry the same ids: a collector sees one tree either way.

Ids are xxh3 hashes (128 bits for a trace, 64 for a span) of the parts joined with NUL bytes,
never zero (zero means "invalid" in W3C Trace Context).
"""

from __future__ import annotations

import re

import xxhash

__all__ = ["invocation_span_id", "parse_traceparent", "span_id", "trace_id", "traceparent"]

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def _key(*parts: str) -> bytes:
    return "\0".join(parts).encode("utf-8", "surrogatepass")


def trace_id(project: str, session_id: str) -> int:
    """The 128-bit trace id of a session: one trace per session, the same on every machine."""
    return xxhash.xxh3_128_intdigest(_key("lopen-trace", project, session_id)) or 1


def span_id(trace: int, kind: str, *parts: str) -> int:
    """A 64-bit span id inside ``trace`` for a span of ``kind`` (run, step, tool, …) named by ``parts``."""
    return xxhash.xxh3_64_intdigest(_key(f"{trace:032x}", kind, *parts)) or 1


def invocation_span_id(project: str, session_id: str, invocation_id: str) -> int:
    """The span id of an invocation's ``invoke_agent`` span."""
    return span_id(trace_id(project, session_id), "invocation", invocation_id)


def traceparent(project: str, session_id: str, invocation_id: str) -> str:
    """The W3C ``traceparent`` naming an invocation's span (version 00, sampled).

    Give it to the gateway (``InvocationRequest.traceparent``): the Copilot CLI then parents its own
    ``invoke_agent``, ``chat`` and ``execute_tool`` spans under Lopen's invocation span.
    """
    trace = trace_id(project, session_id)
    return f"00-{trace:032x}-{span_id(trace, 'invocation', invocation_id):016x}-01"


def parse_traceparent(text: str) -> tuple[int, int, int] | None:
    """A W3C ``traceparent`` (version 00) as (trace id, span id, flags); None when it is not one."""
    match = _TRACEPARENT.match(text.strip().lower()) if text else None
    if match is None or not int(match[1], 16) or not int(match[2], 16):
        return None
    return int(match[1], 16), int(match[2], 16), int(match[3], 16)
