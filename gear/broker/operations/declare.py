"""Exchange and queue methods: declare, delete, bind, unbind, purge, with RabbitMQ's error rules."""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING, Any

from gear.broker.errors import AMQPError, resource
from gear.broker.model import arguments as arguments_rules
from gear.broker.model.exchange import EXCHANGE_TYPES, Exchange
from gear.broker.model.queue import Queue
from gear.wire import spec

if TYPE_CHECKING:
    from collections.abc import Callable

    from gear.broker.operations.view import ChannelView

__all__ = ("HANDLERS", "generated_name", "lookup_queue", "queue_name")

REPLY_TO = "amq.rabbitmq.reply-to"


def generated_name(prefix: str) -> str:
    """``prefix-`` plus 22 characters of unpadded base64url of 16 random bytes (``rabbit_guid``)."""
    return prefix + "-" + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


def _clean(name: str) -> str:
    return name.replace("\r", "").replace("\n", "")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _inequivalent(arg: str, what: str, received: Any, current: Any) -> AMQPError:
    return AMQPError(
        406,
        f"inequivalent arg '{arg}' for {what}: received '{_text(received)}' but current is "
        f"'{_text(current)}'",
    )


def _check_default(name: str) -> None:
    if name == "":
        raise AMQPError(403, "operation not permitted on the default exchange")


def _exchange(channel: ChannelView, name: str) -> Exchange:
    exchange = channel.vhost.exchanges.get(name)
    if exchange is None:
        raise AMQPError(404, "no " + resource("exchange", name, channel.vhost.name))
    return exchange


def queue_name(channel: ChannelView, name: str) -> str:
    """``name``, or the channel's last declared queue for an empty name (RabbitMQ's shortcut).

    Raises:
        AMQPError: 404 for an empty name when no queue was declared on this channel.
    """
    if name:
        return name
    if not channel.last_queue:
        raise AMQPError(404, "no previously declared queue")
    return channel.last_queue


def lookup_queue(channel: ChannelView, name: str) -> Queue:
    """The queue ``name`` (empty: the channel's last declared), checking existence and exclusivity.

    Raises:
        AMQPError: 404 if missing, 405 if another connection owns it exclusively.
    """
    if name == "":
        if not channel.last_queue:
            raise AMQPError(404, "no previously declared queue")
        name = channel.last_queue
    queue = channel.vhost.queues.get(name)
    if queue is None:
        raise AMQPError(404, "no " + resource("queue", name, channel.vhost.name))
    _check_exclusive(channel, queue)
    if queue.inbox:  # a publish from this channel must be visible to its next get/purge/declare
        queue.drain()
    return queue


def _check_exclusive(channel: ChannelView, queue: Queue) -> None:
    if queue.exclusive_owner is not None and queue.exclusive_owner is not channel.conn:
        raise AMQPError(
            405,
            "cannot obtain exclusive access to locked "
            + resource("queue", queue.name, channel.vhost.name)
            + ". It could be originally declared on another connection or "
            "the exclusive property value does not match that of the original declaration.",
        )


def _exchange_declare(channel: ChannelView, method: spec.Exchange.Declare) -> None:
    name = _clean(method.exchange)
    _check_default(name)
    vhost = channel.vhost
    what = resource("exchange", name, vhost.name)
    existing = vhost.exchanges.get(name)
    if method.passive:
        if existing is None:
            raise AMQPError(404, "no " + what)
    else:
        kind = method.exchange_type
        if kind not in EXCHANGE_TYPES:
            raise AMQPError(406, f"invalid type '{kind}' for {what}")  # 4.x; 3.x used 503 (connection)
        arguments = dict(method.arguments or {})
        grants = channel.grants
        grants.check("configure", "exchange", name)
        if existing is None:
            if name.startswith("amq."):
                raise AMQPError(403, f"exchange name '{name}' contains reserved prefix 'amq.*'")
            alternate = arguments.get("alternate-exchange")
            if isinstance(alternate, str | bytes):
                grants.check("read", "exchange", name)
                grants.check("write", "exchange", _text(alternate))
            vhost.exchanges[name] = Exchange(
                name,
                kind,
                durable=method.durable,
                auto_delete=method.auto_delete,
                internal=method.internal,
                arguments=arguments,
            )
            if method.durable:
                vhost.durable_changed()
        else:
            for arg, received, current in (
                ("type", kind, existing.kind),
                ("durable", method.durable, existing.durable),
                ("auto_delete", method.auto_delete, existing.auto_delete),
                ("internal", method.internal, existing.internal),
                (
                    "alternate-exchange",
                    arguments.get("alternate-exchange"),
                    existing.arguments.get("alternate-exchange"),
                ),
            ):
                if _text(received) != _text(current):
                    raise _inequivalent(arg, what, received, current)
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Exchange.DeclareOk())


