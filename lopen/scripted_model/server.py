"""The HTTP side: an OpenAI-compatible server (stdlib, threaded) with a request log."""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import msgspec

from lopen.errors import LopenError
from lopen.scripted_model.playbook import Playbook, RequestView, Turn, Usage, load_playbook, message_text
from lopen.text import plural

log = logging.getLogger("lopen.scripted_model")

UNMATCHED_TEXT = "[scripted model] no rule matched"
CHAT_PATH = "/v1/chat/completions"
HOLD_LIMIT = 300.0  # seconds a held answer waits for its release at most (ScriptedModelServer.hold)
ResponseKind = Literal[
    "ok",
    "slow",
    "rate_limit",
    "server_error",
    "unauthorized",
    "drop",
    "malformed",
    "unmatched",
    "unknown_model",
    "bad_request",
    "models",
    "not_found",
]


class LoggedRequest(msgspec.Struct):
    """One request the server received and how it answered it.

    ``turn`` is the conversation's turn index (chat requests); ``rule`` the rule that answered;
    ``usage`` what the answer reported (None for faults); ``warning`` says when a rule ran out
    of turns or no rule matched.
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
        """Contents of the tool messages in this request's conversation, oldest first."""
        messages = (self.body or {}).get("messages") or []
        return [message_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "tool"]


_CWD = re.compile(r"^\* Current working directory: (.+)$", re.M)


def _with_cwd(arguments: str, body: dict[str, Any]) -> str:
    """Replace ``{{cwd}}`` with the session's working directory, as the CLI's system prompt states it."""
    if "{{cwd}}" not in arguments:
        return arguments
    system = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "system"), "") or ""
    found = _CWD.search(system if isinstance(system, str) else str(system))
    cwd = found.group(1).strip() if found else "."
    return arguments.replace("{{cwd}}", msgspec.json.encode(cwd).decode()[1:-1])


class _Answer(msgspec.Struct, frozen=True):
    kind: ResponseKind
    rule: str | None
    turn_index: int
    turn: Turn
    usage: Usage | None
    warning: str | None


