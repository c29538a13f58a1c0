"""The memory alarm: a high watermark on the bytes of messages the broker holds.

Like RabbitMQ's ``vm_memory_high_watermark``, crossing the mark raises an alarm that blocks publishing
connections (``connection.blocked``, socket no longer read) while consumers keep draining; falling back
below it clears the alarm. Tests can force the alarm on or off regardless of the measure.
"""

from __future__ import annotations

__all__ = ("MemoryAlarm",)


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
