"""Hostile bytes from the broker's side: whatever arrives, the client core raises nothing but its own
typed error, never loops, and never buffers more than one frame; a valid stream means the same
however the reads cut it."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pamqp import commands, frame, heartbeat

from gear.amqp import ConnectionState, ProtocolError
from tests.sdk._wire import Recorder, content, method, open_client

FRAME_MAX = 4096
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _client() -> tuple[Any, Recorder, int, int]:
    rec = Recorder()
    conn = open_client(rec, frame_max=FRAME_MAX)
    consumer = conn.open_channel(rec)
    conn.receive(method(commands.Channel.OpenOk(), consumer.number))
    consumer.consume("q", "ctag", rec.consume, rec)
    conn.receive(method(commands.Basic.ConsumeOk("ctag"), consumer.number))
    publisher = conn.open_channel(rec)
    conn.receive(method(commands.Channel.OpenOk(), publisher.number))
    publisher.call(commands.Confirm.Select())
    conn.receive(method(commands.Confirm.SelectOk(), publisher.number))
    for _ in range(50):
        publisher.publish(b"")
    conn.data_to_send()
    rec.events.clear()
    return conn, rec, consumer.number, publisher.number


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


def _feed(conn: Any, data: bytes, cuts: list[int]) -> bool:
    """Feed ``data`` in pieces; True if the core raised its ProtocolError (anything else propagates)."""
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for start, end in itertools.pairwise(points):
        try:
            conn.receive(data[start:end])
        except ProtocolError:
            return True
        assert conn.buffered <= FRAME_MAX, conn.buffered
    return False


@_SETTINGS
@given(st.binary(max_size=20_000), st.lists(st.integers(0, 20_000), max_size=20))
def test_random_bytes_end_in_a_protocol_error_or_nothing(data: bytes, cuts: list[int]) -> None:
    conn, rec, _, _ = _client()
    if _feed(conn, data, cuts):
        assert conn.state is ConnectionState.CLOSED
        assert next(e for e in rec.events if e[0] == "closed")[3] is False


@_SETTINGS
@given(st.data())
def test_valid_frames_with_one_byte_changed_never_escape_as_anything_else(data: st.DataObject) -> None:
    conn, _rec, consumer, publisher = _client()
    wire = b"".join(data.draw(st.lists(_valid_frames(consumer, publisher), min_size=1, max_size=8)))
    at = data.draw(st.integers(0, len(wire) - 1))
    byte = data.draw(st.integers(0, 255))
    broken = wire[:at] + bytes([byte]) + wire[at + 1 :]
    _feed(conn, broken, data.draw(st.lists(st.integers(0, len(broken)), max_size=10)))


@_SETTINGS
@given(st.data())
def test_a_valid_stream_means_the_same_however_the_reads_cut_it(data: st.DataObject) -> None:
    whole, whole_rec, consumer, publisher = _client()
    frames = data.draw(st.lists(_valid_frames(consumer, publisher), min_size=1, max_size=10))
    wire = b"".join(frames)
    assert not _feed(whole, wire, [])
    cut, cut_rec, _, _ = _client()
    assert not _feed(cut, wire, data.draw(st.lists(st.integers(0, len(wire)), max_size=30)))
    assert cut_rec.events == whole_rec.events
    seen = [(d.delivery_tag, d.body, d.properties) for d in cut_rec.deliveries]
    assert seen == [(d.delivery_tag, d.body, d.properties) for d in whole_rec.deliveries]
    assert cut.state is ConnectionState.OPEN


def test_a_deprecated_method_from_the_broker_is_its_protocol_error() -> None:
    """basic.recover-async (deprecated; pamqp warns when it builds one) is not something a broker sends:
    the client closes with its own error, and no warning escapes (the suite turns warnings into errors).
    The byte-changing fuzz above found it: a delivery's method id changed into this one."""
    conn, _, consumer, _ = _client()
    payload = (0x003C0064).to_bytes(4, "big") + b"\x00"
    frame_bytes = (
        bytes([1]) + consumer.to_bytes(2, "big") + len(payload).to_bytes(4, "big") + payload + b"\xce"
    )
    assert _feed(conn, frame_bytes, [])
    assert conn.state is ConnectionState.CLOSED
