"""The reference broker's message store (a data directory): see :mod:`gear.broker.store.store`.

``record`` (encoding) and ``index`` (indexes, file summary, compaction plans) are pure; ``disk`` does
all the file I/O; ``store`` ties them together.
"""

from __future__ import annotations

from gear.broker.store.disk import StoreLockedError
from gear.broker.store.record import StoredMessage
from gear.broker.store.store import Recovery, Store, StoreStats

__all__ = ("Recovery", "Store", "StoreLockedError", "StoreStats", "StoredMessage")
