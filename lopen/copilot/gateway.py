"""The gateway: one CopilotClient per process, on its own event-loop thread.

Actors call :meth:`Gateway.invoke` (synchronous) to run one fresh session: the model chain is
tried in order, rate limits and transient failures are retried with bounded exponential
backoff, and every SDK event of interest is handed to a callback as it streams.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from lopen.copilot.classify import ErrorEvidence
from lopen.copilot.results import (
    AssistantText,
    Attempt,
    ContextMeasured,
    ContextWindow,
    ErrorKind,
    InvocationError,
    InvocationRequest,
    InvocationResult,
    ModelFellBack,
    RetryScheduled,
    StreamEvent,
    ToolCallRecord,
    ToolFinished,
    ToolStarted,
    Usage,
    UsageReported,
)
from lopen.copilot.tools import LopenTool, to_sdk_tool
from lopen.errors import LopenError

EventCallback = Callable[[StreamEvent], None]


class ProviderConfig(msgspec.Struct, frozen=True):
    """A bring-your-own-model endpoint used for every session instead of GitHub's routing."""

    type: str = "openai"
    base_url: str = ""
    api_key: str = ""
    wire_api: str = "completions"


class GatewayConfig(msgspec.Struct, frozen=True):
    cli_path: str
    default_model: str = "claude-opus-4.6"
    provider: ProviderConfig | None = None
    retry_attempts: int = 4
    retry_base_delay: float = 1.0
    retry_max_delay: float = 30.0
    copilot_home: str = ""
    env: dict[str, str] = msgspec.field(default_factory=dict)
    # The SDK's TelemetryConfig (lopen.telemetry.copilot_telemetry): the CLI exports its own spans.
    telemetry: dict[str, Any] | None = None


