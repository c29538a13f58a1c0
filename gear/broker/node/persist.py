"""What the broker keeps in its data directory, and how it comes back: the bridge to ``store``.

* The durable topology (durable exchanges, durable queues and the bindings between durable ends) is
  saved as JSON, atomically, at the end of any turn that changed it, before the declare-ok goes out.
* Persistent messages in durable queues go to the message store (one copy however many queues);
  their publisher confirms wait for :meth:`Persistence.commit` (one fsync per turn: group commit).
* Recovery rebuilds the topology, then gives each durable queue its messages back, bodies left on disk
  (paged) until delivered, the redelivered flag set on those that had been delivered.

No sockets or event loop here; the store does the file I/O.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import gc
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from gear.broker.errors import AMQPError
from gear.broker.model.checks import check_properties
from gear.broker.model.exchange import Exchange
from gear.broker.model.message import Message
from gear.broker.store import Store, StoredMessage
from gear.broker.store.store import Recovery

if TYPE_CHECKING:
    from gear.broker.model.queue import PublishingChannel, Queue
    from gear.broker.model.vhost import VirtualHost

__all__ = ("Persistence", "RecoveryReport")

_VERSION = 1


@dataclass(slots=True)
class RecoveryReport:
    """What starting on a data directory brought back (for the startup line)."""

    directory: str
    exchanges: int = 0
    queues: int = 0
    bindings: int = 0
    messages: int = 0
    """Queue entries (a message in two queues counts twice)."""
    stored: int = 0
    """Distinct messages in the store."""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line: where, and how much was recovered."""
        text = (
            f"state in {self.directory}: recovered {self.exchanges} exchange(s), {self.queues} queue(s), "
            f"{self.bindings} binding(s), {self.messages} queued message(s) ({self.stored} stored) in "
            f"{self.seconds:.2f} s"
        )
        if self.problems:
            text += f"; {len(self.problems)} problem(s): " + "; ".join(self.problems)
        return text


