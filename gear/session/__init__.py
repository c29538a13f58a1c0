"""Keeping a service's link to the broker alive and publishing over it.

The connector that connects, reconnects and re-applies topology (:mod:`~gear.session.reconnect`), the
publisher that turns each publish into an outcome (:mod:`~gear.session.publisher`), retry attempts,
hedging, pacing and cadence, lifecycle hooks, the probe, and TLS settings. It may import
``gear.base``, ``gear.errors``, ``gear.settings``, ``gear.tracing`` and the link below it
(``gear.link``, ``gear.amqp``); never the calling or serving side above it.
"""

__all__: list[str] = []
