"""Gear's instruments: their OpenTelemetry names, Prometheus names, units, attributes and buckets.

One table for both exporters, so that a dashboard reads the same series whether an instance is
scraped on ``--metrics-port`` or exports through OpenTelemetry (whose Prometheus naming turns
``rpc.client.call.duration`` in seconds into ``rpc_client_call_duration_seconds`` and a counter of
``{message}`` into ``..._total``, as here).

The measured instruments follow the RPC and messaging semantic conventions (v1.44):

* ``rpc.client.call.duration``: calls and gathers, from the request's start to its reply (or error);
  ``rpc.method`` = ``{callee TYPE}/{method}``, ``gear.route`` = the address form, ``error.type`` when it
  failed (the remote exception's class name, ``timeout``, ``UnroutableError``...);
* ``rpc.server.call.duration``: requests that expect a reply (calls, gathers) served here;
  ``rpc.method`` = ``{own TYPE}/{method}``, or ``_OTHER`` for a method this instance does not have;
* ``messaging.process.duration``: casts served here (a cast is a message, not a call);
* ``messaging.client.operation.duration`` and ``messaging.client.sent.messages``: every publish
  attempt (requests, casts, replies, republishes), until the broker's verdict;
  ``messaging.destination.template`` is ``{exchange}:{TYPE}.{host}`` for one instance and the routing
  key itself for the other forms (then also ``messaging.destination.name``), ``error.type`` the outcome
  when not confirmed (``returned``, ``nacked``, ``link_lost``, ``channel_closed``, ``unconfirmed``);
* ``messaging.client.consumed.messages``: every delivery to this instance, by queue (``{TYPE}`` shared,
  ``{TYPE}.{host}`` its own) and Gear kind.

No attribute carries a HOST, a request id or anything else that grows with traffic: the cardinality is
bounded by the TYPEs, methods and error classes in the code. As a last guard, an instrument that reaches
:data:`MAX_SERIES` attribute sets puts further ones in one overflow series: marked
``otel.metric.overflow`` in OpenTelemetry, with every label empty in Prometheus.

The read ones (``gear.*``) are the service's own counters and states, read when scraped.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = (
    "BUCKETS",
    "MAX_SERIES",
    "OTHER_METHOD",
    "OVERFLOW",
    "READ",
    "Instrument",
    "Kind",
    "Label",
    "Measured",
)

BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Histogram bucket bounds in seconds: 1 ms (a call on one machine) to 30 s (the default deadline)."""

MAX_SERIES = 2000
"""Attribute sets one instrument keeps apart; past it, new ones share the overflow series."""

OTHER_METHOD = "_OTHER"
"""``rpc.method`` of a request for a method this instance has no handler for (the conventions' value)."""

OVERFLOW = "otel.metric.overflow"
"""The attribute (``true``) of the series that takes what comes past :data:`MAX_SERIES`."""


class Label(StrEnum):
    """Attribute names (OpenTelemetry's where they exist); Prometheus labels replace ``.`` by ``_``."""

    RPC_SYSTEM = "rpc.system.name"
    RPC_METHOD = "rpc.method"
    ROUTE = "gear.route"
    ERROR_TYPE = "error.type"
    MESSAGING_SYSTEM = "messaging.system"
    OPERATION_NAME = "messaging.operation.name"
    OPERATION_TYPE = "messaging.operation.type"
    DESTINATION_NAME = "messaging.destination.name"
    DESTINATION_TEMPLATE = "messaging.destination.template"
    RPC_KIND = "gear.rpc.kind"
    STATE = "gear.link.state"

    @property
    def prometheus(self) -> str:
        """The Prometheus label name."""
        return self.value.replace(".", "_")


class Kind(StrEnum):
    """How an instrument is exported."""

    HISTOGRAM = "histogram"
    COUNTER = "counter"
    GAUGE = "gauge"


@dataclass(frozen=True, slots=True)
class Instrument:
    """One instrument: its OpenTelemetry name, kind, unit, description and attribute names."""

    name: str
    kind: Kind
    unit: str
    description: str
    labels: tuple[Label, ...] = ()

    @property
    def prometheus(self) -> str:
        """The series name Prometheus stores (a histogram's ``_bucket``/``_sum``/``_count`` aside)."""
        base = self.name.replace(".", "_")
        if self.unit == "s":
            base += "_seconds"
        return base + "_total" if self.kind is Kind.COUNTER else base


