"""The gateway: one CopilotClient per process, on its own event-loop thread.

Actors call :meth:`Gateway.invoke` (synchronous) to run one fresh session: the model chain is
tried in order, rate limits and transient failures are retried with bounded exponential
backoff, and every SDK event of interest is handed to a callback as it streams.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from lopen.copilot.caps import InvocationCap
from lopen.copilot.classify import ErrorEvidence
from lopen.copilot.results import (
    AssistantDelta,
    AssistantReasoning,
    AssistantText,
    Attempt,
    ContextMeasured,
    ContextWindow,
    ErrorKind,
    InvocationError,
    InvocationRequest,
    InvocationResult,
    ModelFellBack,
    PermissionDecision,
    RetryScheduled,
    StreamEvent,
    ToolCallRecord,
    ToolFinished,
    ToolStarted,
    Usage,
    UsageReported,
)
from lopen.copilot.session_options import session_options
from lopen.copilot.tools import LopenTool, to_sdk_tool
from lopen.errors import LopenError
from lopen.sandbox.config import SandboxConfig

if TYPE_CHECKING:
    from lopen.sandbox.kernel import Protection

EventCallback = Callable[[StreamEvent], None]


class ProviderConfig(msgspec.Struct, frozen=True):
    """A bring-your-own-model endpoint used for every session instead of GitHub's routing."""

    type: str = "openai"
    base_url: str = ""
    api_key: str = ""
    wire_api: str = "completions"


FINAL = (ErrorKind.AUTH, ErrorKind.FATAL, ErrorKind.TIMEOUT, ErrorKind.CAPPED, ErrorKind.BUDGET)  # never retried


class GatewayConfig(msgspec.Struct, frozen=True):
    cli_path: str
    default_model: str = "claude-opus-4.6"
    provider: ProviderConfig | None = None
    retry_attempts: int = 4
    retry_base_delay: float = 1.0
    retry_max_delay: float = 30.0
    copilot_home: str = ""
    # copilot_home is this gateway's alone (a BYOK run's): it is removed when the gateway closes, so the
    # CLI's own record of the conversations (its session store) never outlives the run — Lopen's is the one.
    forget_home: bool = False
    env: dict[str, str] = msgspec.field(default_factory=dict)
    # The model's confinement (lopen.sandbox): None = the permission policy alone, writes only
    # in each session's working directory and a private temp folder.
    sandbox: SandboxConfig | None = None
    # The SDK's TelemetryConfig (lopen.telemetry.copilot_telemetry): the CLI exports its own spans.
    telemetry: dict[str, Any] | None = None
    # The user's MCP servers (lopen.copilot.mcp_servers.session_servers: the SDK's mcp_servers, secrets
    # expanded), given to the sessions whose request asks for them (InvocationRequest.mcp).
    mcp_servers: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)