class Persistence:
    """The broker's side of a data directory."""

    def __init__(self, directory: str | os.PathLike[str], **store_options: Any) -> None:
        self.directory = str(directory)
        self.store = Store(directory, **store_options)
        self.topology_dirty = False
        self.paging = False
        """Memory pressure: new messages are paged out as they arrive (set by the core)."""
        self.background = False
        """The shell runs the fsyncs in a worker thread (:meth:`start_sync`); else :meth:`commit` does."""
        self._confirms: list[tuple[PublishingChannel, int, bool]] = []
        self._committing: list[tuple[PublishingChannel, int, bool]] = []
        self._phase = 0

    # -- messages ----------------------------------------------------------------------------------
    def enqueue(self, queue: Queue, message: Message) -> None:
        """A persistent message entered durable ``queue``: store it (once) and journal the entry."""
        if not message.store_id or message.store_id not in self.store:
            self._write(message)
        self.store.enqueue(queue.store_key, message.store_id)

    def _write(self, message: Message) -> None:
        message.stored_in(
            self.store.write(
                StoredMessage(message.exchange, message.routing_key, message.properties, message.body)
            ),
        )

    def page_out(self, message: Message) -> int:
        """Drop ``message``'s body from memory, writing it to the store first if needed; bytes freed."""
        if message.paged:
            return 0
        if not message.store_id or message.store_id not in self.store:
            self._write(message)
        self.store.hold(message.store_id)
        return message.page_out(self.store)

    def delivered(self, queue: Queue, message: Message) -> None:
        """A journaled message was delivered from ``queue``."""
        self.store.deliver(queue.store_key, message.store_id)

    def removed(self, queue: Queue, message: Message) -> None:
        """A journaled message left ``queue`` for good."""
        self.store.ack(queue.store_key, message.store_id)

    def message_freed(self, message: Message) -> None:
        """The last queue released a paged message: drop the in-memory hold on its stored copy."""
        if message.paged:
            self.store.release(message.store_id)

    def queue_deleted(self, queue: Queue) -> None:
        """A durable queue went: release what the journal still had for it."""
        self.store.forget_queue(queue.store_key)

    def confirm_after_commit(self, publisher: PublishingChannel, seq: int, ok: bool) -> None:
        """Send this confirm once the turn's writes are fsynced."""
        self._confirms.append((publisher, seq, ok))

    # -- the end of a turn -------------------------------------------------------------------------
    def commit(self, vhosts: dict[str, VirtualHost]) -> None:
        """End of a turn: save a changed topology; inline, also fsync the turn's messages and journal
        and release their confirms (in background mode the shell does that with :meth:`start_sync`).

        A turn that only delivered or acked writes its journal records without an fsync (the timer
        makes them durable within a tick).
        """
        if self.topology_dirty:
            self.topology_dirty = False
            self.store.save_topology(dump_topology(vhosts))
        if self.background:
            if not self._phase and not self.store.enqueued:
                self.store.commit(force=False)  # acks and deliveries: written, fsynced later
            return
        self.store.commit(force=bool(self._confirms))
        if self._confirms:
            confirms, self._confirms = self._confirms, []
            _settle(confirms)

    def start_sync(self, force: bool = False) -> Callable[[], None] | None:
        """Background mode: begin a group commit of everything so far, or None if one is in flight or
        nothing needs it (acks alone only with ``force``). Run the returned fsync in a worker thread,
        then call :meth:`sync_done`."""
        store = self.store
        if self._phase or not (self._confirms or store.enqueued or (force and store.pending)):
            return None
        self._committing, self._confirms = self._confirms, []
        self._phase = 1
        return store.start_commit() or _nothing

    def sync_done(self) -> Callable[[], None] | None:
        """The fsync from :meth:`start_sync` (or from here) finished: the next one to run, or None when
        the commit is complete and its confirms were released."""
        if self._phase == 1:
            self._phase = 2
            job = self.store.continue_commit()
            if job is not None:
                return job
        self._phase = 0
        self.store.finish_commit()
        confirms, self._committing = self._committing, []
        _settle(confirms)
        return None

    def collect_garbage(self) -> None:
        """Make recorded acks durable, then one step of compaction if worth it (the timer calls this;
        skipped while a background commit is in flight)."""
        if self._phase:
            return
        if not self.background:
            self.store.commit()
        self.store.compact()

    def close(self, vhosts: dict[str, VirtualHost]) -> None:
        """Save and close (no background commit may be in flight)."""
        self.background = False
        self.commit(vhosts)
        self.store.close()

    # -- recovery ----------------------------------------------------------------------------------
    def recover(self, vhosts: dict[str, VirtualHost], make_queue: Callable[..., Queue]) -> RecoveryReport:
        """Rebuild the saved topology into ``vhosts`` and refill the durable queues."""
        # Millions of small objects and no garbage cycles: the cyclic collector would only rescan them.
        collecting = gc.isenabled()
        gc.disable()
        try:
            report = self._recover(vhosts, make_queue)
        finally:
            if collecting:
                gc.enable()
        if report.messages > 100_000:
            gc.freeze()  # what recovery built lives long: keep it out of later collections
        return report

    def _recover(self, vhosts: dict[str, VirtualHost], make_queue: Callable[..., Queue]) -> RecoveryReport:
        report = RecoveryReport(self.directory)
        raw = self.store.load_topology()
        queues_by_key: dict[int, Queue] = {}
        if raw:
            try:
                _load_topology(json.loads(raw), vhosts, make_queue, report, queues_by_key)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                aside = self.store.set_topology_aside()
                report.problems.append(
                    f"topology.json cannot be read ({type(exc).__name__}: {exc}); kept as {aside}, durable "
                    "definitions after the damage are missing"
                )
        elif self.store.queues.queues:
            report.problems.append("topology.json is missing but the journal names queues")
        # When the list of queues is incomplete, keep the other queues' messages on disk (not lost).
        found = self.store.recover(set(queues_by_key), hold=True, keep_unknown=bool(report.problems))
        self._refill(found, queues_by_key, report)
        report.messages = found.messages
        report.stored = self.store.stats().messages
        report.seconds = found.seconds
        report.problems += found.problems
        return report

    def _refill(self, found: Recovery, queues_by_key: dict[int, Queue], report: RecoveryReport) -> None:
        store = self.store
        envelopes = found.envelopes
        locations = store.index.locations
        on_disk = Message.on_disk
        shared: dict[int, Message] = {}
        refused: dict[int, str] = {}
        for key, held in found.queues.items():
            entries: list[tuple[Message, bool]] = []
            for message_id, delivered in held.items():
                if message_id in refused:
                    store.ack(key, message_id)
                    continue
                shared_by = locations[message_id].refs  # one per queue, plus the hold of our copy
                message = shared.get(message_id) if shared_by > 2 else None
                if message is None:
                    exchange, routing_key, properties, body_size = envelopes[message_id]
                    try:
                        checked = check_properties(properties)
                    except AMQPError as error:  # kept by an older broker that did not check
                        refused[message_id] = error.detail or error.text
                        store.ack(key, message_id)
                        continue
                    message = on_disk(
                        exchange, routing_key, properties, body_size, store, message_id, checked
                    )
                    if shared_by > 2:
                        shared[message_id] = message
                entries.append((message, delivered))
            queues_by_key[key].recovered(entries)
        for message_id in refused:
            store.release(message_id)  # the hold recovery took on our copy
        if refused:
            reason = next(iter(refused.values()))
            report.problems.append(
                f"{len(refused)} stored message(s) with content properties a publish is refused for "
                f"({reason}) dropped"
            )


