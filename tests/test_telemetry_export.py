"""Export to a real OTLP/HTTP receiver: live from the bus, and after the fact with `lopen trace`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from otlp_receiver import OtlpReceiver, ReceivedSpan, decode
from telemetry_events import CALLS, MODULE, PROJECT, SESSION, TASK, as_recorded, fill_store, session_events

from events.recorded import module_stream
from events.store import EventStore
from lopen.config.model import Budget, Otel, Settings
from lopen.telemetry import attach, ids
from lopen.telemetry.settings import copilot_telemetry, resolve
from lopen.telemetry.spans import build_spans

ROOT = Path(__file__).resolve().parents[1]


def shape(spans: list[ReceivedSpan]) -> set[tuple]:
    """What must be identical between two exports of one session: ids, tree, names, times, attributes."""
    return {
        (
            s.trace_id,
            s.span_id,
            s.parent_id,
            s.name,
            s.kind,
            s.start,
            s.end,
            tuple(sorted((k, str(v)) for k, v in s.attributes.items())),
            tuple((name, at, tuple(sorted(a.items()))) for name, at, a in s.events),
            s.status,
        )
        for s in spans
    }


def dead_url() -> str:
    """A loopback port nobody listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOPEN_"))}
    env["HOME"] = str(tmp_path / "home")
    env.update(extra)
    return env


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose store holds the synthetic session."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / ".lopen").mkdir()
    (root / ".lopen" / "project-id").write_text(PROJECT + "\n")
    fill_store(root, session_events())
    return root


