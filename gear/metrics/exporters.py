"""Which metrics a service exports, chosen when it starts, and the operator's port.

* ``metrics_port`` set (``GEAR_METRICS_PORT``, ``gear serve --metrics-port``): the instruments are
  aggregated in-process (:class:`~gear.metrics.recorder.Recorder`) and served with ``/livez`` and
  ``/readyz`` on that port (``/metrics`` needs ``pip install 'gear-rpc[metrics]'``);
* the ``otel`` extra installed, ``GEAR_OTEL`` not off, and a meter provider configured by the
  application before ``start()``: the same instruments go to OpenTelemetry;
* both: each measurement goes to both; neither: no meter, and the SDK's hot paths skip all of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from gear.eventloop import call_in_loop
from gear.metrics.health import Probe
from gear.metrics.http import SCRAPE_TIMEOUT, OperatorServer
from gear.metrics.recorder import Recorder
from gear.tracing.emitter import Emitter
from gear.tracing.metering import Meter
from gear.tracing.spans import otel_wanted

__all__ = ("Exporters", "Tee", "using_meter_provider")

log = logging.getLogger("gear.metrics")

_provider: Any | None = None
"""The OpenTelemetry meter provider services started now use (None: the global one)."""


@contextlib.contextmanager
def using_meter_provider(provider: Any) -> Iterator[Any]:
    """Services started inside the block record to ``provider`` (an OpenTelemetry ``MeterProvider``)
    instead of the global one (tests, or an application with a provider of its own)."""
    global _provider
    previous, _provider = _provider, provider
    try:
        yield provider
    finally:
        _provider = previous


class Tee:
    """A meter that hands every measurement to several."""

    def __init__(self, meters: Sequence[Meter]) -> None:
        self._meters = tuple(meters)

    def client_call(self, address: str, method: str, seconds: float, error: BaseException | None) -> None:
        """To each meter."""
        for meter in self._meters:
            meter.client_call(address, method, seconds, error)

    def served(self, method: str, kind: str, seconds: float, error: BaseException | str | None) -> None:
        """To each meter."""
        for meter in self._meters:
            meter.served(method, kind, seconds, error)

    def published(self, kind: str, routing_key: str, seconds: float, outcome: str) -> None:
        """To each meter."""
        for meter in self._meters:
            meter.published(kind, routing_key, seconds, outcome)

    def consumed(self, queue: str, kind: str) -> None:
        """To each meter."""
        for meter in self._meters:
            meter.consumed(queue, kind)


class Exporters:
    """The meters and the operator's server of one running service; :meth:`close` at stop."""

    def __init__(self, emitter: Emitter, server: OperatorServer | None, otel: Any | None) -> None:
        self._emitter = emitter
        self.server = server
        self._otel = otel

    @classmethod
    def start(
        cls,
        probe: Probe,
        emitter: Emitter,
        *,
        port: int | None,
        bind: str,
        exchange: str,
    ) -> Exporters:
        """Choose the meters, set them on ``emitter`` and serve ``port`` if given.

        Raises:
            OSError: ``port`` cannot be bound.
        """
        meters: list[Meter] = []
        recorder = None
        if port is not None:
            recorder = Recorder(probe.type, exchange)
            meters.append(recorder)
        otel = None
        if otel_wanted():
            from gear.metrics.otel import OtelMeter, sdk_configured

            if _provider is not None or sdk_configured():
                otel = OtelMeter(probe, exchange, _provider)
                meters.append(otel)
        server = None
        if port is not None:
            loop = asyncio.get_running_loop()
            server = OperatorServer(probe, loop, _registry(probe, recorder, loop), port, bind)
            log.info("%s: /metrics, /livez and /readyz on %s:%d", probe.type, bind, server.port)
        emitter.meter = None if not meters else meters[0] if len(meters) == 1 else Tee(meters)
        return cls(emitter, server, otel)

    async def close(self) -> None:
        """Stop measuring and serving; the requests the operator's port is answering finish first,
        reading the loop this runs on (so the port is closed from a worker thread)."""
        self._emitter.meter = None
        if self._otel is not None:
            self._otel.close()
        if self.server is not None:
            await asyncio.to_thread(self.server.close)


def _registry(probe: Probe, recorder: Recorder | None, loop: asyncio.AbstractEventLoop) -> Any | None:
    """A prometheus-client registry over ``probe`` and ``recorder``; None without prometheus-client."""
    if importlib.util.find_spec("prometheus_client") is None:
        log.warning(
            "metrics_port is set but prometheus-client is not installed: /metrics answers 503 "
            "(pip install 'gear-rpc[metrics]'); /livez and /readyz work"
        )
        return None
    from prometheus_client import CollectorRegistry

    from gear.metrics.prometheus import Reading, ServiceCollector

    def take() -> Reading:
        measured = recorder.snapshot() if recorder is not None else None
        return Reading(measured, dict(probe.stats), probe.state, probe.readiness().ready)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServiceCollector(lambda: call_in_loop(loop, take, SCRAPE_TIMEOUT)))
    return registry
