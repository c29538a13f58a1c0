"""The serving side: the one inbound path (:mod:`~gear.serving.inbound`) that routes every delivery
once, the dispatcher that runs handlers (:mod:`~gear.serving.dispatch`, :mod:`~gear.serving.handler`),
duplicate suppression and dead letters.

It may import ``gear.base``, ``gear.errors``, ``gear.session``, ``gear.link`` and ``gear.tracing``;
never the calling side (``gear.calling``): replies reach it through a Protocol the RPC satisfies.
"""

__all__: list[str] = []
