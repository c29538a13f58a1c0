"""Operator tools beside the RPC path: RabbitMQ's management HTTP API, read-only
(:mod:`~gear.ops.management`), and retired service types found and removed (:mod:`~gear.ops.prune`),
used by ``gear doctor`` and the CLI.

It may import ``gear.base``, ``gear.errors`` and ``gear.link``; nothing of the calling or serving side.
"""

__all__: list[str] = []
