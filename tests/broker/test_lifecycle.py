"""Closing, timing out and cleaning up: crossing closes, delivery timeouts, timers, exclusive queues,
memory given back on every path, and one connection's flood parsed a share per turn."""

from __future__ import annotations

from typing import Any

import pytest
from pamqp import commands, frame, header
from pamqp.body import ContentBody

from gear.broker.protocol.connection import FAIR_SHARE_SECONDS
from tests.broker._harness import Client, FakeClock, make_core, names
from tests.broker.test_properties import _nested, _publish_raw


def _ready(**fields: Any) -> tuple[Any, FakeClock, Client]:
    core, clock = make_core(**fields)
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    return core, clock, client


def _held(core: Any) -> int:
    """Bytes the broker should account: every message a queue or a channel still holds, once."""
    messages = {
        id(e.message): e.message for v in core.vhosts.values() for q in v.queues.values() for e in q.ready
    }
    for connection in core.connections:
        for channel in connection.channels.values():
            for _, entry, _ in channel.unacked.values():
                messages[id(entry.message)] = entry.message
    return sum(m.size for m in messages.values())


# -- crossing closes ----------------------------------------------------------------------------------
def test_a_channel_close_that_crosses_the_servers_gets_close_ok_and_the_connection_lives() -> None:
    """amqp091-go's case: a publish to a missing exchange and the client's channel.close cross."""
    core, _, client = _ready()
    client.open_channel(2)
    out = client.feed(
        frame.marshal(commands.Basic.Publish(exchange="missing", routing_key="k"), 1)
        + frame.marshal(header.ContentHeader(0, 1, commands.Basic.Properties()), 1)
        + frame.marshal(ContentBody(b"x"), 1)
        + frame.marshal(commands.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), 1)
    )
    assert names(out) == ["Channel.Close", "Channel.CloseOk"]
    assert out[0][1].reply_code == 404
    assert client.send(1, commands.Basic.Qos(prefetch_count=1)) == [], "discarded until close-ok"
    assert client.send(1, commands.Channel.CloseOk()) == []
    assert names(client.send(2, commands.Basic.Qos(prefetch_count=1))) == ["Basic.QosOk"]
    assert names(client.send(1, commands.Channel.Open())) == ["Channel.OpenOk"]
    assert not client.conn.finished
    assert core.internal_errors == 0


def test_a_client_that_closes_first_is_answered_at_once() -> None:
    _, _, client = _ready()
    out = client.send(1, commands.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0))
    assert names(out) == ["Channel.CloseOk"]
    assert names(client.send(1, commands.Channel.Open())) == ["Channel.OpenOk"]


# -- delivery timeouts --------------------------------------------------------------------------------
def _timeout_text(channel: int, ms: int) -> str:
    return (
        f"PRECONDITION_FAILED - delivery acknowledgement on channel {channel} timed out. Timeout value used: "
        f"{ms} ms. This timeout value can be configured, see consumers doc guide to learn more"
    )


def test_a_delivery_unacked_past_x_consumer_timeout_closes_its_channel_and_goes_back() -> None:
    core, clock, client = _ready()
    other = Client(core)
    other.handshake()
    other.open_channel(1)
    client.send(1, commands.Queue.Declare(queue="q", arguments={"x-consumer-timeout": 1000}))
    client.publish(1, "", "q", b"work")
    out = client.send(1, commands.Basic.Consume(queue="q", consumer_tag="slow"))
    assert "Basic.Deliver" in names(out)
    clock.now += 0.9
    core.tick()
    assert client.turn() == []
    clock.now += 0.2
    core.tick()
    out = client.turn()
    assert names(out) == ["Channel.Close"]
    close = out[0][1]
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        406,
        _timeout_text(1, 1000),
        0,
        0,
    )
    out = other.send(1, commands.Basic.Get(queue="q", no_ack=True))
    assert names(out) == ["Basic.GetOk", "ContentHeader", "ContentBody"]
    assert out[0][1].redelivered, "the timed-out delivery was requeued"


def test_acks_in_time_keep_the_channel_and_the_broker_wide_timeout_applies() -> None:
    core, clock, client = _ready(consumer_timeout=2000)
    client.send(1, commands.Queue.Declare(queue="q"))
    client.send(1, commands.Basic.Consume(queue="q", consumer_tag="c"))
    for tag in (1, 2, 3):
        client.publish(1, "", "q")
        clock.now += 1.5
        core.tick()
        client.send(1, commands.Basic.Ack(delivery_tag=tag))
    assert not client.turn()
    client.send(1, commands.Basic.Cancel(consumer_tag="c"))
    client.publish(1, "", "q")
    assert names(client.send(1, commands.Basic.Get(queue="q")))[0] == "Basic.GetOk"  # gets count too
    clock.now += 2.1
    core.tick()
    out = client.turn()
    assert names(out) == ["Channel.Close"]
    assert out[0][1].reply_text == _timeout_text(1, 2000)


