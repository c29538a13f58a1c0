"""The per-method work of a channel: declaring and deleting exchanges, queues and bindings
(:mod:`~gear.broker.operations.declare`), consuming, getting and settling
(:mod:`~gear.broker.operations.consume`), and the delivery timeout.

Each handler is handed the channel as a :class:`~gear.broker.operations.view.ChannelView`, so nothing
here imports the channel. Sans-I/O. It may import ``gear.broker.model``, ``gear.broker.node``,
``gear.broker.errors`` and ``gear.wire``; never ``protocol`` or ``shell``.
"""

__all__: list[str] = []