class Cancel:
    """Cuts the invocations of one caller short — a lane whose claim was lost — while the gateway's
    other invocations go on (``Gateway.abort`` cuts them all). ``set()`` is safe from any thread; an
    invocation started after it returns at once as ``interrupted``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._hooks: dict[int, Callable[[], object]] = {}
        self._next = 0

    def set(self) -> None:
        with self._lock:
            self._set = True
            hooks = list(self._hooks.values())
        for hook in hooks:
            hook()

    def is_set(self) -> bool:
        return self._set

    def on_set(self, hook: Callable[[], object]) -> Callable[[], None]:
        """Call ``hook`` when set (at once when it already is); return how to forget it."""
        with self._lock:
            key, self._next = self._next, self._next + 1
            self._hooks[key] = hook
            already = self._set
        if already:
            hook()
        return lambda: self._forget(key)

    def _forget(self, key: int) -> None:
        with self._lock:
            self._hooks.pop(key, None)


class Gateway:
    """Owns the Copilot client and the thread its event loop runs on."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="copilot-gateway", daemon=True)
        self._client: Any = None
        self._unavailable: set[str] = set()
        self._closed = False
        self._aborted = False
        self._inflight: set[asyncio.Task[Any]] = set()
        self.protection: Protection | None = None  # which sandbox confines the CLI, once started
        self._plan: Any = None  # what the kernel sandbox allows (lopen.sandbox.kernel.Plan)
        self._temp_dir = ""  # the model's private temp folder
        self._own_temp = False
        self._route: Any = None  # how the sandbox's network leaves it (lopen.sandbox.network.Route)
        self._proxy: Any = None  # Lopen's network proxy (lopen.sandbox.proxy.NetworkProxy)
        self._proxy_socket: socket.socket | None = None  # its loopback TCP listener, under Landlock
        self._listeners: dict[int, EventCallback] = {}  # the invocations in flight, for network refusals

    # lifecycle -----------------------------------------------------------------------------

    def start(self) -> Gateway:
        quiet_sdk_logs()
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

    def abort(self) -> None:
        """Abort every invocation in flight and refuse new ones (Ctrl+C, SIGTERM): each ``invoke``
        returns at once with an ``interrupted`` error. Safe from any thread, and from a signal handler."""
        self._aborted = True
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._cancel_inflight)

    def _cancel_inflight(self) -> None:
        for task in list(self._inflight):
            task.cancel()

    def close(self, timeout: float = 15) -> None:
        """Stop the CLI process and the loop thread. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        if self._client is not None and self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._client.stop(), self._loop).result(timeout=timeout)
            except Exception:
                self._force_stop()
        if self._proxy is not None and self._thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._proxy.close(), self._loop).result(timeout=5)
        if self._proxy_socket is not None:
            self._proxy_socket.close()
        if self._route is not None and self._route.socket:
            shutil.rmtree(os.path.dirname(self._route.socket), ignore_errors=True)
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if self._own_temp:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
        if self.config.forget_home and self.config.copilot_home:
            shutil.rmtree(self.config.copilot_home, ignore_errors=True)

    def kill(self) -> None:
        """Kill the CLI process now (a second Ctrl+C): nothing is cleaned up."""
        self._force_stop()

    def _force_stop(self) -> None:
        pid = self.cli_pid
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)

    async def _start(self) -> None:
        from copilot import CopilotClient, RuntimeConnection

        path, args = self._confined_cli()
        if self._proxy_socket is not None:
            await self._proxy.start_tcp(self._proxy_socket)
        elif self._proxy is not None:
            await self._proxy.start(self._route.socket)
        connection = RuntimeConnection.for_stdio(path=path, args=args)
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

    @property
    def _sandbox(self) -> SandboxConfig:
        return self.config.sandbox or SandboxConfig(mode="policy")

    def _confined_cli(self) -> tuple[str, list[str]]:
        """Pick the kernel sandbox, make the model's temp folder, and return the command that
        starts the CLI inside the sandbox. Also registers the secrets Lopen knows for redaction."""
        from events.redaction import register_secrets
        from lopen.sandbox import environment, kernel

        sandbox = self._sandbox
        provider = self.config.provider
        from lopen.copilot.mcp_servers import secrets_of

        known = [*([provider.api_key] if provider else []), *secrets_of(self.config.mcp_servers)]
        register_secrets(environment.known_secrets(os.environ, known))
        self.protection = kernel.detect(sandbox.mode)
        self._temp_dir = sandbox.temp_dir
        if not self._temp_dir:
            self._temp_dir, self._own_temp = tempfile.mkdtemp(prefix="lopen-model-"), True
        byok = bool(provider and provider.base_url)
        for folder in (self._temp_dir, self.config.copilot_home):  # to be bound writable, they must exist
            if folder:
                os.makedirs(folder, exist_ok=True)
        confinement = kernel.plan(sandbox, temp_dir=self._temp_dir, copilot_home=self.config.copilot_home, byok=byok)
        self._plan = confinement
        if self.protection.kind != "policy":
            kernel.unpack_cli(self.config.cli_path, self._process_env())
        if self.protection.confines_network:
            self._open_network(sandbox, provider.base_url if provider and byok else "")
        return kernel.launch(self.protection, confinement, self.config.cli_path, self._route)

    def _open_network(self, sandbox: SandboxConfig, provider_base_url: str) -> None:
        """The sandbox's one way out: Lopen's proxy, allowing the model provider and
        ``sandbox.allow_network`` — under bubblewrap on a Unix socket in a private folder of Lopen's
        temp (the forwarder inside relays to it), under Landlock on a loopback TCP port (the one the
        sandbox may connect to); started on the loop by ``_start``."""
        from lopen.copilot.mcp_servers import network_services
        from lopen.sandbox import network
        from lopen.sandbox.proxy import NetworkProxy

        services = [str((self.config.telemetry or {}).get("otlp_endpoint") or "")]  # the CLI's own spans
        services += network_services(self.config.mcp_servers)  # the user's HTTP MCP servers
        services = [url for url in services if url]
        rules = network.default_rules(provider_base_url) + [network.parse(p) for p in sandbox.allow_network]
        rules += [rule for rule in map(network.provider_rule, services) if rule is not None]
        if self.protection is not None and self.protection.kind == "landlock":
            self._proxy_socket = socket.create_server(("127.0.0.1", 0))
            self._route = network.tcp_route(self._proxy_socket.getsockname()[1], provider_base_url, *services)
        else:
            folder = tempfile.mkdtemp(prefix="lopen-net-")
            self._route = network.route(os.path.join(folder, "proxy.sock"), provider_base_url, *services)
        self._proxy = NetworkProxy(network.Allowlist(rules), self._network_refused)

    def _network_refused(self, target: str, reason: str) -> None:
        """A connection the proxy refused, recorded as a ``network`` permission decision in every
        invocation in flight (one CLI serves them all: which one asked cannot be told)."""
        decision = PermissionDecision("network", target, False, reason)
        for emit in list(self._listeners.values()):
            emit(decision)

    def confined(self, command: str) -> tuple[list[str], dict[str, str]]:
        """``(argv, env)`` to run a shell ``command`` the way the model's own commands run: under the
        same kernel sandbox and with an allowlisted environment holding no credential. For what Lopen
        runs on the model's work (the spec's verify commands): that is code the model wrote."""
        from lopen.sandbox import kernel
        from lopen.sandbox.environment import cli_environment

        env = cli_environment(os.environ, python_dir=str(Path(sys.executable).parent), temp_dir=self._temp_dir)
        for name in ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_SDK_AUTH_TOKEN"):
            env.pop(name, None)
        argv = ["/bin/sh", "-c", command]
        if self.protection is None or self._plan is None:
            return argv, env
        if self._route is not None:
            env.update(self._route.environment())
        path, args = kernel.launch(self.protection, self._plan, argv[0], self._route)
        return [path, *args, *argv[1:]] if path != argv[0] else argv, env

    def _process_env(self) -> dict[str, str]:
        """The CLI's environment: an allowlist of Lopen's (lopen.sandbox.environment), never all of it."""
        from lopen.sandbox.environment import cli_environment

        provider = self.config.provider
        byok = bool(provider and provider.base_url)
        return cli_environment(
            os.environ,
            # The model's shell should find the same Python (and its test runner) Lopen runs on.
            python_dir=str(Path(sys.executable).parent),
            temp_dir=self._temp_dir,
            copilot_home=self.config.copilot_home,
            provider_base_url=provider.base_url if provider and byok else "",
            provider_type=provider.type if provider else "",
            model=self.config.default_model,
            extra={**self.config.env, **(self._route.environment() if self._route is not None else {})},
        )

    def _permission_handler(
        self, request: InvocationRequest, tools: Sequence[LopenTool], emit: EventCallback
    ) -> tuple[Callable[[Any, Any], Any], Callable[[Any], None]]:
        """The session's permission handler: Lopen's policy (lopen.sandbox.policy), every decision
        emitted as a PermissionDecision. Returns ``(handler, observer)``: the observer, registered
        with ``session.on``, tells the handler which sub-agent asked."""
        from lopen.copilot.mcp_servers import allowed_tools
        from lopen.sandbox.policy import permission_handler, policy_for

        policy = policy_for(
            self._sandbox,
            cwd=request.working_directory,
            temp_dir=self._temp_dir,
            tools=[t.name for t in tools],
            confinement=self.protection.confinement if self.protection else "none",
            mcp=allowed_tools(self._mcp_servers(request)),
        )
        askers = _Askers()

        def report(decision: Any, asked: Any) -> None:
            emit(
                PermissionDecision(decision.kind, decision.target, decision.allowed, decision.reason, askers.pop(asked))
            )

        return permission_handler(policy, report), askers.observe

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
        *,
        ask: Callable[[str], str] | None = None,
        cancel: Cancel | None = None,
    ) -> InvocationResult:
        """Run one fresh session to completion. Blocks the calling thread, never the loop. ``ask`` answers
        the CLI's own ``ask_user`` tool (a person at hand: it blocks until they answer); without it the
        model is told no one can. ``cancel`` cuts this invocation short (``interrupted``) when it is set."""
        if self._closed or self._client is None:
            raise RuntimeError("the gateway is not running")
        if self._aborted or (cancel is not None and cancel.is_set()):
            return _interrupted(request)
        try:
            return self._run(self._tracked(self.invoke_async(request, tools, on_event, ask=ask), cancel))
        except concurrent.futures.CancelledError:
            return _interrupted(request)

    async def _tracked(self, coro: Any, cancel: Cancel | None = None) -> InvocationResult:
        task = asyncio.current_task()
        assert task is not None
        self._inflight.add(task)
        loop = self._loop
        forget = cancel.on_set(lambda: loop.call_soon_threadsafe(task.cancel)) if cancel is not None else None
        try:
            if self._aborted or (cancel is not None and cancel.is_set()):
                raise asyncio.CancelledError
            return await coro
        finally:
            self._inflight.discard(task)
            if forget is not None:
                forget()

    async def invoke_async(
        self,
        request: InvocationRequest,
        tools: Sequence[LopenTool] = (),
        on_event: EventCallback | None = None,
        *,
        ask: Callable[[str], str] | None = None,
    ) -> InvocationResult:
        emit = on_event or (lambda _event: None)
        key = id(emit)
        self._listeners[key] = emit
        try:
            return await self._invoke(request, tools, emit, ask)
        finally:
            self._listeners.pop(key, None)

    async def _invoke(
        self,
        request: InvocationRequest,
        tools: Sequence[LopenTool],
        emit: EventCallback,
        ask: Callable[[str], str] | None,
    ) -> InvocationResult:
        started = time.monotonic()
        attempts: list[Attempt] = []
        chain = [m for m in dict.fromkeys(request.models) if m not in self._unavailable] or list(request.models)
        last: InvocationResult | None = None
        for position, model in enumerate(chain):
            retries = 0
            while True:
                last = await self._attempt(model, request, tools, emit, attempts, ask)
                error = last.error
                if error is None or error.kind in FINAL:
                    return self._finish(last, attempts, started)
                if error.kind is ErrorKind.MODEL_UNAVAILABLE:
                    break
                if retries >= self.config.retry_attempts:
                    if error.kind is ErrorKind.RATE_LIMITED and position + 1 < len(chain):
                        break  # still rate-limited after the retry budget: the next model in the chain
                    return self._finish(last, attempts, started)
                retries += 1
                delay = min(self.config.retry_max_delay, self.config.retry_base_delay * 2 ** (retries - 1))
                delay = max(delay, error.retry_after or 0.0)
                emit(RetryScheduled(model=model, reason=error.kind.value, attempt=retries, delay=delay, by="gateway"))
                await asyncio.sleep(delay)
            self._unavailable.add(model)
            if position + 1 < len(chain):
                why = error.message
                if error.kind is ErrorKind.RATE_LIMITED:
                    why = f"still rate-limited after {retries} retries: {why}"
                emit(ModelFellBack(from_model=model, to_model=chain[position + 1], why=why))
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
        ask: Callable[[str], str] | None = None,
    ) -> InvocationResult:
        from lopen.telemetry.context import attach_parent, detach_parent

        run = _SessionRun(model, emit, InvocationCap(request.max_turns, request.max_tokens, request.budget))
        begun = time.monotonic()
        session = None
        mcp_servers = self._mcp_servers(request)
        options = session_options(request, [t.name for t in tools], mcp_servers)
        on_permission, permission_asker = self._permission_handler(request, tools, emit)
        if ask is not None:

            async def answer(question: dict[str, Any], _invocation: dict[str, str]) -> dict[str, Any]:
                text = await asyncio.to_thread(ask, str(question.get("question", "")))
                return {"answer": text, "wasFreeform": True}

            options["on_user_input_request"] = answer
        parent = attach_parent(request.traceparent)  # the CLI's spans go under Lopen's invocation span
        try:
            session = await self._client.create_session(
                on_permission_request=on_permission,
                model=model,
                tools=[to_sdk_tool(t) for t in tools],
                working_directory=request.working_directory or None,
                infinite_sessions={"enabled": False},
                provider=self._provider_dict(),
                session_id=_session_id(request.conversation_id, len(attempts) + 1),
                mcp_servers=mcp_servers or None,
                **options,
            )
            session.on(permission_asker)
            session.on(run.observe)
            run.stop = lambda: asyncio.ensure_future(session.abort())
            await session.send_and_wait(request.prompt, timeout=request.timeout)
        except TimeoutError:
            run.error = InvocationError(
                kind=ErrorKind.TIMEOUT,
                message=f"the invocation ran past copilot.invocation_timeout ({request.timeout:g} s) and was stopped",
                model=model,
            )
        except Exception as exc:
            run.error = run.evidence.classify(model, exc)
        finally:
            detach_parent(parent)
            if session is not None:
                await asyncio.shield(self._dispose(session))
        if run.cap.reached:  # stopped by Lopen: whatever the abort looked like to the SDK
            kind = ErrorKind.BUDGET if run.cap.by_budget else ErrorKind.CAPPED
            run.error = InvocationError(kind=kind, message=run.cap.reached, model=model)
        attempts.append(
            Attempt(model=model, error=run.error, cli_retries=run.cli_retries, duration=time.monotonic() - begun)
        )
        return run.result()

    def _mcp_servers(self, request: InvocationRequest) -> dict[str, dict[str, Any]]:
        """The user's MCP servers this session gets: all of them when the request asks, else none."""
        return self.config.mcp_servers if request.mcp else {}

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


