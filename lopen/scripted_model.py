"""The scripted model: an OpenAI-compatible chat-completions server that plays a playbook.

It stands in for the model only (``lopen demo`` and every end-to-end test): the Copilot CLI,
in BYOK mode, sends its chat-completions requests here and gets scripted assistant turns —
text, tool calls, usage numbers, or faults. The playbook format is documented in
``docs/scripted-model.md``. Standard library HTTP server plus msgspec; no other dependencies.
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from lopen.errors import LopenError

__all__ = [
    "LoggedRequest",
    "Match",
    "Playbook",
    "PlaybookError",
    "Rule",
    "ScriptedModelServer",
    "ToolCall",
    "Turn",
    "Usage",
    "load_playbook",
    "parse_playbook",
]

log = logging.getLogger("lopen.scripted_model")

UNMATCHED_TEXT = "[scripted model] no rule matched"
ResponseKind = Literal[
    "ok",
    "slow",
    "rate_limit",
    "server_error",
    "drop",
    "malformed",
    "unmatched",
    "unknown_model",
    "bad_request",
    "models",
    "not_found",
]
FaultKind = Literal["rate_limit", "server_error", "drop", "malformed", "slow"]
NonNegInt = Annotated[int, msgspec.Meta(ge=0)]


# --- the playbook ---------------------------------------------------------------------------


class PlaybookError(LopenError):
    """A playbook that cannot be read or does not follow the format."""


class Usage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Token numbers returned for one answer (``total_tokens`` = prompt + completion)."""

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


class ToolCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A tool call the model makes. ``arguments`` is JSON-encoded; a string is sent verbatim."""

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
    """One scripted assistant answer, or a fault.

    ``usage`` replaces the playbook's ``default_usage`` for this answer. ``retry_after``
    (seconds, for ``rate_limit``) and ``delay`` (seconds, for ``slow``) default to 1.
    """

    text: str = ""
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


class Match(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Conditions on a request; a rule matches when every condition that is set holds."""

    system_contains: str | None = None
    user_contains: str | None = None
    user_regex: str | None = None
    tools_include: list[str] = []
    tools_exclude: list[str] = []
    model: str | None = None
    last_tool_result_contains: str | None = None
    from_turn: NonNegInt = 0

    def __post_init__(self) -> None:
        if self.user_regex is not None:
            try:
                re.compile(self.user_regex)
            except re.error as exc:
                raise ValueError(f"user_regex {self.user_regex!r} is not a valid regex: {exc}") from None

    def holds(self, request: _RequestView) -> bool:
        offered = request.tools
        return (
            (self.system_contains is None or self.system_contains in request.system)
            and (self.user_contains is None or self.user_contains in request.user)
            and (self.user_regex is None or re.search(self.user_regex, request.user) is not None)
            and all(name in offered for name in self.tools_include)
            and not any(name in offered for name in self.tools_exclude)
            and (self.model is None or self.model == request.model)
            and (
                self.last_tool_result_contains is None
                or (
                    request.last_tool_result is not None
                    and self.last_tool_result_contains in request.last_tool_result
                )
            )
            and request.turn >= self.from_turn
        )


class Rule(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A scripted conversation: ``turns[i]`` answers turn index ``match.from_turn + i``.

    ``max_uses`` (0 = unlimited) bounds how many requests the rule answers, faults included.
    In TOML the turns are ``[[rule.turn]]`` tables.
    """

    name: str
    turns: list[Turn] = msgspec.field(name="turn")
    match: Match = Match()
    max_uses: NonNegInt = 0

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a rule needs a name")
        if not self.turns:
            raise ValueError(f"rule {self.name!r} needs at least one [[rule.turn]]")


class Playbook(msgspec.Struct, frozen=True):
    """Everything the server plays: model ids it serves, default usage, rules in order."""

    name: str
    rules: list[Rule]
    models: list[str] = msgspec.field(default_factory=lambda: ["scripted"])
    default_usage: Usage = Usage(prompt_tokens=1000, completion_tokens=100)

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("models must list at least one model id")
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise ValueError(f"two rules are named {rule.name!r}; rule names must be unique")
            seen.add(rule.name)


class _PlaybookHeader(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    models: list[str] = msgspec.field(default_factory=lambda: ["scripted"])
    default_usage: Usage = Usage(prompt_tokens=1000, completion_tokens=100)


class _PlaybookFile(msgspec.Struct, forbid_unknown_fields=True):
    playbook: _PlaybookHeader
    rules: list[Rule] = msgspec.field(name="rule", default_factory=list)


_HOW = "Fix the playbook; its format is described in docs/scripted-model.md."


def parse_playbook(text: str | bytes, source: str = "<playbook>") -> Playbook:
    """Decode a TOML playbook; ``source`` names it in error messages."""
    try:
        raw = msgspec.toml.decode(text, type=_PlaybookFile)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).rpartition(" - at ")
        if not message:
            message, where = str(exc), "$"
        where = where.strip("`").removeprefix("$").lstrip(".") or "top level"
        raise PlaybookError(f"invalid playbook {source}", f"at `{where}`: {message}", _HOW) from None
    except msgspec.DecodeError as exc:
        raise PlaybookError(f"invalid playbook {source}", f"not valid TOML: {exc}", _HOW) from None
    try:
        return Playbook(
            name=raw.playbook.name,
            models=raw.playbook.models,
            default_usage=raw.playbook.default_usage,
            rules=raw.rules,
        )
    except ValueError as exc:
        raise PlaybookError(f"invalid playbook {source}", str(exc), _HOW) from None


def load_playbook(path: str | Path) -> Playbook:
    """Read and validate a TOML playbook file."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise PlaybookError(
            f"cannot read playbook {path}", exc.strerror or str(exc), "Check the path."
        ) from None
    return parse_playbook(text, str(path))