def test_no_timeout_when_switched_off() -> None:
    core, clock, client = _ready(consumer_timeout=None)
    client.send(1, commands.Queue.Declare(queue="q"))
    client.send(1, commands.Basic.Consume(queue="q", consumer_tag="c"))
    client.publish(1, "", "q")
    clock.now += 10 * 3600
    core.tick()
    assert client.turn() == []
    assert len(core.timers) == 0


# -- timers -------------------------------------------------------------------------------------------
def test_idle_queues_cost_no_timer_work_and_expire_on_time() -> None:
    core, clock, client = _ready()
    for i in range(500):
        client.conn.receive(frame.marshal(commands.Queue.Declare(queue=f"plain-{i}"), 1))
    client.send(1, commands.Queue.Declare(queue="expiring", arguments={"x-expires": 1000}))
    assert len(core.timers) == 1, "only the queue with x-expires waits for a time"
    clock.now += 0.6
    core.tick()
    client.send(1, commands.Queue.Declare(queue="expiring", arguments={"x-expires": 1000}))  # used again
    clock.now += 0.6
    core.tick()
    assert "expiring" in core.vhosts["/"].queues
    client.send(1, commands.Basic.Consume(queue="expiring", consumer_tag="c"))
    clock.now += 5
    core.tick()
    assert "expiring" in core.vhosts["/"].queues, "a consumed queue is in use"
    client.send(1, commands.Basic.Cancel(consumer_tag="c"))
    clock.now += 1.1
    core.tick()
    assert "expiring" not in core.vhosts["/"].queues
    assert len(core.vhosts["/"].queues) == 500


def test_message_ttl_expires_the_head_by_timer_and_dead_letters_each_once() -> None:
    core, clock, client = _ready()
    client.send(1, commands.Queue.Declare(queue="dead"))
    client.send(
        1,
        commands.Queue.Declare(
            queue="q",
            arguments={
                "x-message-ttl": 1000,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "dead",
            },
        ),
    )
    for i in range(3):
        client.publish(1, "", "q", b"%d" % i)
        clock.now += 0.3
    core.tick()
    assert len(core.vhosts["/"].queues["q"].ready) == 3
    clock.now += 0.2  # the first is past its second
    core.tick()
    core.run_turn()
    assert [e.message.body for e in core.vhosts["/"].queues["dead"].ready] == [b"0"]
    clock.now += 2
    core.tick()
    core.run_turn()
    assert [e.message.body for e in core.vhosts["/"].queues["dead"].ready] == [b"0", b"1", b"2"]
    assert core.alarm.used == _held(core)


# -- exclusive queues ---------------------------------------------------------------------------------
def test_a_connection_deletes_exactly_its_exclusive_queues() -> None:
    core, _, owner = _ready()
    other = Client(core)
    other.handshake()
    other.open_channel(1)
    other.send(1, commands.Queue.Declare(queue="theirs", exclusive=True))
    for name in ("mine-1", "mine-2", "mine-3"):
        owner.send(1, commands.Queue.Declare(queue=name, exclusive=True))
    owner.send(1, commands.Queue.Delete(queue="mine-2"))
    assert list(owner.conn.exclusive_queues) == [core.vhosts["/"].queues[n] for n in ("mine-1", "mine-3")]
    owner.conn.connection_lost()
    core.run_turn()
    assert sorted(core.vhosts["/"].queues) == ["theirs"]
    assert not owner.conn.exclusive_queues


# -- consumers ----------------------------------------------------------------------------------------
def test_many_consumers_on_one_channel_come_and_go() -> None:
    core, _, client = _ready()
    client.send(1, commands.Queue.Declare(queue="q"))
    client.feed(
        b"".join(
            frame.marshal(commands.Basic.Consume(queue="q", consumer_tag=f"c{i}"), 1) for i in range(5000)
        )
    )
    queue = core.vhosts["/"].queues["q"]
    assert len(queue.consumers) == 5000
    client.feed(
        b"".join(frame.marshal(commands.Basic.Cancel(consumer_tag=f"c{i}"), 1) for i in range(0, 5000, 2))
    )
    assert len(queue.consumers) == 2500
    for i in range(4):
        client.publish(1, "", "q", b"%d" % i)
    delivered = [c.unacked for c in queue.consumers]
    assert sorted(delivered, reverse=True)[:4] == [1, 1, 1, 1]
    client.send(1, commands.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0))
    assert len(queue.consumers) == 0
    assert len(queue.ready) == 4


def test_an_exclusive_consumer_is_known_without_looking_at_the_others() -> None:
    _, _, client = _ready()
    client.send(1, commands.Queue.Declare(queue="q"))
    client.send(1, commands.Basic.Consume(queue="q", consumer_tag="only", exclusive=True))
    out = client.send(1, commands.Basic.Consume(queue="q", consumer_tag="second"))
    assert out[-1][1].reply_code == 403


