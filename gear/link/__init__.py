"""Gear's link to a broker: the one asyncio shell over the AMQP client core (:mod:`gear.amqp`).

* :mod:`gear.link.stream`: the socket's one owner (reads into the core, corked writes);
* :mod:`gear.link.connection`: connect and handshake, the one dispatch of the core's events, channels
  that await replies, heartbeats, close;
* :mod:`gear.link.delivery`: deliveries handed up with how to settle them;
* :mod:`gear.link.publishing`: the confirm channel, each publish's outcome as a value;
* :mod:`gear.link.confirms`: one confirm channel's pending verdicts;
* :mod:`gear.link.link`: one connection with Gear's three channels, its watchdog and topology.
"""

from __future__ import annotations

from gear.amqp import Delivery
from gear.link.connection import ACK_DELAY
from gear.link.delivery import DeliveryCallback, Settle
from gear.link.link import Link, LinkEvents, open_link
from gear.link.publishing import Outcome, PublishResult

__all__ = (
    "ACK_DELAY",
    "Delivery",
    "DeliveryCallback",
    "Link",
    "LinkEvents",
    "Outcome",
    "PublishResult",
    "Settle",
    "open_link",
)