def _exchange_delete(channel: ChannelView, method: spec.Exchange.Delete) -> None:
    name = _clean(method.exchange)
    _check_default(name)
    vhost = channel.vhost
    if name.startswith("amq."):
        raise AMQPError(403, f"deletion of system exchange '{name}' in vhost '{vhost.name}' not allowed")
    channel.grants.check("configure", "exchange", name)
    exchange = vhost.exchanges.get(name)
    if exchange is not None:
        if method.if_unused and exchange.has_bindings():
            raise AMQPError(406, resource("exchange", name, vhost.name) + " in use")
        vhost.delete_exchange(exchange)
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Exchange.DeleteOk())


def _check_binding(channel: ChannelView, kind: str, destination: str, source: str) -> None:
    """RabbitMQ's order: write on the destination, no default exchange, read on the source."""
    channel.grants.check("write", kind, destination)
    if kind == "exchange":
        _check_default(destination)
    _check_default(source)
    channel.grants.check("read", "exchange", source)


def _exchange_bind(channel: ChannelView, method: spec.Exchange.Bind) -> None:
    _check_binding(channel, "exchange", method.destination, method.source)
    destination = _exchange(channel, method.destination)
    source = _exchange(channel, method.source)
    channel.vhost.bind(source, destination, method.routing_key, method.arguments or {})
    channel.vhost.binding_changed(source, destination)
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Exchange.BindOk())


def _exchange_unbind(channel: ChannelView, method: spec.Exchange.Unbind) -> None:
    _check_binding(channel, "exchange", method.destination, method.source)
    destination = channel.vhost.exchanges.get(method.destination)
    source = channel.vhost.exchanges.get(method.source)
    if (
        source is not None
        and destination is not None
        and channel.vhost.unbind(source, destination, method.routing_key, method.arguments or {})
    ):
        channel.vhost.binding_changed(source, destination)
        channel.vhost.maybe_auto_delete(source)
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Exchange.UnbindOk())


def _queue_declare(channel: ChannelView, method: spec.Queue.Declare) -> None:
    vhost = channel.vhost
    name = _clean(method.queue)
    conn = channel.conn
    if name.startswith(REPLY_TO):
        _reply_to_declare(channel, name, method)
        return
    if method.passive:
        queue = lookup_queue(channel, name)
        _declare_ok(channel, method, queue)
        return
    if name == "":
        name = generated_name("amq.gen")
    elif name.startswith("amq."):
        raise AMQPError(403, f"queue name '{name}' contains reserved prefix 'amq.*'")
    channel.grants.check("configure", "queue", name)
    what = resource("queue", name, vhost.name)
    arguments = dict(method.arguments or {})
    found = vhost.queues.get(name)
    if found is None:
        dead_letter = arguments.get("x-dead-letter-exchange")
        if isinstance(dead_letter, str | bytes):
            channel.grants.check("read", "queue", name)
            channel.grants.check("write", "exchange", _text(dead_letter))
        arguments_rules.validate(
            arguments,
            what,
            durable=method.durable,
            exclusive=method.exclusive,
            auto_delete=method.auto_delete,
        )
        queue = Queue(
            vhost,
            name,
            durable=method.durable and not method.exclusive,
            exclusive_owner=conn if method.exclusive else None,
            auto_delete=method.auto_delete,
            arguments=arguments,
            credit_more_after=channel.limits.credit_more_after,
        )
        vhost.queues[name] = queue
        if method.exclusive:
            conn.exclusive_queues[queue] = None
        if queue.store_key:
            vhost.durable_changed()
    else:
        queue = found
        _check_exclusive(channel, queue)
        if (queue.exclusive_owner is not None) != bool(method.exclusive):
            raise AMQPError(
                405,
                "cannot obtain exclusive access to locked " + what + ". It could be originally "
                "declared on another connection or the exclusive property value does not match "
                "that of the original declaration.",
            )
        durable = method.durable and not method.exclusive
        for flag, wanted, actual in (
            ("durable", durable, queue.durable),
            ("auto_delete", method.auto_delete, queue.auto_delete),
        ):
            if wanted != actual:
                raise _inequivalent(flag, what, wanted, actual)
        arguments_rules.assert_equivalent(arguments, queue.arguments, what)
        queue.last_used = vhost.now()
    _declare_ok(channel, method, queue)


