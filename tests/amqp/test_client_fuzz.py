"""Hostile bytes from the broker's side: whatever arrives, the client core raises nothing (a protocol
error is reported as the connection's close), never loops, and never buffers more than one frame; a
valid stream means the same events however the reads cut it."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings, strategies as st
from pamqp import commands, frame, heartbeat

from gear.amqp import ClientConnection, ConnectionClosed, ConnectionState, Event
from gear.wire import spec
from gear.wire.content import Publish
from gear.wire.properties import Properties
from tests.amqp._wire import content, method, open_client

FRAME_MAX = 4096
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _client() -> tuple[ClientConnection, int, int]:
    conn = open_client(frame_max=FRAME_MAX)
    consumer = conn.open_channel()
    conn.receive(method(commands.Channel.OpenOk(), consumer.number))
    consumer.consume("q", "ctag")
    conn.receive(method(commands.Basic.ConsumeOk("ctag"), consumer.number))
    publisher = conn.open_channel()
    conn.receive(method(commands.Channel.OpenOk(), publisher.number))
    publisher.call(spec.Confirm.Select())
    conn.receive(method(commands.Confirm.SelectOk(), publisher.number))
    for _ in range(50):
        publisher.publish(Publish("", "q", Properties(), b""))
    conn.data_to_send()
    return conn, consumer.number, publisher.number


def _valid_frames(consumer: int, publisher: int) -> st.SearchStrategy[bytes]:
    tags = st.integers(1, 50)
    bodies = st.binary(max_size=3 * FRAME_MAX)
    names = st.text(st.characters(codec="utf-8"), max_size=20)
    props = st.fixed_dictionaries(
        {},
        optional={
            "message_id": names,
            "correlation_id": names,
            "headers": st.dictionaries(
                names, st.one_of(st.integers(-(2**63), 2**63 - 1), names, st.booleans())
            ),
            "delivery_mode": st.sampled_from([1, 2]),
        },
    )
    return st.one_of(
        st.builds(
            lambda tag, body, p: content(
                consumer, commands.Basic.Deliver("ctag", tag, False, "gear", "k"), body, FRAME_MAX, **p
            ),
            tags,
            bodies,
            props,
        ),
        st.builds(lambda tag, many: method(commands.Basic.Ack(tag, many), publisher), tags, st.booleans()),
        st.builds(lambda tag: method(commands.Basic.Nack(tag), publisher), tags),
        st.builds(
            lambda body, p: content(
                publisher, commands.Basic.Return(312, "NO_ROUTE", "gear", "k"), body, FRAME_MAX, **p
            ),
            bodies,
            props,
        ),
        st.just(frame.marshal(heartbeat.Heartbeat(), 0)),
        st.builds(lambda r: method(commands.Connection.Blocked(r)), names),
        st.just(method(commands.Connection.Unblocked())),
        st.builds(lambda on: method(commands.Channel.Flow(on), consumer), st.booleans()),
    )


def _feed(conn: ClientConnection, data: bytes, cuts: list[int]) -> list[Event]:
    """Feed ``data`` in pieces; the events, in order (an exception propagates)."""
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    events: list[Event] = []
    for start, end in itertools.pairwise(points):
        events += conn.receive(data[start:end])
        assert conn.buffered <= FRAME_MAX, conn.buffered
    return events


def _broken(events: list[Event]) -> bool:
    """True if the events report the connection closed for a protocol error."""
    return any(isinstance(e, ConnectionClosed) and not e.by_broker for e in events)


@_SETTINGS
@given(st.binary(max_size=20_000), st.lists(st.integers(0, 20_000), max_size=20))
def test_random_bytes_end_in_a_protocol_error_or_nothing(data: bytes, cuts: list[int]) -> None:
    conn, _, _ = _client()
    events = _feed(conn, data, cuts)
    closes = [e for e in events if isinstance(e, ConnectionClosed)]
    assert len(closes) <= 1
    if closes:
        assert conn.state is ConnectionState.CLOSED
        assert events.index(closes[0]) == len(events) - 3  # then the two channels' closes


@_SETTINGS
@given(st.data())
def test_valid_frames_with_one_byte_changed_never_escape_as_anything_else(data: st.DataObject) -> None:
    conn, consumer, publisher = _client()
    wire = b"".join(data.draw(st.lists(_valid_frames(consumer, publisher), min_size=1, max_size=8)))
    at = data.draw(st.integers(0, len(wire) - 1))
    byte = data.draw(st.integers(0, 255))
    broken = wire[:at] + bytes([byte]) + wire[at + 1 :]
    _feed(conn, broken, data.draw(st.lists(st.integers(0, len(broken)), max_size=10)))


@_SETTINGS
@given(st.data())
def test_a_valid_stream_means_the_same_however_the_reads_cut_it(data: st.DataObject) -> None:
    whole, consumer, publisher = _client()
    frames = data.draw(st.lists(_valid_frames(consumer, publisher), min_size=1, max_size=10))
    wire = b"".join(frames)
    events = _feed(whole, wire, [])
    assert not _broken(events)
    cut, _, _ = _client()
    assert _feed(cut, wire, data.draw(st.lists(st.integers(0, len(wire)), max_size=30))) == events
    assert cut.state is ConnectionState.OPEN


def test_a_deprecated_method_from_the_broker_is_its_protocol_error() -> None:
    """basic.recover-async (deprecated; pamqp warns when it builds one) is not something a broker sends:
    the client closes with its own error, and no warning escapes (the suite turns warnings into errors).
    The byte-changing fuzz above found it: a delivery's method id changed into this one."""
    conn, consumer, _ = _client()
    payload = (0x003C0064).to_bytes(4, "big") + b"\x00"
    frame_bytes = (
        bytes([1]) + consumer.to_bytes(2, "big") + len(payload).to_bytes(4, "big") + payload + b"\xce"
    )
    assert _broken(_feed(conn, frame_bytes, []))
    assert conn.state is ConnectionState.CLOSED