_RPC = (Label.RPC_SYSTEM, Label.RPC_METHOD, Label.ERROR_TYPE)
_SEND = (
    Label.MESSAGING_SYSTEM, Label.OPERATION_NAME, Label.DESTINATION_NAME, Label.DESTINATION_TEMPLATE,
    Label.RPC_KIND, Label.ERROR_TYPE,
)  # fmt: skip


class Measured:
    """The instruments recorded on the hot path."""

    CLIENT_CALL = Instrument(
        "rpc.client.call.duration", Kind.HISTOGRAM, "s",
        "Duration of outgoing Gear calls and gathers, until the reply or the error.", (*_RPC, Label.ROUTE),
    )  # fmt: skip
    SERVER_CALL = Instrument(
        "rpc.server.call.duration", Kind.HISTOGRAM, "s",
        "Duration of serving incoming Gear calls and gathers, until the reply is confirmed.", _RPC,
    )  # fmt: skip
    PROCESS = Instrument(
        "messaging.process.duration", Kind.HISTOGRAM, "s", "Duration of serving incoming Gear casts.",
        (Label.MESSAGING_SYSTEM, Label.OPERATION_NAME, Label.RPC_METHOD, Label.ERROR_TYPE),
    )  # fmt: skip
    PUBLISH = Instrument(
        "messaging.client.operation.duration", Kind.HISTOGRAM, "s",
        "Duration of publish attempts, from sending to the broker's verdict.",
        (*_SEND, Label.OPERATION_TYPE),
    )  # fmt: skip
    SENT = Instrument(
        "messaging.client.sent.messages", Kind.COUNTER, "{message}",
        "Messages sent to the broker (every publish attempt).", _SEND,
    )  # fmt: skip
    CONSUMED = Instrument(
        "messaging.client.consumed.messages", Kind.COUNTER, "{message}",
        "Messages delivered to this instance.",
        (Label.MESSAGING_SYSTEM, Label.OPERATION_NAME, Label.DESTINATION_TEMPLATE, Label.RPC_KIND),
    )  # fmt: skip


def _gauge(name: str, unit: str, description: str, *labels: Label) -> Instrument:
    return Instrument(name, Kind.GAUGE, unit, description, labels)


def _counter(name: str, unit: str, description: str) -> Instrument:
    return Instrument(name, Kind.COUNTER, unit, description)


READ: dict[str, Instrument] = {
    "link_up": _gauge("gear.link.up", "", "1 while a link is open, topology declared, consuming."),
    "link_state": _gauge("gear.link.state", "", "1 for the link's state, 0 for the others.", Label.STATE),
    "ready": _gauge("gear.ready", "", "1 while /readyz says ready."),
    "reconnects": _counter("gear.link.reconnects", "{reconnect}", "Links lost and made again."),
    "failbacks": _counter("gear.link.failbacks", "{failback}", "Moves back to the first-choice broker."),
    "returns": _counter("gear.publish.returns", "{message}", "Publish attempts returned (unroutable)."),
    "republishes": _counter("gear.publish.republishes", "{message}", "Returned messages published again."),
    "nacks": _counter("gear.publish.nacks", "{message}", "Publish attempts the broker nacked."),
    "duplicates": _counter("gear.server.duplicates", "{request}", "Repeats the duplicate window caught."),
    "expired": _counter("gear.server.expired", "{request}", "Requests that arrived after their deadline."),
    "cancelled": _counter("gear.server.cancelled", "{request}", "Handlers cancelled at their deadline."),
    "held_at_stop": _counter("gear.server.held", "{request}", "Requests left for requeue while stopping."),
    "late_replies": _counter("gear.client.late_replies", "{reply}", "Replies after their call gave up."),
    "calls_in_flight": _gauge("gear.client.calls_in_flight", "{call}", "Calls waiting for replies."),
    "handlers_in_flight": _gauge("gear.server.handlers_in_flight", "{request}", "Requests being served."),
}
"""The instruments read from the service when exported, by the key of :attr:`gear.Service.stats` (or
of the service's state) they come from."""
