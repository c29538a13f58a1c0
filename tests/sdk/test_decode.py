"""The inbound frame demux: Gear's deliveries and confirms read inline, every other frame left intact.

Frames are built with pamqp (the client library's codec), so the demux is checked against another
implementation of the wire format.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pamqp import commands, frame, heartbeat
from pamqp.header import ContentHeader

from gear.adapter.confirms import ChannelClosedError, Confirms, Verdict
from gear.adapter.decode import FrameDemux, Properties

DELIVER_CH, PUBLISH_CH, OTHER_CH = 2, 1, 3


def _content(channel: int, method: Any, body: bytes, frame_max: int = 131072, **props: Any) -> bytes:
    properties = commands.Basic.Properties(**props)
    out = frame.marshal(method, channel) + frame.marshal(ContentHeader(0, len(body), properties), channel)
    for start in range(0, len(body), frame_max):
        out += frame.marshal(_Body(body[start : start + frame_max]), channel)
    return out


class _Body:
    """A body frame for pamqp's marshal (pamqp.body.ContentBody, typed loosely)."""

    def __new__(cls, value: bytes) -> Any:
        from pamqp.body import ContentBody

        return ContentBody(value)


def _deliver(tag: int, body: bytes, **props: Any) -> bytes:
    method = commands.Basic.Deliver("ctag", tag, tag % 2 == 1, "gear", f"TYPE.h{tag}")
    return _content(DELIVER_CH, method, body, **props)


class Recorder:
    def __init__(self) -> None:
        self.deliveries: list[tuple[str, int, bool, str, Properties, bytes]] = []
        self.confirms: list[tuple[int, bool, bool]] = []
        self.returns: list[str | None] = []

    def deliver(self, *args: Any) -> None:
        self.deliveries.append(args)

    def confirm(self, delivery_tag: int, multiple: bool, ack: bool) -> None:
        self.confirms.append((delivery_tag, multiple, ack))

    def returned(self, message_id: str | None) -> None:
        self.returns.append(message_id)


def _demux() -> tuple[FrameDemux, Recorder]:
    demux, rec = FrameDemux(), Recorder()
    demux.on_deliver(DELIVER_CH, rec.deliver)
    demux.on_confirm(PUBLISH_CH, rec)
    return demux, rec


def test_a_delivery_is_read_whole_wherever_the_reads_split_it() -> None:
    headers = {"x-deadline": 1234567890123, "traceparent": "00-ab-cd-01", "retry": True}
    wire = _deliver(
        7,
        b'{"x": 1}',
        message_id="m7",
        correlation_id="c7",
        reply_to="WEB.h1",
        message_type="request",
        app_id="WEB.h1",
        headers=headers,
        content_type="application/json",
        delivery_mode=2,
        expiration="5000",
        timestamp=None,
        user_id="guest",
    )
    for cut in range(len(wire) + 1):
        demux, rec = _demux()
        left = demux.feed(wire[:cut]) + demux.feed(wire[cut:])
        assert left == b""
        assert len(rec.deliveries) == 1, cut
        tag, delivery_tag, redelivered, key, props, body = rec.deliveries[0]
        assert (tag, delivery_tag, redelivered, key, body) == ("ctag", 7, True, "TYPE.h7", b'{"x": 1}')
        assert props == Properties("m7", "c7", "WEB.h1", "request", "WEB.h1", headers)


def test_other_frames_reach_the_client_library_byte_for_byte_and_in_order() -> None:
    demux, rec = _demux()
    qos_ok = frame.marshal(commands.Basic.QosOk(), DELIVER_CH)
    other = _content(OTHER_CH, commands.Basic.Deliver("t", 1, False, "", "k"), b"not ours")
    close = frame.marshal(commands.Channel.Close(406, "PRECONDITION_FAILED", 60, 40), PUBLISH_CH)
    beat = frame.marshal(heartbeat.Heartbeat(), 0)
    wire = qos_ok + _deliver(2, b"a") + other + beat + _deliver(4, b"b") + close
    passed = b"".join(demux.feed(wire[i : i + 5]) for i in range(0, len(wire), 5))
    assert passed == qos_ok + other + beat + close
    assert [d[1] for d in rec.deliveries] == [2, 4]