# --- requests and the log -------------------------------------------------------------------


class LoggedRequest(msgspec.Struct):
    """One request the server received and how it answered.

    ``rule`` and ``turn`` are set when a rule answered (``turn`` is the conversation's turn
    index); ``usage`` is what the answer reported; ``warning`` says when the script ran out.
    """

    seq: int
    path: str
    body: dict[str, Any] | None
    rule: str | None
    turn: int | None
    response_kind: ResponseKind
    received_at: float
    answered_at: float
    usage: Usage | None = None
    stream: bool = False
    warning: str | None = None

    def tool_results(self) -> list[str]:
        """Contents of the tool messages in the request's conversation, oldest first."""
        messages = (self.body or {}).get("messages") or []
        return [_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "tool"]


class _RequestView(msgspec.Struct, frozen=True):
    system: str
    user: str
    tools: frozenset[str]
    model: str
    last_tool_result: str | None
    turn: int


def _text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a content-part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _view(body: dict[str, Any]) -> _RequestView:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    by_role: dict[str, list[str]] = {"system": [], "user": [], "tool": []}
    for message in messages:
        role = message.get("role")
        if role in by_role:
            by_role[role].append(_text(message.get("content")))
    tools = frozenset(
        tool["function"].get("name", "")
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict)
    )
    return _RequestView(
        system="\n".join(by_role["system"]),
        user=by_role["user"][-1] if by_role["user"] else "",
        tools=tools,
        model=str(body.get("model") or ""),
        last_tool_result=by_role["tool"][-1] if by_role["tool"] else None,
        turn=sum(1 for m in messages if m.get("role") == "assistant"),
    )


class _Answer(msgspec.Struct, frozen=True):
    """What to send: the chosen turn (None when unmatched) and how it was chosen."""

    kind: ResponseKind
    rule: str | None
    turn_index: int | None
    turn: Turn
    usage: Usage | None
    warning: str | None


# --- the server -----------------------------------------------------------------------------