class Gateway:
    """Owns the Copilot client and the thread its event loop runs on."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="copilot-gateway", daemon=True)
        self._client: Any = None
        self._unavailable: set[str] = set()
        self._closed = False

    # lifecycle -----------------------------------------------------------------------------

    def start(self) -> Gateway:
        self._thread.start()
        try:
            self._run(self._start())
        except BaseException:
            self.close()
            raise
        atexit.register(self.close)
        return self

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def cli_pid(self) -> int | None:
        process = getattr(self._client, "_process", None) or getattr(self._client, "_cli_process", None)
        return getattr(process, "pid", None)

    def close(self) -> None:
        """Stop the CLI process and the loop thread. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        if self._client is not None and self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._client.stop(), self._loop).result(timeout=15)
            except Exception:
                self._force_stop()
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)

    def _force_stop(self) -> None:
        pid = self.cli_pid
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)

    async def _start(self) -> None:
        from copilot import CopilotClient, RuntimeConnection

        connection = RuntimeConnection.for_stdio(path=self.config.cli_path)
        connection.env = self._process_env()
        self._client = CopilotClient(connection=connection, telemetry=self.config.telemetry)
        try:
            await self._client.start()
        except Exception as exc:
            raise LopenError(
                f"the Copilot CLI at {self.config.cli_path} did not start",
                _first_line(str(exc)),
                "run `lopen doctor` to check the CLI and your credentials",
            ) from exc

    def _process_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.config.env)
        # The model's shell should find the same Python (and its test runner) Lopen runs on.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        if self.config.copilot_home:
            env["COPILOT_HOME"] = self.config.copilot_home
        provider = self.config.provider
        if provider and provider.base_url:
            env["COPILOT_OFFLINE"] = "true"
            env["COPILOT_PROVIDER_BASE_URL"] = provider.base_url
            env["COPILOT_PROVIDER_TYPE"] = provider.type or "openai"
            env.setdefault("COPILOT_MODEL", self.config.default_model)
        return env

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        if threading.current_thread() is self._thread:
            raise RuntimeError("Gateway.invoke called from the gateway's own loop: it would deadlock")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # invocations ---------------------------------------------------------------------------

    def invoke(
        self,
        request: InvocationRequest,
        tools: Sequence[LopenTool] = (),
        on_event: EventCallback | None = None,
    ) -> InvocationResult:
        """Run one fresh session to completion. Blocks the calling thread, never the loop."""
        if self._closed or self._client is None:
            raise RuntimeError("the gateway is not running")
        return self._run(self.invoke_async(request, tools, on_event))

    async def invoke_async(
        self,
        request: InvocationRequest,
        tools: Sequence[LopenTool] = (),
        on_event: EventCallback | None = None,
    ) -> InvocationResult:
        emit = on_event or (lambda _event: None)
        started = time.monotonic()
        attempts: list[Attempt] = []
        chain = [m for m in dict.fromkeys(request.models) if m not in self._unavailable] or list(request.models)
        last: InvocationResult | None = None
        for position, model in enumerate(chain):
            retries = 0
            while True:
                last = await self._attempt(model, request, tools, emit, attempts)
                error = last.error
                if error is None or error.kind in (ErrorKind.AUTH, ErrorKind.FATAL):
                    return self._finish(last, attempts, started)
                if error.kind is ErrorKind.MODEL_UNAVAILABLE:
                    break
                if retries >= self.config.retry_attempts:
                    return self._finish(last, attempts, started)
                retries += 1
                delay = min(self.config.retry_max_delay, self.config.retry_base_delay * 2 ** (retries - 1))
                delay = max(delay, error.retry_after or 0.0)
                emit(RetryScheduled(model=model, reason=error.kind.value, attempt=retries, delay=delay, by="gateway"))
                await asyncio.sleep(delay)
            self._unavailable.add(model)
            if position + 1 < len(chain):
                emit(ModelFellBack(from_model=model, to_model=chain[position + 1], why=error.message))
        assert last is not None
        last.error = InvocationError(
            kind=ErrorKind.MODEL_UNAVAILABLE,
            message=f"none of the models {', '.join(chain)} is available: {last.error.message if last.error else ''}",
            model=chain[-1],
        )
        return self._finish(last, attempts, started)

    @staticmethod
    def _finish(result: InvocationResult, attempts: list[Attempt], started: float) -> InvocationResult:
        result.attempts = list(attempts)
        result.duration = time.monotonic() - started
        return result

    async def _attempt(
        self,
        model: str,
        request: InvocationRequest,
        tools: Sequence[LopenTool],
        emit: EventCallback,
        attempts: list[Attempt],
    ) -> InvocationResult:
        from copilot.session import PermissionHandler

        from lopen.telemetry.context import attach_parent, detach_parent

        run = _SessionRun(model, emit)
        begun = time.monotonic()
        session = None
        parent = attach_parent(request.traceparent)  # the CLI's spans go under Lopen's invocation span
        try:
            session = await self._client.create_session(
                on_permission_request=PermissionHandler.approve_all,
                model=model,
                tools=[to_sdk_tool(t) for t in tools],
                system_message={"mode": request.system_mode, "content": request.system_message},
                working_directory=request.working_directory or None,
                infinite_sessions={"enabled": False},
                provider=self._provider_dict(),
                session_id=_session_id(request.conversation_id, len(attempts) + 1),
            )
            session.on(run.observe)
            await session.send_and_wait(request.prompt, timeout=request.timeout)
        except Exception as exc:
            run.error = run.evidence.classify(model, exc)
        finally:
            detach_parent(parent)
            if session is not None:
                await self._dispose(session)
        attempts.append(
            Attempt(model=model, error=run.error, cli_retries=run.cli_retries, duration=time.monotonic() - begun)
        )
        return run.result()

    async def _dispose(self, session: Any) -> None:
        session_id = session.session_id
        try:
            await session.disconnect()
            await self._client.delete_session(session_id)
        except Exception:
            pass  # a session that cannot be cleaned up must not hide the invocation's outcome

    def _provider_dict(self) -> dict[str, str] | None:
        provider = self.config.provider
        if not provider or not provider.base_url:
            return None
        config = {"type": provider.type or "openai", "base_url": provider.base_url, "wire_api": provider.wire_api}
        if provider.api_key:
            config["api_key"] = provider.api_key
        return config