def test_a_large_body_spans_several_frames() -> None:
    demux, rec = _demux()
    body = bytes(range(256)) * 40
    wire = _content(DELIVER_CH, commands.Basic.Deliver("ctag", 1, False, "", "k"), body, 1000)
    assert demux.feed(wire) == b""
    assert rec.deliveries[0][5] == body


def test_an_empty_body_completes_at_the_header() -> None:
    demux, rec = _demux()
    assert demux.feed(_deliver(1, b"")) == b""
    assert rec.deliveries[0][5] == b""


def test_confirms_and_returns_on_the_publish_channel() -> None:
    demux, rec = _demux()
    method = commands.Basic.Return(312, "NO_ROUTE", "gear", "X.y")
    returned = _content(PUBLISH_CH, method, b"b", message_id="m3")
    wire = (
        frame.marshal(commands.Basic.Ack(1), PUBLISH_CH)
        + returned
        + frame.marshal(commands.Basic.Ack(3), PUBLISH_CH)
        + frame.marshal(commands.Basic.Nack(5, multiple=True), PUBLISH_CH)
    )
    assert demux.feed(wire) == b""
    assert rec.returns == ["m3"]
    assert rec.confirms == [(1, False, True), (3, False, True), (5, True, False)]


def test_a_forgotten_channel_goes_back_to_the_client_library() -> None:
    demux, rec = _demux()
    demux.forget(DELIVER_CH, object())  # another sink: still ours
    assert demux.feed(_deliver(1, b"x")) == b""
    demux.forget(DELIVER_CH, rec.deliver)
    wire = _deliver(2, b"y")
    assert demux.feed(wire) == wire
    assert len(rec.deliveries) == 1


def test_a_malformed_header_is_left_to_the_client_library() -> None:
    demux, rec = _demux()
    method = frame.marshal(commands.Basic.Deliver("ctag", 1, False, "", "k"), DELIVER_CH)
    bad_header = b"\x02\x00\x02\x00\x00\x00\x0e" + b"\x00\x3c\x00\x00" + b"\x00" * 8 + b"\x00\x80" + b"\xce"
    assert demux.feed(method + bad_header) == bad_header
    assert rec.deliveries == []


def _confirms_with(tags: int) -> tuple[Confirms, list[asyncio.Future[Verdict]], list[bytes]]:
    confirms, written = Confirms(asyncio.get_running_loop()), list[bytes]()
    futures = [confirms.send(b"frames %d" % n, f"m{n}", written.append) for n in range(1, tags + 1)]
    return confirms, futures, written


async def test_confirms_number_publishes_and_settle_them_by_the_brokers_verdicts() -> None:
    confirms, futures, written = _confirms_with(6)
    assert written == [b"frames %d" % n for n in range(1, 7)]
    confirms.returned("m2")
    confirms.confirm(3, multiple=True, ack=True)  # 1, 2 (already returned) and 3
    confirms.confirm(5, multiple=False, ack=False)
    confirms.returned("unknown")
    confirms.confirm(9, multiple=False, ack=True)  # nothing pending under that tag
    settled = {n: f.result() for n, f in enumerate(futures, 1) if f.done()}
    assert settled == {1: Verdict.ACK, 2: Verdict.RETURNED, 3: Verdict.ACK, 5: Verdict.NACKED}
    assert len(confirms) == 2


async def test_a_verdict_for_a_publish_given_up_on_is_ignored() -> None:
    confirms, futures, _ = _confirms_with(2)
    futures[0].cancel()
    confirms.confirm(2, multiple=True, ack=True)
    assert futures[1].result() is Verdict.ACK
    assert len(confirms) == 0


async def test_a_closed_channel_fails_pending_and_later_publishes() -> None:
    confirms, futures, written = _confirms_with(2)
    reason = ConnectionResetError("gone")
    confirms.fail_all(reason)
    later = confirms.send(b"late", "m9", written.append)
    assert all(f.exception() is reason for f in [*futures, later])
    assert b"late" not in written
    confirms, futures, _ = _confirms_with(1)
    confirms.fail_all(None)
    assert isinstance(futures[0].exception(), ChannelClosedError)