# -- memory -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path", ["dead-letter", "expiry", "delete", "purge", "channel error mid-body", "maxlen"]
)
def test_bytes_held_against_the_watermark_are_given_back(path: str) -> None:
    core, clock, client = _ready(memory_high_watermark=50_000)
    client.send(1, commands.Queue.Declare(queue="dead"))
    arguments: dict[str, Any] = {
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "dead",
        "x-message-ttl": 500,
    }
    if path == "maxlen":
        arguments["x-max-length"] = 1
    client.send(1, commands.Queue.Declare(queue="q", arguments=arguments))
    body = b"x" * 20_000
    client.publish(1, "", "q", body)
    if path == "dead-letter":
        client.send(1, commands.Basic.Consume(queue="q", consumer_tag="c"))
        client.send(1, commands.Basic.Reject(delivery_tag=1, requeue=False))
        client.send(1, commands.Queue.Purge(queue="dead"))
    elif path == "expiry":
        clock.now += 1
        core.tick()
        client.turn()
        client.send(1, commands.Queue.Purge(queue="dead"))
    elif path == "delete":
        client.send(1, commands.Basic.Consume(queue="q", consumer_tag="c"))
        client.publish(1, "", "q", body)
        client.send(1, commands.Queue.Delete(queue="q"))
        client.send(1, commands.Basic.Ack(delivery_tag=0, multiple=True))
    elif path == "purge":
        client.send(1, commands.Queue.Purge(queue="q"))
    elif path == "channel error mid-body":
        client.send(1, commands.Queue.Purge(queue="q"))
        client.feed(
            frame.marshal(commands.Basic.Publish(exchange="", routing_key="q"), 1)
            + frame.marshal(header.ContentHeader(0, 90_000), 1)
            + frame.marshal(ContentBody(b"y" * 30_000), 1)
        )
        assert core.alarm.used >= 30_000
        client.send(1, commands.Queue.Declare(queue="x", passive=True))  # 505: the body was expected
        assert client.conn.state == "closing"
    elif path == "maxlen":
        client.publish(1, "", "q", body)  # the first is dropped (and dead-lettered)
        client.send(1, commands.Queue.Purge(queue="q"))
        client.send(1, commands.Queue.Purge(queue="dead"))
    core.run_turn()
    assert core.alarm.used == _held(core) == 0
    assert core.status().alarms == []


# -- alarms and fairness ------------------------------------------------------------------------------
def test_under_an_alarm_a_publisher_stops_at_its_first_content_frame() -> None:
    core, _, publisher = _ready()
    publisher.send(1, commands.Queue.Declare(queue="q"))
    core.set_memory_alarm(True)
    body = b"z" * 100_000
    out = publisher.feed(
        frame.marshal(commands.Basic.Publish(exchange="", routing_key="q"), 1)
        + frame.marshal(header.ContentHeader(0, len(body)), 1)
        + frame.marshal(ContentBody(body), 1)
    )
    assert names(out) == ["Connection.Blocked"]
    assert core.alarm.used == 0, "the body was not read"
    core.set_memory_alarm(None)
    assert names(publisher.turn()) == ["Connection.Unblocked"]
    assert len(core.vhosts["/"].queues["q"].ready) == 1


class _TickingClock(FakeClock):
    """A processor clock that moves a millisecond each time it is read (parsing takes time)."""

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


def test_a_flood_is_parsed_one_share_per_turn_and_others_go_between() -> None:
    core, _, flood = _ready()
    core.cpu_clock = _TickingClock()
    quiet = Client(core)
    quiet.handshake()
    quiet.open_channel(1)
    flood.send(1, commands.Queue.Declare(queue="q"))
    data = b"".join(flood.publish_bytes(1, "", "q", b"f" * 60_000) for _ in range(40))
    flood.conn.receive(data)
    assert flood.conn.parked
    assert not flood.conn.reading, "the socket waits while the rest is parsed"
    parsed = len(core.vhosts["/"].queues["q"].inbox)
    assert 0 < parsed < 40
    assert parsed <= FAIR_SHARE_SECONDS / 0.001 + 1, "one share: as many frames as its time allows"
    out = quiet.feed(frame.marshal(commands.Basic.Qos(prefetch_count=1), 1))
    assert names(out) == ["Basic.QosOk"]
    while core.parked:
        core.resume_parked()
        core.run_turn()
    assert len(core.vhosts["/"].queues["q"].ready) == 40
    assert flood.conn.reading


def test_a_publish_whose_headers_nest_too_deep_is_refused_before_it_is_queued() -> None:
    core, _, client = _ready()
    client.send(1, commands.Queue.Declare(queue="q", arguments={"x-message-ttl": 100}))
    out = client.feed(_publish_raw(client, "q", _nested(10_000)))
    assert names(out) == ["Connection.Close"]
    assert out[0][1].reply_code == 530
    assert core.alarm.used == 0
