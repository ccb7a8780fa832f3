"""Playbooks: the TOML format, its validation, and how a request picks a rule and a turn."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from lopen.errors import LopenError

FaultKind = Literal["rate_limit", "server_error", "unauthorized", "drop", "malformed", "slow"]
NonNegInt = Annotated[int, msgspec.Meta(ge=0)]


class PlaybookError(LopenError):
    """A playbook that cannot be read or does not follow the format."""


class Usage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Token numbers reported for one answer (``total_tokens`` = prompt + completion)."""

    prompt_tokens: NonNegInt = 0
    completion_tokens: NonNegInt = 0
    cached_tokens: NonNegInt = 0

    def __post_init__(self) -> None:
        if self.cached_tokens > self.prompt_tokens:
            raise ValueError("cached_tokens cannot exceed prompt_tokens")

    def to_openai(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        }


DEFAULT_USAGE = Usage(prompt_tokens=1000, completion_tokens=100)


class ToolCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A tool call the model makes. A table of ``arguments`` is JSON-encoded; a string is sent verbatim."""

    name: str
    arguments: dict[str, Any] | str = {}

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a tool call needs a name")

    def encoded_arguments(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return msgspec.json.encode(self.arguments).decode()


class Turn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One scripted answer, or a fault.

    ``usage`` replaces the playbook's ``default_usage`` wholesale for this answer.
    ``retry_after`` (seconds, ``rate_limit`` only) and ``delay`` (seconds, ``slow`` only)
    default to 1. For ``rate_limit``, ``server_error`` and ``unauthorized`` (HTTP 401: the key was
    revoked or expired) a ``text`` becomes the error message.
    """

    text: str = ""
    reasoning: str = ""  # a summary of the model's thinking, sent as ``reasoning_content``
    tool_calls: list[ToolCall] = []
    usage: Usage | None = None
    fault: FaultKind | None = None
    retry_after: NonNegInt | None = None
    delay: Annotated[float, msgspec.Meta(ge=0)] | None = None

    def __post_init__(self) -> None:
        if self.retry_after is not None and self.fault != "rate_limit":
            raise ValueError('retry_after is only meaningful with fault = "rate_limit"')
        if self.delay is not None and self.fault != "slow":
            raise ValueError('delay is only meaningful with fault = "slow"')
        if self.tool_calls and self.fault not in (None, "slow"):
            raise ValueError(f'a turn with fault = "{self.fault}" cannot carry tool_calls')


class RequestView(msgspec.Struct, frozen=True):
    """The parts of a chat-completions request that rules match on."""

    system: str
    user: str
    tools: frozenset[str]
    model: str
    tool_results: tuple[str, ...]
    turn: int

    @classmethod
    def of(cls, body: dict[str, Any]) -> RequestView:
        """System text (all system messages), the last user message, the tools offered by name,
        the model, the tool results in order, and the turn index (assistant messages so far)."""
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        by_role: dict[str, list[str]] = {"system": [], "user": [], "tool": [], "assistant": []}
        for message in messages:
            if (role := message.get("role")) in by_role:
                by_role[role].append(message_text(message.get("content")))
        offered = (tool.get("function") for tool in body.get("tools") or [] if isinstance(tool, dict))
        return cls(
            system="\n".join(by_role["system"]),
            user=by_role["user"][-1] if by_role["user"] else "",
            tools=frozenset(str(f.get("name")) for f in offered if isinstance(f, dict)),
            model=str(body.get("model") or ""),
            tool_results=tuple(by_role["tool"]),
            turn=len(by_role["assistant"]),
        )


def message_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a content-part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


