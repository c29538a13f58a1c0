"""Gear's AMQP 0-9-1 client, sans I/O: the protocol core under every Gear connection.

The same shape as the reference broker's core (and h11's): state machines fed with bytes, handing out
small frozen event values (h11's shape) and bytes to send; no sockets, no clock, no asyncio, no
logging, no callbacks. The one I/O shell over it is :mod:`gear.link`.

* :mod:`gear.amqp.connection`: the handshake, channel 0, heartbeats in, both close handshakes;
* :mod:`gear.amqp.channel`: one channel: replies awaited, consumers, content assembly, settling, closing;
* :mod:`gear.amqp.events`: what ``receive`` returns (opened, blocked, replies, confirms, deliveries...);
* :mod:`gear.amqp.errors`: protocol violations and closes, and the broker's methods decoded.

Frames are read and written with :mod:`gear.wire`, the codec the reference broker uses too.
"""

from __future__ import annotations

from gear.amqp.channel import ChannelState, ClientChannel
from gear.amqp.connection import ClientConnection, ConnectionState, Credentials
from gear.amqp.errors import ChannelClosedError, ClosedError, ConnectionClosedError, ProtocolError
from gear.amqp.events import (
    Blocked,
    ChannelClosed,
    Confirm,
    ConnectionClosed,
    ConsumerCancelled,
    Delivery,
    Event,
    MethodReply,
    Opened,
    Returned,
    Unblocked,
)

__all__ = (
    "Blocked",
    "ChannelClosed",
    "ChannelClosedError",
    "ChannelState",
    "ClientChannel",
    "ClientConnection",
    "ClosedError",
    "Confirm",
    "ConnectionClosed",
    "ConnectionClosedError",
    "ConnectionState",
    "ConsumerCancelled",
    "Credentials",
    "Delivery",
    "Event",
    "MethodReply",
    "Opened",
    "ProtocolError",
    "Returned",
    "Unblocked",
)
