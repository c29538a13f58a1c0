"""Resource alarms: memory (a high watermark on message bytes held) and disk (a free-space limit).

Like RabbitMQ's ``vm_memory_high_watermark`` and ``disk_free_limit``, an active alarm blocks publishing
connections (``connection.blocked``, socket no longer read) while consumers keep draining; the alarm
clears when the measure comes back. Tests can force the memory alarm regardless of the measure, and
feed the disk alarm any free-space reading.
"""

from __future__ import annotations

__all__ = ("DiskAlarm", "MemoryAlarm")


class MemoryAlarm:
    """Tracks message memory against a limit; ``active`` says whether publishers must be blocked."""

    __slots__ = ("forced", "limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.forced: bool | None = None

    @property
    def active(self) -> bool:
        """True while publishers must be blocked."""
        if self.forced is not None:
            return self.forced
        return self.used >= self.limit

    def change(self, delta: int) -> bool:
        """Account ``delta`` bytes; True if the alarm state flipped."""
        before = self.active
        self.used += delta
        return self.active != before

    def force(self, active: bool | None) -> bool:
        """Force the alarm on or off (None returns to the measure); True if the state flipped."""
        before = self.active
        self.forced = active
        return self.active != before

    @property
    def reasons(self) -> list[str]:
        """Names of the active alarms, for the status view."""
        return ["memory"] if self.active else []


class DiskAlarm:
    """Free disk space against ``disk_free_limit``; off (never active) when the limit is None.

    The core performs no I/O: the shell measures the free space and reports it with :meth:`update`.
    """

    __slots__ = ("free", "limit")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.free: int | None = None

    @property
    def active(self) -> bool:
        """True while free space is below the limit."""
        return self.limit is not None and self.free is not None and self.free < self.limit

    def update(self, free: int) -> bool:
        """Record a free-space reading in bytes; True if the alarm state flipped."""
        before = self.active
        self.free = free
        return self.active != before