def _declare_ok(channel: ChannelView, method: spec.Queue.Declare, queue: Queue) -> None:
    channel.last_queue = queue.name
    if not method.nowait:
        channel.conn.send_method(
            channel.number,
            spec.Queue.DeclareOk(queue.name, len(queue.ready) + len(queue.inbox), len(queue.consumers)),
        )


def _reply_to_declare(channel: ChannelView, name: str, method: spec.Queue.Declare) -> None:
    key = name[len(REPLY_TO) + 1 :]
    alive = name == REPLY_TO or channel.replies.alive(key)
    if not method.passive:
        raise AMQPError(403, f"queue name '{name}' contains reserved prefix 'amq.*'")
    if not alive:
        raise AMQPError(404, "no " + resource("queue", name, channel.vhost.name))
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Queue.DeclareOk(name, 0, 1 if key else 0))


def _bind_target(channel: ChannelView, name: str, exchange_name: str) -> tuple[Queue, Exchange]:
    name = queue_name(channel, _clean(name))
    _check_binding(channel, "queue", name, exchange_name)
    if name.startswith(REPLY_TO):
        raise AMQPError(403, f"access to {resource('queue', name, channel.vhost.name)} refused")
    queue = lookup_queue(channel, name)
    return queue, _exchange(channel, exchange_name)


def _queue_bind(channel: ChannelView, method: spec.Queue.Bind) -> None:
    queue, exchange = _bind_target(channel, method.queue, method.exchange)
    channel.vhost.bind(exchange, queue, method.routing_key, method.arguments or {})
    channel.vhost.binding_changed(exchange, queue)
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Queue.BindOk())


def _queue_unbind(channel: ChannelView, method: spec.Queue.Unbind) -> None:
    # Unbinding is idempotent in RabbitMQ: a missing queue, exchange or binding is not an error.
    name = _clean(method.queue) or channel.last_queue
    _check_binding(channel, "queue", name, method.exchange)
    vhost = channel.vhost
    queue = vhost.queues.get(name)
    exchange = vhost.exchanges.get(method.exchange)
    if queue is not None:
        _check_exclusive(channel, queue)
    if (
        queue is not None
        and exchange is not None
        and vhost.unbind(exchange, queue, method.routing_key, method.arguments or {})
    ):
        vhost.binding_changed(exchange, queue)
        vhost.maybe_auto_delete(exchange)
    channel.conn.send_method(channel.number, spec.Queue.UnbindOk())


def _queue_purge(channel: ChannelView, method: spec.Queue.Purge) -> None:
    name = queue_name(channel, _clean(method.queue))
    channel.grants.check("read", "queue", name)
    queue = lookup_queue(channel, name)
    count = queue.purge()
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Queue.PurgeOk(message_count=count))


def _queue_delete(channel: ChannelView, method: spec.Queue.Delete) -> None:
    name = _clean(method.queue) or channel.last_queue
    if not name:
        raise AMQPError(404, "no previously declared queue")
    channel.grants.check("configure", "queue", name)
    queue = channel.vhost.queues.get(name)
    count = 0
    if queue is not None:
        _check_exclusive(channel, queue)
        what = resource("queue", name, channel.vhost.name)
        if method.if_unused and queue.consumers:
            raise AMQPError(406, what + " in use")
        if method.if_empty and queue.ready:
            raise AMQPError(406, what + " is not empty")
        count = channel.vhost.delete_queue(queue)
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Queue.DeleteOk(message_count=count))


HANDLERS: dict[type, Callable[[ChannelView, Any], None]] = {
    spec.Exchange.Declare: _exchange_declare,
    spec.Exchange.Delete: _exchange_delete,
    spec.Exchange.Bind: _exchange_bind,
    spec.Exchange.Unbind: _exchange_unbind,
    spec.Queue.Declare: _queue_declare,
    spec.Queue.Bind: _queue_bind,
    spec.Queue.Unbind: _queue_unbind,
    spec.Queue.Purge: _queue_purge,
    spec.Queue.Delete: _queue_delete,
}
