"""Wire-level rules checked with a raw socket: protocol header, framing errors, channel state errors."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from pamqp import body as content_body, commands, frame, header

from tests.backends import BrokerHandle
from tests.conformance._support import REPLY_NAMES
from tests.raw_amqp import PROTOCOL_HEADER, RawAmqp

NINE_CAPABILITIES = (
    "publisher_confirms",
    "exchange_exchange_bindings",
    "basic.nack",
    "consumer_cancel_notify",
    "connection.blocked",
    "consumer_priorities",
    "authentication_failure_close",
    "per_consumer_qos",
    "direct_reply_to",
)


async def _still_serves(broker: BrokerHandle) -> None:
    """The broker still completes a fresh handshake (bad input must never take it down)."""
    raw = await RawAmqp.open(broker.url)
    await raw.close()


AMQP_1_0_HEADER = b"AMQP\x03\x01\x00\x00"
"""The AMQP 1.0 SASL header: what RabbitMQ 4.x offers for a header it does not take as 0-9-x."""


@pytest.mark.parametrize(
    ("bad_header", "amqp_0_9_like"),
    [(b"AMQP\x00\x00\x09\x02", True), (b"AMQP\x00\x00\x08\x00", False), (b"XXXXXXXX", False)],
    ids=["amqp-0-9-2", "amqp-0-8-0", "garbage"],
)
async def test_bad_protocol_header_gets_a_supported_header_and_close(
    broker: BrokerHandle, bad_header: bytes, amqp_0_9_like: bool
) -> None:
    """A wrong protocol header gets the header of a protocol the server speaks, then a socket close, no
    connection.start. RabbitMQ 3.x and the reference broker: AMQP\\x00\\x00\\x09\\x01 for any bad header.
    RabbitMQ 4.x: the same for 'AMQP 0 0 9 x', the AMQP 1.0 header for anything else."""
    expected = PROTOCOL_HEADER
    if not broker.is_reference and broker.semantics >= (4, 0) and not amqp_0_9_like:
        expected = AMQP_1_0_HEADER
    raw = await RawAmqp.connect(broker.url)
    raw.send_bytes(bad_header)
    answer = await raw.wait_eof("bad protocol header")
    assert answer == expected, f"{broker.name}: expected exactly {expected!r} then close, got {answer!r}"
    await raw.close()
    await _still_serves(broker)


async def test_amqp_0_9_header_is_accepted(broker: BrokerHandle) -> None:
    """The 0-9 header AMQP\\x01\\x01\\x00\\x09 is treated as 0-9-1: the server sends connection.start."""
    raw = await RawAmqp.connect(broker.url)
    raw.send_bytes(b"AMQP\x01\x01\x00\x09")
    start = await raw.expect(commands.Connection.Start)
    assert (start.version_major, start.version_minor) == (0, 9)
    await raw.close()


async def test_handshake_advertises_capabilities_and_tune(broker: BrokerHandle) -> None:
    """connection.start: 0-9, PLAIN, RabbitMQ's nine capabilities; connection.tune: (2047, 131072, 60)."""
    raw = await RawAmqp.open(broker.url)
    assert raw.start is not None
    assert raw.tune is not None
    assert (raw.start.version_major, raw.start.version_minor) == (0, 9)
    assert "PLAIN" in str(raw.start.mechanisms).split(), "connection.start mechanisms must include PLAIN"
    properties = raw.start.server_properties or {}
    for key in ("product", "version", "platform", "copyright", "information"):
        assert key in properties, f"server-properties must carry {key!r}"
    capabilities = properties.get("capabilities")
    assert isinstance(capabilities, dict), "server-properties must carry a capabilities table"
    missing = [c for c in NINE_CAPABILITIES if capabilities.get(c) is not True]
    assert not missing, f"capabilities must advertise these as true: {missing}"
    assert (raw.tune.channel_max, raw.tune.frame_max, raw.tune.heartbeat) == (2047, 131072, 60), (
        "connection.tune must propose channel_max 2047, frame_max 131072, heartbeat 60"
    )
    await raw.close()


def _bad_frame_end(raw: RawAmqp) -> None:
    data = frame.marshal(commands.Channel.Open(), 1)
    raw.send_bytes(data[:-1] + b"\x00")


def _unknown_frame_type(raw: RawAmqp) -> None:
    raw.send_bytes(struct.pack(">BHI", 9, 0, 0) + b"\xce")


def _heartbeat_on_channel_1(raw: RawAmqp) -> None:
    raw.send_bytes(struct.pack(">BHI", 8, 1, 0) + b"\xce")  # pamqp's Heartbeat always marshals channel 0


def _oversize_frame(raw: RawAmqp) -> None:
    raw.send_bytes(struct.pack(">BHI", 3, 1, 200_000) + b"x" * 200_000 + b"\xce")


def _second_channel_open(raw: RawAmqp) -> None:
    raw.send(1, commands.Channel.Open())


def _method_on_unopened_channel(raw: RawAmqp) -> None:
    raw.send(5, commands.Basic.Qos(prefetch_count=1))


def _body_without_header(raw: RawAmqp) -> None:
    raw.send(1, content_body.ContentBody(b"abc"))


def _method_instead_of_content_header(raw: RawAmqp) -> None:
    raw.send(1, commands.Basic.Publish(exchange="", routing_key="x"))
    raw.send(1, commands.Basic.Qos(prefetch_count=1))