def derived(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    """The spans folded from events (what `lopen trace` rebuilds): all but the measured appends."""
    return [s for s in spans if s.name != "store append"]


def lopen(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


# -- live: an observer on the bus ------------------------------------------------------------------


def live_export(root: Path, url: str, settings: Settings | None = None, **kwargs: object) -> list[str]:
    warnings: list[str] = []
    with EventStore.open(root) as store:
        handle = attach(
            store,
            PROJECT,
            settings or Settings(),
            environ={"OTEL_EXPORTER_OTLP_ENDPOINT": url},
            warn=warnings.append,
            **kwargs,
        )
        assert handle.enabled
        stream = module_stream(PROJECT, MODULE)
        for event in session_events():
            store.append(stream, [event])
        handle.close()
    return warnings


def test_live_export_sends_the_tree_the_fold_builds(tmp_path: Path, otlp_receiver: OtlpReceiver) -> None:
    warnings = live_export(tmp_path, otlp_receiver.url)

    assert warnings == []
    everything = otlp_receiver.spans()
    appends = [s for s in everything if s.name == "store append"]
    received = [s for s in everything if s.name != "store append"]  # measured live, not derived from events
    expected = build_spans(as_recorded(session_events()))
    # one span per append (each event was appended alone), under what was open when it was appended
    assert sorted(s.attributes["lopen.store.first_seq"] for s in appends) == list(range(1, len(session_events()) + 1))
    names = {s.span_id: s.name for s in received}
    assert {names[s.parent_id].split(" ")[0] for s in appends} == {"run", "step", "invoke_agent"}
    assert all(s.end >= s.start and s.attributes["db.system.name"] == "sqlite" for s in appends)
    assert {(s.span_id, s.parent_id, s.name) for s in received} == {
        (f"{e.span_id:016x}", f"{e.parent_id:016x}" if e.parent_id else "", e.name) for e in expected
    }
    assert {s.trace_id for s in received} == {f"{ids.trace_id(PROJECT, SESSION):032x}"}
    assert {s.service for s in received} == {"lopen"}
    task = next(s for s in received if s.name == "invoke_agent task")
    assert task.attributes["gen_ai.usage.input_tokens"] == sum(c[1] for c in CALLS if c[0] == TASK)
    assert task.span_id == ids.traceparent(PROJECT, SESSION, TASK).split("-")[2]
    assert task.kind == 3  # SPAN_KIND_CLIENT
    assert [name for name, _, _ in task.events] == [
        "lopen.task.status",
        "lopen.guardrail",
        "lopen.completion_refused",
        "lopen.task.status",
    ]
    assert all("protobuf" in t for t in otlp_receiver.content_types)

    counts = otlp_receiver.metrics("lopen.commits")[-1].sum.data_points
    assert [p.as_int for p in counts] == [1]
    usage = otlp_receiver.metrics("gen_ai.client.token.usage")[-1].histogram.data_points
    assert sum(p.sum for p in usage) == sum(c[1] + c[2] for c in CALLS)


def test_live_export_gauges_the_module_budget_from_its_history(tmp_path: Path, otlp_receiver: OtlpReceiver) -> None:
    fill_store(tmp_path, session_events(session="slugify-20261125-1", t0=1_794_000_000.0))  # an earlier session
    settings = Settings(budget=Budget(token_budget_per_module=100_000))
    live_export(tmp_path, otlp_receiver.url, settings)

    (gauge,) = otlp_receiver.metrics("lopen.budget.used")[-1:]
    (point,) = gauge.gauge.data_points
    used = sum(c[1] + c[2] for c in CALLS)
    assert point.as_double == pytest.approx(2 * used / 100_000)


def test_attached_after_the_session_started_the_live_export_is_still_complete(
    tmp_path: Path, otlp_receiver: OtlpReceiver
) -> None:
    events = session_events()
    stream = module_stream(PROJECT, MODULE)
    with EventStore.open(tmp_path) as store:
        for event in events[:12]:  # the session started, planning done, the task invocation under way
            store.append(stream, [event])
        handle = attach(store, PROJECT, Settings(), environ={"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.url})
        for event in events[12:]:
            store.append(stream, [event])
        handle.close()
    expected = build_spans(as_recorded(events))
    assert sorted(s.span_id for s in derived(otlp_receiver.spans())) == sorted(f"{e.span_id:016x}" for e in expected)
    measured = [s.attributes["lopen.store.first_seq"] for s in otlp_receiver.spans() if s.name == "store append"]
    assert sorted(measured) == list(range(13, len(events) + 1))  # the appends made while attached
    usage = otlp_receiver.metrics("gen_ai.client.token.usage")[-1].histogram.data_points
    assert sum(p.sum for p in usage) == sum(c[1] + c[2] for c in CALLS)


def test_a_resumed_session_exports_its_new_run_and_counts_the_whole_session(
    tmp_path: Path, otlp_receiver: OtlpReceiver
) -> None:
    from events import catalogue as ev

    first_run = [*session_events(end=False), ev.SessionPaused(at=1_795_000_014.0, session_id=SESSION, reason="budget")]
    second_run = [
        ev.SessionResumed(at=1_795_000_100.0, session_id=SESSION),
        ev.StepEntered(at=1_795_000_101.0, session_id=SESSION, phase="building", step=7),
        ev.SessionCompleted(at=1_795_000_102.0, session_id=SESSION),
    ]
    stream = module_stream(PROJECT, MODULE)
    with EventStore.open(tmp_path) as store:
        for event in first_run:
            store.append(stream, [event])
        handle = attach(store, PROJECT, Settings(), environ={"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.url})
        for event in second_run:
            store.append(stream, [event])
        handle.close()
    assert sorted(s.name for s in derived(otlp_receiver.spans())) == ["run slugify", "step 7 building"]
    (commits,) = otlp_receiver.metrics("lopen.commits")[-1].sum.data_points
    assert commits.as_int == 1  # counted from the session's start, like `lopen trace` counts it
    assert commits.start_time_unix_nano == round(first_run[0].at * 1e9)


def test_a_run_started_inside_a_callers_trace_links_to_it_live_and_rebuilt(
    tmp_path: Path, project: Path, otlp_receiver: OtlpReceiver
) -> None:
    """A CI job's TRACEPARENT, recorded with the run that resumed the session: the run's span links to
    the job's span, live and from `lopen trace` alike (its own ids stay derived from the session)."""
    from events import catalogue as ev

    caller = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    resumed = ev.SessionResumed(at=1_795_000_100.0, session_id=SESSION, traceparent=f"00-{caller[0]}-{caller[1]}-01")
    with EventStore.open(project) as store:
        handle = attach(store, PROJECT, Settings(), environ={"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.url})
        paused = ev.SessionPaused(at=1_795_000_101.0, session_id=SESSION)
        store.append(module_stream(PROJECT, MODULE), [resumed, paused])
        handle.close()
    (live,) = [s for s in otlp_receiver.spans() if s.name == "run slugify" and s.links]
    assert live.links == [caller]
    assert live.trace_id == f"{ids.trace_id(PROJECT, SESSION):032x}" != caller[0]  # still the session's trace

    with OtlpReceiver() as rebuilt:
        done = lopen("trace", SESSION, "--endpoint", rebuilt.url, cwd=project, env=clean_env(tmp_path))
        assert done.returncode == 0, done.stderr
        runs = [s for s in rebuilt.spans() if s.name == "run slugify"]
    assert [s.links for s in runs] == [[], [caller]]  # the first run was started outside any trace
    assert runs[1].span_id == live.span_id


def test_lopen_trace_rebuilds_the_same_spans_from_the_store(
    tmp_path: Path, project: Path, otlp_receiver: OtlpReceiver
) -> None:
    with OtlpReceiver() as live:
        live_export(tmp_path / "live", live.url)
        live_spans = derived(live.spans())

    done = lopen("trace", SESSION, "--endpoint", otlp_receiver.url, cwd=project, env=clean_env(tmp_path))

    assert done.returncode == 0, done.stderr
    assert f"exported {SESSION}: {len(session_events())} events as {len(live_spans)} spans" in done.stdout
    assert "events/s" in done.stdout
    assert shape(otlp_receiver.spans()) == shape(live_spans)
    resources = {tuple(sorted(s.resource.items())) for s in [*otlp_receiver.spans(), *live_spans]}
    assert len(resources) == 1  # no per-process instance id: the same metric series live and rebuilt
    assert dict(next(iter(resources)))["service.instance.id"] == PROJECT
    names = {m.name for m in otlp_receiver.metrics()}
    assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "lopen.tasks.completed"} <= names


def test_lopen_trace_uses_the_standard_endpoint_variable(
    tmp_path: Path, project: Path, otlp_receiver: OtlpReceiver
) -> None:
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=otlp_receiver.url, OTEL_SERVICE_NAME="lopen-ci")
    done = lopen("trace", SESSION, cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert {s.service for s in otlp_receiver.spans()} == {"lopen-ci"}


def test_lopen_trace_to_a_file_writes_otlp_json_lines(tmp_path: Path, project: Path) -> None:
    out = tmp_path / "trace.jsonl"
    done = lopen("trace", SESSION, "--file", str(out), cwd=project, env=clean_env(tmp_path))
    assert done.returncode == 0, done.stderr

    lines = out.read_text().splitlines()
    decoded = [decode("traces" if '"resourceSpans"' in line else "metrics", line.encode(), "json") for line in lines]
    receiver = OtlpReceiver()
    receiver.traces = [d for d in decoded if hasattr(d, "resource_spans")]
    receiver.metric_requests = [d for d in decoded if hasattr(d, "resource_metrics")]
    receiver.server.server_close()
    expected = build_spans(as_recorded(session_events()))
    assert {s.span_id for s in receiver.spans()} == {f"{e.span_id:016x}" for e in expected}
    assert receiver.metrics("lopen.oracle.verdicts")


def test_lopen_trace_says_what_is_wrong_without_a_traceback(tmp_path: Path, project: Path) -> None:
    env = clean_env(tmp_path)
    nowhere = lopen("trace", SESSION, cwd=project, env=env)
    assert nowhere.returncode == 1
    assert "error: nowhere to export session" in nowhere.stderr and "fix: pass --endpoint" in nowhere.stderr

    unknown = lopen("trace", "slugify-20261126-9", "--endpoint", dead_url(), cwd=project, env=env)
    assert unknown.returncode == 1 and "error: no session slugify-20261126-9" in unknown.stderr

    dead = dead_url()
    refused = lopen("trace", SESSION, "--endpoint", dead, cwd=project, env=env)
    assert refused.returncode == 1
    assert f"error: could not export session {SESSION} to {dead}" in refused.stderr
    assert "why: connection refused" in refused.stderr
    for done in (nowhere, unknown, refused):
        assert "Traceback" not in done.stderr


# -- never in the way --------------------------------------------------------------------------------


def test_a_dead_endpoint_is_one_warning_and_the_run_goes_on(tmp_path: Path) -> None:
    dead = dead_url()
    warnings = live_export(tmp_path, dead)
    assert len(warnings) == 1
    assert warnings[0].startswith(f"telemetry: cannot export to {dead} (connection refused)")
    assert "lopen trace <session>" in warnings[0]
    with EventStore.open(tmp_path) as store:  # every event is stored: nothing waited on the collector
        assert store.version(module_stream(PROJECT, MODULE)) == len(session_events())


def test_a_collector_that_refuses_is_one_warning_too(tmp_path: Path) -> None:
    with OtlpReceiver(status=400) as refusing:
        warnings = live_export(tmp_path, refusing.url)
    assert len(warnings) == 1 and warnings[0].startswith(f"telemetry: cannot export to {refusing.url}")


def test_a_collector_that_takes_traces_only_gets_the_spans_and_one_note(tmp_path: Path, project: Path) -> None:
    with OtlpReceiver(metrics_status=404) as jaeger_like:
        warnings = live_export(tmp_path / "live", jaeger_like.url)
        live_spans = len(derived(jaeger_like.spans()))
        done = lopen("trace", SESSION, "--endpoint", jaeger_like.url, cwd=project, env=clean_env(tmp_path))
        assert len(derived(jaeger_like.spans())) == 2 * live_spans > 0
    assert len(warnings) == 1
    assert warnings[0] == (
        f"telemetry: {jaeger_like.url} does not take metrics (the collector answered HTTP 404, reason: Not Found); "
        "spans still go there"
    )
    assert done.returncode == 0, done.stderr
    assert "0 metric points" in done.stdout
    assert done.stderr.startswith(f"warning: {jaeger_like.url} does not take metrics")


def test_a_dead_endpoint_prints_one_line_on_stderr_and_no_traceback(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from pathlib import Path
        from telemetry_events import MODULE, PROJECT, session_events
        from events.recorded import module_stream
        from events.store import EventStore
        from lopen.config.model import Settings
        from lopen.telemetry import attach

        with EventStore.open(Path({str(tmp_path)!r})) as store:
            handle = attach(store, PROJECT, Settings())
            for event in session_events():
                store.append(module_stream(PROJECT, MODULE), [event])
            handle.close()
        print("done")
        """
    )
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=dead_url())
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("warning: telemetry: cannot export to")


def test_with_nothing_set_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    """The run path Lopen owns — settings, attach, the bus, the gateway's request and context — and
    `lopen --help` load no opentelemetry module when no OTEL_* variable is set."""
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from pathlib import Path
        from typer.testing import CliRunner
        from telemetry_events import MODULE, PROJECT, session_events
        from events.recorded import module_stream
        from events.store import EventStore
        from lopen.cli import app
        from lopen.config import load_settings
        from lopen.copilot.gateway import GatewayConfig
        from lopen.copilot.results import InvocationRequest
        from lopen.telemetry import attach, copilot_telemetry, resolve
        from lopen.telemetry.context import attach_parent, detach_parent, remote_parent

        assert CliRunner().invoke(app, ["--help"]).exit_code == 0
        assert CliRunner().invoke(app, ["trace", "--help"]).exit_code == 0
        settings = load_settings(Path({str(tmp_path)!r}))
        with EventStore.open(Path({str(tmp_path)!r})) as store:
            handle = attach(store, PROJECT, settings)
            assert not handle.enabled
            telemetry = copilot_telemetry(resolve(settings.otel).export)
            assert telemetry is None and handle.copilot_telemetry() is None
            GatewayConfig(cli_path="copilot", telemetry=telemetry)
            for event in session_events():
                store.append(module_stream(PROJECT, MODULE), [event])
                parent = handle.traceparent(event.session_id, "task-1")
                InvocationRequest(models=["m"], prompt="p", traceparent=parent)
                with remote_parent(parent):
                    pass
                detach_parent(attach_parent(parent))
            handle.close()
        loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
        assert not loaded, loaded
        print("clean")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=clean_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "clean\n" and done.stderr == ""


# -- the switches --------------------------------------------------------------------------------------


def test_the_standard_variables_win_over_the_otel_settings() -> None:
    otel = Otel(endpoint="http://config:4318", service_name="from-config", capture_content=True)
    assert resolve(otel, {}).export.endpoint == "http://config:4318"
    chosen = resolve(
        otel,
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318/",
            "OTEL_SERVICE_NAME": "from-env",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false",
        },
    ).export
    assert (chosen.endpoint, chosen.service_name, chosen.protocol, chosen.capture_content) == (
        "http://env:4318",
        "from-env",
        "http/json",
        False,
    )
    assert (chosen.traces, chosen.metrics) == ("http://env:4318/v1/traces", "http://env:4318/v1/metrics")
    assert copilot_telemetry(chosen) == {
        "otlp_endpoint": "http://env:4318",
        "otlp_protocol": "http/json",
        "capture_content": False,
    }


def test_disabled_and_unusable_settings_export_nothing() -> None:
    on = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"}
    assert resolve(None, {}).export is None
    assert resolve(None, {**on, "OTEL_SDK_DISABLED": "true"}).disabled
    assert resolve(Otel(endpoint="http://c:4318", disabled=True), {}).export is None
    assert resolve(Otel(disabled=True), {**on, "OTEL_SDK_DISABLED": "false"}).export is not None  # the variable wins
    grpc = resolve(None, {**on, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert grpc.export is None and "grpc is not supported" in grpc.problem
    assert "not an http:// or https:// URL" in resolve(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}).problem
    assert (
        resolve(None, {**on, "OTEL_SDK_DISABLED": "true"}, endpoint="http://flag:1").export.endpoint == "http://flag:1"
    )


def test_the_otel_settings_are_ordinary_settings(tmp_path: Path) -> None:
    from lopen.config import load_settings
    from lopen.errors import LopenError

    env = {"LOPEN_OTEL__ENDPOINT": "http://collector:4318", "LOPEN_OTEL__CAPTURE_CONTENT": "true"}
    settings = load_settings(tmp_path, env=env)
    assert (settings.otel.endpoint, settings.otel.capture_content) == ("http://collector:4318", True)
    with pytest.raises(LopenError, match=r"otel\.endpoint"):
        load_settings(tmp_path, env={"LOPEN_OTEL__ENDPOINT": "collector:4318"})
    masked = load_settings(tmp_path, env={"LOPEN_OTEL__ENDPOINT": "https://user:secret@collector"}).public()
    assert masked["otel"]["endpoint"] == "https://user:***@collector"


def test_each_attempt_of_an_invocation_is_its_own_sdk_session() -> None:
    from lopen.copilot.gateway import _session_id

    assert [_session_id("task-1", n) for n in (1, 2, 3)] == ["task-1", "task-1-2", "task-1-3"]
    assert _session_id("", 1) is None  # the SDK picks one
