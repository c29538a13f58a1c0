"""A :class:`Disk` that crashes at a chosen step and, like a power cut, loses what was not fsynced."""

from __future__ import annotations

import os
from pathlib import Path

from gear.broker.store.disk import Disk

__all__ = ("CrashError", "FaultyDisk")


class CrashError(Exception):
    """The simulated crash."""


class FaultyDisk(Disk):
    """Counts the steps that change the disk; at step ``crash_at`` it raises :class:`CrashError` after
    cutting every file appended to since its last fsync back to its fsynced length."""

    def __init__(self, root: str | os.PathLike[str], crash_at: int | None = None) -> None:
        super().__init__(root)
        self.crash_at = crash_at
        self.steps: list[str] = []
        self._synced: dict[str, int] = {}

    def checkpoint(self, step: str) -> None:
        self.steps.append(step)
        if self.crash_at is not None and len(self.steps) >= self.crash_at:
            self.power_cut()
            raise CrashError(step)

    def append(self, name: str, data: bytes | bytearray | memoryview) -> None:
        self._synced.setdefault(name, self.size(name))
        super().append(name, data)

    def sync(self, name: str) -> None:
        super().sync(name)
        self._synced[name] = self.size(name)

    def truncate(self, name: str, size: int) -> None:
        super().truncate(name, size)
        self._synced[name] = size

    def power_cut(self) -> None:
        """Drop unsynced appends and close everything."""
        for name, size in self._synced.items():
            path = Path(self.root, name)
            if path.exists() and path.stat().st_size > size:
                os.truncate(path, size)
        self.close()
