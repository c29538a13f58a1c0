"""Gear's AMQP 0-9-1 client, sans I/O: the protocol core under every Gear connection.

The same shape as the reference broker's core (and h11's): state machines fed with bytes, handing out
typed messages through small handler Protocols and bytes to send; no sockets, no clock, no asyncio.
The one I/O shell over it is :mod:`gear.link`.

* :mod:`gear.amqp.connection`: the handshake, channel 0, heartbeats in, both close handshakes;
* :mod:`gear.amqp.channel`: one channel: replies awaited, consumers, content assembly, closing;
* :mod:`gear.amqp.message`: deliveries and returns as typed values, and how a delivery is settled;
* :mod:`gear.amqp.methods`: method frames (the hot ones by hand, the rest through pamqp);
* :mod:`gear.amqp.publish`: the frames of one ``basic.publish``, packed fast;
* :mod:`gear.amqp.errors`: protocol violations and closes.
"""

from __future__ import annotations

from gear.amqp.channel import ChannelHandler, ChannelState, ClientChannel
from gear.amqp.connection import ClientConnection, ConnectionHandler, ConnectionState, Credentials
from gear.amqp.errors import ChannelClosedError, ClosedError, ConnectionClosedError, ProtocolError
from gear.amqp.message import Consumer, Delivery, Returned, Settle
from gear.amqp.publish import encode_publish

__all__ = (
    "ChannelClosedError",
    "ChannelHandler",
    "ChannelState",
    "ClientChannel",
    "ClientConnection",
    "ClosedError",
    "ConnectionClosedError",
    "ConnectionHandler",
    "ConnectionState",
    "Consumer",
    "Credentials",
    "Delivery",
    "ProtocolError",
    "Returned",
    "Settle",
    "encode_publish",
)
