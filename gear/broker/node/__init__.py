"""One broker node's state and policy above the model: the core that owns the vhosts and the
connections (:mod:`~gear.broker.node.core`), the configuration, users and permissions (``config``,
``access``, ``definitions``), resource alarms, persistence through the message store (``persist``) and
status snapshots.

Sans-I/O. It may import ``gear.broker.model``, ``gear.broker.errors``, ``gear.broker.store``,
``gear.wire`` and ``gear.base``; never ``operations``, ``protocol`` or ``shell`` (the core sees
connections through its ``CoreConnection`` Protocol).
"""

__all__: list[str] = []
