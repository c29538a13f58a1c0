"""Credit-based flow control between the stages of the publish path.

Theory of operation
-------------------
RabbitMQ (``credit_flow.erl``) links every sender to every receiver with a credit spec
``{InitialCredit, MoreCreditAfter}`` = ``{400, 200}``. The sender starts with ``InitialCredit`` and spends
one credit per message it hands to that receiver. At zero it is *blocked* for that receiver and must stop
producing. The receiver counts the messages it has actually processed from each sender and, every
``MoreCreditAfter`` of them, grants that many credits back.

Here the chain is reader -> channel -> queue. The reader hands frames to the channel synchronously (the
channel runs inside the same call), so that link never holds messages and needs no ledger. The channel
hands messages to queues through each queue's inbox, which the broker drains once per event-loop turn;
that link is metered by a :class:`CreditLedger` on the channel and a :class:`CreditMeter` on the queue.
When any of a connection's channels is blocked, the connection stops parsing frames and the asyncio
shell stops reading the socket: TCP back-pressure then slows the publisher, and the broker holds at most
``InitialCredit`` unprocessed messages per channel and queue. Unlike ``connection.blocked``, this "flow"
state is never signalled to the client.
"""

from __future__ import annotations

__all__ = ("CreditLedger", "CreditMeter")


class CreditLedger:
    """The sender's side: credit left towards each receiver."""

    __slots__ = ("_credit", "blocked_on", "initial")

    def __init__(self, initial: int) -> None:
        self.initial = initial
        self._credit: dict[object, int] = {}
        self.blocked_on: set[object] = set()

    def spend(self, receiver: object) -> bool:
        """Spend one credit; returns False when this spend used the last one (the sender is now blocked)."""
        left = self._credit.get(receiver, self.initial) - 1
        self._credit[receiver] = left
        if left <= 0:
            self.blocked_on.add(receiver)
            return False
        return True

    def grant(self, receiver: object, amount: int) -> bool:
        """Receive ``amount`` credits from ``receiver``; True if that unblocked the sender entirely."""
        left = self._credit.get(receiver, self.initial) + amount
        self._credit[receiver] = min(left, self.initial)
        if left > 0 and receiver in self.blocked_on:
            self.blocked_on.discard(receiver)
            return not self.blocked_on
        return False

    def forget(self, receiver: object) -> bool:
        """The receiver went away (queue deleted): drop its ledger; True if that unblocked the sender."""
        self._credit.pop(receiver, None)
        if receiver in self.blocked_on:
            self.blocked_on.discard(receiver)
            return not self.blocked_on
        return False

    def credit(self, receiver: object) -> int:
        """Credit left towards ``receiver``."""
        return self._credit.get(receiver, self.initial)

    def receivers(self) -> list[object]:
        """Every receiver this sender has spent credit on (and not forgotten)."""
        return list(self._credit)

    @property
    def blocked(self) -> bool:
        """True while credit towards some receiver is exhausted."""
        return bool(self.blocked_on)


class CreditMeter:
    """The receiver's side: messages processed per sender since its last grant."""

    __slots__ = ("_processed", "more_after")

    def __init__(self, more_after: int) -> None:
        self.more_after = more_after
        self._processed: dict[object, int] = {}

    def processed(self, sender: object) -> int:
        """Count one processed message; returns the credit to grant now (0 or ``more_after``)."""
        count = self._processed.get(sender, 0) + 1
        if count >= self.more_after:
            self._processed[sender] = 0
            return count
        self._processed[sender] = count
        return 0

    def forget(self, sender: object) -> None:
        """The sender went away (channel closed)."""
        self._processed.pop(sender, None)

    def senders(self) -> list[object]:
        """Every sender this receiver has processed messages from (and not forgotten)."""
        return list(self._processed)
