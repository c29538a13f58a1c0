"""The broker's asyncio shell and its HTTP ports: the server that owns the sockets and the event
loop and drives the sans-I/O core (:mod:`~gear.broker.shell.server`, the only module of the broker
that imports ``asyncio`` or ``socket``), TLS contexts, the read-only management HTTP API and the
Prometheus metrics port.

It may import every other part of ``gear.broker``, ``gear.wire``, ``gear.base`` and ``gear.eventloop``;
nothing of the SDK.
"""

__all__: list[str] = []
