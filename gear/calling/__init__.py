"""The calling side: ``call``, ``cast`` and ``gather`` (:mod:`~gear.calling.rpc`) and their blocking
twin for code without an event loop (:mod:`~gear.calling.sync`).

It may import ``gear.base``, ``gear.errors``, ``gear.session`` and ``gear.tracing``; never the serving
side (``gear.serving``): the router there hands replies to the calling side through a Protocol.
"""

__all__: list[str] = []