class Match(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Conditions on a request; a rule matches when every condition that is set holds."""

    system_contains: str | None = None
    user_contains: str | None = None
    user_regex: str | None = None
    tools_include: list[str] = []
    tools_exclude: list[str] = []
    model: str | None = None
    last_tool_result_contains: str | None = None
    any_tool_result_contains: str | None = None
    from_turn: NonNegInt = 0

    def __post_init__(self) -> None:
        if self.user_regex is not None:
            try:
                re.compile(self.user_regex)
            except re.error as exc:
                raise ValueError(f"user_regex {self.user_regex!r} is not a valid regex: {exc}") from None

    def holds(self, request: RequestView) -> bool:
        results = request.tool_results
        return (
            (self.system_contains is None or self.system_contains in request.system)
            and (self.user_contains is None or self.user_contains in request.user)
            and (self.user_regex is None or re.search(self.user_regex, request.user) is not None)
            and all(name in request.tools for name in self.tools_include)
            and not any(name in request.tools for name in self.tools_exclude)
            and (self.model is None or self.model == request.model)
            and (
                self.last_tool_result_contains is None
                or (bool(results) and self.last_tool_result_contains in results[-1])
            )
            and (
                self.any_tool_result_contains is None
                or any(self.any_tool_result_contains in result for result in results)
            )
            and request.turn >= self.from_turn
        )


class Rule(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A scripted conversation: ``turns[i]`` answers turn index ``match.from_turn + i``.

    ``max_uses`` (0 = unlimited) bounds how many requests the rule answers, faults included.
    In TOML the turns are the ``[[rule.turn]]`` tables.
    """

    name: str
    turns: list[Turn] = msgspec.field(name="turn", default_factory=list)
    match: Match = Match()
    max_uses: NonNegInt = 0

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a rule needs a name")
        if not self.turns:
            raise ValueError(f"rule {self.name!r} needs at least one [[rule.turn]]")


class Choice(msgspec.Struct, frozen=True):
    """The turn chosen for a request; ``overflow`` when the rule had run out of turns."""

    rule: Rule
    turn: Turn
    overflow: bool


class Playbook(msgspec.Struct, frozen=True):
    """What the server plays: the model ids it serves, default usage, and rules in order."""

    name: str
    rules: list[Rule]
    models: list[str] = msgspec.field(default_factory=lambda: ["scripted"])
    default_usage: Usage = DEFAULT_USAGE

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("models must list at least one model id")
        names = [rule.name for rule in self.rules]
        if duplicates := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"rule names must be unique; repeated: {', '.join(duplicates)}")

    def choose(self, request: RequestView, uses: dict[str, int]) -> Choice | None:
        """The first rule (in order) that matches and has uses left, and its turn for the request.

        Counts the use in ``uses`` (rule name → requests answered); the caller serializes calls.
        Past the rule's last turn, the last turn is replayed without its tool calls.
        """
        for rule in self.rules:
            used = uses.get(rule.name, 0)
            if (rule.max_uses == 0 or used < rule.max_uses) and rule.match.holds(request):
                uses[rule.name] = used + 1
                index = request.turn - rule.match.from_turn
                if index < len(rule.turns):
                    return Choice(rule=rule, turn=rule.turns[index], overflow=False)
                last = msgspec.structs.replace(rule.turns[-1], tool_calls=[])
                return Choice(rule=rule, turn=last, overflow=True)
        return None


class _PlaybookHeader(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    models: list[str] = msgspec.field(default_factory=lambda: ["scripted"])
    default_usage: Usage = DEFAULT_USAGE


class _PlaybookFile(msgspec.Struct, forbid_unknown_fields=True):
    playbook: _PlaybookHeader
    rules: list[Rule] = msgspec.field(name="rule", default_factory=list)


_HOW = "Fix the playbook; the format is described in docs/scripted-model.md."


def parse_playbook(text: str | bytes, source: str = "<playbook>") -> Playbook:
    """Decode and validate a TOML playbook; ``source`` names it in error messages."""
    try:
        raw = msgspec.toml.decode(text, type=_PlaybookFile)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).rpartition(" - at ")
        if not message:
            message, where = str(exc), ""
        where = where.strip("`").removeprefix("$").lstrip(".") or "the top level"
        raise PlaybookError(f"invalid playbook {source}", f"at {where}: {message}", _HOW) from None
    except msgspec.DecodeError as exc:
        raise PlaybookError(f"invalid playbook {source}", f"not valid TOML: {exc}", _HOW) from None
    try:
        header = raw.playbook
        return Playbook(name=header.name, models=header.models, default_usage=header.default_usage, rules=raw.rules)
    except ValueError as exc:
        raise PlaybookError(f"invalid playbook {source}", str(exc), _HOW) from None


def load_playbook(path: str | Path) -> Playbook:
    """Read, decode and validate a TOML playbook file."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise PlaybookError(f"cannot read playbook {path}", exc.strerror or str(exc), "Check the path.") from None
    return parse_playbook(text, str(path))
