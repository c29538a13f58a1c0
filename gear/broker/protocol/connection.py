"""The connection state machine: protocol header, handshake, channels, heartbeats, blocking, closing.

Theory of operation
-------------------
A :class:`Connection` is sans-I/O. The shell calls :meth:`receive` with received bytes and later writes
whatever :meth:`data_to_send` returns (the verbs of the client core, :mod:`gear.amqp`); it stops reading
the socket while :attr:`reading` is False and closes it once :attr:`finished` is True. Time arrives
through :meth:`tick`.

States, in order: ``header`` (waiting for the 8-byte protocol header) -> ``start-ok`` -> ``tune-ok`` ->
``open`` (waiting for ``connection.open``) -> ``running`` -> ``closing`` -> ``closed``. ``closing`` is
RabbitMQ's close handshake, entered when the server sent ``connection.close`` or answered the client's
with ``close-ok``: channels and exclusive queues are already released, every incoming frame other than
``connection.close`` (answered with ``close-ok`` again) and ``close-ok`` (which ends it) is discarded, and
the client closes the socket. A client that pipelined publishes before its ``connection.close`` thus
reads its ``close-ok`` instead of a reset. The wait is bounded: the socket is dropped after
``CLOSE_TIMEOUT`` (RabbitMQ waits the heartbeat interval, at most 30 s).

Logins (see :mod:`gear.broker.node.access`): a refused login is answered as RabbitMQ does, with
``connection.close`` 403 and a text that names only the mechanism when the client advertised
``authentication_failure_close``, else by closing the socket. A client that fails the handshake
otherwise (unknown mechanism, malformed response, a wrong method) gets no answer, and its socket is
closed only after ``SILENT_CLOSE_DELAY``, as RabbitMQ makes such clients wait.

Errors: every protocol violation raises :class:`~gear.broker.errors.AMQPError`. :meth:`_process` is the
single place that converts it: a soft code on a non-zero channel closes that channel, anything else
closes the connection with the code, text and failing method. After a framing error the byte stream
cannot be trusted, so the socket is closed right after the ``connection.close`` is written.

Back-pressure: frame parsing stops (``reading`` goes False) while a channel has exhausted its credit
towards a queue (*flow*), or after a content frame (header or body) arrives during a resource alarm
(*blocked*; the client is told with ``connection.blocked`` if it advertised that capability), as
RabbitMQ's reader does: a publisher is stopped at its first content frame, not at the end of a message
that may be large. Unparsed bytes stay buffered; the shell pauses the socket so TCP pushes back on the
client.

Fairness: one call parses a connection's frames for at most ``FAIR_SHARE_SECONDS`` of processor time
(or ``FAIR_SHARE_BYTES``); the rest waits for the next event-loop turn (the socket paused meanwhile), so a
client that floods the broker with costly frames (65,000-entry tables) delays the others by one share
and one frame, never by everything it sent. The clock is read every few frames, not for each.

Output: frames are queued with :meth:`send` and taken once per event-loop turn, so the shell makes one
``transport.write`` per connection per turn. Deliveries stop for the rest of a turn once
``OUTPUT_BATCH_LIMIT`` bytes are queued, or while the socket's write buffer is full; taking the output
(or the socket draining) lets the connection's consumers continue with the next batch.

Heartbeats: with a negotiated interval ``hb``, a heartbeat frame goes out when nothing was sent for
``hb/2``; the socket is dropped when nothing arrived for ``2*hb`` (the receive timer is paused while
blocked, as in RabbitMQ). Each connection has one timer in the core's heap for all of this (handshake
and close timeouts too), re-armed when it fires.

Exclusive queues are listed on the connection that declared them, which deletes exactly those when it
closes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from gear.base.timers import Timer
from gear.broker.errors import AMQPError
from gear.broker.model.checks import read_method
from gear.broker.node.access import Grants, LoginRefusedError
from gear.broker.node.status import ConnectionStatus
from gear.broker.protocol.channel import Channel, ChannelLimits
from gear.broker.protocol.handshake import (
    ACCEPTED_HEADERS,
    BadResponseError,
    check_tune,
    credentials,
    offered_mechanisms,
    server_properties,
)
from gear.wire import spec
from gear.wire.frames import (
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    HEARTBEAT_FRAME,
    PROTOCOL_HEADER,
    FrameError,
    FrameReader,
)
from gear.wire.methods import encode_method, method_id_of

if TYPE_CHECKING:
    from gear.broker.model.queue import Queue
    from gear.broker.node.core import BrokerCore

__all__ = (
    "CLOSE_TIMEOUT",
    "FAIR_SHARE_BYTES",
    "FAIR_SHARE_SECONDS",
    "OUTPUT_BATCH_LIMIT",
    "SILENT_CLOSE_DELAY",
    "Connection",
)

log = logging.getLogger("gear.broker")

#: Seconds the close handshake waits for the client's ``close-ok`` or socket close.
CLOSE_TIMEOUT = 3.0
#: Seconds a client that failed the handshake waits before its socket closes (RabbitMQ's 3 s).
SILENT_CLOSE_DELAY = 3.0
#: Deliveries stop for the rest of a turn once this much output is queued for one connection.
OUTPUT_BATCH_LIMIT = 1 << 20
#: Processor seconds of parsing one connection's frames per event-loop turn before the others get theirs.
FAIR_SHARE_SECONDS = 0.02
#: ... and at most this many bytes of them (bounds a turn whatever the clock says).
FAIR_SHARE_BYTES = 4 * 1024 * 1024
#: The share is checked after this many bytes or frames (reading the clock for each frame would cost).
_CHECK_BYTES = 16 * 1024
_CHECK_FRAMES = 64


class Connection:
    """One client connection (sans-I/O)."""

    def __init__(
        self,
        core: BrokerCore[Connection],
        peer: str,
        *,
        tls: bool = False,
        certificate_user: str | None = None,
    ) -> None:
        self.core = core
        self.peer = peer
        self.name = peer
        self.tls = tls
        self.certificate_user = certificate_user
        self.grants: Grants | None = None
        self.state = "header"
        self.user = ""
        self.vhost_name = ""
        self.client_capabilities: dict[str, Any] = {}
        self.channels: dict[int, Channel] = {}
        self.exclusive_queues: dict[Queue, None] = {}
        """The exclusive queues this connection declared (deleted with it)."""
        self.channel_max = core.config.channel_max
        self.frame_max = 4096
        self.heartbeat = 0
        self.finished = False
        self.flow_blocked = False
        self.alarm_blocked = False
        self.alarm_pending = bool(core.alarm_reasons)
        self.sent_blocked = False
        self.resume_pending = False
        self.parked = False
        """This turn's share of parsing is used up; the rest waits for the next turn."""
        self.write_paused = False
        self.starved = False
        self.out_bytes = 0
        self.publishes = 0
        self._reader = FrameReader()
        self._out: list[bytes] = []
        self._opened_at = core.now
        self._last_recv = core.now
        self._last_sent = core.now
        self._close_deadline: float | None = None
        self._last_flow = -1e9
        self._timer: Timer | None = None
        core.connections.add(self)
        self._wake_at(self._opened_at + core.config.handshake_timeout)

    # -- output -----------------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        """Queue bytes for the socket."""
        if self.finished:
            return
        if not self._out:
            self.core.mark_dirty(self)
        self._out.append(data)
        self.out_bytes += len(data)

    def flush_later(self) -> None:
        """Flush this connection's output at the end of the turn."""
        self.core.mark_dirty(self)

    def send_method(self, channel: int, method: spec.Method) -> None:
        """Queue one method frame."""
        self.send(encode_method(channel, method))

    def before_flush(self) -> None:
        """Let channels emit coalesced confirms before the output is taken."""
        for channel in self.channels.values():
            if channel.confirms_pending:
                channel.flush_confirms()

    def data_to_send(self) -> bytes:
        """Everything queued since the last call, as one buffer."""
        if not self._out:
            return b""
        data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
        self._out = []
        self.out_bytes = 0
        self._last_sent = self.core.now
        if self.starved and not self.write_paused:
            self.kick_consumers()  # room again: the next batch goes out in the next turn
        return data

    @property
    def can_send(self) -> bool:
        """False while the socket pushes back or this turn's batch is full (deliveries wait)."""
        if self.write_paused or self.out_bytes >= OUTPUT_BATCH_LIMIT:
            self.starved = True
            return False
        return True

    def kick_consumers(self) -> None:
        """Let the queues of this connection's consumers deliver again."""
        self.starved = False
        for channel in list(self.channels.values()):
            for queue in list(channel.consumer_queues):
                if not queue.deleted and queue.ready:
                    queue.deliver_ready()

    @property
    def reading(self) -> bool:
        """False while the shell should not read the socket."""
        return not (self.flow_blocked or self.alarm_blocked or self.parked or self.finished)

    @property
    def status_visible(self) -> bool:
        """Connections appear in the status view from the protocol header until the close handshake."""
        return self.state not in ("header", "closing") and not self.finished

    # -- input ------------------------------------------------------------------------------------
    def receive(self, data: bytes) -> None:
        """Take received bytes and process every complete frame (unless flow or alarm stops it)."""
        if self.finished:
            return
        core = self.core
        self._last_recv = core.now = core.clock()
        self._reader.feed(data)
        self._process()

    def _process(self) -> None:
        reader = self._reader
        clock = self.core.cpu_clock
        started = clock()
        handed = 0  # frame bytes handed out this turn
        check_at = _CHECK_BYTES
        frames = 0
        while self.reading:
            frames += 1
            if frames >= _CHECK_FRAMES or handed >= check_at:
                frames, check_at = 0, handed + _CHECK_BYTES
                used_up = handed >= FAIR_SHARE_BYTES or clock() - started >= FAIR_SHARE_SECONDS
                if used_up and reader.buffered:
                    self.parked = True
                    self.core.resume_next_turn(self)
                    return
            channel_id = 0
            try:
                if self.state == "header":
                    if not self._header():
                        return
                    continue
                try:
                    span = reader.next_span()
                except FrameError as error:
                    raise AMQPError(error.code, error.text) from error
                if span is None:
                    return
                ftype, channel_id, start, end = span
                payload = reader.buffer[start:end]
                if type(payload) is not bytes:
                    payload = bytes(payload)  # bodies are kept: immutable bytes
                handed += end - start + 8
                if self.state == "closing":
                    self._closing_frame(ftype, channel_id, payload)
                    continue
                self._frame(ftype, channel_id, payload)
            except AMQPError as error:
                if self.state == "closing":
                    reader.discard()  # after a framing error the stream is garbage until close-ok
                    continue
                self._fail(error, channel_id)
                if error.code == 501 or (self.state == "closing" and error.code in (502, 505)):
                    reader.discard()
            except Exception:  # a broker bug must cost one connection, never the broker
                log.exception("internal error on connection %s", self.name)
                self.core.internal_errors += 1
                self._fail(AMQPError(541, "internal error"), 0)
                reader.discard()

    def _header(self) -> bool:
        data = self._reader.take(8)
        if data is None:
            head = self._reader.peek(4)
            if not b"AMQP".startswith(head):
                self.send(PROTOCOL_HEADER)
                self._drop()
            return False
        if data not in ACCEPTED_HEADERS:
            self.send(PROTOCOL_HEADER)
            self._drop()
            return False
        self.state = "start-ok"
        self.send_method(
            0,
            spec.Connection.Start(
                server_properties=server_properties(),
                mechanisms=offered_mechanisms(self.certificate_user),
                locales="en_US",
            ),
        )
        return True

    def _frame(self, ftype: int, channel_id: int, payload: bytes) -> None:
        if ftype == FRAME_METHOD:
            method = read_method(payload)
            if channel_id == 0:
                self._connection_method(method)
                return
            if self.state != "running":
                raise AMQPError(504, f"channel {channel_id} used before connection.open")
            channel = self.channels.get(channel_id)
            if channel is None:
                self._open_channel(channel_id, method)
                return
            channel.handle_method(method)
            return
        if ftype == FRAME_HEARTBEAT:
            if channel_id != 0:
                raise AMQPError(505, f"heartbeat frame on channel {channel_id}")
            return
        if channel_id == 0:
            raise AMQPError(505, "content frame on channel 0")
        channel = self.channels.get(channel_id)
        if channel is None:
            raise AMQPError(504, f"expected 'channel.open' on channel {channel_id}")
        if ftype == FRAME_HEADER:
            channel.handle_header(payload)
        elif ftype == FRAME_BODY:
            channel.handle_body(payload)

    def _closing_frame(self, ftype: int, channel_id: int, payload: bytes) -> None:
        if ftype != FRAME_METHOD or channel_id != 0:
            return
        method = read_method(payload)
        if isinstance(method, spec.Connection.Close):
            self.send_method(0, spec.Connection.CloseOk())  # crossed closes: the client waits for it
        elif isinstance(method, spec.Connection.CloseOk):
            self._drop()

    # -- connection class -------------------------------------------------------------------------
    def _connection_method(self, method: spec.Method) -> None:
        state = self.state
        if isinstance(method, spec.Connection.StartOk) and state == "start-ok":
            self._start_ok(method)
        elif isinstance(method, spec.Connection.TuneOk) and state == "tune-ok":
            self._tune_ok(method)
        elif isinstance(method, spec.Connection.Open) and state == "open":
            vhost = method.virtual_host or "/"
            if vhost not in self.core.vhosts:
                raise AMQPError(530, f"vhost {vhost} not found", class_id=10, method_id=40)
            self.grants = self._vhost_grants(vhost, class_id=10, method_id=40)
            self.vhost_name = vhost
            self.state = "running"
            self.send_method(0, spec.Connection.OpenOk())
            self._heartbeat_timer()
            if self.alarm_pending:
                self.alarm_changed(True)
        elif isinstance(method, spec.Connection.Close):
            self.send_method(0, spec.Connection.CloseOk())
            self._enter_closing()  # the client closes the socket (frames it pipelined are discarded)
        elif isinstance(method, spec.Connection.CloseOk):
            self._drop()
        elif isinstance(method, spec.Connection.Blocked | spec.Connection.Unblocked):
            return
        elif isinstance(method, spec.Connection.UpdateSecret) and state == "running":
            # RabbitMQ's internal user database keeps no secret state to refresh: it re-checks the
            # vhost access (permissions may have changed) and answers update-secret-ok.
            self.grants = self._vhost_grants(self.vhost_name, class_id=10, method_id=70)
            for channel in self.channels.values():
                channel.grants = self.grants
            self.send_method(0, spec.Connection.UpdateSecretOk())
        else:
            cid, mid = method_id_of(method)
            raise AMQPError(
                503,
                f"unexpected method {method.name} in state {state!r}",
                class_id=cid,
                method_id=mid,
            )

    def _start_ok(self, method: spec.Connection.StartOk) -> None:
        props = method.client_properties if isinstance(method.client_properties, dict) else {}
        caps = props.get("capabilities")
        self.client_capabilities = dict(caps) if isinstance(caps, dict) else {}
        name = props.get("connection_name")
        if name:
            self.name = f"{self.peer} ({name!s})"[:512]
        access = self.core.access
        try:
            mechanism, user, password = credentials(method.mechanism, method.response, self.certificate_user)
            self.user = access.authenticate(mechanism, user, password, peer_address=self.peer_address)
        except BadResponseError as error:
            access.refused()
            log.info("handshake refused from %s: %s", self.peer, error)
            self._linger()
            return
        except LoginRefusedError as refused:
            # what RabbitMQ logs too, and what the client's error tells the user to look for
            log.warning("%s login refused from %s: %s", refused.mechanism, self.peer, refused.reason)
            if self.client_capabilities.get("authentication_failure_close") is True:
                self._fail(
                    AMQPError(
                        403,
                        f"Login was refused using authentication mechanism {refused.mechanism}. "
                        "For details see the broker logfile.",
                    ),
                    0,
                )
            else:
                self._linger()
            return
        self.state = "tune-ok"
        config = self.core.config
        self.send_method(
            0,
            spec.Connection.Tune(
                channel_max=config.channel_max, frame_max=config.frame_max, heartbeat=config.heartbeat
            ),
        )

    @property
    def peer_address(self) -> str:
        """The client's IP address (the peer text without its port)."""
        return self.peer.rsplit(":", 1)[0]

    def _vhost_grants(self, vhost: str, *, class_id: int, method_id: int) -> Grants:
        grants = self.core.access.grants(self.user, vhost)
        if grants is None:
            raise AMQPError(
                530,
                f"access to vhost '{vhost}' refused for user '{self.user}'",
                class_id=class_id,
                method_id=method_id,
            )
        return grants

    def _tune_ok(self, method: spec.Connection.TuneOk) -> None:
        check_tune(method, self.core.config)
        self.frame_max = method.frame_max
        self.channel_max = method.channel_max
        self.heartbeat = method.heartbeat
        self._reader.frame_max = self.frame_max
        self.state = "open"

    def _open_channel(self, channel_id: int, method: spec.Method) -> None:
        if not isinstance(method, spec.Channel.Open):
            cid, mid = method_id_of(method)
            raise AMQPError(
                504, f"expected 'channel.open' on channel {channel_id}", class_id=cid, method_id=mid
            )
        if self.channel_max and len(self.channels) >= self.channel_max:
            # RabbitMQ counts open channels; any number 1..65535 is fine below the count.
            raise AMQPError(
                530,
                f"number of channels opened ({len(self.channels)}) has reached the negotiated "
                f"channel_max ({self.channel_max})",
                class_id=20,
                method_id=10,
            )
        assert self.grants is not None, "channels open only after connection.open"
        core = self.core
        self.channels[channel_id] = Channel(
            self,
            channel_id,
            vhost=core.vhosts[self.vhost_name],
            grants=self.grants,
            limits=ChannelLimits(
                core.config.max_message_size,
                *core.config.credit,
                consumer_timeout=core.config.consumer_timeout,
            ),
            replies=core.replies,
        )
        self.send_method(channel_id, spec.Channel.OpenOk())

    def channel_closed(self, channel: Channel) -> None:
        """A channel finished closing; its number may be reused."""
        if self.channels.get(channel.number) is channel:
            del self.channels[channel.number]
        self.credit_changed()

    # -- errors and closing -----------------------------------------------------------------------
    def _fail(self, error: AMQPError, channel_id: int) -> None:
        if self.finished or self.state == "closing":
            return
        channel = self.channels.get(channel_id)
        if not error.hard and channel is not None and channel_id != 0:
            channel.close_with(error)
            return
        detail = f" ({error.detail})" if error.detail else ""
        log.info("closing connection %s: %s%s", self.name, error.text, detail)
        if self.state in ("header", "start-ok") and error.code != 403:
            self._linger()
            return
        self.send_method(
            0,
            spec.Connection.Close(
                reply_code=error.code,
                reply_text=error.text,
                class_id=error.class_id,
                method_id=error.method_id,
            ),
        )
        self._enter_closing()

    def force_close(self, reason: str) -> None:
        """``connection.close`` 320 CONNECTION_FORCED (``rabbitmqctl close_connection``)."""
        if self.finished or self.state == "closing":
            return
        if self.state in ("header", "start-ok", "tune-ok", "open"):
            self._drop()
            return
        forced = AMQPError(320, reason)
        self.send_method(
            0, spec.Connection.Close(reply_code=320, reply_text=forced.text, class_id=0, method_id=0)
        )
        self._enter_closing()

    def _linger(self) -> None:
        """Answer nothing and close the socket after ``SILENT_CLOSE_DELAY`` (a failed handshake)."""
        self._enter_closing()
        self._close_deadline = self.core.now + SILENT_CLOSE_DELAY
        self._wake_at(self._close_deadline)

    def _enter_closing(self) -> None:
        self.state = "closing"
        self._close_deadline = self.core.now + CLOSE_TIMEOUT
        self._wake_at(self._close_deadline)
        self._release_channels()
        self._delete_exclusive_queues()
        self.flow_blocked = False
        self.alarm_blocked = False

    def _drop(self) -> None:
        """Finish: release every channel (requeue unacked, drop exclusive queues) and ask to close."""
        if self.finished:
            return
        self.state = "closed"
        self._release_channels()
        self.finished = True
        self.core.timers.cancel(self._timer)
        self._timer = None
        self.core.mark_dirty(self)
        self.core.connections.discard(self)
        self._delete_exclusive_queues()

    def _delete_exclusive_queues(self) -> None:
        for queue in list(self.exclusive_queues):
            queue.vhost.delete_queue(queue)
        self.exclusive_queues.clear()

    def _release_channels(self) -> None:
        for channel in list(self.channels.values()):
            channel.release()
        self.channels.clear()

    def connection_lost(self) -> None:
        """The socket closed (client went away or the shell dropped it)."""
        if not self.finished:
            self._drop()

    # -- flow, alarms, timers ---------------------------------------------------------------------
    def credit_changed(self) -> None:
        """A channel's credit state changed: recompute the flow state."""
        blocked = any(ch.ledger.blocked for ch in self.channels.values())
        if blocked:
            self._last_flow = self.core.now
        if blocked != self.flow_blocked:
            self.flow_blocked = blocked
            if not blocked:
                self.resume_pending = True
                self.core.resume_later(self)

    def content_seen(self) -> None:
        """A content frame arrived: under an alarm, stop reading after it (RabbitMQ's
        ``publish_received``)."""
        if self.alarm_pending and not self.alarm_blocked:
            self.alarm_blocked = True
            if self.client_capabilities.get("connection.blocked") and not self.sent_blocked:
                self.sent_blocked = True
                self.send_method(0, spec.Connection.Blocked(reason=self.core.blocked_reason))

    def publish_seen(self) -> None:
        """A publish was completed (counted for the status view)."""
        self.publishes += 1

    def alarm_changed(self, active: bool) -> None:
        """A resource alarm was raised, or the last one cleared."""
        self.alarm_pending = active
        if active or self.state == "closing":
            return
        if self.sent_blocked:
            self.sent_blocked = False
            self.send_method(0, spec.Connection.Unblocked())
        if self.alarm_blocked:
            self.alarm_blocked = False
            self._last_recv = self.core.now
            self.resume_pending = True
            self.core.resume_later(self)

    def resume(self) -> None:
        """Continue parsing buffered frames after flow or an alarm released the connection, or in the
        turn after its fair share ran out."""
        self.resume_pending = False
        self.parked = False
        self._process()

    def _wake_at(self, when: float) -> None:
        """Have :meth:`tick` run at ``when`` (instead of whenever it was due)."""
        timers = self.core.timers
        timers.cancel(self._timer)
        self._timer = timers.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.tick(self.core.now)

    def _heartbeat_timer(self) -> None:
        """Running: wake for heartbeats only (none when the client turned them off)."""
        hb = self.heartbeat
        if hb:
            self._wake_at(min(self._last_sent + hb / 2, self._last_recv + 2 * hb))
        else:
            self.core.timers.cancel(self._timer)
            self._timer = None

    def tick(self, now: float) -> None:
        """Timers: handshake timeout, close-ok timeout, heartbeats (each connection's own timer calls
        this when something may be due; calling it early is harmless)."""
        if self.finished:
            return
        if self._close_deadline is not None:
            if now >= self._close_deadline:
                self._drop()
            elif self._timer is None:
                self._wake_at(self._close_deadline)
            return
        if self.state != "running":
            deadline = self._opened_at + self.core.config.handshake_timeout
            if now >= deadline:
                log.info("handshake timeout for %s", self.peer)
                self._drop()
            elif self._timer is None:
                self._wake_at(deadline)
            return
        hb = self.heartbeat
        if not hb:
            return
        if self.alarm_blocked:
            self._last_recv = now
        elif now - self._last_recv > 2 * hb:
            log.info("missed heartbeats from client %s, timeout: %ss", self.name, hb)
            self._drop()
            return
        if now - self._last_sent >= hb / 2 and not self._out:
            self.send(HEARTBEAT_FRAME)
            self._last_sent = now
        if self._timer is None:
            due = min(self._last_sent + hb / 2, self._last_recv + 2 * hb)
            self._wake_at(due if due > now else now + hb / 2)

    def status(self) -> ConnectionStatus:
        """This connection in the status view."""
        if self.alarm_blocked:
            state = "blocked"
        elif self.alarm_pending and self.publishes:
            state = "blocking"
        elif self.flow_blocked or self.core.now - self._last_flow < 1.0:
            state = "flow"
        else:
            state = "running"
        return ConnectionStatus(
            name=self.name,
            peer=self.peer,
            state=state,
            channels=len(self.channels),
            user=self.user,
            vhost=self.vhost_name,
            tls=self.tls,
        )
