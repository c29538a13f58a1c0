"""The broker core with a data directory: confirms wait for fsync (one per turn), recovery, paging.

A :class:`FaultyDisk` stands in for the disk, so a test can cut the power (lose everything not
fsynced) and start a new core on the same directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pamqp import commands

from gear.broker.node.core import BrokerCore
from gear.broker.store import store as store_module
from tests.broker._harness import Client, make_core, names
from tests.store._faulty import FaultyDisk

PERSISTENT = commands.Basic.Properties(delivery_mode=2)


@pytest.fixture(autouse=True)
def _faulty_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "Disk", FaultyDisk)


def _disk(core: BrokerCore) -> FaultyDisk:
    assert core.persistence is not None
    disk = core.persistence.store.disk
    assert isinstance(disk, FaultyDisk)
    return disk


def _client(
    core: BrokerCore, *queues: str, durable: bool = True, arguments: dict[str, Any] | None = None
) -> Client:
    client = Client(core)
    client.handshake()
    client.open_channel(1, confirm=True)
    for name in queues:
        out = client.send(1, commands.Queue.Declare(queue=name, durable=durable, arguments=arguments or None))
        assert names(out) == ["Queue.DeclareOk"], out
    return client


def _publish_many(client: Client, queue: str, count: int, persistent: bool = True) -> list[tuple[int, Any]]:
    props = PERSISTENT if persistent else commands.Basic.Properties()
    return client.feed(
        b"".join(client.publish_bytes(1, "", queue, f"m{n}".encode(), properties=props) for n in range(count))
    )


def _stored(core: BrokerCore) -> int:
    store = core.status().store
    assert store is not None
    return store.messages


def _get_all(client: Client, queue: str) -> list[tuple[bytes, bool]]:
    """Get and ack every message: ``[(body, redelivered), ...]``."""
    found: list[tuple[bytes, bool]] = []
    while True:
        out = client.send(1, commands.Basic.Get(queue=queue))
        if names(out) == ["Basic.GetEmpty"]:
            return found
        get_ok = out[0][1]
        found.append((b"".join(o.value for _, o in out[2:]), get_ok.redelivered))
        client.send(1, commands.Basic.Ack(delivery_tag=get_ok.delivery_tag))


def test_a_turn_of_publishes_is_confirmed_after_one_fsync_of_segment_and_journal(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "q")
    disk = _disk(core)
    before = len(disk.steps)
    out = _publish_many(client, "q", 20)
    assert names(out) == ["Basic.Ack"]
    assert (out[0][1].delivery_tag, out[0][1].multiple) == (20, True)
    fsyncs = [s for s in disk.steps[before:] if s.startswith("fsync")]
    assert fsyncs == ["fsync msg/00000001.seg", "fsync queues.log"]


def test_acks_not_yet_fsynced_are_lost_in_a_power_cut_so_the_message_comes_back(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "q")
    _publish_many(client, "q", 1)
    first = client.send(1, commands.Basic.Get(queue="q"))
    client.send(1, commands.Basic.Ack(delivery_tag=first[0][1].delivery_tag))
    _disk(core).power_cut()

    core, _ = make_core(data_dir=str(tmp_path))
    assert _get_all(_client(core), "q") == [(b"m0", False)], "at least once: never lost, maybe again"


def test_transient_messages_are_confirmed_without_an_fsync(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "durable", "lazy", arguments={"x-queue-mode": "lazy"})
    disk = _disk(core)
    before = len(disk.steps)
    out = _publish_many(client, "durable", 3, persistent=False)
    out += _publish_many(client, "lazy", 3, persistent=False)  # bodies written to the store, not fsynced
    assert names(out) == ["Basic.Ack", "Basic.Ack"]
    assert not [s for s in disk.steps[before:] if s.startswith("fsync")]


def test_what_was_confirmed_survives_a_power_cut_and_what_was_not_is_lost(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "q")
    assert names(_publish_many(client, "q", 3)) == ["Basic.Ack"]
    # frames fed but the turn never ran: no confirm was sent, and nothing reached the disk
    client.conn.receive(client.publish_bytes(1, "", "q", b"unconfirmed", properties=PERSISTENT))
    _disk(core).power_cut()

    core, _ = make_core(data_dir=str(tmp_path))
    assert core.recovery is not None
    assert core.recovery.messages == 3
    client = _client(core)
    assert _get_all(client, "q") == [(b"m0", False), (b"m1", False), (b"m2", False)]


def test_transient_messages_and_queues_are_not_recovered(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "durable")
    _client(core, "transient", durable=False)
    _publish_many(client, "durable", 2, persistent=False)
    _publish_many(client, "transient", 2)
    core.close()

    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "durable")
    assert _get_all(client, "durable") == []
    out = client.send(1, commands.Queue.Declare(queue="transient", passive=True))
    assert names(out) == ["Channel.Close"]
    assert out[0][1].reply_code == 404


def test_delivered_unacked_come_back_redelivered_and_acked_do_not(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "q")
    _publish_many(client, "q", 4)
    first = client.send(1, commands.Basic.Get(queue="q"))  # m0: acked
    client.send(1, commands.Basic.Ack(delivery_tag=first[0][1].delivery_tag))
    client.send(1, commands.Basic.Get(queue="q"))  # m1: delivered, never acked
    core.tick()  # acks and deliveries are fsynced by the timer (or by the next confirmed publish)
    _disk(core).power_cut()

    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core)
    assert _get_all(client, "q") == [(b"m1", True), (b"m2", False), (b"m3", False)]


def test_durable_topology_is_recovered_with_its_arguments(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "q", arguments={"x-max-priority": 5, "x-dead-letter-exchange": "dlx"})
    client.send(1, commands.Exchange.Declare(exchange="t", exchange_type="topic", durable=True))
    client.send(1, commands.Exchange.Declare(exchange="gone", exchange_type="topic", durable=False))
    client.send(1, commands.Queue.Bind(queue="q", exchange="t", routing_key="a.#"))
    client.send(1, commands.Queue.Bind(queue="q", exchange="gone", routing_key="x"))
    core.close()

    core, _ = make_core(data_dir=str(tmp_path))
    assert core.recovery is not None
    assert (core.recovery.exchanges, core.recovery.queues, core.recovery.bindings) == (1, 1, 1)
    vhost = core.vhosts["/"]
    assert "gone" not in vhost.exchanges
    queue = vhost.queues["q"]
    assert queue.max_priority == 5
    assert queue.dlx == "dlx"
    client = _client(core)
    client.publish(1, "t", "a.b.c", b"routed", properties=PERSISTENT)
    assert _get_all(client, "q") == [(b"routed", False)]


def test_a_deleted_durable_queue_stays_deleted(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "q")
    _publish_many(client, "q", 3)
    assert names(client.send(1, commands.Queue.Delete(queue="q"))) == ["Queue.DeleteOk"]
    core.close()
    core, _ = make_core(data_dir=str(tmp_path))
    assert "q" not in core.vhosts["/"].queues
    store = core.status().store
    assert store is not None
    assert store.messages == 0


def test_a_lazy_queue_keeps_bodies_on_disk_and_delivers_them(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "lazy", durable=False, arguments={"x-queue-mode": "lazy"})
    _publish_many(client, "lazy", 10, persistent=False)
    queue = core.status().queues[0]
    assert (queue.messages_ready, queue.messages_paged) == (10, 10)
    assert core.alarm.used < 10 * 100
    assert _get_all(client, "lazy") == [(f"m{n}".encode(), False) for n in range(10)]
    assert _stored(core) == 0


def _flood(core: BrokerCore, count: int, size: int) -> list[str]:
    client = _client(core, "q", durable=False)
    seen: list[str] = []
    body = b"x" * size
    for n in range(count):
        out = client.publish(1, "", "q", n.to_bytes(4, "big") + body)
        seen += names(out)
    return seen


def test_a_backlog_larger_than_the_memory_limit_is_paged_and_keeps_flowing(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path), memory_high_watermark=200_000)
    seen = _flood(core, 600, 1000)  # 600 kB of bodies, three times the watermark
    assert "Connection.Blocked" not in seen
    assert seen.count("Basic.Ack") == 600
    status = core.status()
    assert status.memory_used < status.memory_limit
    assert status.store is not None
    assert status.store.paged >= 500
    client = _client(core)
    got = _get_all(client, "q")
    assert [int.from_bytes(body[:4], "big") for body, _ in got] == list(range(600))
    assert all(len(body) == 1004 for body, _ in got)
    assert _stored(core) == 0


def test_without_a_data_directory_the_same_backlog_blocks_publishers() -> None:
    core, _ = make_core(memory_high_watermark=200_000)
    assert "Connection.Blocked" in _flood(core, 600, 1000)


def test_the_status_view_shows_the_store(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "lazy", arguments={"x-queue-mode": "lazy"})
    _publish_many(client, "lazy", 4)
    text = str(core.status())
    assert f"store: {tmp_path}: " in text
    assert "0% garbage, 4 messages, 4 paged" in text
    assert "store: none (memory only)" in str(make_core()[0].status())


def test_an_unreadable_topology_is_reported_set_aside_and_its_messages_kept(tmp_path: Path) -> None:
    core, _ = make_core(data_dir=str(tmp_path))
    client = _client(core, "q")
    _publish_many(client, "q", 2)
    core.close()
    (tmp_path / "topology.json").write_text('{"version": 1, "vhosts": {"/": {"queues": [{"nam')

    core, _ = make_core(data_dir=str(tmp_path))  # starts, serves, says what it could not recover
    assert core.recovery is not None
    problems = " ".join(core.recovery.problems)
    assert "topology.json cannot be read" in problems
    assert "2 message(s) kept on disk" in problems
    assert list(tmp_path.glob("topology.json.unreadable-*"))
    assert "q" not in core.vhosts["/"].queues
    assert _stored(core) == 2
    assert _get_all(_client(core, "other"), "other") == []
