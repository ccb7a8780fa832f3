"""Every session becomes an offline test (issue 22, item 6): ``lopen playbook <session>`` turns a recorded
session — a real model's included — into a scripted-model playbook (docs/scripted-model.md) that plays it
again through the real CLI: ``lopen run <module> --playbook FILE``.

How the record maps onto the format:

- each invocation (planning, a task, research, a summary, each oracle verification) becomes one rule,
  matched on the header line its recorded prompt began with (``[lopen] module=… kind=… task=…``: every
  field, in any order, each matched whole), with ``max_uses`` = its number of model calls, so that
  invocations with the same header (an oracle that rejects, then passes) are answered in order;
- each model call becomes a turn: the ``TokensUsed`` that reported it (its usage), the ``ModelSaid`` of
  that call (its text: an oracle's is the verdict's JSON), its ``ModelReasoned`` (its reasoning) and the
  ``ToolCalled`` events that follow,
  up to the next model call — the CLI records a call's usage and message before it runs its tools;
- paths in tool arguments that name the folder the model worked in (the session's worktrees) become
  ``{{cwd}}``, which the scripted model replaces with the replay's working directory.

A sub-agent's calls (the CLI's ``task`` tool) are left out: its requests do not carry Lopen's header.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from events import catalogue as ev
from events.redaction import REDACTED
from lopen.errors import LopenError

if TYPE_CHECKING:
    from events.recorded import Recorded
    from lopen.app.context import Project
    from lopen.scripted_model import Playbook, Rule, Turn

CWD = "{{cwd}}"
HEADER = re.compile(r"^\[lopen\] (.*)$", re.M)
FIELD = re.compile(r"(\S+?)=(\S+)")


@dataclass
class _Call:
    """One model call as recorded: its usage, what it said, the tools it called."""

    usage: ev.TokensUsed | None = None
    said: str | None = None
    reasoning: str = ""
    calls: list[ev.ToolCalled] = field(default_factory=list)


@dataclass
class _Invocation:
    started: ev.InvocationStarted
    seq: int
    calls: list[_Call] = field(default_factory=list)
    skipped: int = 0  # a sub-agent's events
    attempts: int = 0  # model calls that began an attempt (charged as a prompt): more than one = retried

    def take(self, event: ev.Event) -> None:
        if getattr(event, "agent_id", ""):
            self.skipped += 1
            return
        last = self.calls[-1] if self.calls else None
        if isinstance(event, ev.ToolCalled):
            if last is None:
                last = _Call()
                self.calls.append(last)
            last.calls.append(event)
        elif isinstance(event, ev.TokensUsed):
            self.attempts += event.premium > 0
            if last is None or last.calls or last.usage is not None:
                self.calls.append(_Call(usage=event))
            else:
                last.usage = event
        elif isinstance(event, ev.ModelSaid):
            if last is None or last.calls or last.said is not None:
                self.calls.append(_Call(said=event.text))
            else:
                last.said = event.text
        elif isinstance(event, ev.ModelReasoned):  # the CLI reports it after the call's message
            if last is None or last.calls or last.reasoning:
                self.calls.append(_Call(reasoning=event.text))
            else:
                last.reasoning = event.text


@dataclass(frozen=True)
class Recording:
    """What ``playbook_of`` made, and what a reader should know about it."""

    playbook: Playbook
    invocations: int
    turns: int
    tool_calls: int
    notes: tuple[str, ...] = ()


def header_regex(line: str) -> str:
    """A regex for a header line with every field of ``line``, in any order, each value matched whole."""
    fields = FIELD.findall(line)
    return r"\[lopen\]" + "".join(rf"(?=.* {_escape(k)}={_escape(v)}(?!\S))" for k, v in fields)


def _label(fields: dict[str, str]) -> str:
    """A rule's name: the kind, an oracle's scope, and what it is about (``task-core/1``,
    ``oracle-component-core``, ``planning-step-4``)."""
    given = {k: v for k, v in fields.items() if v != "-"}
    about = next((given[k] for k in ("target", "task", "component", "section") if k in given), "")
    about = about or (f"step-{given['step']}" if "step" in given else "")
    return "-".join(v for v in (given.get("kind", ""), given.get("scope", ""), about) if v)


def _escape(text: str) -> str:
    """``re.escape`` without the escapes a header value never needs (``-``, ``/``), for a readable file."""
    return re.escape(text).replace("\\-", "-").replace("\\/", "/")


def playbook_of(records: Iterable[Recorded], prompt_text: Any, *, name: str, folders: Iterable[str] = ()) -> Recording:
    """The playbook that answers a session's invocations as its model did. ``prompt_text(key)`` reads a
    prompt blob (None when missing); ``folders`` are the paths the model worked in (made ``{{cwd}}``), in
    addition to the worktrees the records name."""
    from lopen.scripted_model import Match, Playbook, Rule, ToolCall, Turn, Usage

    invocations: dict[str, _Invocation] = {}
    worked_in = {f for f in folders if f}
    models: dict[str, str] = {}
    for rec in records:
        e = rec.event
        if isinstance(e, ev.SessionStarted):
            worked_in.add(e.worktree)
            models = models or dict(e.models)
        elif isinstance(e, ev.BranchEnsured):
            worked_in.add(e.worktree)
        elif isinstance(e, ev.InvocationStarted):
            invocations[e.invocation_id] = _Invocation(e, rec.seq)
        elif (
            isinstance(e, ev.TokensUsed | ev.ModelSaid | ev.ModelReasoned | ev.ToolCalled)
            and e.invocation_id in invocations
        ):
            invocations[e.invocation_id].take(e)
    paths = sorted((p.rstrip("/") for p in worked_in if p and p.rstrip("/")), key=len, reverse=True)

    def portable(value: Any) -> Any:
        if isinstance(value, str):
            for path in paths:
                value = value.replace(path, CWD)
            return value
        if isinstance(value, dict):
            return {k: portable(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [portable(v) for v in value]
        return value

    rules: list[Rule] = []
    names: dict[str, int] = {}
    turns = tool_calls = redacted = skipped = 0
    retried = [i.started.invocation_id for i in invocations.values() if i.attempts > 1]
    without_prompt: list[str] = []
    for inv in invocations.values():
        started = inv.started
        user = prompt_text(started.prompt["user"]) if "user" in started.prompt else None
        found = HEADER.search(user or "")
        if found is None:
            without_prompt.append(started.invocation_id)
            continue
        header = found.group(0)
        skipped += inv.skipped
        if not inv.calls:  # it ended before the model answered (interrupted): nothing to play
            continue
        fields = dict(FIELD.findall(header))
        label = _label(fields) or started.kind or "invocation"
        names[label] = names.get(label, 0) + 1
        played: list[Turn] = []
        for call in inv.calls:
            tools = []
            for t in call.calls:
                arguments = portable(t.arguments)
                if set(arguments) == {"raw"} and isinstance(arguments["raw"], str):  # not a JSON object
                    arguments = arguments["raw"]
                redacted += str(arguments).count(REDACTED)
                tools.append(ToolCall(name=t.tool, arguments=arguments))
            usage = None
            if (u := call.usage) is not None:
                cached = min(u.cache_read, u.input)  # a provider may count cache reads outside the input
                usage = Usage(prompt_tokens=u.input, completion_tokens=u.output, cached_tokens=cached)
            played.append(Turn(text=call.said or "", reasoning=call.reasoning, tool_calls=tools, usage=usage))
            tool_calls += len(tools)
        turns += len(played)
        rule_name = label if names[label] == 1 else f"{label}-{names[label]}"
        rules.append(
            Rule(name=rule_name, turns=played, match=Match(user_regex=header_regex(header)), max_uses=len(played))
        )
    if without_prompt:
        raise LopenError(
            f"session {name} cannot be made a playbook: {len(without_prompt)} of its invocations have no "
            f"recorded prompt (first: {without_prompt[0]})",
            "it was recorded before Lopen kept each invocation's exact prompt and what the model said, so "
            "there is neither a header line to recognise the invocation by nor the model's words to answer with",
            "record it again with this Lopen (run the module again); `lopen replay --transcript` shows what "
            "that session kept",
        )
    main = (
        models.get("building")
        or models.get("planning")
        or next((i.started.model for i in invocations.values() if i.started.kind != "oracle" and i.started.model), "")
    )
    oracle = models.get("oracle") or next(
        (i.started.model for i in invocations.values() if i.started.kind == "oracle" and i.started.model), ""
    )
    served = list(dict.fromkeys(m for m in (main or "scripted", oracle) if m))
    notes = []
    if redacted:
        notes.append(
            f"{redacted} value{'s' * (redacted != 1)} in tool arguments {'were' if redacted != 1 else 'was'} "
            f"redacted when recorded: the playbook sends {REDACTED} in {'their' if redacted != 1 else 'its'} place"
        )
    if retried:
        notes.append(
            f"{len(retried)} invocation{'s' * (len(retried) != 1)} ({', '.join(retried)}) started again after "
            "a provider error: the playbook plays the attempts as one conversation, without the error, so the "
            "replay differs there"
        )
    if skipped:
        notes.append(f"{skipped} event{'s' * (skipped != 1)} of sub-agents left out: their requests are not Lopen's")
    playbook = Playbook(name=f"recorded-{name}", models=served, rules=rules)
    return Recording(playbook, len(rules), turns, tool_calls, tuple(notes))


def to_toml(recording: Recording, *, source: str) -> str:
    """The playbook as TOML (multi-line strings kept multi-line), a comment on top saying where it is from."""
    import msgspec
    import tomli_w

    data = msgspec.to_builtins(recording.playbook)
    body = {
        "playbook": {"name": data["name"], "models": data["models"]},
        "rule": [_rule_data(rule) for rule in data["rules"]],
    }
    top = [
        f"# Recorded by `lopen playbook` from {source}: {recording.invocations} invocations, {recording.turns} "
        f"model calls, {recording.tool_calls} tool calls.",
        "# One rule per invocation, matched on its header line; one [[rule.turn]] per model call.",
        "# Play it again offline: lopen run <module> --playbook THIS_FILE (docs/scripted-model.md).",
        *(f"# Note: {note}" for note in recording.notes),
    ]
    return "\n".join(top) + "\n\n" + tomli_w.dumps(body, multiline_strings=True)


def _rule_data(rule: dict[str, Any]) -> dict[str, Any]:
    turns = []
    for turn in rule["turn"]:
        out: dict[str, Any] = {}
        if turn.get("text"):
            out["text"] = turn["text"]
        if turn.get("reasoning"):
            out["reasoning"] = turn["reasoning"]
        if turn.get("usage"):
            out["usage"] = turn["usage"]
        if turn.get("tool_calls"):
            out["tool_calls"] = turn["tool_calls"]
        turns.append(out)
    match = {k: v for k, v in rule["match"].items() if v not in (None, [], 0)}
    return {"name": rule["name"], "max_uses": rule["max_uses"], "match": match, "turn": turns}


def export_playbook(project: Project, session: str, out: Path | None = None) -> dict[str, Any]:
    """Write the playbook of ``session`` to ``out`` (default ``<session>.playbook.toml`` here); what it holds."""
    from events.selection import session_records
    from lopen.app import queries
    from lopen.scripted_model import parse_playbook

    store, project_id = project.opened or project.open(read_only=True)
    try:
        views = store.projections
        views.catch_up()
        row = queries.session_row(views, session)
        recording = playbook_of(
            session_records(store, project_id, session),
            lambda key: store.blob(project_id, key),
            name=session,
        )
    finally:
        if project.opened is None:
            store.close()
    text = to_toml(recording, source=f"session {session} (module {row.module})")
    parse_playbook(text, "the recorded playbook")  # what is written loads
    out = out or Path.cwd() / f"{session}.playbook.toml"
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise LopenError(
            f"cannot write {out}", exc.strerror or str(exc), "give --out a path in a folder you can write to"
        ) from None
    return {
        "out": str(out),
        "session": session,
        "module": row.module,
        "invocations": recording.invocations,
        "turns": recording.turns,
        "tool_calls": recording.tool_calls,
        "models": recording.playbook.models,
        "notes": list(recording.notes),
        "bytes": len(text.encode()),
    }
