"""The message store: segment files of messages, a queue journal, reference counts and compaction.

Theory of operation. A persistent message routed to durable queues is written once to the current
segment file (:meth:`Store.write`) and referenced once per queue through a journal record
(:meth:`Store.enqueue`); deliveries and acks append journal records too. Nothing is durable until a
commit: :meth:`Store.commit` inline, or :meth:`Store.start_commit` / :meth:`Store.continue_commit` /
:meth:`Store.finish_commit` with the fsyncs run in a worker thread. Either way the segment is fsynced
before the journal block naming its messages is appended and fsynced (group commit: one of each per
batch) - only then are publisher confirms sent.

A message whose last reference goes becomes garbage in its file; the file summary counts the valid
bytes of each file. :meth:`Store.compact` combines closed files whose garbage passed the threshold
into a new file (written to a temporary name, fsynced, renamed), then deletes the old ones; if the
broker dies in between, both copies exist and recovery keeps one. The journal is rewritten as a
snapshot (same atomic replace) when it holds far more records than live messages.

Recovery (:class:`Store` then :meth:`Store.recover`) replays the journal, scans the segments for the
messages it names, skips damaged blocks and cuts off a torn tail (reporting both), and gives each
durable queue back its messages with their delivered flags. Records of queues that no longer exist
are dropped.

The file I/O is all in :mod:`gear.broker.store.disk`; :mod:`~gear.broker.store.record` and
:mod:`~gear.broker.store.index` are pure.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from gear.broker.store import record
from gear.broker.store.disk import Disk
from gear.broker.store.index import FileInfo, Location, MessageIndex, QueueIndex, plan_compaction
from gear.broker.store.record import StoredMessage

__all__ = ("JOURNAL", "TOPOLOGY", "Recovery", "Store", "StoreStats")

JOURNAL = "queues.log"
TOPOLOGY = "topology.json"
SEGMENT_SIZE = 16 * 1024 * 1024
GC_THRESHOLD = 0.5
JOURNAL_REWRITE_MIN = 100_000


def _segment(number: int) -> str:
    return f"msg/{number:08d}.seg"


@dataclass(slots=True)
class Recovery:
    """What :meth:`Store.recover` found."""

    queues: dict[int, dict[int, bool]] = field(default_factory=dict)
    """Durable queue key -> ``{message_id: delivered}`` in arrival order."""
    envelopes: dict[int, record.Envelope] = field(default_factory=dict)
    """Message id -> exchange, routing key, properties and body size, for every recovered message."""
    messages: int = 0
    """Queue entries recovered (a message in two queues counts twice)."""
    problems: list[str] = field(default_factory=list)
    """What could not be recovered, and where."""
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Sizes for the status view."""

    directory: str
    bytes: int
    garbage: int
    messages: int
    files: int

    @property
    def garbage_ratio(self) -> float:
        """Garbage bytes over segment bytes (0 when empty)."""
        return self.garbage / self.bytes if self.bytes else 0.0


