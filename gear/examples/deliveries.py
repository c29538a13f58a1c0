"""A tiny trace sink that counts what each instance received, so the demo can show who got a message.

Gear reports what happens to every message through a ``Tracer`` (``emit(name, attributes=...)``); the
JSON-lines tracer feeds ``gear traces analyze``. Any object with ``enabled`` and ``emit`` will do, which
makes proving "``CTRL.*`` reached every CTRL and nothing else" a few lines of code.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Unpack

from gear.tracing.api import Attr, EventAttrs, EventName, SpanIds

__all__ = ("DeliveryLog",)


class DeliveryLog:
    """Counts requests delivered to one instance, per method (duplicates caught by Gear excluded)."""

    enabled = True

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()  # plain handlers run in threads; emit may come from any of them

    def emit(self, name: EventName, *, attributes: EventAttrs | None = None, **ids: Unpack[SpanIds]) -> None:
        """Count a ``gear.deliver`` event; ignore the rest."""
        if name != EventName.DELIVER or not attributes or attributes.get(Attr.DUPLICATE):
            return
        with self._lock:
            self._counts[str(attributes.get(Attr.RPC_METHOD))] += 1

    def close(self) -> None:
        """Nothing to flush."""

    def count(self, method: str) -> int:
        """How many ``method`` requests this instance received."""
        with self._lock:
            return self._counts[method]
