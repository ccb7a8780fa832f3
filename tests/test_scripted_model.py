"""The scripted model over plain HTTP: matching, turns, faults, streaming, the request log."""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest

from lopen.scripted_model import (
    UNMATCHED_TEXT,
    LoggedRequest,
    Match,
    Playbook,
    PlaybookError,
    Rule,
    ScriptedModelServer,
    ToolCall,
    Turn,
    Usage,
    load_playbook,
    parse_playbook,
)

ROOT = Path(__file__).resolve().parent.parent

BASIC = """
[playbook]
name = "basic"
models = ["scripted-opus", "scripted-mini"]
default_usage = { prompt_tokens = 1200, completion_tokens = 150, cached_tokens = 0 }

[[rule]]
name = "plan"
match = { user_contains = "kind=planning", tools_include = ["read_spec"] }

  [[rule.turn]]
  text = "Reading the spec."
  tool_calls = [ { name = "read_spec", arguments = { module = "slugify", section = "Overview" } },
                 { name = "create", arguments = { path = "notes.md", file_text = "# Notes\\n" } } ]
  usage = { prompt_tokens = 2000, completion_tokens = 120, cached_tokens = 500 }

  [[rule.turn]]
  text = "Done."
"""


# --- helpers ---------------------------------------------------------------------------------


class Reply(msgspec.Struct):
    status: int
    headers: dict[str, str]
    raw: bytes

    def json(self) -> Any:
        return json.loads(self.raw)


def request(url: str, method: str, path: str, body: Any = None) -> Reply:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        conn.request(method, parts.path + path, body=payload, headers=headers)
        response = conn.getresponse()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        conn.close()


def chat(url: str, body: dict[str, Any]) -> Reply:
    return request(url, "POST", "/chat/completions", body)


