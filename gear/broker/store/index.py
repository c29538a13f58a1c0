"""The store's in-memory indexes and garbage-collection decisions: pure data structures, no I/O.

* :class:`MessageIndex`: message id -> :class:`Location` (segment file, offset, record size,
  reference count), so a message routed to several queues is stored once; and the *file summary*,
  the valid (still referenced) bytes of each segment file.
* :class:`QueueIndex`: for each durable queue, the messages it holds and whether each was delivered
  (acked messages are gone). It is what the queue journal records.
* :func:`plan_compaction`: which segment files to rewrite, combined into one, once their garbage
  passes a threshold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ("FileInfo", "Location", "MessageIndex", "QueueIndex", "plan_compaction")


class Location:
    """Where one message's record is, and how many queues (or in-memory holders) still need it."""

    __slots__ = ("file", "offset", "refs", "size")

    def __init__(self, file: int, offset: int, size: int) -> None:
        self.file = file
        self.offset = offset
        self.size = size
        self.refs = 0

    def __repr__(self) -> str:
        return f"Location(file={self.file}, offset={self.offset}, size={self.size}, refs={self.refs})"


@dataclass(slots=True)
class FileInfo:
    """The file summary of one segment: bytes written and bytes still referenced."""

    total: int = 0
    valid: int = 0
    messages: int = 0
    """Records with at least one reference."""

    @property
    def garbage(self) -> int:
        """Bytes no longer needed."""
        return self.total - self.valid


@dataclass(slots=True)
class MessageIndex:
    """Message id -> location with reference counts, plus the per-file summary."""

    locations: dict[int, Location] = field(default_factory=dict)
    files: dict[int, FileInfo] = field(default_factory=dict)

    def add(self, message_id: int, file: int, offset: int, size: int) -> Location:
        """Record a message written at ``file``/``offset`` (unreferenced until :meth:`ref`).

        A second copy of an id already indexed (left behind by an interrupted compaction) only adds
        to its file's size, as garbage.
        """
        info = self.files.setdefault(file, FileInfo())
        info.total += size
        found = self.locations.get(message_id)
        if found is not None:
            return found
        location = Location(file, offset, size)
        self.locations[message_id] = location
        return location

    def ref(self, message_id: int) -> bool:
        """One more holder; False if the message is not indexed."""
        location = self.locations.get(message_id)
        if location is None:
            return False
        if location.refs == 0:
            info = self.files[location.file]
            info.valid += location.size
            info.messages += 1
        location.refs += 1
        return True

    def unref(self, message_id: int) -> bool:
        """One holder fewer; True if the message became garbage.

        Garbage stays indexed (and readable, and may be referenced again) until its file is compacted.
        """
        location = self.locations.get(message_id)
        if location is None or location.refs == 0:
            return False
        location.refs -= 1
        if location.refs > 0:
            return False
        info = self.files[location.file]
        info.valid -= location.size
        info.messages -= 1
        return True

    def moved(self, message_id: int, file: int, offset: int) -> None:
        """A compaction copied the message to ``file``/``offset``."""
        location = self.locations[message_id]
        old = self.files[location.file]
        old.valid -= location.size
        old.messages -= 1
        new = self.files.setdefault(file, FileInfo())
        new.total += location.size
        new.valid += location.size
        new.messages += 1
        location.file = file
        location.offset = offset

    def sort_records(
        self, file: int, records: Iterable[tuple[int, int, int]]
    ) -> tuple[list[tuple[int, Location]], list[int]]:
        """Of the ``(message_id, offset, size)`` records read from ``file``: the ones indexed there and
        referenced (to copy), and the ids of the ones indexed there as garbage (to forget)."""
        live: list[tuple[int, Location]] = []
        garbage: list[int] = []
        locations = self.locations
        for message_id, offset, _ in records:
            location = locations.get(message_id)
            if location is None or location.file != file or location.offset != offset:
                continue  # not indexed, or indexed in another copy
            if location.refs:
                live.append((message_id, location))
            else:
                garbage.append(message_id)
        return live, garbage

    def remove_files(self, files: Iterable[int], garbage: Iterable[int]) -> None:
        """Forget ``files`` (their live messages were moved) and the ``garbage`` ids indexed in them."""
        for message_id in garbage:
            self.locations.pop(message_id, None)
        for number in files:
            del self.files[number]

    def live_messages(self) -> int:
        """Messages with at least one reference."""
        return sum(info.messages for info in self.files.values())

    def total_bytes(self) -> int:
        """Bytes in every segment."""
        return sum(info.total for info in self.files.values())

    def garbage_bytes(self) -> int:
        """Bytes no longer referenced."""
        return sum(info.garbage for info in self.files.values())


def plan_compaction(
    files: dict[int, FileInfo], current: int, *, threshold: float, segment_size: int
) -> list[int]:
    """Segment files to combine into one new file, or ``[]`` when nothing is worth doing.

    A closed file (not ``current``) qualifies when its garbage is more than ``threshold`` of its
    size; qualifying files are taken emptiest first while their live bytes fit one segment. Files with
    nothing live are always taken (they are deleted without copying).
    """
    candidates = sorted(
        (number for number, info in files.items() if number != current and info.total > 0),
        key=lambda number: files[number].valid,
    )
    chosen: list[int] = []
    live = 0
    for number in candidates:
        info = files[number]
        if info.valid and info.garbage <= threshold * info.total:
            continue
        if info.valid and live + info.valid > segment_size and chosen:
            break
        chosen.append(number)
        live += info.valid
    return chosen


@dataclass(slots=True)
class QueueIndex:
    """Per durable queue: message id -> delivered flag, in arrival order; acked messages removed."""

    queues: dict[int, dict[int, bool]] = field(default_factory=dict)
    records: int = 0
    """Journal records written since the journal was last rewritten."""

    def enqueue(self, queue: int, message_id: int) -> None:
        """A message entered ``queue``."""
        self.queues.setdefault(queue, {})[message_id] = False
        self.records += 1

    def deliver(self, queue: int, message_id: int) -> None:
        """A message was delivered (its redelivered flag is set after a restart)."""
        held = self.queues.get(queue)
        if held is not None and message_id in held:
            held[message_id] = True
            self.records += 1

    def ack(self, queue: int, message_id: int) -> bool:
        """A message left ``queue``; False if it was not there."""
        held = self.queues.get(queue)
        if held is None or held.pop(message_id, None) is None:
            return False
        self.records += 1
        return True

    def live(self) -> int:
        """Messages held by all queues together."""
        return sum(len(held) for held in self.queues.values())

    def wants_rewrite(self, minimum: int) -> bool:
        """True when the journal holds many more records than a snapshot would."""
        return self.records > minimum and self.records > 2 * self.live()