class ScriptedModelServer:
    """Serves a playbook over HTTP on ``host:port`` (an ephemeral port by default).

    Use as a context manager, or ``start()`` / ``stop()``. ``url`` is the base URL ending in
    ``/v1``; ``requests`` is the request log, in arrival order. With ``log_path`` every logged
    request is also appended to that file as one JSON line.
    """

    def __init__(
        self,
        playbook: Playbook,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | Path | None = None,
    ) -> None:
        self.playbook = playbook
        self._host = host
        self._port = port
        self._log_path = Path(log_path) if log_path is not None else None
        self._lock = threading.Lock()
        self._seq = 0
        self._uses = dict.fromkeys((rule.name for rule in playbook.rules), 0)
        self._log: list[LoggedRequest] = []
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> ScriptedModelServer:
        if self._httpd is not None:
            raise RuntimeError("the scripted model server is already running")
        self._httpd = _HTTPServer((self._host, self._port), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            name="scripted-model",
            kwargs={"poll_interval": 0.05},
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        httpd.shutdown()
        httpd.server_close()
        thread.join()
        self._httpd = self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the scripted model server is not running")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    # state

    @property
    def requests(self) -> list[LoggedRequest]:
        """A snapshot of the request log, ordered by ``seq`` (arrival order)."""
        with self._lock:
            return sorted(self._log, key=lambda entry: entry.seq)

    @property
    def chat_requests(self) -> list[LoggedRequest]:
        """The logged ``/v1/chat/completions`` requests only."""
        return [entry for entry in self.requests if entry.path == "/v1/chat/completions"]

    def uses(self, rule: str) -> int:
        """How many requests the named rule has answered so far."""
        with self._lock:
            return self._uses[rule]

    def _next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def _record(self, entry: LoggedRequest) -> None:
        line = msgspec.json.encode(entry) + b"\n" if self._log_path is not None else b""
        with self._lock:
            self._log.append(entry)
            if self._log_path is not None:
                with self._log_path.open("ab") as fh:
                    fh.write(line)
        where = f" rule={entry.rule} turn={entry.turn}" if entry.rule is not None else ""
        log.info("#%d %s%s -> %s", entry.seq, entry.path, where, entry.response_kind)
        if entry.warning:
            log.warning("#%d %s", entry.seq, entry.warning)

    def _choose(self, body: dict[str, Any]) -> _Answer:
        """Pick the rule and turn for a chat request, counting the use (thread-safe)."""
        request = _view(body)
        with self._lock:
            rule = next(
                (
                    r
                    for r in self.playbook.rules
                    if (r.max_uses == 0 or self._uses[r.name] < r.max_uses) and r.match.holds(request)
                ),
                None,
            )
            if rule is not None:
                self._uses[rule.name] += 1
        if rule is None:
            return _Answer(
                kind="unmatched",
                rule=None,
                turn_index=request.turn,
                turn=Turn(text=UNMATCHED_TEXT),
                usage=self.playbook.default_usage,
                warning=f"no rule matched the request at turn {request.turn}",
            )
        index, warning = request.turn - rule.match.from_turn, None
        if index < len(rule.turns):
            turn = rule.turns[index]
        else:
            turn = msgspec.structs.replace(rule.turns[-1], tool_calls=[])
            warning = (
                f"turn {request.turn} is beyond rule {rule.name!r} ({len(rule.turns)} turns): "
                "replayed its last turn without tool calls"
            )
        kind: ResponseKind = turn.fault or "ok"
        usage = (turn.usage or self.playbook.default_usage) if kind in ("ok", "slow") else None
        return _Answer(
            kind=kind, rule=rule.name, turn_index=request.turn, turn=turn, usage=usage, warning=warning
        )


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[_Handler], owner: ScriptedModelServer) -> None:
        self.owner = owner
        super().__init__(address, handler)