class _SessionRun:
    """Collects one session's events: tool calls, usage, context window, final message, errors."""

    def __init__(self, model: str, emit: EventCallback) -> None:
        self.model = model
        self.emit = emit
        self.final_message = ""
        self.tool_calls: list[ToolCallRecord] = []
        self.pending: dict[str, tuple[str, Any, float]] = {}
        self.usage = Usage()
        self.context = ContextWindow()
        self.cli_retries = 0
        self.evidence = ErrorEvidence()
        self.error: InvocationError | None = None

    def observe(self, event: Any) -> None:
        if getattr(event, "agent_id", None):
            return
        data = event.data
        handler = getattr(self, "_on_" + type(data).__name__, None)
        if handler is not None:
            handler(data)

    def _on_ToolExecutionStartData(self, data: Any) -> None:
        self.pending[data.tool_call_id] = (data.tool_name, data.arguments, time.monotonic())
        self.emit(ToolStarted(call_id=data.tool_call_id, name=data.tool_name, arguments=data.arguments))

    def _on_ToolExecutionCompleteData(self, data: Any) -> None:
        name, arguments, begun = self.pending.pop(data.tool_call_id, ("?", None, time.monotonic()))
        if data.result is not None:
            text = data.result.content
        elif data.error is not None:
            text = data.error.message
        else:
            text = ""
        record = ToolCallRecord(
            call_id=data.tool_call_id,
            name=name,
            arguments=arguments,
            result=text,
            success=bool(data.success),
            duration=time.monotonic() - begun,
        )
        self.tool_calls.append(record)
        self.emit(ToolFinished(record=record))

    def _on_AssistantMessageData(self, data: Any) -> None:
        if data.content:
            self.final_message = data.content
            self.emit(AssistantText(text=data.content))

    def _on_AssistantUsageData(self, data: Any) -> None:
        values = (
            data.input_tokens or 0,
            data.output_tokens or 0,
            data.cache_read_tokens or 0,
            data.cache_write_tokens or 0,
        )
        self.usage.add(data.model or self.model, *values)
        self.emit(UsageReported(data.model or self.model, *values))

    def _on_SessionUsageInfoData(self, data: Any) -> None:
        self.context = ContextWindow(used=int(data.current_tokens or 0), limit=int(data.token_limit or 0))
        self.emit(ContextMeasured(used=self.context.used, limit=self.context.limit))

    def _on_AssistantTurnRetryData(self, data: Any) -> None:
        self.cli_retries += 1
        self.emit(
            RetryScheduled(model=self.model, reason=str(data.reason), attempt=self.cli_retries, delay=0.0, by="cli")
        )

    def _on_ModelCallFinalResultData(self, data: Any) -> None:
        self.evidence.final_result = getattr(data.result, "value", str(data.result))

    def _on_ModelCallFailureData(self, data: Any) -> None:
        self.evidence.status_code = data.status_code or self.evidence.status_code
        self.evidence.error_code = data.error_code or self.evidence.error_code

    def _on_SessionErrorData(self, data: Any) -> None:
        self.evidence.error_type = data.error_type
        self.evidence.status_code = data.status_code or self.evidence.status_code
        self.evidence.message = data.message

    def result(self) -> InvocationResult:
        return InvocationResult(
            model=self.model,
            final_message=self.final_message,
            tool_calls=self.tool_calls,
            usage=self.usage,
            context=self.context,
            duration=0.0,
            attempts=[],
            error=self.error,
        )


def _session_id(conversation_id: str, attempt: int) -> str | None:
    """The SDK session's id: the conversation's for the first attempt, ``-<n>`` after it; None = the SDK's."""
    if not conversation_id:
        return None
    return conversation_id if attempt == 1 else f"{conversation_id}-{attempt}"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)
