"""What goes into a gateway invocation and what comes back (plain msgspec structs)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import msgspec

from events.folds.tokens import TokenTotals


class ErrorKind(StrEnum):
    AUTH = "auth"
    RATE_LIMITED = "rate_limited"
    MODEL_UNAVAILABLE = "model_unavailable"
    TRANSIENT = "transient"
    TIMEOUT = "timeout"  # the invocation ran past its timeout: not retried
    INTERRUPTED = "interrupted"  # Lopen aborted it (Ctrl+C, SIGTERM): not retried
    CAPPED = "capped"  # it reached its cap of tool calls or tokens and was stopped: not retried
    BUDGET = "budget"  # a budget was reached inside it and it was stopped: not retried, not a failure
    FATAL = "fatal"


class InvocationError(msgspec.Struct, frozen=True):
    kind: ErrorKind
    message: str
    retry_after: float | None = None
    model: str = ""


class ToolCallRecord(msgspec.Struct, frozen=True):
    """One tool call the model made, Lopen's own or the CLI's (`bash`, `view`, …); ``agent_id`` is set
    when a sub-agent (the CLI's `task` tool) made it."""

    call_id: str
    name: str
    arguments: dict | str | None
    result: str
    success: bool
    duration: float
    agent_id: str = ""


ModelUsage = TokenTotals  # one model's calls in a session: the one token fold


class Usage(TokenTotals, kw_only=True):
    """Token usage summed from the SDK's usage events (the gateway's tally), in total and per model:
    both through the one token fold (``events.folds.tokens.TokenTotals.count``)."""

    per_model: dict[str, TokenTotals] = msgspec.field(default_factory=dict)

    def record(self, model: str, input: int, output: int, cache_read: int, cache_write: int) -> None:
        """One model call's usage, as the SDK reports it."""
        self.count(input, output, cache_read, cache_write)
        bucket = self.per_model.get(model)
        if bucket is None:
            bucket = self.per_model[model] = TokenTotals()
        bucket.count(input, output, cache_read, cache_write)


class ContextWindow(msgspec.Struct, frozen=True):
    used: int = 0
    limit: int = 0


class Attempt(msgspec.Struct, frozen=True):
    """One try at the invocation: which model, how it ended, and any retries the CLI made itself."""

    model: str
    error: InvocationError | None
    cli_retries: int
    duration: float


class InvocationResult(msgspec.Struct):
    model: str
    final_message: str
    tool_calls: list[ToolCallRecord]
    usage: Usage
    context: ContextWindow
    duration: float
    attempts: list[Attempt]
    error: InvocationError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class InvocationRequest(msgspec.Struct, frozen=True):
    """A fresh session: the model chain is tried in order when a model is unavailable.

    ``cli_tools`` names the CLI's own tools the session is offered (None = all of them, the CLI's
    default; ``()`` = none: the oracle's session judges, it cannot act). ``builder`` retargets the CLI
    to a headless builder (``lopen.copilot.session_options``): skills, the co-author trailer and the
    repository's instruction files off, ``guidance`` in place of the CLI's interactive guidelines.
    ``traceparent`` (W3C, from ``lopen.telemetry``; "" = none) makes the Copilot CLI's own spans
    children of Lopen's invocation span. ``conversation_id`` names the SDK session of the first
    attempt (retries get ``-2``, ``-3`` …; "" = the SDK's own id): Lopen's span and the CLI's then
    share one ``gen_ai.conversation.id``. ``max_turns`` and ``max_tokens`` cap what the invocation may
    spend, and ``budget`` says when a budget is reached inside it (``lopen.copilot.caps``). ``mcp`` gives
    the session the user's MCP servers (``GatewayConfig.mcp_servers``; the oracle's never asks).
    """

    models: list[str]
    prompt: str
    system_message: str = ""
    system_mode: str = "append"
    working_directory: str = ""
    timeout: float = 900.0
    cli_tools: tuple[str, ...] | None = None
    builder: bool = False
    guidance: str = ""
    traceparent: str = ""
    conversation_id: str = ""
    max_turns: int = 0  # tool calls before the invocation is stopped (0 = no cap; lopen.copilot.caps)
    max_tokens: int = 0  # input + output tokens before it is stopped (0 = no cap)
    # asked after each model call's usage was handed over: the figures of a budget reached, or ""
    budget: Callable[[], str] | None = None
    mcp: bool = False


# Stream events handed to the gateway's callback while a session runs.


class StreamEvent(msgspec.Struct, frozen=True, tag=True):
    pass


class ToolStarted(StreamEvent, frozen=True):
    call_id: str
    name: str
    arguments: dict | str | None
    agent_id: str = ""


class ToolFinished(StreamEvent, frozen=True):
    record: ToolCallRecord


class AssistantText(StreamEvent, frozen=True):
    text: str
    agent_id: str = ""


class AssistantReasoning(StreamEvent, frozen=True):
    """A summary of the model's reasoning, whole (the SDK's ``assistant.reasoning``; recorded)."""

    text: str
    agent_id: str = ""


class AssistantDelta(StreamEvent, frozen=True):
    """A piece of the model's message as it streams (for live views; never recorded)."""

    text: str


class UsageReported(StreamEvent, frozen=True):
    """One model call's usage, as it arrives. ``first_of_attempt`` marks the first call of a session
    attempt (the user prompt: what premium requests are charged for)."""

    model: str
    input: int
    output: int
    cache_read: int
    cache_write: int
    call_id: str = ""
    agent_id: str = ""
    first_of_attempt: bool = False


class ContextMeasured(StreamEvent, frozen=True):
    used: int
    limit: int


class RetryScheduled(StreamEvent, frozen=True):
    """A retry: by the CLI itself (`by="cli"`) or by the gateway after a failed attempt."""

    model: str
    reason: str
    attempt: int
    delay: float
    by: str


class ModelFellBack(StreamEvent, frozen=True):
    from_model: str
    to_model: str
    why: str


class PermissionDecision(StreamEvent, frozen=True):
    """The sandbox policy's answer to one permission request of the Copilot CLI (G7).

    ``kind`` is the CLI's request kind (write, read, shell, url, mcp, …), ``target`` the path,
    command or URL it names, ``agent_id`` the sub-agent that asked ("" for the session's own
    agent). ``kind="network"``: a connection Lopen's network proxy refused (``target`` is its
    ``host:port``; the gateway emits it, not the CLI)."""

    kind: str
    target: str
    allowed: bool
    reason: str = ""
    agent_id: str = ""