def _settle(confirms: list[tuple[PublishingChannel, int, bool]]) -> None:
    for publisher, seq, ok in confirms:
        if not publisher.released:
            publisher.settle_confirm(seq, ok)


def _nothing() -> None:
    """An fsync job with nothing to sync."""


# -- topology -------------------------------------------------------------------------------------
def dump_topology(vhosts: dict[str, VirtualHost]) -> bytes:
    """The durable exchanges, queues and bindings of every vhost, as JSON bytes."""
    from gear.broker.model.vhost import SYSTEM_EXCHANGES

    system = {name for name, _, _ in SYSTEM_EXCHANGES}
    out: dict[str, Any] = {"version": _VERSION, "vhosts": {}}
    for vhost in vhosts.values():
        exchanges = [
            {
                "name": ex.name,
                "type": ex.kind,
                "auto_delete": ex.auto_delete,
                "internal": ex.internal,
                "arguments": _tagged(ex.arguments),
            }
            for ex in vhost.exchanges.values()
            if ex.durable and ex.name not in system
        ]
        queues = [
            {
                "name": q.name,
                "key": q.store_key,
                "auto_delete": q.auto_delete,
                "arguments": _tagged(q.arguments),
            }
            for q in vhost.queues.values()
            if q.store_key
        ]
        bindings = []
        for ex in vhost.exchanges.values():
            if not ex.durable:
                continue
            for b in ex.bindings:
                dest = b.destination
                if isinstance(dest, Exchange):
                    if not dest.durable:
                        continue
                    kind, name = "exchange", dest.name
                else:
                    queue = cast("Queue", dest)
                    if not queue.store_key:
                        continue
                    kind, name = "queue", queue.name
                bindings.append(
                    {
                        "source": ex.name,
                        "kind": kind,
                        "destination": name,
                        "key": b.key,
                        "arguments": _tagged(b.arguments),
                    }
                )
        if exchanges or queues or bindings:
            out["vhosts"][vhost.name] = {"exchanges": exchanges, "queues": queues, "bindings": bindings}
    return json.dumps(out, separators=(",", ":")).encode()


def _load_topology(
    saved: dict[str, Any],
    vhosts: dict[str, VirtualHost],
    make_queue: Callable[..., Queue],
    report: RecoveryReport,
    queues_by_key: dict[int, Queue],
) -> None:
    for vhost_name, data in (saved.get("vhosts") or {}).items():
        vhost = vhosts.get(vhost_name)
        if vhost is None:
            report.problems.append(f"vhost {vhost_name!r} is no longer configured: its durable state skipped")
            continue
        for ex in data.get("exchanges", []):
            if ex["name"] not in vhost.exchanges:
                vhost.exchanges[ex["name"]] = Exchange(
                    ex["name"],
                    ex["type"],
                    durable=True,
                    auto_delete=ex["auto_delete"],
                    internal=ex["internal"],
                    arguments=_untagged(ex["arguments"]),
                )
                report.exchanges += 1
        for q in data.get("queues", []):
            queue = make_queue(vhost, q["name"], q["auto_delete"], _untagged(q["arguments"]))
            queue.store_key = int(q["key"])
            vhost.queues[queue.name] = queue
            queues_by_key[queue.store_key] = queue
            report.queues += 1
        for b in data.get("bindings", []):
            source = vhost.exchanges.get(b["source"])
            dest: Exchange | Queue | None = (
                vhost.exchanges.get(b["destination"])
                if b["kind"] == "exchange"
                else vhost.queues.get(b["destination"])
            )
            if source is None or dest is None:
                report.problems.append(f"binding {b['source']} -> {b['destination']} lost an end; skipped")
                continue
            vhost.bind(source, dest, b["key"], _untagged(b["arguments"]))
            report.bindings += 1


def _tagged(value: Any) -> Any:
    """An AMQP field value as JSON-safe data (bytes, decimals and timestamps tagged)."""
    if isinstance(value, dict):
        return {"t": "table", "v": {str(k): _tagged(v) for k, v in value.items()}}
    if isinstance(value, list):
        return {"t": "array", "v": [_tagged(v) for v in value]}
    if isinstance(value, bytes):
        return {"t": "bytes", "v": base64.b64encode(value).decode()}
    if isinstance(value, decimal.Decimal):
        return {"t": "decimal", "v": str(value)}
    if isinstance(value, datetime.datetime):
        return {"t": "time", "v": value.isoformat()}
    return value


def _untagged(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    kind, data = value.get("t"), cast(Any, value.get("v"))
    if kind == "table":
        return {k: _untagged(v) for k, v in data.items()}
    if kind == "array":
        return [_untagged(v) for v in data]
    if kind == "bytes":
        return base64.b64decode(data)
    if kind == "decimal":
        return decimal.Decimal(data)
    if kind == "time":
        return datetime.datetime.fromisoformat(data)
    return value
