"""One trace across both processes: the real Copilot CLI's own spans under Lopen's invocation span."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest
from otlp_receiver import OtlpReceiver
from telemetry_events import MODULE, ORACLE, PROJECT, SESSION, TASK, session_events

from events.recorded import module_stream
from events.store import EventStore
from lopen.config.model import Settings
from lopen.copilot import InvocationRequest, LopenTool
from lopen.telemetry import attach, ids
from lopen.telemetry.settings import copilot_telemetry, resolve

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]

PLAYBOOK = """
[playbook]
name = "traced"
models = ["scripted-main"]

[[rule]]
name = "work"
match = { user_contains = "please work" }
  [[rule.turn]]
  text = "Echo, then a shell command."
  tool_calls = [
    { name = "echo", arguments = { text = "hello" } },
    { name = "bash", arguments = { command = "echo hi" } },
  ]
  usage = { prompt_tokens = 1200, completion_tokens = 30 }
  [[rule.turn]]
  text = "Done."
  usage = { prompt_tokens = 1300, completion_tokens = 12 }
"""

PLAIN_PLAYBOOK = """
[playbook]
name = "plain"
models = ["scripted-main"]

[[rule]]
name = "work"
match = { user_contains = "please work" }
  [[rule.turn]]
  tool_calls = [ { name = "bash", arguments = { command = "echo hi" } } ]
  [[rule.turn]]
  text = "Done."
"""


class EchoArgs(msgspec.Struct, forbid_unknown_fields=True):
    text: str


ECHO = LopenTool("echo", "Echo the text back.", EchoArgs, lambda args: f"echo says {args.text}")


def traced_request(tmp_path: Path) -> InvocationRequest:
    return InvocationRequest(
        models=["scripted-main"],
        prompt="please work",
        system_message="You are tested.",
        working_directory=str(tmp_path),
        traceparent=ids.traceparent(PROJECT, SESSION, TASK),
        conversation_id=TASK,
    )


def ancestors(span_id: str, parents: dict[str, str]) -> list[str]:
    chain = []
    while span_id in parents:
        span_id = parents[span_id]
        chain.append(span_id)
    return chain


def test_the_clis_spans_reach_the_collector_under_lopens_invocation_span(
    scripted, gateway_for, tmp_path: Path, otlp_receiver: OtlpReceiver
) -> None:
    export = resolve(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.url}).export
    gateway = gateway_for(scripted(PLAYBOOK), telemetry=copilot_telemetry(export))
    result = gateway.invoke(traced_request(tmp_path), [ECHO])
    assert result.error is None and [c.name for c in result.tool_calls] == ["echo", "bash"]
    gateway.close()  # the CLI flushes its exporters when it stops

    # Lopen's own spans of the same session, exported live from the store's bus, to the same collector
    with EventStore.open(tmp_path) as store:
        handle = attach(store, PROJECT, Settings(), environ={"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.url})
        for event in session_events():
            store.append(module_stream(PROJECT, MODULE), [event])
        handle.close()

    spans = otlp_receiver.spans()
    trace = f"{ids.trace_id(PROJECT, SESSION):032x}"
    cli = [s for s in spans if s.service == "github-copilot"]
    lopen = {s.span_id: s for s in spans if s.service == "lopen"}
    assert cli and lopen
    assert {s.trace_id for s in cli} == {trace}
    invocation = next(s for s in lopen.values() if s.name == "invoke_agent task")
    parents = {s.span_id: s.parent_id for s in spans if s.parent_id}
    for span in cli:  # every CLI span hangs, through its own, under Lopen's invocation span
        assert invocation.span_id in ancestors(span.span_id, parents), span.name
    agent = next(s for s in cli if s.name.startswith("invoke_agent"))
    assert agent.parent_id == invocation.span_id
    assert agent.attributes["gen_ai.conversation.id"] == invocation.attributes["gen_ai.conversation.id"] == TASK
    assert agent.attributes["gen_ai.usage.input_tokens"] == result.usage.input
    tools = {s.attributes.get("gen_ai.tool.call.id") for s in cli if s.name.startswith("execute_tool")}
    assert tools == {c.call_id for c in result.tool_calls}
    assert ancestors(invocation.span_id, {s.span_id: s.parent_id for s in lopen.values() if s.parent_id})[-1] == next(
        s.span_id for s in lopen.values() if s.name == "run slugify"
    )
    assert otlp_receiver.metrics("gen_ai.client.operation.duration")  # the CLI's metrics arrive too


def test_the_clis_file_exporter_writes_spans_under_lopens_invocation_span(
    scripted, gateway_for, tmp_path: Path
) -> None:
    path = tmp_path / "cli-spans.jsonl"
    gateway = gateway_for(scripted(PLAYBOOK), telemetry={"exporter_type": "file", "file_path": str(path)})
    assert gateway.invoke(traced_request(tmp_path), [ECHO]).error is None
    gateway.close()

    spans = [row for row in map(json.loads, path.read_text().splitlines()) if row.get("type") == "span"]
    _, trace, span, _ = ids.traceparent(PROJECT, SESSION, TASK).split("-")
    assert spans and {s["traceId"] for s in spans} == {trace}
    parents = {s["spanId"]: s.get("parentSpanId", "") for s in spans}
    for row in spans:
        assert span in ancestors(row["spanId"], parents), row["name"]


VERIFY_PLAYBOOK = """
[playbook]
name = "verified"
models = ["scripted-main"]

