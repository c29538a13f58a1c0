"""Gear's metrics and health endpoints, for Prometheus, OpenTelemetry and orchestrators.

``gear.Service(..., metrics_port=9464)`` (``GEAR_METRICS_PORT``, ``gear serve --metrics-port``) serves
``/metrics`` (``pip install 'gear-rpc[metrics]'``: prometheus-client), ``/livez`` and ``/readyz`` on
that port; with the ``otel`` extra and a meter provider configured, the same instruments go to
OpenTelemetry. The instruments and their attributes are listed in :mod:`gear.metrics.names`. Without
either, nothing here is imported by the SDK's hot paths and no third-party package is loaded.
"""

from __future__ import annotations

from gear.metrics.health import LINK_STATES, Probe, Readiness
from gear.metrics.names import BUCKETS, READ, Instrument, Measured
from gear.metrics.recorder import Recorder

__all__ = ("BUCKETS", "LINK_STATES", "READ", "Instrument", "Measured", "Probe", "Readiness", "Recorder")
