"""The one owner of a connection's socket: every byte read goes to the protocol core, every byte
written comes from it.

:class:`Stream` is the asyncio protocol under a Gear connection. Reads land in one reused buffer
(``recv_into``: asyncio's default read allocates a fresh 256 KiB ``bytes`` per ``recv``, which glibc
serves with ``mmap`` and gives back with ``munmap``) and go straight to
:meth:`gear.amqp.ClientConnection.receive` (uvloop's loop fills the buffer as asyncio's does; a
transport that cannot calls :meth:`Stream.data_received` with bytes of its own), whose events go to
the connection's dispatch. ``last_frame`` is the loop time of the last read that completed a frame:
the link's liveness clock.

With ``busy_poll`` (seconds, :attr:`gear.Settings.busy_poll`), every read and write keeps the event
loop polling, instead of sleeping in ``epoll_wait``, until that long after this socket's last I/O: a
reply or request that arrives meanwhile is read without the wake-up of a sleeping process, at the cost
of a busy core while the window lasts. The window is timed on ``time.monotonic``, not the loop's
clock: uvloop's advances in whole milliseconds, which would stretch a window of 0.2 ms to one.

Writes are corked: the first send of a loop iteration goes out at once (a lone call pays no extra
loop turn), later ones in the same iteration are coalesced into one ``write`` at its end (many calls
in flight cost one syscall per iteration, not one per frame), and acknowledgements may wait up to a
few milliseconds to share a send with the next outgoing frame.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import cast

from gear.amqp import ClientConnection, Event

__all__ = ("Stream",)

log = logging.getLogger("gear.link")

_RECV_BUFFER = 2**16


class Stream(asyncio.BufferedProtocol):
    """The asyncio protocol of one AMQP connection (see the module docstring)."""

    def __init__(
        self,
        core: ClientConnection,
        loop: asyncio.AbstractEventLoop,
        on_events: Callable[[list[Event]], None],
        on_lost: Callable[[str], None],
        *,
        busy_poll: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._core = core
        self._loop = loop
        self._now = loop.time
        self._on_events = on_events
        self._on_lost = on_lost
        self._recv = bytearray(_RECV_BUFFER)
        self._view = memoryview(self._recv)
        self.transport: asyncio.Transport | None = None
        self.last_frame = loop.time()
        """Loop time of the last read that completed at least one frame."""
        self.last_sent = loop.time()
        """Loop time of the last write."""
        self._scheduled = False
        self._sent_this_turn = False
        self._lazy: asyncio.TimerHandle | None = None
        self.busy_poll = busy_poll
        """Seconds the loop keeps polling after this socket's last read or write (0: it may sleep)."""
        self._poll_clock = clock
        self._poll_until = 0.0
        self.polling = False
        """Whether the loop is being kept from sleeping by this stream right now."""

    # -- asyncio.BufferedProtocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass, only alike
        self.flush()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(self._view[:nbytes]))

    def data_received(self, data: bytes) -> None:
        """Bytes read from the socket (``buffer_updated`` hands them on; a transport without buffered
        reads calls this directly)."""
        if self.busy_poll:
            self._keep_polling(self._poll_clock())
        core = self._core
        frames = core.frames_received
        try:
            events = core.receive(data)
        except Exception:  # a bug in Gear: this stream cannot be trusted any more; the link reconnects
            log.exception("reading from the broker failed unexpectedly; dropping the connection")
            self.abort()
            self._on_events(core.connection_lost("Gear failed reading from the broker (see the log)"))
            return
        if core.frames_received != frames:
            self.last_frame = self._now()
        if events:
            self._on_events(events)
        if core.has_output:
            self.send_soon()

    def eof_received(self) -> bool | None:
        return None  # close the transport: a broker that half-closes is gone

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self._lazy is not None:
            self._lazy.cancel()
            self._lazy = None
        reason = f"the socket closed ({exc})" if exc is not None else "the broker closed the socket"
        self._on_lost(reason)

    # -- writing -----------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write everything the core has queued, now."""
        self._scheduled = False
        data = self._core.data_to_send()
        transport = self.transport
        if data and transport is not None and not transport.is_closing():
            transport.write(data)
            self.last_sent = self._now()
            if self.busy_poll:
                self._keep_polling(self._poll_clock())

    def send_now(self) -> None:
        """Send what the core queued: at once if nothing went out yet in this loop iteration, else
        at the end of it together with everything else queued meanwhile."""
        if not self._sent_this_turn:
            self._sent_this_turn = True
            self._loop.call_soon(self._new_turn)
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def send_soon(self) -> None:
        """Send what the core queued at the end of this loop iteration."""
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def send_within(self, seconds: float) -> None:
        """Send what the core queued with the next write, or after ``seconds`` at the latest.

        A timer armed earlier stays armed after a flush (it fires early for later data, never late),
        so one call at a time does not create and cancel a timer per message.
        """
        if self._lazy is None and self.transport is not None:
            self._lazy = self._loop.call_later(seconds, self._lazy_due)

    def _lazy_due(self) -> None:
        self._lazy = None
        self.flush()

    # -- busy polling ------------------------------------------------------------------------------

    def _keep_polling(self, now: float) -> None:
        """Poll until ``busy_poll`` after ``now`` (the poll clock's time of this I/O)."""
        self._poll_until = now + self.busy_poll
        if not self.polling:
            self.polling = True
            self._loop.call_soon(self._poll)

    def _poll(self) -> None:
        """Run again in the next loop iteration (so that iteration polls the sockets with a zero
        timeout instead of sleeping), until ``busy_poll`` has passed since the last I/O."""
        if self.transport is not None and self._poll_clock() < self._poll_until:
            self._loop.call_soon(self._poll)
        else:
            self.polling = False

    def _new_turn(self) -> None:
        self._sent_this_turn = False

    def close(self) -> None:
        """Send what is queued, then close the socket."""
        self.flush()
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Drop the socket at once (nothing queued is sent)."""
        self._core.data_to_send()
        if self.transport is not None:
            self.transport.abort()
