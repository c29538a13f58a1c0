"""The only package that touches the AMQP client library (aiormq, the transport aio-pika is built on).

* :mod:`gear.adapter.link`: one connection with Gear's three channels, its watchdog and topology;
* :mod:`gear.adapter.publish`: one confirmed publish attempt, its outcome as a value;
* :mod:`gear.adapter.encode`: the frames of one ``basic.publish``, packed fast;
* :mod:`gear.adapter.consume`: deliveries in Gear's form, and acknowledgements;
* :mod:`gear.adapter.decode`: deliveries, confirms and returns read off the socket's bytes;
* :mod:`gear.adapter.confirms`: one publish channel's sequence numbers and pending verdicts;
* :mod:`gear.adapter.transport`: the socket (a reader that notes silence, a writer that batches);
* :mod:`gear.adapter.logs`: the library's network-error log lines moved to DEBUG;
* :mod:`gear.adapter._aiormq`: every private name of the library, checked at import.
"""

from __future__ import annotations

from gear.adapter import logs
from gear.adapter.consume import ACK_DELAY, Delivery, DeliveryCallback, ack, reject
from gear.adapter.link import Link, LinkEvents, open_link
from gear.adapter.publish import Outcome, PublishResult

__all__ = (
    "ACK_DELAY",
    "Delivery",
    "DeliveryCallback",
    "Link",
    "LinkEvents",
    "Outcome",
    "PublishResult",
    "ack",
    "open_link",
    "reject",
)

logs.install()
