"""The conversation as it happened (``lopen replay --transcript``): per invocation, the exact prompt
Lopen sent (its parts, from their blobs), what the model said, each tool call with its whole arguments
and its whole result (from its blob), the oracle's verdicts, the task's status changes and how the
invocation ended — in the order they were recorded.

Texts are printed whole and unindented, between heading lines, so that a prompt or a file the model
read can be copied out as it was. ``--json`` gives the same records as ``lopen replay --json`` lines
with the blobs' texts added: ``prompt_text`` (part → text) on ``InvocationStarted`` and ``result`` (the
whole result) on ``ToolCalled``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

import msgspec

from events import catalogue as ev
from events.blobs import key_of
from events.recorded import Recorded
from events.selection import iso
from events.store import EventStore

# The events a conversation is made of; the rest of a session's history is `lopen replay`'s.
KINDS = (
    ev.InvocationStarted,
    ev.ModelSaid,
    ev.ModelReasoned,
    ev.ToolCalled,
    ev.OracleVerdictRecorded,
    ev.CompletionRefused,
    ev.TaskStatusChanged,
    ev.UserMessageDelivered,
    ev.InvocationFinished,
)
PARTS = {"system": "system message", "guidance": "guidance", "user": "prompt"}
_ENCODE = msgspec.json.Encoder().encode


def conversation(records: Iterable[Recorded]) -> Iterator[Recorded]:
    """The records of ``records`` a transcript shows."""
    return (rec for rec in records if isinstance(rec.event, KINDS))


class Blobs:
    """Reads blobs for a transcript, each once, and says when one no longer matches its key."""

    def __init__(self, store: EventStore, project: str) -> None:
        self.store = store
        self.project = project

    def text(self, key: str) -> tuple[str | None, str]:
        """(the blob's text or None when it is missing, a problem to show or "")."""
        text = self.store.blob(self.project, key)
        if text is None:
            return None, f"blob {key} is missing from the event store"
        if key_of(text) != key:
            return text, f"blob {key} does not match its key: it was rewritten (run `lopen verify --full`)"
        return text, ""


def result_of(event: ev.ToolCalled, blobs: Blobs) -> tuple[str, str]:
    """A tool call's whole result and a note ("" when there is nothing to say)."""
    if event.result_blob:
        text, problem = blobs.text(event.result_blob)
        if text is not None:
            return text, problem
        return event.result_summary, problem + "; its first characters were kept in the event"
    if event.result_hash and len(event.result_summary) >= 300:
        return event.result_summary, "cut at 300 characters when it was recorded (before Lopen kept whole results)"
    return event.result_summary, ""


class TranscriptView:
    """Renders a conversation's records as text, one block per record."""

    def __init__(self, blobs: Blobs, *, width: int = 80, ascii: bool = False) -> None:
        self.blobs = blobs
        self.width = min(max(width, 40), 100)
        self.heavy, self.light = ("=", "-") if ascii else ("━", "─")
        self.good, self.bad, self.arrow = ("+", "x", "->") if ascii else ("✓", "✗", "→")

    def render(self, rec: Recorded) -> list[str]:
        e = rec.event
        stamp = f"#{rec.seq} {datetime.fromtimestamp(e.at, UTC).strftime('%H:%M:%S')}"
        if isinstance(e, ev.InvocationStarted):
            what = f"oracle for {e.parent_invocation}" if e.parent_invocation else e.kind
            about = " ".join(
                f"{k} {v}" for k, v in (("component", e.component), ("task", e.task), ("model", e.model)) if v
            )
            lines = ["", self._rule(f"{stamp} invocation {e.invocation_id} ({what}) {about}", self.heavy)]
            if not e.prompt:
                sections = f", sections sent: {', '.join(e.sections_sent)}" if e.sections_sent else ""
                return [*lines, f"(the prompt was not kept then: {e.prompt_size:,} characters{sections})"]
            for part, key in e.prompt.items():
                text, problem = self.blobs.text(key)
                lines.append(self._rule(f"{PARTS.get(part, part)} ({len(text or ''):,} characters)"))
                lines += self._body(text or "", problem)
            return lines
        if isinstance(e, ev.ModelSaid):
            who = f" (sub-agent {e.agent_id})" if e.agent_id else ""
            return [self._rule(f"{stamp} the model said{who}"), *self._body(e.text)]
        if isinstance(e, ev.ModelReasoned):
            who = f" (sub-agent {e.agent_id})" if e.agent_id else ""
            return [self._rule(f"{stamp} the model's reasoning (a summary){who}"), *self._body(e.text)]
        if isinstance(e, ev.ToolCalled):
            mark = self.good if e.success else f"{self.bad} failed"
            extra = ", ".join(
                x
                for x in (
                    f"exit code {e.exit_code}" if e.exit_code is not None else "",
                    f"{e.duration:.1f} s" if e.duration >= 0.05 else "",
                    f"sub-agent {e.agent_id}" if e.agent_id else "",
                )
                if x
            )
            lines = [self._rule(f"{stamp} tool {e.tool} {mark}" + (f" ({extra})" if extra else ""))]
            lines += _arguments(e.arguments)
            result, note = result_of(e, self.blobs)
            lines.append(self._rule(f"result ({len(result):,} characters)"))
            return lines + self._body(result, note)
        if isinstance(e, ev.OracleVerdictRecorded):
            said = f"{self.good} passed" if e.passed else f"{self.bad} REJECTED"
            lines = [self._rule(f"{stamp} oracle verdict: {e.scope} {e.target} {said}")]
            if e.summary:
                lines.append(f"summary: {e.summary}")
            for c in e.criteria:
                lines.append(
                    f"criterion {c.id} {'met' if c.met else 'NOT MET'}" + (f": {c.evidence}" if c.evidence else "")
                )
            for f in e.findings:
                where = f" ({f.location})" if f.location else ""
                kind = f" {f.category}" if f.category else ""
                lines.append(f"finding [{f.severity}]{kind}: {f.description}{where}")
            if e.raw:
                lines += ["raw answer (not a verdict):", *e.raw.splitlines()]
            return lines
        if isinstance(e, ev.CompletionRefused):
            return [self._rule(f"{stamp} completion of {e.scope} {e.target} refused"), *self._body(e.why)]
        if isinstance(e, ev.TaskStatusChanged):
            line = self._rule(f"{stamp} task {e.task_id} {e.from_state} {self.arrow} {e.to_state}")
            return [line, *self._body(e.reason)] if e.reason else [line]
        if isinstance(e, ev.UserMessageDelivered):
            return [self._rule(f"{stamp} a person's message {e.message_id} went with the prompt")]
        if isinstance(e, ev.InvocationFinished):
            why = f": {e.error_kind}" if e.error_kind else ""
            return [
                self._rule(
                    f"{stamp} invocation {e.invocation_id} ended {e.outcome}{why} ({e.duration:.1f} s)", self.heavy
                )
            ]
        return []

    def _rule(self, title: str, glyph: str = "") -> str:
        glyph = glyph or self.light
        text = f"{glyph * 2} {title} "
        return text + glyph * max(0, self.width - len(text))

    @staticmethod
    def _body(text: str, note: str = "") -> list[str]:
        lines = text.splitlines() if text else []
        return [*lines, f"[{note}]"] if note else lines


def _arguments(arguments: dict[str, object]) -> list[str]:
    """Each argument whole: a multi-line string as its lines under its name, anything else as JSON."""
    out = []
    for name, value in arguments.items():
        if isinstance(value, str) and "\n" in value:
            out += [f"{name}:", *value.splitlines()]
        else:
            out.append(f"{name}: {json.dumps(value, ensure_ascii=False)}")
    return out


def json_transcript(records: Iterable[Recorded], blobs: Blobs) -> Iterator[bytes]:
    """The conversation's records as ``lopen replay --json`` lines, the blobs' texts added."""
    for rec in conversation(records):
        e = rec.event
        data = msgspec.to_builtins(e)
        data["at"] = iso(e.at)
        if isinstance(e, ev.InvocationStarted) and e.prompt:
            data["prompt_text"] = {part: blobs.text(key)[0] for part, key in e.prompt.items()}
        elif isinstance(e, ev.ToolCalled):
            data["result"] = result_of(e, blobs)[0]
        yield b'{"seq":%d,%s\n' % (rec.seq, _ENCODE(data)[1:])