FRAMING_RULES: list[tuple[str, Callable[[RawAmqp], None], int]] = [
    ("bad-frame-end", _bad_frame_end, 501),
    ("unknown-frame-type", _unknown_frame_type, 501),
    ("heartbeat-on-channel-1", _heartbeat_on_channel_1, 505),
    ("frame-larger-than-frame-max", _oversize_frame, 501),
    ("second-channel-open", _second_channel_open, 504),
    ("method-on-unopened-channel", _method_on_unopened_channel, 504),
    ("body-without-header", _body_without_header, 505),
    ("method-instead-of-content-header", _method_instead_of_content_header, 505),
]


@pytest.mark.parametrize(
    ("send_bad", "code"), [r[1:] for r in FRAMING_RULES], ids=[r[0] for r in FRAMING_RULES]
)
async def test_framing_error_closes_connection_with_code(
    broker: BrokerHandle, send_bad: Callable[[RawAmqp], None], code: int
) -> None:
    """Bad framing or channel state: connection.close with the code, then the socket closes."""
    raw = await RawAmqp.open(broker.url)
    await raw.open_channel(1)
    send_bad(raw)
    rule = f"{send_bad.__name__.strip('_').replace('_', ' ')}"
    close = await raw.expect_connection_close(code, rule)
    name = REPLY_NAMES[code]
    assert str(close.reply_text).startswith(f"{name} - "), f"{rule}: reply text must start '{name} - '"
    await raw.close()
    await _still_serves(broker)


async def test_client_connection_close_gets_close_ok(broker: BrokerHandle) -> None:
    """A client connection.close is answered with connection.close-ok."""
    raw = await RawAmqp.open(broker.url)
    raw.send(0, commands.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    await raw.expect(commands.Connection.CloseOk)
    await raw.close()


async def test_stray_client_cancel_ok(broker: BrokerHandle) -> None:
    """A client basic.cancel-ok the server did not ask for. RabbitMQ up to 4.2: 503 COMMAND_INVALID, a
    connection error. RabbitMQ 4.3: 541 INTERNAL_ERROR, a connection error. The reference broker:
    ignored (the channel keeps working)."""
    raw = await RawAmqp.open(broker.url)
    try:
        await raw.open_channel(1)
        raw.send(1, commands.Basic.CancelOk(consumer_tag="never-existed"))
        rule = f"stray basic.cancel-ok ({broker.name})"
        if broker.is_reference:
            raw.send(1, commands.Basic.Qos(prefetch_count=1))
            await raw.expect(commands.Basic.QosOk)
        elif broker.semantics >= (4, 3):
            close = await raw.expect_connection_close(541, rule)
            assert close.reply_text == "INTERNAL_ERROR"
        else:
            close = await raw.expect_connection_close(503, rule)
            assert close.reply_text.startswith("COMMAND_INVALID - ")
    finally:
        await raw.close()


async def test_channel_close_protocol_after_soft_error(broker: BrokerHandle) -> None:
    """A soft error sends channel.close carrying the failing method's class/method ids; until close-ok the
    server ignores other methods on that channel; after close-ok the channel number can be opened again."""
    raw = await RawAmqp.open(broker.url)
    try:
        await raw.open_channel(1)
        raw.send(1, commands.Queue.Declare(queue="gear.conformance.missing", passive=True))
        close = await raw.expect(commands.Channel.Close)
        assert close.reply_code == 404
        assert (close.class_id, close.method_id) == (50, 10), "channel.close names queue.declare (50, 10)"
        raw.send(1, commands.Basic.Qos(prefetch_count=1))  # must be ignored, not answered, not an error
        raw.send(1, commands.Channel.CloseOk())
        raw.send(1, commands.Channel.Open())
        channel, reopened = await raw.read_frame()
        assert isinstance(reopened, commands.Channel.OpenOk), (
            f"after close-ok the channel reopens (the method sent meanwhile is ignored), got {reopened!r}"
        )
        assert channel == 1
    finally:
        await raw.close()


async def test_content_frames_interleave_across_channels(broker: BrokerHandle) -> None:
    """Frames of publishes on different channels may interleave; each message is assembled per channel."""
    raw = await RawAmqp.open(broker.url)
    try:
        await raw.open_channel(1)
        await raw.open_channel(2)
        raw.send(1, commands.Queue.Declare(queue="", exclusive=True))
        declared = await raw.expect(commands.Queue.DeclareOk)
        queue = str(declared.queue)
        for channel in (1, 2):  # confirms tell when both messages are queued (channels are not ordered)
            raw.send(channel, commands.Confirm.Select())
            await raw.expect(commands.Confirm.SelectOk)
        raw.send(1, commands.Basic.Publish(exchange="", routing_key=queue))
        raw.send(2, commands.Basic.Publish(exchange="", routing_key=queue))
        raw.send(1, header.ContentHeader(0, 3, commands.Basic.Properties(message_id="one")))
        raw.send(2, header.ContentHeader(0, 3, commands.Basic.Properties(message_id="two")))
        raw.send(2, content_body.ContentBody(b"two"))
        raw.send(1, content_body.ContentBody(b"one"))
        confirms = [await raw.next_frame() for _ in range(2)]
        assert all(isinstance(f, commands.Basic.Ack) for _, f in confirms), f"expected acks: {confirms}"
        assert {ch for ch, _ in confirms} == {1, 2}, "each channel's publish is confirmed on its channel"
        bodies = []
        for _ in range(2):
            raw.send(1, commands.Basic.Get(queue=queue, no_ack=True))
            await raw.expect(commands.Basic.GetOk)
            content = await raw.expect(header.ContentHeader)
            chunk = await raw.expect(content_body.ContentBody)
            assert content.properties.message_id == chunk.value.decode(), "properties belong to their body"
            bodies.append(chunk.value)
        assert sorted(bodies) == [b"one", b"two"]
    finally:
        await raw.close()
