"""The trace event line: one pydantic model, the single source of the schema.

Each line of a trace file is one :class:`TraceEvent` serialised with aliases (``event.name``,
``service.name``, ``messaging.message.id``, ...). The Spark schema used by ``gear traces analyze`` is
derived from these models (``gear.pipeline.schema``), so a field added here is read there.

Which events carry what (the pipeline relies on this; the generator in ``gear.testing.traces.generate``
follows it):

* every event of one RPC carries ``span_id`` = the request id (stable across republishes), the call
  tree's ``trace_id``, and ``parent_span_id`` = the request id of the call whose handler made it;
* caller side, on the caller's instance: ``gear.publish`` (``gear.rpc.kind`` call | cast | gather,
  ``service.peer.name`` = callee TYPE or ``*``, ``gear.route``, ``rpc.method``, ``gear.attempt`` 1),
  ``gear.publish.confirm`` / ``gear.publish.nack`` / ``gear.publish.return`` /
  ``gear.publish.republish`` (``gear.attempt`` 2..), ``gear.rpc.response`` (``error.type`` set when the
  handler failed), ``gear.rpc.timeout``, ``gear.rpc.late_reply``, ``gear.rpc.unroutable``;
* callee side, on each receiving instance: exactly one ``gear.deliver`` per request delivery
  (``gear.amqp.redelivered``; ``gear.duplicate`` when the idempotency window recognised the request
  id and the handler did not run again), one ``gear.settle`` per acknowledgement actually sent
  (``messaging.operation.name`` ack | nack | reject, ``gear.amqp.requeue``; a delivery whose channel
  closed first is not settled by Gear: the broker redelivers it), ``gear.rpc.reply`` (with the handler
  time in ``gear.duration_ms``), ``gear.rpc.expired``, ``gear.rpc.cancelled`` (a handler outlived the
  deadline, ``error.type`` = deadline; no reply follows), and the reply's own ``gear.publish`` with
  ``gear.rpc.kind`` = ``reply`` (its confirm/nack/return events carry ``gear.rpc.kind`` = reply too);
  a message that is not a Gear message gets one ``gear.settle`` (reject, no requeue) and no deliver;
* per instance: ``gear.connection.lost`` / ``.reconnect`` (``gear.reconnect.downtime_ms``) and
  ``.blocked`` (``gear.blocked.reason``) / ``.unblocked``.

Types are fixed: one attribute of the wrong JSON type makes Spark drop the whole line, so the JSONL
writer coerces values with :data:`ATTRIBUTE_TYPES` before writing.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field

__all__ = ("ATTRIBUTE_TYPES", "Attributes", "Resource", "TraceEvent", "coerce_attributes")

_MODEL = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


class Resource(BaseModel):
    """Who wrote the event: OpenTelemetry resource attributes of one service instance."""

    model_config = _MODEL

    service_name: str = Field(alias="service.name", description="The service TYPE.")
    host_name: str = Field(alias="host.name", description="The instance's HOST word.")
    instance_id: str = Field(alias="service.instance.id", description="Unique per running instance.")
    pid: int | None = Field(default=None, alias="process.pid")
    sample_rate: float | None = Field(
        default=None,
        alias="gear.trace.sample_rate",
        gt=0,
        le=1,
        description="The share of traces this instance records (head sampling by trace id); absent: all.",
    )


class Attributes(BaseModel):
    """Event attributes; OpenTelemetry names where they exist, ``gear.*`` otherwise (see ``Attr``).

    The aliases are ``Attr``'s values written out: a type checker without pydantic's plugin (a user's
    mypy reading this source) needs string literals there (``tests/tracing`` checks they match)."""

    model_config = _MODEL

    messaging_system: str | None = Field(default=None, alias="messaging.system")
    operation_type: str | None = Field(default=None, alias="messaging.operation.type")
    operation_name: str | None = Field(default=None, alias="messaging.operation.name")
    destination: str | None = Field(default=None, alias="messaging.destination.name")
    routing_key: str | None = Field(default=None, alias="messaging.rabbitmq.destination.routing_key")
    message_id: str | None = Field(default=None, alias="messaging.message.id")
    conversation_id: str | None = Field(default=None, alias="messaging.message.conversation_id")
    delivery_tag: int | None = Field(default=None, alias="messaging.rabbitmq.message.delivery_tag")
    body_size: int | None = Field(default=None, alias="messaging.message.body.size")
    error_type: str | None = Field(default=None, alias="error.type")
    exception_message: str | None = Field(default=None, alias="exception.message")
    rpc_system: str | None = Field(default=None, alias="rpc.system.name")
    rpc_method: str | None = Field(default=None, alias="rpc.method")
    peer_service: str | None = Field(default=None, alias="service.peer.name")
    server_address: str | None = Field(default=None, alias="server.address")
    server_port: int | None = Field(default=None, alias="server.port")
    route: str | None = Field(default=None, alias="gear.route")
    rpc_kind: str | None = Field(default=None, alias="gear.rpc.kind")
    request_id: str | None = Field(default=None, alias="gear.request.id")
    attempt: int | None = Field(default=None, alias="gear.attempt")
    caller: str | None = Field(default=None, alias="gear.caller")
    callee_host: str | None = Field(default=None, alias="gear.callee.host")
    timeout_ms: float | None = Field(default=None, alias="gear.timeout_ms")
    duration_ms: float | None = Field(default=None, alias="gear.duration_ms")
    redelivered: bool | None = Field(default=None, alias="gear.amqp.redelivered")
    requeue: bool | None = Field(default=None, alias="gear.amqp.requeue")
    reply_code: int | None = Field(default=None, alias="gear.amqp.reply_code")
    republish_reason: str | None = Field(default=None, alias="gear.republish.reason")
    duplicate: bool | None = Field(default=None, alias="gear.duplicate")
    blocked_reason: str | None = Field(default=None, alias="gear.blocked.reason")
    connection_id: str | None = Field(default=None, alias="gear.connection.id")
    reconnect_attempt: int | None = Field(default=None, alias="gear.reconnect.attempt")
    downtime_ms: float | None = Field(default=None, alias="gear.reconnect.downtime_ms")


class TraceEvent(BaseModel):
    """One line of a trace file."""

    model_config = _MODEL

    time_unix_nano: int = Field(description="Wall clock of the writing instance, unix nanoseconds.")
    event_name: str = Field(alias="event.name", description="An ``EventName`` value.")
    severity_number: int = Field(default=9, description="OpenTelemetry severity: 9 info, 13 warn.")
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    seq: int | None = Field(default=None, alias="gear.event.seq", description="Per-instance counter.")
    resource: Resource
    attributes: Attributes = Field(default_factory=Attributes)


def _python_type(annotation: Any) -> type:
    args = [a for a in get_args(annotation) if a is not type(None)]
    found = args[0] if args else annotation
    assert isinstance(found, type)
    return found


ATTRIBUTE_TYPES: MappingProxyType[str, type] = MappingProxyType(
    {
        str(field.alias): _python_type(field.annotation)
        for field in Attributes.model_fields.values()
        if field.alias is not None
    }
)
"""Attribute key -> the Python type its JSON value must have (``bool``, ``int``, ``float``, ``str``)."""


def _coerce(kind: type, value: Any) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise TypeError(f"expected bool, got {type(value).__name__}")
    if kind is int:
        if isinstance(value, bool):
            raise TypeError("expected int, got bool")
        return int(value)
    if kind is float:
        if isinstance(value, bool):
            raise TypeError("expected float, got bool")
        return float(value)
    return str(value)


_TYPES = dict(ATTRIBUTE_TYPES)  # a plain dict: faster lookups than the read-only view


def coerce_attributes(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return JSON-safe attributes with every known key of its declared type.

    ``None`` values are dropped; a value that cannot be coerced is kept as text under
    ``gear.invalid.<key>`` so that nothing is lost and the line stays readable by Spark. Unknown keys
    are kept when their value is a JSON scalar and written as text otherwise. Attributes that are
    already clean (what the typed emitters build) are returned as they are, not copied.
    """
    types = _TYPES
    for key, value in attributes.items():
        if type(value) is not types.get(key):
            break
    else:
        return attributes
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        kind = ATTRIBUTE_TYPES.get(key)
        if type(value) is kind:  # the common case: already the declared type (bool is not int here)
            out[key] = value
            continue
        if kind is None:
            out[key] = value if isinstance(value, str | int | float | bool) else str(value)
            continue
        try:
            out[key] = _coerce(kind, value)
        except (TypeError, ValueError, OverflowError):
            out[f"gear.invalid.{key}"] = str(value)
    return out
