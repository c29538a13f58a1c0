"""Pacing the links one process opens to one broker, so that a fleet's reconnect storm ends.

Theory of operation
-------------------
When a broker comes back to thousands of instances, all of them connect at once. Unpaced, the
broker's listen queue overflows (the kernel drops the SYNs it has no room for and the clients retry
them after 1, 3, 7, 15 s), and the connections that get in all progress together, each at a
thousandth of the broker's pace: none is ready before nearly all are, and when that takes longer than
the handshake timeout every attempt is abandoned and begun again. The broker stays busy with work that
is thrown away, and the fleet does not come back (a metastable failure, issue 37).

So the instances of one process (a fleet in a worker process, or the many services of a test) open
their links to one broker at most :data:`OPENING_AT_ONCE` at a time, first come first served: each
opening (connect, handshake, channels, topology, consumers) runs at the broker's full pace and
finishes well within its timeouts, the broker is kept busy and nothing it does is wasted. A process
with one instance is not slowed at all; many processes of one instance each are spread by the
reconnect backoff's jitter (:class:`gear.session.reconnect.Backoff`) instead. The bounds on an opening
(handshake timeout, setup step bounds) start when it gets its turn, not while it waits for one.
"""

from __future__ import annotations

import asyncio
import weakref

from gear.link.connection import Endpoint

__all__ = ("OPENING_AT_ONCE", "opening_turns")

OPENING_AT_ONCE = 64
"""Links one process opens to one broker at the same time; the others wait their turn (FIFO). 64, not
16: two processes of 1,000 instances each came back after a restart of RabbitMQ 4.3 in 5.2-10.8 s
(median 6.9) instead of 7.0-12.5 s (median 10.9), faster in 6 of 6 alternating runs, and of the
reference broker in 1.7-1.9 s instead of 2.1-2.4 s (4 of 4): a link's opening waits on broker round
trips, and 16 at a time left RabbitMQ's second core idle. At 5,000 both are bound by the broker's CPU
(21.2 and 22.4 s on RabbitMQ)."""

_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def opening_turns(url: str) -> asyncio.Semaphore:
    """The turns of this event loop for opening links to the broker at ``url`` (its host and port:
    a broker that does not answer holds up only the instances that wait for it).

    Raises:
        ConfigurationError: a malformed URL.
    """
    endpoint = Endpoint.parse(url)
    by_broker = _TURNS.setdefault(asyncio.get_running_loop(), {})
    key = (endpoint.host, endpoint.port)
    turns = by_broker.get(key)
    if turns is None:
        turns = by_broker[key] = asyncio.Semaphore(OPENING_AT_ONCE)
    return turns
