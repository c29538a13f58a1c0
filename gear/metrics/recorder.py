"""The measured instruments, aggregated in this process for a Prometheus scrape.

Theory of operation: everything is recorded on the event loop (the emitter, the publisher and the
router report there), so no lock is taken. A histogram series is one list: a count per bucket (the
last for values above every bound) and the sum at the end; recording is a dictionary lookup by the raw
key the hot path already has, a ``bisect`` and two additions. Labels are worked out once per raw key
(:mod:`gear.metrics.labels`). A scrape copies the series on the loop (:meth:`Recorder.snapshot`) and
the exporter turns the copy into cumulative buckets.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from gear.metrics.labels import call_labels, consumed_labels, process_labels, publish_labels, served_labels
from gear.metrics.names import BUCKETS, MAX_SERIES, Instrument, Measured
from gear.tracing.metering import error_type

__all__ = ("Recorder", "Snapshot")

_CAST = "gear.cast"
_RAW_KEYS = 4096
"""Raw keys (addresses, routing keys...) kept per instrument before the cache starts over."""

Series = list[float]
"""Counts per bucket (``len(BUCKETS) + 1``), then the sum of the values."""


class _Family:
    """The series of one instrument by label values, with the overflow guard."""

    __slots__ = ("_width", "instrument", "overflowed", "series")

    def __init__(self, instrument: Instrument, width: int) -> None:
        self.instrument = instrument
        self.series: dict[tuple[str, ...], Series] = {}
        self.overflowed = False
        self._width = width

    def find(self, labels: tuple[str, ...]) -> Series:
        """The series of ``labels`` (new, or the overflow series past :data:`MAX_SERIES`)."""
        found = self.series.get(labels)
        if found is None:
            if len(self.series) >= MAX_SERIES:
                self.overflowed = True
                labels = ()
                found = self.series.get(labels)
            if found is None:
                found = self.series[labels] = [0.0] * self._width
        return found


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A copy of every family's series, by instrument."""

    histograms: dict[Instrument, dict[tuple[str, ...], Series]]
    counters: dict[Instrument, dict[tuple[str, ...], float]]


class Recorder:
    """Gear's :class:`~gear.tracing.metering.Meter` for Prometheus: histograms and counters in memory.

    Args:
        own_type: this instance's TYPE (the ``rpc.method`` prefix of what it serves).
        exchange: the exchange it publishes to.
    """

    def __init__(self, own_type: str, exchange: str = "gear") -> None:
        hist = len(BUCKETS) + 2
        self._client = _Family(Measured.CLIENT_CALL, hist)
        self._server = _Family(Measured.SERVER_CALL, hist)
        self._process = _Family(Measured.PROCESS, hist)
        self._publish = _Family(Measured.PUBLISH, hist)
        self._consumed = _Family(Measured.CONSUMED, 1)
        self._own = own_type
        self._exchange = exchange
        # raw key -> series: the hot path's one lookup (cleared past _RAW_KEYS: raw keys may hold HOSTs)
        self._calls: dict[tuple[str, str, str], Series] = {}
        self._served: dict[tuple[str, str], Series] = {}
        self._casts: dict[tuple[str, str], Series] = {}
        self._sent: dict[tuple[str, str, str], Series] = {}
        self._delivered: dict[tuple[str, str], Series] = {}

    @staticmethod
    def _keep(cache: dict[Any, Series], key: Any, series: Series) -> Series:
        if len(cache) >= _RAW_KEYS:
            cache.clear()
        cache[key] = series
        return series

    # -- the Meter protocol (on the event loop) ---------------------------------------------------------

    def client_call(self, address: str, method: str, seconds: float, error: BaseException | None) -> None:
        """Record a finished call or gather."""
        key = (address, method, "" if error is None else error_type(error))
        series = self._calls.get(key)
        if series is None:
            series = self._keep(self._calls, key, self._client.find(call_labels(*key)))
        series[bisect_left(BUCKETS, seconds)] += 1
        series[-1] += seconds

    def served(self, method: str, kind: str, seconds: float, error: BaseException | str | None) -> None:
        """Record a served request (a cast under ``messaging.process.duration``)."""
        key = (method, "" if error is None else error_type(error))
        if kind == _CAST:
            series = self._casts.get(key)
            if series is None:
                made = self._process.find(process_labels(self._own, *key))
                series = self._keep(self._casts, key, made)
        else:
            series = self._served.get(key)
            if series is None:
                series = self._keep(self._served, key, self._server.find(served_labels(self._own, *key)))
        series[bisect_left(BUCKETS, seconds)] += 1
        series[-1] += seconds

    def published(self, kind: str, routing_key: str, seconds: float, outcome: str) -> None:
        """Record one publish attempt and its verdict."""
        key = (kind, routing_key, outcome)
        series = self._sent.get(key)
        if series is None:
            series = self._keep(self._sent, key, self._publish.find(publish_labels(self._exchange, *key)))
        series[bisect_left(BUCKETS, seconds)] += 1
        series[-1] += seconds

    def consumed(self, queue: str, kind: str) -> None:
        """Count one delivery."""
        key = (queue, kind)
        series = self._delivered.get(key)
        if series is None:
            made = self._consumed.find(consumed_labels(self._own, *key))
            series = self._keep(self._delivered, key, made)
        series[0] += 1

    # -- reading (on the event loop) ----------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """A copy of every series, taken at once (call it on the event loop)."""
        histograms = {
            f.instrument: {k: list(v) for k, v in f.series.items()}
            for f in (self._client, self._server, self._process)
        }
        # a publish's labels are its sent-message labels and the operation type
        histograms[Measured.PUBLISH] = {
            (*k, "send") if k else k: list(v) for k, v in self._publish.series.items()
        }
        sent = {k: sum(v[:-1]) for k, v in self._publish.series.items()}
        consumed = {k: v[0] for k, v in self._consumed.series.items()}
        return Snapshot(histograms, {Measured.SENT: sent, Measured.CONSUMED: consumed})