[[rule]]
name = "oracle"
match = { user_contains = "oracle check" }
  [[rule.turn]]
  text = '{"passed": true, "confidence": 0.9, "summary": "ok", "findings": []}'

[[rule]]
name = "work"
match = { user_contains = "please verify" }
  [[rule.turn]]
  tool_calls = [ { name = "verify_task_completion", arguments = { task = "core/1" } } ]
  [[rule.turn]]
  text = "Verified."
"""


class VerifyArgs(msgspec.Struct, forbid_unknown_fields=True):
    task: str


def test_an_oracle_session_opened_inside_a_tool_call_hangs_under_the_oracle_span(
    scripted, gateway_for, tmp_path: Path
) -> None:
    """The SDK runs a tool handler inside the CLI's execute_tool context; the oracle invocation the
    verify tool opens must still go under *its own* span (Lopen's oracle invocation span)."""
    path = tmp_path / "cli-spans.jsonl"
    gateway = gateway_for(scripted(VERIFY_PLAYBOOK), telemetry={"exporter_type": "file", "file_path": str(path)})

    def verify(args: VerifyArgs) -> str:  # a sync handler: it runs in a worker thread, like the workflow's
        oracle = InvocationRequest(
            models=["scripted-main"],
            prompt="oracle check",
            working_directory=str(tmp_path),
            traceparent=ids.traceparent(PROJECT, SESSION, ORACLE),
            conversation_id=ORACLE,
        )
        return gateway.invoke(oracle).final_message

    tool = LopenTool("verify_task_completion", "Verify a task.", VerifyArgs, verify)
    request = msgspec.structs.replace(traced_request(tmp_path), prompt="please verify")
    result = gateway.invoke(request, [tool])
    assert result.error is None and result.tool_calls[0].result.startswith('{"passed": true')
    gateway.close()

    spans = [row for row in map(json.loads, path.read_text().splitlines()) if row.get("type") == "span"]
    agents = {s["attributes"]["gen_ai.conversation.id"]: s for s in spans if s["name"].startswith("invoke_agent")}
    assert set(agents) == {TASK, ORACLE}
    trace = f"{ids.trace_id(PROJECT, SESSION):032x}"
    assert {s["traceId"] for s in spans} == {trace}
    assert agents[TASK]["parentSpanId"] == ids.traceparent(PROJECT, SESSION, TASK).split("-")[2]
    assert agents[ORACLE]["parentSpanId"] == ids.traceparent(PROJECT, SESSION, ORACLE).split("-")[2]


def test_without_a_traceparent_the_cli_starts_its_own_trace(scripted, gateway_for, tmp_path: Path) -> None:
    path = tmp_path / "cli-spans.jsonl"
    gateway = gateway_for(scripted(PLAYBOOK), telemetry={"exporter_type": "file", "file_path": str(path)})
    request = msgspec.structs.replace(traced_request(tmp_path), traceparent="", conversation_id="")
    assert gateway.invoke(request, [ECHO]).error is None
    gateway.close()
    spans = [row for row in map(json.loads, path.read_text().splitlines()) if row.get("type") == "span"]
    assert spans and f"{ids.trace_id(PROJECT, SESSION):032x}" not in {s["traceId"] for s in spans}


def test_with_telemetry_off_an_invocation_loads_no_opentelemetry_sdk(cli_path: str, tmp_path: Path) -> None:
    """Lopen loads nothing; the Copilot SDK itself probes the OpenTelemetry *API* for a current trace
    context on every create/send (copilot/_telemetry.py) — the SDK, exporters and protobuf stay out."""
    code = textwrap.dedent(
        f"""
        import sys
        from lopen.copilot import InvocationRequest
        from lopen.copilot.gateway import Gateway, GatewayConfig, ProviderConfig
        from lopen.scripted_model import ScriptedModelServer, parse_playbook

        with ScriptedModelServer(parse_playbook({PLAIN_PLAYBOOK!r})) as server:
            config = GatewayConfig(
                cli_path={cli_path!r}, default_model="scripted-main", copilot_home={str(tmp_path / "home")!r},
                provider=ProviderConfig(base_url=server.url, api_key="sk-scripted-test"),
            )
            with Gateway(config) as gateway:
                request = InvocationRequest(
                    models=["scripted-main"], prompt="please work", working_directory={str(tmp_path)!r}
                )
                assert gateway.invoke(request).error is None
        heavy = ("opentelemetry.sdk", "opentelemetry.exporter", "google.protobuf")
        loaded = sorted(m for m in sys.modules if m.startswith(heavy))
        assert not loaded, loaded
        print("clean")
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOPEN_"))}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "clean\n"