class Store:
    """One data directory's message store. Opening it scans the directory (see :meth:`recover`).

    Raises:
        StoreLockedError: another broker uses the directory.
        OSError: the directory cannot be used.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        segment_size: int = SEGMENT_SIZE,
        gc_threshold: float = GC_THRESHOLD,
        journal_rewrite_min: int = JOURNAL_REWRITE_MIN,
        disk: Disk | None = None,
    ) -> None:
        started = time.perf_counter()
        self.disk = disk if disk is not None else Disk(root)
        self.segment_size = segment_size
        self.gc_threshold = gc_threshold
        self.journal_rewrite_min = journal_rewrite_min
        self.index = MessageIndex()
        self.queues = QueueIndex()
        self.problems: list[str] = []
        self._segment_buffer = bytearray()
        self._journal_buffer = bytearray()
        self._segment_unsynced = False
        self._journal_unsynced = False
        self._held_journal = bytearray()
        self._enqueued = False
        """Enqueue records were buffered since the last fsync (confirms may be waiting on them)."""
        self._next_id = 1
        self.disk.open()
        self.disk.remove_temporaries()
        self._replay_journal()
        self._numbers = sorted(int(name[4:-4]) for name in self.disk.listing("msg") if name.endswith(".seg"))
        self._current = self._numbers[-1] if self._numbers else 1
        self._current_size = self.disk.size(_segment(self._current))
        self._flushed = self._current_size
        self.index.files[self._current] = FileInfo(total=self._current_size)
        self._ready = not self._numbers and not self.queues.queues
        self._open_seconds = time.perf_counter() - started

    # -- opening -----------------------------------------------------------------------------------
    def _replay_journal(self) -> None:
        data = self.disk.read_all(JOURNAL)
        records, damaged, valid = record.scan_journal(data)
        self._report_damage(JOURNAL, damaged, len(data), valid)
        queues: dict[int, dict[int, bool]] = self.queues.queues
        enqueue, deliver = record.OP_ENQUEUE, record.OP_DELIVER
        held: dict[int, bool] = {}
        last = -1
        for op, queue, message_id in records:
            if queue != last:
                held = queues.setdefault(queue, {})
                last = queue
            if op == enqueue:
                held[message_id] = False
            elif op == deliver:
                if message_id in held:
                    held[message_id] = True
            else:
                held.pop(message_id, None)
        for queue in [q for q, h in queues.items() if not h]:
            del queues[queue]
        self.queues.records = len(records)
        if valid < len(data):
            self.disk.truncate(JOURNAL, valid)

    def _report_damage(self, name: str, damaged: list[tuple[int, int]], size: int, valid: int) -> None:
        for start, end in damaged:
            self.problems.append(f"{name}: bytes {start}..{end} damaged (skipped; what they held is lost)")
        if valid < size:
            self.problems.append(
                f"{name}: {size - valid} bytes after offset {valid} unreadable (torn write or damage), "
                "cut off"
            )

    def recover(
        self, durable_queues: set[int], *, hold: bool = False, keep_unknown: bool = False
    ) -> Recovery:
        """Scan the segments and give the durable queues that still exist their messages back.

        Records of other queues are dropped (kept on disk, unreturned, with ``keep_unknown``: when the
        caller could not read its list of queues), as are messages no queue holds. With ``hold``, each
        recovered message also gets one in-memory reference (as :meth:`hold`), for the caller's copy
        of it. Must be called once, before anything is written.
        """
        started = time.perf_counter()
        result = Recovery(problems=self.problems)
        queues = self.queues.queues
        unknown = [queue for queue in queues if queue not in durable_queues]
        dropped = [] if keep_unknown else unknown
        for queue in dropped:
            del queues[queue]
        kept = [queue for queue in unknown if queue in queues]
        wanted: Counter[int] = Counter(
            itertools.chain.from_iterable(held for queue, held in queues.items() if queue not in kept)
        )
        held_only: Counter[int] = Counter(itertools.chain.from_iterable(queues[queue] for queue in kept))
        wanted_all: dict[int, int] = wanted + held_only if held_only else wanted
        top = max(wanted_all, default=0)
        locations = self.index.locations
        extra = 1 if hold else 0
        for number in self._numbers:
            name = _segment(number)
            data = self.disk.read_all(name)
            found, envelopes, unwanted_top, damaged, valid = record.scan_segment(data, wanted_all)
            self._report_damage(name, damaged, len(data), valid)
            if valid < len(data):
                self.disk.truncate(name, valid)
            info = FileInfo(total=valid)
            for message_id, offset, size in found:
                if message_id in locations:  # a second copy (an interrupted compaction)
                    continue
                location = Location(number, offset, size)
                location.refs = wanted[message_id] + extra if message_id in wanted else 0
                location.refs += held_only[message_id] if held_only else 0
                locations[message_id] = location
                info.valid += size
                info.messages += 1
            top = max(top, unwanted_top)
            result.envelopes.update(envelopes)
            self.index.files[number] = info
        self._current_size = self._flushed = self.disk.size(_segment(self._current))
        self.index.files.setdefault(self._current, FileInfo(total=self._current_size))
        self._next_id = top + 1
        for queue, held in queues.items():
            missing = [mid for mid in held if mid not in locations]
            for mid in missing:
                del held[mid]
            if missing:
                result.problems.append(
                    f"queue {queue:016x}: {len(missing)} message(s) missing from the segment files"
                )
            if queue in kept:
                result.problems.append(
                    f"queue {queue:016x}: {len(held)} message(s) kept on disk for a queue the topology does "
                    "not name (it could not be read); dropped at the next start"
                )
                continue
            result.queues[queue] = held
            result.messages += len(held)
        self._ready = True
        if dropped or result.problems or self.queues.wants_rewrite(0):
            self.rewrite_journal()
        result.seconds = self._open_seconds + time.perf_counter() - started
        return result

    # -- writing -----------------------------------------------------------------------------------
    def write(self, message: StoredMessage) -> int:
        """Append a message (unreferenced: follow with :meth:`enqueue` or :meth:`hold`); returns its id.

        Raises:
            RuntimeError: :meth:`recover` was not called on a directory with data.
        """
        if not self._ready:
            raise RuntimeError("recover() the store before writing to it")
        message_id = self._next_id
        self._next_id += 1
        data = record.encode_message(message_id, record.encode_payload(message))
        if self._current_size and self._current_size + len(data) > self.segment_size:
            self._roll()
        buffer = self._segment_buffer
        if not buffer:
            record.open_block(buffer)
            self._current_size += record.BLOCK_HEADER
        self.index.add(message_id, self._current, self._current_size, len(data))
        buffer += data
        self._current_size += len(data)
        return message_id

    def _roll(self) -> None:
        """Close the current segment (written and fsynced) and start the next."""
        self._write_segment_buffer()
        self.disk.sync(_segment(self._current))
        self._segment_unsynced = False
        self.disk.retire(_segment(self._current))  # a background fsync may still use it
        self._current = max(self.index.files) + 1
        self.index.files.setdefault(self._current, FileInfo())
        self._current_size = 0
        self._flushed = 0

    def _journal(self, op: int, queue: int, message_id: int) -> None:
        buffer = self._journal_buffer
        if not buffer:
            record.open_block(buffer)
        buffer += record.encode_journal(op, queue, message_id)

    def enqueue(self, queue: int, message_id: int) -> None:
        """``message_id`` entered durable ``queue`` (one reference)."""
        self._journal(record.OP_ENQUEUE, queue, message_id)
        self._enqueued = True
        self.queues.enqueue(queue, message_id)
        self.index.ref(message_id)

    def deliver(self, queue: int, message_id: int) -> None:
        """``message_id`` was delivered from ``queue`` (redelivered after a restart)."""
        self._journal(record.OP_DELIVER, queue, message_id)
        self.queues.deliver(queue, message_id)

    def ack(self, queue: int, message_id: int) -> None:
        """``message_id`` left durable ``queue`` for good (acked, dropped, purged...)."""
        if self.queues.ack(queue, message_id):
            self._journal(record.OP_ACK, queue, message_id)
            self.index.unref(message_id)

    def forget_queue(self, queue: int) -> None:
        """A durable queue was deleted: release everything it held."""
        held = self.queues.queues.pop(queue, {})
        for message_id in held:
            self._journal(record.OP_ACK, queue, message_id)
            self.index.unref(message_id)

    def hold(self, message_id: int) -> None:
        """An in-memory holder (a transient message paged out) references ``message_id``."""
        self.index.ref(message_id)

    def release(self, message_id: int) -> None:
        """Drop an in-memory reference taken with :meth:`hold`."""
        self.index.unref(message_id)

    @property
    def pending(self) -> bool:
        """Bytes are buffered that :meth:`commit` would write and fsync."""
        return bool(
            self._segment_buffer or self._journal_buffer or self._segment_unsynced or self._journal_unsynced
        )

    @property
    def enqueued(self) -> bool:
        """Queue entries were recorded since the last fsync (their confirms may be waiting)."""
        return self._enqueued

    def commit(self, *, force: bool = True) -> bool:
        """Write what was buffered and fsync it: segment first, then journal. False if nothing was.

        With ``force=False`` the fsync is skipped when only deliveries and acks were recorded since the
        last one (they are written out, and made durable by the next fsync): losing them in a crash
        means a message comes back (redelivered), never that one is lost.
        """
        if not (
            self._segment_buffer or self._journal_buffer or self._segment_unsynced or self._journal_unsynced
        ):
            return False
        sync = force or self._enqueued
        if self._segment_buffer or self._segment_unsynced:
            self._write_segment_buffer()
            if sync:
                self.disk.sync(_segment(self._current))
                self._segment_unsynced = False
        if self._journal_buffer:
            data, self._journal_buffer = self._journal_buffer, bytearray()
            record.seal_block(data)
            self.disk.append(JOURNAL, data)
            self._journal_unsynced = True
        if sync and self._journal_unsynced:
            self.disk.sync(JOURNAL)
            self._journal_unsynced = False
            self._enqueued = False
        return sync

    # -- a group commit with its fsyncs off the caller's thread ----------------------------------------
    def start_commit(self) -> Callable[[], None] | None:
        """Step 1: write the segment buffer out and set the journal buffer aside; returns the segment
        fsync to run (in any thread), or None if the segment needs none. Then :meth:`continue_commit`.

        The journal is appended only after the segment fsync, so it never names a message that a
        crash could lose.
        """
        self._write_segment_buffer()
        if self._journal_buffer:
            self._held_journal, self._journal_buffer = self._journal_buffer, bytearray()
            record.seal_block(self._held_journal)
        self._enqueued = False
        if not self._segment_unsynced:
            return None
        self._segment_unsynced = False
        return self.disk.fsync_job(_segment(self._current))

    def continue_commit(self) -> Callable[[], None] | None:
        """Step 2, once the segment fsync is done: append the journal block set aside; returns its
        fsync to run (or None). Then :meth:`finish_commit`."""
        if self._held_journal:
            self.disk.append(JOURNAL, self._held_journal)
            self._held_journal = bytearray()
            self._journal_unsynced = True
        if not self._journal_unsynced:
            return None
        self._journal_unsynced = False
        return self.disk.fsync_job(JOURNAL)

    def finish_commit(self) -> None:
        """Step 3, once every fsync is done: release descriptors retired meanwhile."""
        self.disk.close_retired()

    def _write_segment_buffer(self) -> None:
        if self._segment_buffer:
            data, self._segment_buffer = self._segment_buffer, bytearray()
            record.seal_block(data)
            self.disk.append(_segment(self._current), data)
            self._flushed += len(data)
            self._segment_unsynced = True

    # -- reading -----------------------------------------------------------------------------------
    def read(self, message_id: int) -> StoredMessage:
        """The stored message (also garbage not yet collected).

        Raises:
            KeyError: no such message (never written, or collected).
        """
        location = self.index.locations[message_id]
        if location.file == self._current and location.offset >= self._flushed:
            self._write_segment_buffer()
        data = self.disk.read_at(_segment(location.file), location.offset, location.size)
        return record.decode_payload(memoryview(data)[record.MESSAGE_HEADER :])

    def __contains__(self, message_id: int) -> bool:
        """Whether ``message_id`` can be read (referenced, or garbage not yet collected)."""
        return message_id in self.index.locations

    # -- garbage collection ------------------------------------------------------------------------
    def compact(self) -> bool:
        """One step of garbage collection: combine the files worth it, or rewrite a long journal.

        Returns True if it did something. Safe to interrupt at any point (see the module docstring).
        """
        self.commit()
        victims = plan_compaction(
            self.index.files, self._current, threshold=self.gc_threshold, segment_size=self.segment_size
        )
        if victims:
            self._combine(victims)
            return True
        if self.queues.wants_rewrite(self.journal_rewrite_min):
            self.rewrite_journal()
            return True
        return False

    def _combine(self, victims: list[int]) -> None:
        """Copy the live messages of ``victims`` into one new file, then delete them: work in
        proportion to the victims' size, not to the whole index."""
        out = bytearray()
        record.open_block(out)
        moves: list[tuple[int, int]] = []
        garbage: list[int] = []
        for number in victims:
            data = self.disk.read_all(_segment(number))
            live, dead = self.index.sort_records(number, record.scan_segment(data)[0])
            garbage += dead
            for message_id, location in live:
                moves.append((message_id, len(out)))
                out += data[location.offset : location.offset + location.size]
        if moves:
            target = max(self.index.files) + 1
            record.seal_block(out)
            self.disk.write_atomic(_segment(target), out)
            for message_id, offset in moves:
                self.index.moved(message_id, target, offset)
        for number in victims:
            self.disk.remove(_segment(number))
        self.index.remove_files(victims, garbage)
        self.disk.sync_dir("msg")

    def rewrite_journal(self) -> None:
        """Replace the journal with a snapshot of what the queues hold now."""
        self.commit()
        out = bytearray()
        record.open_block(out)
        encode = record.encode_journal
        enqueue, deliver = record.OP_ENQUEUE, record.OP_DELIVER
        for queue, held in self.queues.queues.items():
            for message_id, delivered in held.items():
                out += encode(enqueue, queue, message_id)
                if delivered:
                    out += encode(deliver, queue, message_id)
        record.seal_block(out)
        self.disk.write_atomic(JOURNAL, out)
        self.queues.records = self.queues.live()

    # -- definitions and lifecycle ----------------------------------------------------------------
    def load_topology(self) -> bytes:
        """The saved durable topology (empty if none)."""
        return self.disk.read_all(TOPOLOGY)

    def set_topology_aside(self) -> str:
        """Rename an unreadable topology file out of the way (for a person to look at); returns its
        new name."""
        name = f"{TOPOLOGY}.unreadable-{int(time.time())}"
        self.disk.rename(TOPOLOGY, name)
        return name

    def save_topology(self, data: bytes) -> None:
        """Replace the saved durable topology atomically."""
        self.disk.write_atomic(TOPOLOGY, data)

    def stats(self) -> StoreStats:
        """Sizes for the status view."""
        total = self.index.total_bytes() + self.disk.size(JOURNAL)
        return StoreStats(
            directory=str(self.disk.root),
            bytes=total,
            garbage=self.index.garbage_bytes(),
            messages=self.index.live_messages(),
            files=len(self.index.files),
        )

    def close(self) -> None:
        """Commit and close the files."""
        self.commit()
        self.disk.close()
