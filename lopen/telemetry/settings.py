"""Whether, where and how Lopen exports: the standard ``OTEL_*`` switches over the ``otel`` settings.

Only standard switches turn export on and off:

==================================================  =============================================
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``otel.endpoint``  the OTLP/HTTP base URL; set = export
``OTEL_EXPORTER_OTLP_PROTOCOL`` / ``otel.protocol``  ``http/protobuf`` (default) or ``http/json``
``OTEL_SERVICE_NAME`` / ``otel.service_name``        ``service.name`` of Lopen's spans (``lopen``)
``OTEL_SDK_DISABLED`` / ``otel.disabled``            ``true`` = export nothing, whatever else is set
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_         message content in spans (redacted); off by
CONTENT`` / ``otel.capture_content``                default
==================================================  =============================================

A set ``OTEL_*`` variable wins over the ``otel.*`` setting (which has its own layers: flags,
``LOPEN_OTEL__*``, config files). ``OTEL_EXPORTER_OTLP_TIMEOUT`` (milliseconds) bounds one export
request, and ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``…_METRICS_ENDPOINT`` replace the URL of one
signal, as in every OpenTelemetry SDK.

Nothing here imports OpenTelemetry: deciding that telemetry is off costs a few dictionary lookups.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from lopen.config.model import Otel

__all__ = ["ExportSettings", "Resolution", "capture_content", "copilot_telemetry", "resolve", "service_name"]

LIVE_TIMEOUT = 2.0  # seconds one live export request may take: a run never waits longer on a collector
PROTOCOLS = ("http/protobuf", "http/json")


class ExportSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how to export. ``endpoint`` is the OTLP base URL (``/v1/traces`` is appended)."""

    endpoint: str
    protocol: str = "http/protobuf"
    service_name: str = "lopen"
    capture_content: bool = False
    timeout: float = LIVE_TIMEOUT
    traces_url: str = ""
    metrics_url: str = ""

    @property
    def traces(self) -> str:
        return self.traces_url or f"{self.endpoint}/v1/traces"

    @property
    def metrics(self) -> str:
        return self.metrics_url or f"{self.endpoint}/v1/metrics"


class Resolution(msgspec.Struct, frozen=True):
    """``export`` is None when nothing is exported; ``problem`` says why a setting was not usable."""

    export: ExportSettings | None
    problem: str = ""
    disabled: bool = False


def _flag(text: str | None) -> bool | None:
    if text is None or not text.strip():
        return None
    return text.strip().lower() == "true"


def resolve(otel: Otel | None = None, environ: Mapping[str, str] | None = None, *, endpoint: str = "") -> Resolution:
    """Decide from the environment and the ``otel`` settings. ``endpoint`` (``lopen trace --endpoint``)
    is an explicit request: it wins over both, ``OTEL_SDK_DISABLED`` included."""
    env = os.environ if environ is None else environ
    disabled = _flag(env.get("OTEL_SDK_DISABLED"))
    if not endpoint and (disabled or (disabled is None and otel is not None and otel.disabled)):
        return Resolution(None, disabled=True)
    source = "--endpoint"
    if not endpoint:
        endpoint, source = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip(), "OTEL_EXPORTER_OTLP_ENDPOINT"
    if not endpoint and otel is not None:
        endpoint, source = otel.endpoint, "otel.endpoint"
    if not endpoint:
        return Resolution(None)
    if not endpoint.startswith(("http://", "https://")):
        return Resolution(None, f"{source}={endpoint} is not an http:// or https:// URL")
    protocol = env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip() or (otel.protocol if otel else "http/protobuf")
    if protocol not in PROTOCOLS:
        return Resolution(
            None,
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported: Lopen exports OTLP over HTTP "
            "(http/protobuf or http/json, usually port 4318)",
        )
    return Resolution(
        ExportSettings(
            endpoint=endpoint.rstrip("/"),
            protocol=protocol,
            service_name=service_name(otel, env),
            capture_content=capture_content(otel, env),
            timeout=_timeout(env.get("OTEL_EXPORTER_OTLP_TIMEOUT")),
            traces_url=env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip(),
            metrics_url=env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip(),
        )
    )


def service_name(otel: Otel | None = None, environ: Mapping[str, str] | None = None) -> str:
    """``OTEL_SERVICE_NAME``, else ``otel.service_name``, else ``lopen``."""
    env = os.environ if environ is None else environ
    return env.get("OTEL_SERVICE_NAME", "").strip() or (otel.service_name if otel else "lopen")


def capture_content(otel: Otel | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether message content goes into spans: ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``,
    else ``otel.capture_content``; off by default."""
    env = os.environ if environ is None else environ
    capture = _flag(env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"))
    return capture if capture is not None else bool(otel and otel.capture_content)


def _timeout(millis: str | None) -> float:
    """``OTEL_EXPORTER_OTLP_TIMEOUT`` in seconds, never longer than a run should wait."""
    try:
        seconds = float(millis) / 1000 if millis else LIVE_TIMEOUT
    except ValueError:
        return LIVE_TIMEOUT
    return min(max(seconds, 0.1), 10.0)


def copilot_telemetry(export: ExportSettings | None) -> dict[str, Any] | None:
    """The SDK's ``TelemetryConfig`` for ``CopilotClient(telemetry=…)`` (``GatewayConfig.telemetry``):
    the Copilot CLI exports its own spans and metrics to the same collector. None = off."""
    if export is None:
        return None
    return {
        "otlp_endpoint": export.endpoint,
        "otlp_protocol": export.protocol,
        "capture_content": export.capture_content,
    }