def _error_body(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _call_id(rule: str, turn: int, i: int) -> str:
    return f"call_{re.sub(r'[^A-Za-z0-9_-]', '_', rule)}_{turn}_{i}"


def _pieces(text: str, size: int = 64) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    server_version = "lopen-scripted-model"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    # plumbing

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return data
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(
        self, status: int, payload: bytes, content_type: str = "application/json", **headers: str
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any, **headers: str) -> None:
        self._send(status, msgspec.json.encode(obj), **headers)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _log(
        self,
        seq: int,
        received: float,
        kind: ResponseKind,
        body: dict[str, Any] | None = None,
        answer: _Answer | None = None,
    ) -> None:
        self.server.owner._record(
            LoggedRequest(
                seq=seq,
                path=self.path.split("?", 1)[0],
                body=body,
                rule=answer.rule if answer else None,
                turn=answer.turn_index if answer else None,
                response_kind=kind,
                received_at=received,
                answered_at=time.time(),
                usage=answer.usage if answer else None,
                stream=bool(body and body.get("stream")),
                warning=answer.warning if answer else None,
            )
        )

    # routes

    def do_GET(self) -> None:
        received, seq = time.time(), self.server.owner._next_seq()
        path = self.path.split("?", 1)[0]
        models = self.server.owner.playbook.models
        if path == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "lopen-scripted"} for m in models]
            self._send_json(200, {"object": "list", "data": data})
            self._log(seq, received, "models")
        elif path.startswith("/v1/models/") and path.removeprefix("/v1/models/") in models:
            model = path.removeprefix("/v1/models/")
            self._send_json(200, {"id": model, "object": "model", "created": 0, "owned_by": "lopen-scripted"})
            self._log(seq, received, "models")
        elif path.startswith("/v1/models/"):
            self._unknown_model(seq, received, path.removeprefix("/v1/models/"), None)
        else:
            self._not_found(seq, received, None)

    def do_POST(self) -> None:
        received, seq = time.time(), self.server.owner._next_seq()
        raw = self._read_body()
        if self.path.split("?", 1)[0] != "/v1/chat/completions":
            self._not_found(seq, received, None)
            return
        try:
            body = msgspec.json.decode(raw)
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("the body must be a JSON object with a messages list")
        except (msgspec.DecodeError, ValueError) as exc:
            self._send_json(400, _error_body(f"Invalid request: {exc}", "invalid_request_error", None))
            self._log(seq, received, "bad_request")
            return
        model = str(body.get("model") or "")
        if model not in self.server.owner.playbook.models:
            self._unknown_model(seq, received, model, body)
            return
        self._complete(seq, received, body)

    def _not_found(self, seq: int, received: float, body: dict[str, Any] | None) -> None:
        message = f"No route for {self.command} {self.path}"
        self._send_json(404, _error_body(message, "invalid_request_error", "not_found"))
        self._log(seq, received, "not_found", body)

    def _unknown_model(self, seq: int, received: float, model: str, body: dict[str, Any] | None) -> None:
        message = f"The model `{model}` does not exist"
        self._send_json(404, _error_body(message, "invalid_request_error", "model_not_found"))
        self._log(seq, received, "unknown_model", body)

    def _complete(self, seq: int, received: float, body: dict[str, Any]) -> None:
        answer = self.server.owner._choose(body)
        turn, stream = answer.turn, bool(body.get("stream"))
        if turn.fault == "rate_limit":
            retry_after = turn.retry_after if turn.retry_after is not None else 1
            message = turn.text or "Rate limit reached (scripted). Please retry later."
            self._send_json(
                429,
                _error_body(message, "rate_limit_error", "rate_limit_exceeded"),
                Retry_After=str(retry_after),
            )
        elif turn.fault == "server_error":
            message = turn.text or "The server had an error while processing your request (scripted)."
            self._send_json(500, _error_body(message, "server_error", None))
        elif turn.fault == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif turn.fault == "malformed":
            if stream:
                self._send(200, b'data: {"id": "chatcmpl-broken", "choices": [\n\n', "text/event-stream")
            else:
                self._send(200, b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{')
        else:
            if turn.fault == "slow":
                time.sleep(turn.delay if turn.delay is not None else 1.0)
            self._answer(seq, body, answer, stream)
        self._log(seq, received, answer.kind, body, answer)

    def _answer(self, seq: int, body: dict[str, Any], answer: _Answer, stream: bool) -> None:
        turn, usage = answer.turn, answer.usage or Usage()
        calls = [
            {
                "id": _call_id(answer.rule or "unmatched", answer.turn_index or 0, i),
                "type": "function",
                "function": {"name": call.name, "arguments": call.encoded_arguments()},
            }
            for i, call in enumerate(turn.tool_calls)
        ]
        finish = "tool_calls" if calls else "stop"
        head = {"id": f"chatcmpl-scripted-{seq}", "created": int(time.time()), "model": body.get("model")}
        if not stream:
            message: dict[str, Any] = {"role": "assistant", "content": turn.text or (None if calls else "")}
            if calls:
                message["tool_calls"] = calls
            choice = {"index": 0, "message": message, "finish_reason": finish}
            self._send_json(
                200, {**head, "object": "chat.completion", "choices": [choice], "usage": usage.to_openai()}
            )
            return

        def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            event = {**head, "object": "chat.completion.chunk", "choices": [choice], **extra}
            return b"data: " + msgspec.json.encode(event) + b"\n\n"

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._write_chunk(chunk({"role": "assistant", "content": ""}))
        for piece in _pieces(turn.text):
            self._write_chunk(chunk({"content": piece}))
        for i, call in enumerate(calls):
            function = call["function"]
            opening = {"index": i, "id": call["id"], "type": "function"}
            opening["function"] = {"name": function["name"], "arguments": ""}
            self._write_chunk(chunk({"tool_calls": [opening]}))
            for piece in _pieces(function["arguments"]):
                self._write_chunk(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
        self._write_chunk(chunk({}, finish, usage=usage.to_openai()))
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


# --- command line (bin/scripted-model) ------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Serve a playbook until Ctrl+C; prints the base URL on stdout first."""
    parser = argparse.ArgumentParser(
        prog="scripted-model",
        description="Lopen's scripted model: an OpenAI-compatible server playing a playbook.",
    )
    parser.add_argument("--playbook", required=True, type=Path, help="the TOML playbook to play")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: an ephemeral port)")
    parser.add_argument("--log", type=Path, help="append every request to this JSONL file")
    parser.add_argument("--quiet", action="store_true", help="log only warnings on stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    try:
        playbook = load_playbook(args.playbook)
    except LopenError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with ScriptedModelServer(playbook, host=args.host, port=args.port, log_path=args.log) as server:
            print(server.url, flush=True)
            print(f"[scripted model] playing {playbook.name!r}; Ctrl+C to stop", file=sys.stderr, flush=True)
            while not stop.wait(0.5):
                pass
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"error: cannot serve on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
