"""What the tracing benchmarks feed the typed emitters: stand-ins for a message, a delivery and its
parsed envelope (the fields the emitters read), and an OpenTelemetry SDK provider that drops its spans."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ("Delivery", "Meta", "Msg", "sdk_provider")

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


@dataclass
class Msg:
    routing_key: str = "REPO.r1"
    request_id: str = "ab" * 8
    kind: str = "gear.call"
    method: str = "put"
    body: bytes = b"{}"
    trace_id: str | None = TRACE_ID
    parent_id: str | None = None
    deadline_unix: float | None = None
    headers: dict[str, Any] = field(default_factory=dict)


@dataclass
class Delivery:
    body: bytes = b"{}"
    queue: str = "REPO.r1"
    routing_key: str = "REPO.r1"
    delivery_tag: int = 1
    redelivered: bool = False
    message_id: str | None = "ab.1"
    headers: dict[str, Any] = field(default_factory=dict)


@dataclass
class Meta:
    kind: str = "gear.call"
    request_id: str = "ab" * 8
    method: str = "put"
    sender: str = "WEB.w1"
    attempt: int = 1
    trace_id: str | None = TRACE_ID
    parent_id: str | None = None


def sdk_provider(sample: float = 1.0) -> Any:
    """An OpenTelemetry SDK ``TracerProvider`` with a batch processor whose exporter drops the spans;
    below 1, ``sample`` configures the ``parentbased_traceidratio`` sampler at that rate."""
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio

    class Drop(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider(sampler=ParentBasedTraceIdRatio(sample)) if sample < 1 else TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    return provider