def conversation(
    user: str = "hello",
    *,
    assistants: int = 0,
    system: str = "You are Copilot.",
    tools: tuple[str, ...] = (),
    model: str = "scripted",
    tool_result: str | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """A request body shaped like the Copilot CLI's: system, user, then assistant/tool pairs."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": f"<current_datetime>2026-01-01T00:00:00Z</current_datetime>\n\n{user}"},
    ]
    for i in range(assistants):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": tool_result or f"result {i}"})
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": 0,
        "top_p": 0.95,
        "frequency_penalty": 0,
        "presence_penalty": 0,
        "tools": [
            {"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
            for n in tools
        ],
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def sse_events(raw: bytes) -> list[Any]:
    """Parse an SSE body strictly: every event is one `data:` line followed by a blank line."""
    text = raw.decode()
    assert text.endswith("\n\n")
    events: list[Any] = []
    for block in text[:-2].split("\n\n"):
        assert block.startswith("data: ") and "\n" not in block, block
        data = block.removeprefix("data: ")
        events.append(data if data == "[DONE]" else json.loads(data))
    return events


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ScriptedModelServer] = []

    def start(playbook: Playbook | str, **kwargs: Any) -> ScriptedModelServer:
        if isinstance(playbook, str):
            playbook = parse_playbook(playbook)
        server = ScriptedModelServer(playbook, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def one_rule(match: Match, **rule: Any) -> Playbook:
    return Playbook(
        name="t",
        rules=[
            Rule(name="target", match=match, turns=[Turn(text="target")], **rule),
            Rule(name="fallback", turns=[Turn(text="fallback")]),
        ],
    )


def answered_by(server: ScriptedModelServer, body: dict[str, Any]) -> str | None:
    reply = chat(server.url, body)
    assert reply.status == 200
    return server.requests[-1].rule


# --- endpoints -------------------------------------------------------------------------------


def test_models_lists_the_playbook_models(serve: Any) -> None:
    server = serve(BASIC)
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/v1")
    listing = request(server.url, "GET", "/models")
    assert listing.status == 200
    assert listing.json() == {
        "object": "list",
        "data": [
            {"id": "scripted-opus", "object": "model", "created": 0, "owned_by": "lopen-scripted"},
            {"id": "scripted-mini", "object": "model", "created": 0, "owned_by": "lopen-scripted"},
        ],
    }
    assert request(server.url, "GET", "/models/scripted-mini").json()["id"] == "scripted-mini"
    assert request(server.url, "GET", "/models/gpt-5").status == 404
    assert request(server.url, "GET", "/nothing").status == 404
    assert [r.response_kind for r in server.requests] == ["models", "models", "unknown_model", "not_found"]


def test_unknown_model_is_404_with_openai_error_and_uses_no_rule(serve: Any) -> None:
    server = serve(BASIC)
    reply = chat(server.url, conversation("kind=planning", tools=("read_spec",), model="claude-opus-4.6"))
    assert reply.status == 404
    assert reply.json() == {
        "error": {
            "message": "The model `claude-opus-4.6` does not exist",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
    assert server.uses("plan") == 0
    assert server.requests[-1].response_kind == "unknown_model"


def test_bad_request_body_is_400(serve: Any) -> None:
    server = serve(BASIC)
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", body=b"{not json")
    response = conn.getresponse()
    assert response.status == 400 and json.loads(response.read())["error"]["type"] == "invalid_request_error"
    conn.close()
    assert server.requests[-1].response_kind == "bad_request"


# --- answers ---------------------------------------------------------------------------------


def test_non_streaming_answer_has_tool_calls_and_exact_usage(serve: Any) -> None:
    server = serve(BASIC)
    reply = chat(
        server.url, conversation("[lopen] kind=planning", tools=("read_spec", "create"), model="scripted-opus")
    )
    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    answer = reply.json()
    assert answer["object"] == "chat.completion" and answer["model"] == "scripted-opus"
    (choice,) = answer["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["role"] == "assistant" and choice["message"]["content"] == "Reading the spec."
    calls = choice["message"]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_plan_0_0", "call_plan_0_1"]
    assert all(c["type"] == "function" for c in calls)
    assert json.loads(calls[0]["function"]["arguments"]) == {"module": "slugify", "section": "Overview"}
    assert calls[1]["function"] == {
        "name": "create",
        "arguments": json.dumps({"path": "notes.md", "file_text": "# Notes\n"}, separators=(",", ":")),
    }
    assert answer["usage"] == {
        "prompt_tokens": 2000,
        "completion_tokens": 120,
        "total_tokens": 2120,
        "prompt_tokens_details": {"cached_tokens": 500},
    }

    final = chat(server.url, conversation("kind=planning", assistants=1, tools=("read_spec",), model="scripted-opus"))
    (choice,) = final.json()["choices"]
    assert choice == {"index": 0, "message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}
    assert final.json()["usage"]["total_tokens"] == 1350  # the playbook's default_usage


def test_string_arguments_are_sent_verbatim(serve: Any) -> None:
    playbook = Playbook(name="t", rules=[Rule(name="r", turns=[Turn(tool_calls=[ToolCall("x", "{not json")])])])
    server = serve(playbook)
    message = chat(server.url, conversation()).json()["choices"][0]["message"]
    assert message["content"] is None
    assert message["tool_calls"][0]["function"]["arguments"] == "{not json"


def test_turn_index_counts_assistant_messages_and_overflow_replays_last_text(serve: Any) -> None:
    playbook = Playbook(
        name="t",
        rules=[
            Rule(
                name="r",
                turns=[
                    Turn(text="zero", tool_calls=[ToolCall("bash", {"command": "ls"})]),
                    Turn(text="one", tool_calls=[ToolCall("bash", {"command": "pwd"})]),
                    Turn(text="two", tool_calls=[ToolCall("bash", {"command": "true"})]),
                ],
            )
        ],
    )
    server = serve(playbook)
    for turn in range(5):
        message = chat(server.url, conversation(assistants=turn)).json()["choices"][0]["message"]
        if turn < 3:
            assert message["content"] == ["zero", "one", "two"][turn]
            assert message["tool_calls"][0]["id"] == f"call_r_{turn}_0"
        else:
            assert message == {"role": "assistant", "content": "two"}
    log = server.requests
    assert [r.turn for r in log] == [0, 1, 2, 3, 4]
    assert [r.warning is not None for r in log] == [False, False, False, True, True]
    assert "past the end of rule 'r'" in (log[3].warning or "")


def test_unmatched_request_gets_a_plain_answer(serve: Any) -> None:
    server = serve(BASIC)
    reply = chat(server.url, conversation("kind=task", model="scripted-mini"))
    assert reply.status == 200
    assert reply.json()["choices"][0]["message"] == {"role": "assistant", "content": UNMATCHED_TEXT}
    entry = server.requests[-1]
    assert (entry.response_kind, entry.rule, entry.turn) == ("unmatched", None, 0)
    assert entry.warning and "no rule matched" in entry.warning


# --- matching --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("match", "hit", "miss"),
    [
        (Match(system_contains="LOPEN"), {"system": "cli prompt\nLOPEN rules"}, {"system": "cli prompt"}),
        (Match(user_contains="kind=task"), {"user": "[lopen] kind=task"}, {"user": "[lopen] kind=spec"}),
        (Match(user_regex=r"task=\w+/\d+ "), {"user": "task=slug/2 kind=task"}, {"user": "task=- kind=task"}),
        (Match(tools_include=["a", "b"]), {"tools": ("a", "b", "c")}, {"tools": ("a", "c")}),
        (Match(tools_exclude=["record_tasks"]), {"tools": ("a",)}, {"tools": ("a", "record_tasks")}),
        (Match(model="scripted-mini"), {"model": "scripted-mini"}, {"model": "scripted"}),
        (
            Match(last_tool_result_contains="FAILED"),
            {"assistants": 1, "tool_result": "3 FAILED"},
            {"assistants": 1, "tool_result": "ok"},
        ),
        (Match(last_tool_result_contains="x"), {"assistants": 1, "tool_result": "x"}, {"assistants": 0}),
        (Match(any_tool_result_contains="x"), {"assistants": 1, "tool_result": "x"}, {"assistants": 0}),
        (Match(from_turn=2), {"assistants": 2}, {"assistants": 1}),
    ],
)
def test_each_match_key(serve: Any, match: Match, hit: dict[str, Any], miss: dict[str, Any]) -> None:
    server = serve(msgspec.structs.replace(one_rule(match), models=["scripted", "scripted-mini"]))
    assert answered_by(server, conversation(**hit)) == "target"
    assert answered_by(server, conversation(**miss)) == "fallback"


def test_user_match_looks_at_the_last_user_message_only(serve: Any) -> None:
    server = serve(one_rule(Match(user_contains="second")))
    body = conversation("first")
    assert answered_by(server, body) == "fallback"
    body["messages"].append({"role": "user", "content": [{"type": "text", "text": "the second one"}]})
    assert answered_by(server, body) == "target"


def test_last_tool_result_is_the_most_recent_one_and_any_is_any(serve: Any) -> None:
    body = conversation(assistants=2, tool_result="FAILED")
    body["messages"][-1]["content"] = "passed"
    assert answered_by(serve(one_rule(Match(last_tool_result_contains="FAILED"))), body) == "fallback"
    assert answered_by(serve(one_rule(Match(any_tool_result_contains="FAILED"))), body) == "target"


def test_all_keys_must_hold_and_rules_go_in_order(serve: Any) -> None:
    server = serve(
        """
        [playbook]
        name = "order"
        [[rule]]
        name = "both"
        match = { user_contains = "kind=task", tools_include = ["record_tasks"] }
          [[rule.turn]]
          text = "both"
        [[rule]]
        name = "task"
        match = { user_contains = "kind=task" }
          [[rule.turn]]
          text = "task"
        [[rule]]
        name = "also-task"
        match = { user_contains = "kind=task" }
          [[rule.turn]]
          text = "never"
        """
    )
    assert answered_by(server, conversation("kind=task", tools=("record_tasks",))) == "both"
    assert answered_by(server, conversation("kind=task", tools=("bash",))) == "task"
    assert server.uses("also-task") == 0


def test_from_turn_numbers_the_rule_turns_from_there(serve: Any) -> None:
    server = serve(
        """
        [playbook]
        name = "branch"
        [[rule]]
        name = "after-failure"
        match = { last_tool_result_contains = "FAILED", from_turn = 2 }
          [[rule.turn]]
          text = "fixing"
        [[rule]]
        name = "main"
          [[rule.turn]]
          text = "zero"
        """
    )
    reply = chat(server.url, conversation(assistants=2, tool_result="FAILED"))
    assert reply.json()["choices"][0]["message"]["content"] == "fixing"
    assert (server.requests[-1].rule, server.requests[-1].turn, server.requests[-1].warning) == (
        "after-failure",
        2,
        None,
    )


def test_max_uses_falls_through_to_later_rules(serve: Any) -> None:
    server = serve(
        """
        [playbook]
        name = "limits"
        [[rule]]
        name = "first-two"
        max_uses = 2
          [[rule.turn]]
          text = "early"
        [[rule]]
        name = "rest"
          [[rule.turn]]
          text = "late"
        """
    )
    texts = [chat(server.url, conversation()).json()["choices"][0]["message"]["content"] for _ in range(4)]
    assert texts == ["early", "early", "late", "late"]
    assert (server.uses("first-two"), server.uses("rest")) == (2, 2)


def test_max_uses_is_exact_under_concurrent_requests(serve: Any) -> None:
    server = serve(
        Playbook(
            name="t",
            rules=[
                Rule(name="limited", max_uses=5, turns=[Turn(text="a")]),
                Rule(name="rest", turns=[Turn(text="b")]),
            ],
        )
    )
    statuses: list[int] = []
    threads = [
        threading.Thread(target=lambda: statuses.append(chat(server.url, conversation()).status)) for _ in range(20)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200] * 20
    assert (server.uses("limited"), server.uses("rest")) == (5, 15)
    assert [r.seq for r in server.requests] == list(range(1, 21))


# --- faults ----------------------------------------------------------------------------------

FAULTS = """
[playbook]
name = "faults"
[[rule]]
name = "fault"
max_uses = {max_uses}
  [[rule.turn]]
  {fault}
[[rule]]
name = "normal"
  [[rule.turn]]
  text = "recovered"
"""


def fault_server(serve: Any, fault: str, max_uses: int = 1) -> ScriptedModelServer:
    return serve(FAULTS.format(fault=fault, max_uses=max_uses))


def test_rate_limit_twice_then_success(serve: Any) -> None:
    server = fault_server(serve, 'fault = "rate_limit"\n  retry_after = 7', max_uses=2)
    body = conversation()
    for _ in range(2):
        reply = chat(server.url, body)
        assert reply.status == 429 and reply.headers["retry-after"] == "7"
        assert reply.json()["error"]["code"] == "rate_limit_exceeded"
        assert reply.json()["error"]["type"] == "rate_limit_error"
    reply = chat(server.url, body)  # the same request: the fault did not use up turn 0
    assert reply.status == 200 and reply.json()["choices"][0]["message"]["content"] == "recovered"
    log = server.requests
    assert [(r.response_kind, r.rule, r.turn) for r in log] == [
        ("rate_limit", "fault", 0),
        ("rate_limit", "fault", 0),
        ("ok", "normal", 0),
    ]
    assert [r.usage for r in log] == [None, None, Usage(prompt_tokens=1000, completion_tokens=100)]


def test_server_error_is_500_with_the_turn_text_as_message(serve: Any) -> None:
    server = fault_server(serve, 'fault = "server_error"\n  text = "boom"')
    reply = chat(server.url, conversation())
    assert reply.status == 500
    assert reply.json()["error"] == {"message": "boom", "type": "server_error", "param": None, "code": None}
    assert chat(server.url, conversation()).status == 200


def test_drop_closes_the_connection_without_a_response(serve: Any) -> None:
    server = fault_server(serve, 'fault = "drop"')
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        chat(server.url, conversation())
    assert chat(server.url, conversation()).status == 200
    assert [r.response_kind for r in server.requests] == ["drop", "ok"]


@pytest.mark.parametrize("stream", [False, True])
def test_malformed_is_200_with_a_broken_body(serve: Any, stream: bool) -> None:
    server = fault_server(serve, 'fault = "malformed"')
    reply = chat(server.url, conversation(stream=stream))
    assert reply.status == 200
    payload = reply.raw.decode().removeprefix("data: ") if stream else reply.raw.decode()
    with pytest.raises(json.JSONDecodeError):
        json.loads(payload)
    assert server.requests[-1].response_kind == "malformed"


def test_slow_waits_then_answers_normally(serve: Any) -> None:
    server = serve(
        """
        [playbook]
        name = "slow"
        [[rule]]
        name = "slow"
          [[rule.turn]]
          fault = "slow"
          delay = 0.3
          text = "late but fine"
          tool_calls = [ { name = "bash", arguments = { command = "ls" } } ]
          usage = { prompt_tokens = 10, completion_tokens = 2 }
        """
    )
    started = time.monotonic()
    reply = chat(server.url, conversation())
    assert time.monotonic() - started >= 0.3
    message = reply.json()["choices"][0]["message"]
    assert message["content"] == "late but fine" and message["tool_calls"][0]["function"]["name"] == "bash"
    entry = server.requests[-1]
    assert entry.response_kind == "slow" and entry.usage == Usage(prompt_tokens=10, completion_tokens=2)
    assert entry.answered_at - entry.received_at >= 0.3


def test_fault_rule_past_its_turns_keeps_faulting(serve: Any) -> None:
    server = fault_server(serve, 'fault = "rate_limit"', max_uses=0)
    assert chat(server.url, conversation(assistants=3)).status == 429


# --- streaming -------------------------------------------------------------------------------


def test_streaming_is_valid_sse_with_usage_in_the_final_chunk(serve: Any) -> None:
    long_text = "Reading the spec. " * 10
    server = serve(BASIC.replace('"Reading the spec."', json.dumps(long_text)))
    body = conversation("kind=planning", tools=("read_spec",), model="scripted-opus", stream=True)
    reply = chat(server.url, body)
    assert reply.status == 200 and reply.headers["content-type"] == "text/event-stream"
    assert reply.headers.get("transfer-encoding") == "chunked"
    events = sse_events(reply.raw)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == long_text
    calls: dict[int, dict[str, str]] = {}
    for c in chunks:
        for part in c["choices"][0]["delta"].get("tool_calls", []):
            call = calls.setdefault(part["index"], {"id": "", "name": "", "arguments": ""})
            call["id"] += part.get("id", "")
            call["name"] += part.get("function", {}).get("name", "")
            call["arguments"] += part.get("function", {}).get("arguments", "")
    assert [(c["id"], c["name"]) for c in calls.values()] == [
        ("call_plan_0_0", "read_spec"),
        ("call_plan_0_1", "create"),
    ]
    assert json.loads(calls[1]["arguments"]) == {"path": "notes.md", "file_text": "# Notes\n"}
    assert all(c["choices"][0]["finish_reason"] is None and "usage" not in c for c in chunks[:-1])
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"] == {
        "prompt_tokens": 2000,
        "completion_tokens": 120,
        "total_tokens": 2120,
        "prompt_tokens_details": {"cached_tokens": 500},
    }
    assert server.requests[-1].stream


def test_streaming_keeps_the_connection_usable(serve: Any) -> None:
    server = serve(BASIC)
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    for body in (conversation(model="scripted-mini", stream=True), conversation(model="scripted-mini")):
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body))
        response = conn.getresponse()
        assert response.status == 200 and response.read()
    conn.close()


# --- the request log -------------------------------------------------------------------------


def test_request_log_in_memory_and_as_jsonl(serve: Any, tmp_path: Path) -> None:
    log_file = tmp_path / "requests.jsonl"
    server = serve(BASIC, log_path=log_file)
    before = time.time()
    first = conversation("kind=planning", tools=("read_spec",), model="scripted-opus")
    chat(server.url, first)
    second = conversation("kind=planning", assistants=1, tools=("read_spec",), model="scripted-opus")
    second["messages"][-1]["content"] = "spec section text"
    chat(server.url, second)
    log = server.chat_requests
    assert [(r.seq, r.path, r.rule, r.turn, r.response_kind) for r in log] == [
        (1, "/v1/chat/completions", "plan", 0, "ok"),
        (2, "/v1/chat/completions", "plan", 1, "ok"),
    ]
    assert log[0].body == first and log[1].body == second
    assert before <= log[0].received_at <= log[0].answered_at <= log[1].received_at <= log[1].answered_at
    assert log[0].usage == Usage(prompt_tokens=2000, completion_tokens=120, cached_tokens=500)
    assert log[1].usage == Usage(prompt_tokens=1200, completion_tokens=150)
    assert log[1].tool_results() == ["spec section text"]
    lines = log_file.read_bytes().splitlines()
    assert [msgspec.json.decode(line, type=LoggedRequest) for line in lines] == log


# --- playbooks -------------------------------------------------------------------------------


def test_docs_example_playbooks_parse() -> None:
    docs = (ROOT / "docs" / "scripted-model.md").read_text()
    playbooks = [block for block in re.findall(r"```toml\n(.*?)```", docs, re.S) if "[playbook]" in block]
    assert len(playbooks) >= 2
    for text in playbooks:
        assert parse_playbook(text, "docs example").rules


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[playbook]\nname = "x"\nmodel = ["a"]\n', "at playbook: Object contains unknown field `model`"),
        (
            '[playbook]\nname = "x"\n[[rule]]\nname = "r"\nmatch = { user_contain = "a" }\n[[rule.turn]]\n',
            "at rule[0].match: Object contains unknown field `user_contain`",
        ),
        (
            '[playbook]\nname = "x"\n[[rule]]\nname = "r"\n[[rule.turn]]\nfault = "oops"\n',
            "at rule[0].turn[0].fault: Invalid enum value 'oops'",
        ),
        ('[playbook]\nname = "x"\n[[rule]]\nname = "r"\nmax_uses = -1\n[[rule.turn]]\n', "at rule[0].max_uses"),
        (
            '[playbook]\nname = "x"\n[[rule]]\nname = "r"\n[[rule.turn]]\n[[rule.turn]]\nretry_after = 2\n',
            'at rule[0].turn[1]: retry_after is only meaningful with fault = "rate_limit"',
        ),
        (
            '[playbook]\nname = "x"\n[[rule]]\nname = "r"\n[[rule.turn]]\nfault = "drop"\n'
            'tool_calls = [ { name = "bash" } ]\n',
            "cannot carry tool_calls",
        ),
        ('[playbook]\nname = "x"\n[[rule]]\nname = "r"\nmatch = { user_regex = "(" }\n[[rule.turn]]\n', "regex"),
        ('[playbook]\nname = "x"\n[[rule]]\nname = "r"\n', "at rule[0]: rule 'r' needs at least one"),
        (
            '[playbook]\nname = "x"\n[[rule]]\nname = "r"\n[[rule.turn]]\ntool_calls = [ { arguments = {} } ]\n',
            "at rule[0].turn[0].tool_calls[0]: Object missing required field `name`",
        ),
        ('[playbook]\nname = "x"\ndefault_usage = { prompt_tokens = 1, cached_tokens = 2 }\n', "cached_tokens"),
        (
            '[playbook]\nname = "x"\n[[rule]]\nname = "r"\n[[rule.turn]]\n[[rule]]\nname = "r"\n[[rule.turn]]\n',
            "repeated: r",
        ),
        ('[playbook]\nname = "x"\nmodels = []\n', "at least one model"),
        ("[[rule]\n", "not valid TOML"),
        ("# empty\n", "at the top level: Object missing required field `playbook`"),
    ],
)
def test_bad_playbooks_say_where(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    rendered = caught.value.render()
    assert f"invalid playbook {path}" in rendered
    assert expected in rendered
    assert "docs/scripted-model.md" in rendered


def test_missing_playbook_file() -> None:
    with pytest.raises(PlaybookError, match="cannot read playbook"):
        load_playbook("/nonexistent/playbook.toml")


def test_python_built_playbooks_are_validated() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Rule(name="r", turns=[])
    with pytest.raises(ValueError, match="delay"):
        Turn(delay=1)
    with pytest.raises(ValueError, match="unique"):
        Playbook(name="p", rules=[Rule(name="r", turns=[Turn()]), Rule(name="r", turns=[Turn()])])


# --- bin/scripted-model ----------------------------------------------------------------------


def test_bin_scripted_model_serves_until_interrupted(tmp_path: Path) -> None:
    playbook = tmp_path / "basic.toml"
    playbook.write_text(BASIC)
    log_file = tmp_path / "log.jsonl"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bin" / "scripted-model"), "--playbook", str(playbook), "--log", str(log_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url)
        reply = chat(url, conversation("kind=planning", tools=("read_spec",), model="scripted-opus"))
        assert reply.status == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.wait()
    assert process.stderr is not None
    assert "rule=plan turn=0 -> ok" in process.stderr.read()
    assert len(log_file.read_bytes().splitlines()) == 1


def test_bin_scripted_model_reports_a_bad_playbook(tmp_path: Path) -> None:
    playbook = tmp_path / "bad.toml"
    playbook.write_text('[playbook]\nname = "x"\nbogus = 1\n')
    result = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "scripted-model"), "--playbook", str(playbook)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert "unknown field `bogus`" in result.stderr and "Traceback" not in result.stderr