class ScriptedModelServer:
    """Serves a playbook on ``host:port`` (an ephemeral port by default) in a daemon thread.

    Use it as a context manager, or ``start()`` / ``stop()``. ``url`` is the base URL, ending in
    ``/v1``. ``requests`` is the request log in arrival order; with ``log_path`` every entry is
    also appended to that file as one JSON line.
    """

    def __init__(
        self,
        playbook: Playbook,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | Path | None = None,
    ) -> None:
        self.playbook = playbook
        self._address = (host, port)
        self._log_path = Path(log_path) if log_path is not None else None
        self._lock = threading.Lock()
        self._seq = 0
        self._uses: dict[str, int] = {}
        self._gates: dict[str, threading.Event] = {}  # rule → its answers wait until it is released
        self._log: list[LoggedRequest] = []
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ScriptedModelServer:
        if self._httpd is not None:
            raise RuntimeError("the scripted model server is already running")
        self._httpd = _HTTPServer(self._address, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, name="scripted-model", daemon=True
        )
        self._thread.start()
        return self

    def hold(self, rule: str) -> None:
        """Every answer of ``rule`` waits until ``release(rule)`` (at most ``HOLD_LIMIT`` seconds): a model
        call that hangs exactly as long as a test needs — the process waiting for it can be paused, taken
        over or killed meanwhile. ``uses(rule)`` counts a held request as soon as it arrives."""
        with self._lock:
            self._gates.setdefault(rule, threading.Event())

    def release(self, rule: str) -> None:
        """Let ``rule``'s held answers (and every later one) go."""
        with self._lock:
            gate = self._gates.setdefault(rule, threading.Event())
        gate.set()

    def _gate(self, rule: str | None) -> threading.Event | None:
        with self._lock:
            return self._gates.get(rule) if rule is not None else None

    def stop(self) -> None:
        if self._httpd is None or self._thread is None:
            return
        with self._lock:
            gates = list(self._gates.values())
        for gate in gates:  # nothing waits past the server
            gate.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
        self._httpd = self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the scripted model server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def requests(self) -> list[LoggedRequest]:
        """A snapshot of the request log, ordered by ``seq`` (arrival order)."""
        with self._lock:
            return sorted(self._log, key=lambda entry: entry.seq)

    @property
    def chat_requests(self) -> list[LoggedRequest]:
        """The logged ``/v1/chat/completions`` requests only."""
        return [entry for entry in self.requests if entry.path == CHAT_PATH]

    def uses(self, rule: str) -> int:
        """How many requests the named rule has answered so far."""
        with self._lock:
            return self._uses.get(rule, 0)

    def _next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def _record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self._log.append(entry)
            if self._log_path is not None:
                with self._log_path.open("ab") as fh:
                    fh.write(msgspec.json.encode(entry) + b"\n")
        where = f" rule={entry.rule} turn={entry.turn}" if entry.rule is not None else ""
        log.info("#%d %s%s -> %s", entry.seq, entry.path, where, entry.response_kind)
        if entry.warning:
            log.warning("#%d %s", entry.seq, entry.warning)

    def _answer_for(self, body: dict[str, Any]) -> _Answer:
        request = RequestView.of(body)
        with self._lock:
            choice = self.playbook.choose(request, self._uses)
        if choice is None:
            warning = f"no rule matched the request at turn {request.turn}"
            usage = self.playbook.default_usage
            return _Answer("unmatched", None, request.turn, Turn(text=UNMATCHED_TEXT), usage, warning)
        turn, name = choice.turn, choice.rule.name
        warning = None
        if choice.overflow:
            warning = (
                f"turn {request.turn} is past the end of rule {name!r} ({plural(len(choice.rule.turns), 'turn')}): "
                "replayed its last turn without tool calls"
            )
        kind: ResponseKind = turn.fault or "ok"
        usage = (turn.usage or self.playbook.default_usage) if kind in ("ok", "slow") else None
        return _Answer(kind, name, request.turn, turn, usage, warning)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 resets connections when a test fires many at once

    def __init__(self, address: tuple[str, int], owner: ScriptedModelServer) -> None:
        self.owner = owner
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer (a killed CLI, a cut-off call) is normal here, not a traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _error(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _model_object(model: str) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": 0, "owned_by": "lopen-scripted"}


def _pieces(text: str, size: int = 64) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class _Handler(BaseHTTPRequestHandler):
    """One connection. Each request's log entry is recorded just before the last byte of its
    answer is written, so a client that has read an answer always finds it in the log."""

    protocol_version = "HTTP/1.1"
    server_version = "lopen-scripted-model"
    server: _HTTPServer
    _entry: LoggedRequest | None = None

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    @property
    def _route(self) -> str:
        return self.path.split("?", 1)[0]

    # the log

    def _begin(self, received: float, body: dict[str, Any] | None = None) -> None:
        self._entry = LoggedRequest(
            seq=self.server.owner._next_seq(),
            path=self._route,
            body=body,
            rule=None,
            turn=None,
            response_kind="not_found",
            received_at=received,
            answered_at=received,
            stream=bool(body and body.get("stream")),
        )

    def _commit(self) -> None:
        if (entry := self._entry) is not None:
            self._entry = None
            entry.answered_at = time.time()
            self.server.owner._record(entry)

    # plumbing

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return data
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, payload: bytes, content_type: str = "application/json", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self._commit()
        self.wfile.write(payload)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any, **headers: str) -> None:
        self._send(status, msgspec.json.encode(obj), **headers)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # routes

    def do_GET(self) -> None:
        self._begin(time.time())
        try:
            self._get()
        finally:
            self._commit()

    def do_POST(self) -> None:
        received = time.time()
        raw = self._read_body()
        try:
            body = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            body = None
        self._begin(received, body if isinstance(body, dict) else None)
        try:
            self._post(body)
        finally:
            self._commit()

    def _get(self) -> None:
        assert self._entry is not None
        models = self.server.owner.playbook.models
        if self._route == "/v1/models":
            self._entry.response_kind = "models"
            self._send_json(200, {"object": "list", "data": [_model_object(m) for m in models]})
        elif self._route.startswith("/v1/models/"):
            model = self._route.removeprefix("/v1/models/")
            if model in models:
                self._entry.response_kind = "models"
                self._send_json(200, _model_object(model))
            else:
                self._unknown_model(model)
        else:
            self._not_found()

    def _post(self, body: Any) -> None:
        assert self._entry is not None
        if self._route != CHAT_PATH:
            self._not_found()
        elif not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._entry.response_kind = "bad_request"
            message = "Invalid request: the body must be a JSON object with a `messages` list"
            self._send_json(400, _error(message, "invalid_request_error", None))
        elif (model := str(body.get("model") or "")) not in self.server.owner.playbook.models:
            self._unknown_model(model)
        else:
            answer = self.server.owner._answer_for(body)
            entry = self._entry
            entry.response_kind, entry.rule, entry.turn = answer.kind, answer.rule, answer.turn_index
            entry.usage, entry.warning = answer.usage, answer.warning
            self._play(entry.seq, body, answer)

    def _not_found(self) -> None:
        message = f"No route for {self.command} {self._route}"
        self._send_json(404, _error(message, "invalid_request_error", "not_found"))

    def _unknown_model(self, model: str) -> None:
        assert self._entry is not None
        self._entry.response_kind = "unknown_model"
        message = f"The model `{model}` does not exist"
        self._send_json(404, _error(message, "invalid_request_error", "model_not_found"))

    def _play(self, seq: int, body: dict[str, Any], answer: _Answer) -> None:
        turn, stream = answer.turn, bool(body.get("stream"))
        gate = self.server.owner._gate(answer.rule)
        if gate is not None:
            gate.wait(HOLD_LIMIT)
        if turn.fault == "rate_limit":
            retry_after = str(turn.retry_after if turn.retry_after is not None else 1)
            message = turn.text or "Rate limit reached (scripted). Please retry later."
            error = _error(message, "rate_limit_error", "rate_limit_exceeded")
            self._send_json(429, error, **{"Retry-After": retry_after})
        elif turn.fault == "server_error":
            message = turn.text or "The server had an error while processing your request (scripted)."
            self._send_json(500, _error(message, "server_error", None))
        elif turn.fault == "unauthorized":
            message = turn.text or "Incorrect API key provided: the key was revoked or has expired (scripted)."
            self._send_json(401, _error(message, "invalid_request_error", "invalid_api_key"))
        elif turn.fault == "drop":
            self.close_connection = True
            self._commit()
            with contextlib.suppress(OSError):  # the client may be gone already
                self.connection.shutdown(socket.SHUT_RDWR)
        elif turn.fault == "malformed":
            if stream:
                self._send(200, b'data: {"id": "chatcmpl-broken", "choices": [\n\n', "text/event-stream")
            else:
                self._send(200, b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{')
        else:
            if turn.fault == "slow":
                time.sleep(turn.delay if turn.delay is not None else 1.0)
            self._complete(seq, body, answer, stream)

    def _complete(self, seq: int, body: dict[str, Any], answer: _Answer, stream: bool) -> None:
        turn, usage = answer.turn, (answer.usage or Usage()).to_openai()
        prefix = f"call_{re.sub(r'[^A-Za-z0-9_-]', '_', answer.rule or 'unmatched')}_{answer.turn_index}"
        calls = [
            {
                "id": f"{prefix}_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": _with_cwd(call.encoded_arguments(), body)},
            }
            for i, call in enumerate(turn.tool_calls)
        ]
        finish = "tool_calls" if calls else "stop"
        head = {"id": f"chatcmpl-scripted-{seq}", "created": int(time.time()), "model": body.get("model")}
        if not stream:
            message: dict[str, Any] = {"role": "assistant", "content": turn.text or (None if calls else "")}
            if calls:
                message["tool_calls"] = calls
            if turn.reasoning:
                message["reasoning_content"] = turn.reasoning
            choice = {"index": 0, "message": message, "finish_reason": finish}
            self._send_json(200, {**head, "object": "chat.completion", "choices": [choice], "usage": usage})
            return

        def event(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            data = {**head, "object": "chat.completion.chunk", "choices": [choice], **extra}
            return b"data: " + msgspec.json.encode(data) + b"\n\n"

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._write_chunk(event({"role": "assistant", "content": ""}))
        for piece in _pieces(turn.reasoning):
            self._write_chunk(event({"reasoning_content": piece}))
        for piece in _pieces(turn.text):
            self._write_chunk(event({"content": piece}))
        for i, call in enumerate(calls):
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            opening = {"index": i, "id": call["id"], "type": "function"}
            self._write_chunk(event({"tool_calls": [{**opening, "function": {"name": name, "arguments": ""}}]}))
            for piece in _pieces(arguments):
                self._write_chunk(event({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
        self._write_chunk(event({}, finish, usage=usage))
        self._write_chunk(b"data: [DONE]\n\n")
        self._commit()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main(argv: list[str] | None = None) -> int:
    """``scripted-model --playbook PATH [--port N] [--log FILE]``: print the base URL, serve until Ctrl+C."""
    parser = argparse.ArgumentParser(
        prog="scripted-model",
        description="Lopen's scripted model: an OpenAI-compatible server that plays a playbook.",
    )
    parser.add_argument("--playbook", required=True, type=Path, help="the TOML playbook to play")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: an ephemeral port)")
    parser.add_argument("--log", type=Path, help="append every request to this file as JSON lines")
    parser.add_argument("--quiet", action="store_true", help="report only warnings on stderr")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):  # also when started with SIGINT ignored (a background job)
        signal.signal(signum, lambda *_: stop.set())
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    try:
        playbook = load_playbook(args.playbook)
    except LopenError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    try:
        with ScriptedModelServer(playbook, host=args.host, port=args.port, log_path=args.log) as server:
            print(server.url, flush=True)
            print(f"[scripted model] playing {playbook.name!r}; Ctrl+C to stop", file=sys.stderr, flush=True)
            while not stop.wait(0.5):
                pass
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0
