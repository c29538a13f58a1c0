"""Broker-side frames built with pamqp (another implementation of the wire format), and a client core
driven through its handshake, for the sans-I/O client tests."""

from __future__ import annotations

from typing import Any

from pamqp import body as pamqp_body, commands, frame
from pamqp.header import ContentHeader

from gear.amqp import ClientConnection, Credentials, Opened

__all__ = ("content", "deliver", "method", "open_client", "server_frames")


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


def open_client(**tune: Any) -> ClientConnection:
    """A client connection through its handshake (``tune`` as for :func:`server_frames`)."""
    conn = ClientConnection(credentials=Credentials.plain("guest", "guest"), vhost="/", heartbeat=10)
    conn.initiate()
    events = [event for data in server_frames(**tune) for event in conn.receive(data)]
    conn.data_to_send()
    assert events == [Opened()]
    return conn
