"""The broker core: virtual hosts, connections, the resource alarms and the per-turn work list.

It performs no network I/O. The asyncio shell (or a test) calls :meth:`BrokerCore.run_turn` after
feeding bytes, and :meth:`BrokerCore.tick` on a timer; time comes from an injected clock. With a data
directory, ``run_turn`` ends with the store's group commit (one fsync for the turn) before the turn's
output, so confirms and declare-oks leave only once their state is on disk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, cast

from gear.base.timers import Timers
from gear.broker.model.queue import PublishingChannel, Queue
from gear.broker.model.replies import ReplyConsumers
from gear.broker.model.vhost import VirtualHost
from gear.broker.node.alarms import DiskAlarm, MemoryAlarm
from gear.broker.node.config import BrokerConfig
from gear.broker.node.persist import Persistence, RecoveryReport
from gear.broker.node.status import BrokerStatus, ConnectionStatus, QueueStatus, StoreStatus

__all__ = ("BrokerCore", "CoreConnection")

log = logging.getLogger("gear.broker")


class CoreConnection(Protocol):
    """What the core needs from a connection (the core never imports the connection module)."""

    resume_pending: bool
    finished: bool

    @property
    def status_visible(self) -> bool: ...

    def resume(self) -> None: ...

    def before_flush(self) -> None: ...

    def alarm_changed(self, active: bool) -> None: ...

    def status(self) -> ConnectionStatus: ...


C = TypeVar("C", bound=CoreConnection)


class BrokerCore(Generic[C]):
    """State shared by every connection of one broker (``C``: the connection type)."""

    def __init__(
        self,
        config: BrokerConfig,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        self.config = config
        self.clock = clock
        self.cpu_clock = cpu_clock
        """Processor time of the broker's thread: a connection's share of parsing per turn is measured
        with it (wall time would count the moments the process was not running)."""
        self.now = clock()
        self.timers = Timers(log)
        """Every timed event of the broker (heartbeats, timeouts, TTL, ``x-expires``)."""
        self.vhosts = {name: VirtualHost(name, self) for name in config.all_vhosts()}
        self.access = config.access_control()
        self.connections: set[C] = set()
        self.alarm = MemoryAlarm(config.memory_limit_bytes())
        self.disk_alarm = DiskAlarm(config.disk_free_limit)
        self.replies = ReplyConsumers()
        """The one owner of direct reply-to keys."""
        self._drain: dict[Queue, None] = {}
        self._dirty: dict[C, None] = {}
        self._resume: dict[C, None] = {}
        self._next_turn: dict[C, None] = {}
        self.wake: Callable[[], None] = lambda: None
        self.wake_parked: Callable[[], None] = lambda: None
        """Asks the shell to call :meth:`resume_parked` once the other connections' input was read."""
        self._woken = False
        self.internal_errors = 0
        self.persistence: Persistence | None = None
        self.recovery: RecoveryReport | None = None
        self.paging_limit = int(self.alarm.limit * config.memory_paging_ratio)
        if config.data_dir is not None:
            self.persistence = Persistence(config.data_dir)
            self.recovery = self.persistence.recover(self.vhosts, self._recovered_queue)
            for problem in self.recovery.problems:
                log.warning("data directory %s: %s", config.data_dir, problem)
            self._check_paging()

    def _recovered_queue(
        self, vhost: VirtualHost, name: str, auto_delete: bool, arguments: dict[str, Any]
    ) -> Queue:
        return Queue(
            vhost,
            name,
            durable=True,
            exclusive_owner=None,
            auto_delete=auto_delete,
            arguments=arguments,
            credit_more_after=self.config.credit[1],
        )

    # -- the per-turn work list -------------------------------------------------------------------
    def schedule_drain(self, queue: Queue) -> None:
        """Drain ``queue``'s inbox at the end of this turn."""
        self._drain[queue] = None
        self._request()

    def mark_dirty(self, connection: C) -> None:
        """``connection`` has output to flush at the end of this turn."""
        self._dirty[connection] = None
        self._request()

    def resume_later(self, connection: C) -> None:
        """``connection`` may parse its buffered frames again (flow or alarm released it)."""
        self._resume[connection] = None
        self.mark_dirty(connection)

    @property
    def parked(self) -> bool:
        """Some connection waits for the next turn to parse more of its frames."""
        return bool(self._next_turn)

    def resume_next_turn(self, connection: C) -> None:
        """``connection`` used its share of parsing: continue it after the others had their turn."""
        if not self._next_turn:
            self.wake_parked()
        self._next_turn[connection] = None
        self.mark_dirty(connection)

    def resume_parked(self) -> None:
        """Let the connections that used their share parse their next one (the shell calls this after
        reading everyone's sockets, so a flood costs the others one share, not one per turn)."""
        waiting, self._next_turn = self._next_turn, {}
        for connection in waiting:
            if not connection.finished:
                connection.resume()
                self.mark_dirty(connection)  # the shell reads its socket again once it caught up

    def _request(self) -> None:
        if not self._woken:
            self._woken = True
            self.wake()

    def run_turn(self) -> list[C]:
        """Drain queue inboxes (until quiet), then return the connections with output to flush."""
        self._woken = False
        self.now = self.clock()
        rounds = 0
        while self._drain and rounds < 16:
            rounds += 1
            queues, self._drain = self._drain, {}
            for queue in queues:
                self._drain_one(queue)
        while self._resume:
            resume, self._resume = self._resume, {}
            for connection in resume:
                if connection.resume_pending and not connection.finished:
                    connection.resume()
            while self._drain and rounds < 32:
                rounds += 1
                queues, self._drain = self._drain, {}
                for queue in queues:
                    self._drain_one(queue)
        if self._drain:
            self._request()
        if self.persistence is not None:
            self.persistence.commit(self.vhosts)
        dirty, self._dirty = list(self._dirty), {}
        for connection in dirty:
            connection.before_flush()
        return dirty

    def _drain_one(self, queue: Queue) -> None:
        try:
            queue.drain()
        except Exception:  # a bug in one queue must not stall every connection's output
            self.internal_errors += 1
            log.exception("internal error draining queue %s", queue.name)

    def internal_error(self) -> None:
        """Count a broker bug that was logged and contained (tests assert there were none)."""
        self.internal_errors += 1

    # -- timers -----------------------------------------------------------------------------------
    def tick(self) -> None:
        """Run the timers that are due (heartbeats, handshake and close timeouts, TTL, ``x-expires``,
        delivery timeouts), then the store's garbage collection."""
        self.now = self.clock()
        failed = self.timers.errors
        self.timers.run(self.now)
        self.internal_errors += self.timers.errors - failed
        if self.persistence is not None:
            self.persistence.collect_garbage()

    def start_sync(self, force: bool = False) -> Callable[[], None] | None:
        """Background group commit (the shell's choice, see ``Persistence.start_sync``): an fsync to
        run in a worker thread, or None."""
        if self.persistence is None:
            return None
        self.persistence.background = True
        return self.persistence.start_sync(force)

    def sync_done(self) -> Callable[[], None] | None:
        """The fsync from :meth:`start_sync` finished: the next fsync to run, or None (confirms
        released: flush the connections)."""
        assert self.persistence is not None
        return self.persistence.sync_done()

    def close(self) -> None:
        """Flush and close the data directory (a clean stop)."""
        if self.persistence is not None:
            self.persistence.close(self.vhosts)
            self.persistence = None

    # -- resource alarms --------------------------------------------------------------------------
    @property
    def alarm_reasons(self) -> list[str]:
        """The active resource alarms (``memory``, ``disk``), empty when publishers may publish."""
        return self.alarm.reasons + (["disk"] if self.disk_alarm.active else [])

    @property
    def blocked_reason(self) -> str:
        """The ``connection.blocked`` reason, as RabbitMQ words it: ``low on memory & disk``."""
        return "low on " + " & ".join(self.alarm_reasons)

    def memory_changed(self, delta: int) -> None:
        """Account message bytes; raise or clear the alarm on crossing the watermark."""
        before = bool(self.alarm_reasons)
        if self.alarm.change(delta):
            log.info(
                "memory alarm %s (%s of %s bytes)",
                "set" if self.alarm.active else "cleared",
                self.alarm.used,
                self.alarm.limit,
            )
            self._alarms_changed(before)
        persistence = self.persistence
        if persistence is not None and (
            self.alarm.used > self.paging_limit
            if not persistence.paging
            else self.alarm.used < self.paging_limit // 2
        ):
            self._check_paging()

    def _check_paging(self) -> None:
        """Start paging above the paging limit (moving every ready body to disk once); stop below half."""
        persistence = self.persistence
        if persistence is None:
            return
        used = self.alarm.used
        pressure = used > self.paging_limit if not persistence.paging else used >= self.paging_limit // 2
        if pressure == persistence.paging:
            return
        persistence.paging = pressure
        if not pressure:
            log.info(
                "memory below half the paging limit (%s bytes): new messages stay in memory",
                self.paging_limit,
            )
            return
        log.info("memory above the paging limit (%s bytes): paging message bodies to disk", self.paging_limit)
        freed = 0
        for vhost in self.vhosts.values():
            for queue in vhost.queues.values():
                freed += queue.page_out()
        if freed:
            self.memory_changed(-freed)

    def set_memory_alarm(self, active: bool | None) -> None:
        """Force the memory alarm on or off; None returns to the real watermark."""
        before = bool(self.alarm_reasons)
        if self.alarm.force(active):
            log.info("memory alarm %s (forced %s)", "set" if self.alarm.active else "cleared", active)
            self._alarms_changed(before)

    def disk_free_changed(self, free: int) -> None:
        """Record the free space of the broker's disk; raise or clear the disk alarm at the limit."""
        before = bool(self.alarm_reasons)
        if self.disk_alarm.update(free):
            log.warning(
                "disk alarm %s (%s bytes free, limit %s)",
                "set" if self.disk_alarm.active else "cleared",
                free,
                self.disk_alarm.limit,
            )
            self._alarms_changed(before)

    def _alarms_changed(self, before: bool) -> None:
        active = bool(self.alarm_reasons)
        if active == before:
            return  # one alarm replaced or joined another: publishers stay blocked as they are
        for connection in list(self.connections):
            connection.alarm_changed(active)

    # -- registry ---------------------------------------------------------------------------------
    @property
    def store(self) -> Persistence | None:
        """The message store (None without a data directory)."""
        return self.persistence

    def topology_changed(self) -> None:
        """A durable exchange, queue or binding changed: save the topology at the end of this turn."""
        if self.persistence is not None:
            self.persistence.topology_dirty = True

    def queue_deleted(self, queue: Queue) -> None:
        """Forget inbox work for a deleted queue; the channels that published to it forget their credit."""
        self._drain.pop(queue, None)
        if queue.inbox:
            queue.drain()
        for sender in {*queue.meter.senders(), *queue.blocked_senders}:
            cast("PublishingChannel", sender).queue_deleted(queue)

    def status(self) -> BrokerStatus:
        """A snapshot for the status view."""
        conns = [c.status() for c in self.connections if c.status_visible]
        queues = [
            QueueStatus(
                name=q.name,
                vhost=v.name,
                messages_ready=len(q.ready) + len(q.inbox),
                messages_unacked=q.unacked,
                consumers=len(q.consumers),
                state="flow" if q.blocked_senders else "running",
                durable=q.durable,
                exclusive=q.exclusive_owner is not None,
                auto_delete=q.auto_delete,
                messages_paged=q.paged_count() if self.persistence is not None else 0,
            )
            for v in self.vhosts.values()
            for q in v.queues.values()
        ]
        store = None
        if self.persistence is not None:
            stats = self.persistence.store.stats()
            store = StoreStatus(
                directory=stats.directory,
                bytes=stats.bytes,
                garbage_ratio=stats.garbage_ratio,
                messages=stats.messages,
                paged=sum(q.messages_paged for q in queues),
                paging=self.persistence.paging,
            )
        return BrokerStatus(
            connections=sorted(conns, key=_conn_key),
            queues=sorted(queues, key=lambda q: (q.vhost, q.name)),
            alarms=self.alarm_reasons,
            memory_used=self.alarm.used,
            memory_limit=self.alarm.limit,
            disk_free=self.disk_alarm.free,
            disk_free_limit=self.disk_alarm.limit,
            failed_logins=self.access.failed_logins,
            store=store,
        )


def _conn_key(status: ConnectionStatus) -> str:
    return status.name