class _Askers:
    """Which agent asked each pending permission request: the SDK hands the handler the request
    alone, while the session event carrying it (seen first, by ``observe``) names the agent."""

    def __init__(self) -> None:
        self._pending: list[tuple[Any, str]] = []

    def observe(self, event: Any) -> None:
        data = event.data
        if type(data).__name__ == "PermissionRequestedData" and data.permission_request is not None:
            agent = getattr(event, "agent_id", None) or getattr(data, "owner_agent_id", None) or ""
            self._pending.append((data.permission_request, agent))

    def pop(self, request: Any) -> str:
        for index, (pending, agent) in enumerate(self._pending):
            if pending is request:
                del self._pending[index]
                return agent
        return ""


class _SessionRun:
    """Collects one session's events: tool calls (a sub-agent's too, with its ``agent_id``), usage per
    model call, context window, final message, errors."""

    def __init__(self, model: str, emit: EventCallback, cap: InvocationCap | None = None) -> None:
        self.model = model
        self.emit = emit
        self.cap = cap or InvocationCap()
        self.stop: Callable[[], object] = lambda: None  # aborts the session (set once it exists)
        self.final_message = ""
        self.tool_calls: list[ToolCallRecord] = []
        self.pending: dict[str, tuple[str, Any, float]] = {}
        self.usage = Usage()
        self.context = ContextWindow()
        self.cli_retries = 0
        self.evidence = ErrorEvidence()
        self.error: InvocationError | None = None
        self.charged = False  # the attempt's first main-agent model call was seen
        self.agent = ""  # the agent id of the event being observed ("" = the session's own)
        self.event_id = ""

    def observe(self, event: Any) -> None:
        data = event.data
        handler = getattr(self, "_on_" + type(data).__name__, None)
        if handler is not None:
            self.agent = getattr(event, "agent_id", None) or ""
            self.event_id = str(getattr(event, "id", "") or "")
            handler(data)

    def _on_ToolExecutionStartData(self, data: Any) -> None:
        self.pending[data.tool_call_id] = (data.tool_name, data.arguments, time.monotonic())
        self.emit(
            ToolStarted(call_id=data.tool_call_id, name=data.tool_name, arguments=data.arguments, agent_id=self.agent)
        )

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
            agent_id=self.agent,
        )
        self.tool_calls.append(record)
        self.emit(ToolFinished(record=record))
        if self.cap.tool_call():
            self.stop()

    def _on_AssistantMessageData(self, data: Any) -> None:
        if data.content:
            if not self.agent:
                self.final_message = data.content
            self.emit(AssistantText(text=data.content, agent_id=self.agent))

    def _on_AssistantReasoningData(self, data: Any) -> None:
        if data.content:
            self.emit(AssistantReasoning(text=data.content, agent_id=self.agent))

    def _on_AssistantMessageDeltaData(self, data: Any) -> None:
        text = getattr(data, "delta_content", None) or ""
        if text and not self.agent:
            self.emit(AssistantDelta(text=text))

    def _on_AssistantUsageData(self, data: Any) -> None:
        values = (
            data.input_tokens or 0,
            data.output_tokens or 0,
            data.cache_read_tokens or 0,
            data.cache_write_tokens or 0,
        )
        model = data.model or self.model
        first = not self.agent and not self.charged
        self.charged = self.charged or first
        self.usage.record(model, *values)
        call_id = data.api_call_id or data.provider_call_id or self.event_id
        self.emit(UsageReported(model, *values, call_id=call_id or "", agent_id=self.agent, first_of_attempt=first))
        if self.cap.tokens(values[0], values[1]):
            self.stop()

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


def quiet_sdk_logs() -> None:
    """The SDK logs its own errors (a request cut off by Ctrl+C, a CLI shutting down) with tracebacks on
    stderr; what matters reaches the user as Lopen's own message. ``LOPEN_DEBUG=1`` (``--debug``) shows them."""
    if os.environ.get("LOPEN_DEBUG"):
        return
    sdk = logging.getLogger("copilot")
    if not any(isinstance(h, logging.NullHandler) for h in sdk.handlers):
        sdk.addHandler(logging.NullHandler())
    sdk.propagate = False


def _interrupted(request: InvocationRequest) -> InvocationResult:
    model = request.models[0] if request.models else ""
    return InvocationResult(
        model=model,
        final_message="",
        tool_calls=[],
        usage=Usage(),
        context=ContextWindow(),
        duration=0.0,
        attempts=[],
        error=InvocationError(kind=ErrorKind.INTERRUPTED, message="interrupted: Lopen is stopping", model=model),
    )


def _session_id(conversation_id: str, attempt: int) -> str | None:
    """The SDK session's id: the conversation's for the first attempt, ``-<n>`` after it; None = the SDK's."""
    if not conversation_id:
        return None
    return conversation_id if attempt == 1 else f"{conversation_id}-{attempt}"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)
