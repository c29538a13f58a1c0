"""Broker-side frames built with pamqp (another implementation of the wire format), and a client core
driven through its handshake, for the sans-I/O client tests."""

from __future__ import annotations

from typing import Any

from pamqp import body as pamqp_body
from pamqp import commands, frame
from pamqp.header import ContentHeader

from gear.amqp import ClientConnection, Credentials, Returned

__all__ = ("Recorder", "content", "deliver", "method", "open_client", "server_frames")


def method(value: Any, channel: int = 0) -> bytes:
    """One method frame."""
    return frame.marshal(value, channel)


def content(channel: int, value: Any, body: bytes, frame_max: int = 131072, **props: Any) -> bytes:
    """A method with content: the method, its header, and body frames of at most ``frame_max - 8``."""
    properties = commands.Basic.Properties(**props)
    out = method(value, channel) + frame.marshal(ContentHeader(0, len(body), properties), channel)
    chunk = frame_max - 8
    for start in range(0, len(body), chunk):
        out += frame.marshal(pamqp_body.ContentBody(body[start : start + chunk]), channel)
    return out


def deliver(channel: int, tag: int, body: bytes, consumer_tag: str = "ctag", **props: Any) -> bytes:
    """``basic.deliver`` of ``body`` with its content."""
    return content(
        channel, commands.Basic.Deliver(consumer_tag, tag, tag % 2 == 1, "gear", f"T.h{tag}"), body, **props
    )


def server_frames(*, frame_max: int = 131072, heartbeat: int = 60, channel_max: int = 2047) -> list[bytes]:
    """``connection.start``, ``tune`` and ``open-ok`` as a RabbitMQ would send them."""
    start = commands.Connection.Start(
        server_properties={"product": "RabbitMQ", "version": "4.3.6", "capabilities": {"basic.nack": True}},
        mechanisms="PLAIN AMQPLAIN",
        locales="en_US",
    )
    tune = commands.Connection.Tune(channel_max=channel_max, frame_max=frame_max, heartbeat=heartbeat)
    return [method(start), method(tune), method(commands.Connection.OpenOk())]


class Recorder:
    """Every handler call of a connection and its channels, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.deliveries: list[Any] = []
        self.settled: list[tuple[str, int, bool]] = []

    # connection handler
    def on_open(self) -> None:
        self.events.append(("open",))

    def on_blocked(self, reason: str) -> None:
        self.events.append(("blocked", reason))

    def on_unblocked(self) -> None:
        self.events.append(("unblocked",))

    def on_closed(self, code: int, text: str, by_broker: bool) -> None:
        self.events.append(("closed", code, text, by_broker))

    # channel handler
    def on_reply(self, value: Any) -> None:
        self.events.append(("reply", value.name))

    def on_confirm(self, delivery_tag: int, multiple: bool, ack: bool) -> None:
        self.events.append(("confirm", delivery_tag, multiple, ack))

    def on_return(self, returned: Returned) -> None:
        self.events.append(("return", returned.reply_code, returned.properties.message_id, returned.body))

    def on_cancelled(self, consumer_tag: str) -> None:
        self.events.append(("cancelled", consumer_tag))

    # consumer and settle
    def consume(self, delivery: Any) -> None:
        self.deliveries.append(delivery)

    def ack(self, delivery_tag: int) -> bool:
        self.settled.append(("ack", delivery_tag, False))
        return True

    def reject(self, delivery_tag: int, requeue: bool) -> bool:
        self.settled.append(("reject", delivery_tag, requeue))
        return True


def open_client(rec: Recorder, **tune: Any) -> ClientConnection:
    """A client connection through its handshake (``tune`` as for :func:`server_frames`)."""
    conn = ClientConnection(rec, credentials=Credentials.plain("guest", "guest"), vhost="/", heartbeat=10)
    conn.initiate()
    for data in server_frames(**tune):
        conn.receive(data)
    conn.data_to_send()
    assert rec.events == [("open",)]
    rec.events.clear()
    return conn
