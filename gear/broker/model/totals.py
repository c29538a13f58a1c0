"""Message counters of one virtual host since the broker started: what RabbitMQ's global counters count.

The channel and the consumer code add to them as messages pass (an integer addition each); the
Prometheus exporter (:mod:`gear.broker.shell.metrics`) reads them under RabbitMQ's metric names.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ("MessageTotals",)


@dataclass(slots=True)
class MessageTotals:
    """Messages counted since start, as ``rabbitmq_global_messages_*_total`` name them."""

    received: int = 0
    """Publishes taken from clients (``basic.publish`` with its content)."""
    received_confirm: int = 0
    """Of those, on channels in confirm mode."""
    routed: int = 0
    """Publishes routed to at least one queue (or a direct reply-to consumer)."""
    unroutable_returned: int = 0
    """Mandatory publishes routed nowhere: returned to the publisher."""
    unroutable_dropped: int = 0
    """Publishes routed nowhere without ``mandatory``: dropped."""
    confirmed: int = 0
    """Publishes confirmed (``basic.ack``) to publishers."""
    delivered_manual_ack: int = 0
    """Deliveries to consumers that acknowledge."""
    delivered_auto_ack: int = 0
    """Deliveries to ``no_ack`` consumers."""
    redelivered: int = 0
    """Deliveries with the redelivered flag."""
    acknowledged: int = 0
    """Deliveries acknowledged by consumers."""

    def add(self, other: MessageTotals) -> None:
        """Add ``other``'s counts to these (summing vhosts)."""
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))
