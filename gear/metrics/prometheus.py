"""Prometheus families of one instance (``pip install 'gear-rpc[metrics]'``: prometheus-client).

Imported only when a metrics port is served. The measured instruments come from a
:class:`~gear.metrics.recorder.Snapshot`, the read ones from the service's counters and state; the
library writes the exposition (text or OpenMetrics, as the scraper asks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from gear.metrics.health import LINK_STATES
from gear.metrics.names import BUCKETS, READ, Instrument, Kind
from gear.metrics.recorder import Series, Snapshot

__all__ = ("Reading", "ServiceCollector", "families")

_BOUNDS = [*(f"{b:g}" for b in BUCKETS), "+Inf"]


@dataclass(frozen=True, slots=True)
class Reading:
    """What one scrape reads, taken on the event loop at one moment."""

    measured: Snapshot | None
    stats: Mapping[str, int]
    state: str
    ready: bool


def _labels(instrument: Instrument) -> list[str]:
    return [label.prometheus for label in instrument.labels]


def _histogram(instrument: Instrument, series: Mapping[tuple[str, ...], Series]) -> HistogramMetricFamily:
    width = len(instrument.labels)
    family = HistogramMetricFamily(
        instrument.prometheus, instrument.description, labels=_labels(instrument), unit="seconds"
    )
    for key, values in sorted(series.items()):
        running = 0.0
        buckets = []
        for bound, count in zip(_BOUNDS, values[:-1], strict=True):
            running += count
            buckets.append((bound, running))
        family.add_metric(list(key) if key else [""] * width, buckets, values[-1])
    return family


def _counter(instrument: Instrument, values: Mapping[tuple[str, ...], float]) -> CounterMetricFamily:
    width = len(instrument.labels)
    family = CounterMetricFamily(instrument.prometheus, instrument.description, labels=_labels(instrument))
    for key, value in sorted(values.items()):
        family.add_metric(list(key) if key else [""] * width, value)
    return family


def families(reading: Reading) -> Iterator[Metric]:
    """Every family of one reading."""
    if reading.measured is not None:
        for instrument, series in reading.measured.histograms.items():
            yield _histogram(instrument, series)
        for instrument, values in reading.measured.counters.items():
            yield _counter(instrument, values)
    for key, instrument in READ.items():
        if key == "link_up":
            up = reading.state in ("ready", "blocked")
            yield GaugeMetricFamily(instrument.prometheus, instrument.description, value=float(up))
        elif key == "link_state":
            family = GaugeMetricFamily(
                instrument.prometheus, instrument.description, labels=_labels(instrument)
            )
            for state in LINK_STATES:
                family.add_metric([state], float(state == reading.state))
            yield family
        elif key == "ready":
            yield GaugeMetricFamily(instrument.prometheus, instrument.description, value=float(reading.ready))
        elif key in reading.stats:
            value = float(reading.stats[key])
            if instrument.kind is Kind.COUNTER:
                yield CounterMetricFamily(instrument.prometheus, instrument.description, value=value)
            else:
                yield GaugeMetricFamily(instrument.prometheus, instrument.description, value=value)


class ServiceCollector(Collector):
    """A prometheus-client collector that takes one :class:`Reading` per scrape from ``read``."""

    def __init__(self, read: Callable[[], Reading]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        """The families of a fresh reading."""
        yield from families(self._read())
