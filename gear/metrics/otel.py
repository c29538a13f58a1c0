"""Gear's metrics through the OpenTelemetry API (``pip install 'gear-rpc[otel]'``).

Imported only when the extra is installed and the application configured a meter provider (an SDK's)
before the service started: with the API's own no-op or proxy provider nothing is recorded, so
nothing is measured either. The measured instruments are recorded as they happen (attribute
dictionaries made once per raw key); the read ones are observable instruments whose callbacks read the
service when the SDK collects (on its reader's thread: they read counters and states only). The SDK's
own cardinality limit applies on top of Gear's bounded attributes.
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Histogram, Observation

from gear.metrics.health import LINK_STATES, Probe
from gear.metrics.labels import (
    RawCache,
    call_labels,
    consumed_labels,
    process_labels,
    publish_labels,
    served_labels,
)
from gear.metrics.names import BUCKETS, READ, Instrument, Kind, Label, Measured
from gear.tracing.metering import error_type
from gear.tracing.otel import SCHEMA_URL

__all__ = ("OtelMeter", "sdk_configured")

_CAST = "gear.cast"
_SERVICE = "service.name"
"""The read instruments' attribute: the TYPE of the service they describe."""
_Attributes = dict[str, str]


def sdk_configured(provider: metrics.MeterProvider | None = None) -> bool:
    """True when ``provider`` (default: the global one) is not one of the API's own (no-op or proxy)."""
    found = metrics.get_meter_provider() if provider is None else provider
    return not type(found).__module__.startswith("opentelemetry.metrics")


def _attributes(instrument: Instrument, values: tuple[str, ...]) -> _Attributes:
    return {label.value: value for label, value in zip(instrument.labels, values, strict=True) if value}


class _Instruments:
    """One provider's instruments, made once per process; the observable ones read every service
    registered (a process usually runs one; several of one TYPE are summed)."""

    def __init__(self, provider: metrics.MeterProvider | None) -> None:
        from gear.version import version

        meter = metrics.get_meter("gear", version(), meter_provider=provider, schema_url=SCHEMA_URL)
        self.client = self._histogram(meter, Measured.CLIENT_CALL)
        self.server = self._histogram(meter, Measured.SERVER_CALL)
        self.process = self._histogram(meter, Measured.PROCESS)
        self.publish = self._histogram(meter, Measured.PUBLISH)
        self.sent = meter.create_counter(Measured.SENT.name, Measured.SENT.unit, Measured.SENT.description)
        consumed = Measured.CONSUMED
        self.consumed = meter.create_counter(consumed.name, consumed.unit, consumed.description)
        self.probes: list[Probe] = []
        for key, instrument in READ.items():
            self._observe(meter, key, instrument)

    @staticmethod
    def _histogram(meter: metrics.Meter, instrument: Instrument) -> Histogram:
        return meter.create_histogram(
            instrument.name,
            instrument.unit,
            instrument.description,
            explicit_bucket_boundaries_advisory=BUCKETS,
        )

    def _observe(self, meter: metrics.Meter, key: str, instrument: Instrument) -> None:
        def read(options: CallbackOptions) -> Iterable[Observation]:
            totals: dict[tuple[str, str], int] = {}
            for probe in list(self.probes):
                for state, value in _read(probe, key):
                    totals[probe.type, state] = totals.get((probe.type, state), 0) + value
            return [
                Observation(value, {_SERVICE: own, **({Label.STATE.value: state} if state else {})})
                for (own, state), value in totals.items()
            ]

        if instrument.kind is Kind.COUNTER:
            meter.create_observable_counter(instrument.name, [read], instrument.unit, instrument.description)
        else:
            meter.create_observable_gauge(instrument.name, [read], instrument.unit, instrument.description)


def _read(probe: Probe, key: str) -> list[tuple[str, int]]:
    """The values of the read instrument ``key`` for one service, with their link state (or "")."""
    if key == "link_up":
        return [("", int(probe.state in ("ready", "blocked")))]
    if key == "link_state":
        now = probe.state
        return [(state, int(state == now)) for state in LINK_STATES]
    if key == "ready":
        return [("", int(probe.readiness().ready))]
    value = probe.stats.get(key)
    return [] if value is None else [("", value)]


_made: dict[int, _Instruments] = {}


class OtelMeter:
    """A :class:`~gear.tracing.metering.Meter` that records through an OpenTelemetry meter.

    Args:
        probe: the service, for the observable instruments (read until :meth:`close`).
        exchange: the exchange it publishes to.
        provider: the meter provider; default: the global one.
    """

    def __init__(
        self, probe: Probe, exchange: str = "gear", provider: metrics.MeterProvider | None = None
    ) -> None:
        key = id(provider if provider is not None else metrics.get_meter_provider())
        found = _made.get(key)
        if found is None:
            found = _made[key] = _Instruments(provider)
        self._instruments = found
        self._probe = probe
        found.probes.append(probe)
        own = probe.type
        self._calls = RawCache(lambda *raw: _attributes(Measured.CLIENT_CALL, call_labels(*raw)))
        self._served = RawCache(lambda *raw: _attributes(Measured.SERVER_CALL, served_labels(own, *raw)))
        self._casts = RawCache(lambda *raw: _attributes(Measured.PROCESS, process_labels(own, *raw)))
        self._sends = RawCache(lambda *raw: _send_attributes(publish_labels(exchange, *raw)))
        self._delivered = RawCache(lambda *raw: _attributes(Measured.CONSUMED, consumed_labels(own, *raw)))

    def close(self) -> None:
        """Stop reading the service."""
        if self._probe in self._instruments.probes:
            self._instruments.probes.remove(self._probe)

    # -- the Meter protocol ---------------------------------------------------------------------------

    def client_call(self, address: str, method: str, seconds: float, error: BaseException | None) -> None:
        """Record a finished call or gather."""
        attributes = self._calls.get((address, method, "" if error is None else error_type(error)))
        self._instruments.client.record(seconds, attributes)

    def served(self, method: str, kind: str, seconds: float, error: BaseException | str | None) -> None:
        """Record a served request (a cast as ``messaging.process.duration``)."""
        raw = (method, "" if error is None else error_type(error))
        if kind == _CAST:
            self._instruments.process.record(seconds, self._casts.get(raw))
        else:
            self._instruments.server.record(seconds, self._served.get(raw))

    def published(self, kind: str, routing_key: str, seconds: float, outcome: str) -> None:
        """Record one publish attempt."""
        sent, publish = self._sends.get((kind, routing_key, outcome))
        self._instruments.sent.add(1, sent)
        self._instruments.publish.record(seconds, publish)

    def consumed(self, queue: str, kind: str) -> None:
        """Count one delivery."""
        self._instruments.consumed.add(1, self._delivered.get((queue, kind)))


def _send_attributes(values: tuple[str, ...]) -> tuple[_Attributes, _Attributes]:
    """The attributes of a sent message, and of its publish (the same and the operation type)."""
    sent = _attributes(Measured.SENT, values)
    return sent, {**sent, Label.OPERATION_TYPE.value: "send"}
