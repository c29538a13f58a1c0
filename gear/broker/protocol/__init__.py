"""AMQP 0-9-1 as the broker speaks it, without I/O: a connection's handshake and login
(:mod:`~gear.broker.protocol.handshake`), the connection that parses every frame and owns its channels
(:mod:`~gear.broker.protocol.connection`: bytes in, bytes out, ``tick(now)`` for time), and the channel
with its method dispatch and the publish path (:mod:`~gear.broker.protocol.channel`).

It may import ``gear.broker.operations``, ``gear.broker.node``, ``gear.broker.model``,
``gear.broker.errors``, ``gear.wire`` and ``gear.base``; never ``shell``.
"""

__all__: list[str] = []
