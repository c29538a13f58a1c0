"""The attempts of one publish, as a sans-I/O policy: what each attempt's outcome leads to.

:class:`Attempts` holds what the publisher learned about one logical message (how many attempts, how many
the broker returned or nacked, whether one may have reached it, whether the next goes out alone) and
turns each attempt's outcome into a :data:`Step`: :class:`Settled` (the publish is over), a
:class:`Retry` (what to wait for before the next attempt) or the :class:`~gear.errors.GearError` to
raise. It does no I/O and reads no clock: the publisher's loop
(:meth:`gear.session.publisher.Publisher.publish`) passes the loop time in and carries the steps out.
The rules are listed in :mod:`gear.session.publisher`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gear.errors import (
    ConnectionLostError,
    GearError,
    NotConfirmedError,
    OutcomeUnknownError,
    PublishRefusedError,
    UnroutableError,
)
from gear.link import Outcome, PublishResult

__all__ = ("NODE_REFUSALS", "RETRY_PAUSE", "Attempts", "RepublishPolicy", "Retry", "Settled", "Step")

RETRY_PAUSE = 0.01
"""Seconds before retrying an attempt that could not be sent (the link is being replaced)."""
_NACK_PAUSES = (0.25, 0.75)
"""Pauses before the 2nd and 3rd attempt of a nacked message; a 3rd nack is ``NotConfirmedError``.
A nack is rare and usually lasting (a full queue with ``reject-publish``), but during a RabbitMQ node
loss it is transient, and a channel opened during a quorum leader election stays nacked: each retry
goes out on a fresh channel, the last about a second after the first nack."""


@dataclass(frozen=True, slots=True)
class RepublishPolicy:
    """How returned messages are retried: delays double from ``initial`` up to ``maximum``."""

    initial: float = 0.05
    maximum: float = 1.0
    retry: bool = True
    give_up_after: int | None = None
    """Fail as unroutable once the broker returned this many attempts, even if the budget is not spent
    (``None``: republish until it is)."""
    refused_again: bool = False
    """Send a message the broker refused with ``403`` or ``404`` (it closed the channel over it, alone
    on it) again after a pause, until the budget ends, instead of failing at once: for replies, whose
    caller learns nothing from a refusal and waits until its deadline anyway. A node whose data disk
    died refuses every publish so (its metadata store fails) until the link is left for a healthy
    node. Other refusals (a ``406`` over the message itself) stay final: sending it again would only
    close the channel under the instance's other messages."""

    def delay(self, attempt: int) -> float:
        """The sleep after the ``attempt``-th return (1-based)."""
        return min(self.maximum, self.initial * 2.0 ** min(attempt - 1, 32))


@dataclass(frozen=True, slots=True)
class Settled:
    """The publish is over: ``routed`` (confirmed) or returned and not to be retried."""

    routed: bool


@dataclass(frozen=True, slots=True)
class Retry:
    """Publish again, after (in this order) taking the link out of service, pausing, renewing the
    channel; then, when ``bounded``, only if the budget is not spent (see :meth:`Attempts.spent`)."""

    pause: float = 0.0
    drop_link: bool = False
    """The link is unusable: the connector replaces it and the next attempt waits for the new one."""
    renew: bool = False
    """The next attempt goes out on a fresh publish channel (the broker nacked this one)."""
    bounded: bool = False


Step = Settled | Retry | GearError
"""What an attempt's outcome leads to."""

NODE_REFUSALS = frozenset({403, 404})
"""Refusals that a failing node gives any publish (``RepublishPolicy.refused_again``)."""
_CONFIRMED = Settled(routed=True)
_NOT_RETRIED = Settled(routed=False)
_ISOLATE = Retry()
_RECONNECT = Retry(pause=RETRY_PAUSE, drop_link=True, bounded=True)
_RESEND = Retry(pause=RETRY_PAUSE, bounded=True)


class Attempts:
    """The attempts of one message to ``address`` until loop time ``until`` (plus ``verdict_grace`` for
    the verdict on an attempt already sent)."""

    __slots__ = (
        "_maybe_routed",
        "_nacks",
        "_policy",
        "_refusals",
        "_slowest",
        "address",
        "attempt",
        "isolated",
        "reason",
        "returned",
        "until",
        "verdict_grace",
    )

    def __init__(self, address: str, policy: RepublishPolicy, until: float, verdict_grace: float) -> None:
        self.address = address
        self.until = until
        self.verdict_grace = verdict_grace
        self._policy = policy
        self.attempt = 0
        """The number of the attempt going out (1-based; 0 before the first)."""
        self.reason = ""
        """Why the attempt going out is a retry (``return``, ``nack``, ``channel_closed``, ``refused``,
        ``connection_lost``), empty for the first."""
        self.isolated = False
        """The attempt going out must be alone on its channel (a channel error may have been another's)."""
        self.returned = 0
        """Attempts the broker returned."""
        self._nacks = 0
        self._maybe_routed = ""
        """Why an earlier attempt may have reached the broker (empty: none may have)."""
        self._slowest = 0.0
        """Seconds from sending an attempt to the broker returning it, at most."""
        self._refusals = 0
        """Attempts the broker refused alone on their channel (see ``RepublishPolicy.refused_again``)."""

    def next(self) -> int:
        """Start the next attempt; returns its number."""
        self.attempt += 1
        return self.attempt

    def judge(self, result: PublishResult, now: float, took: float, url: str | None, link_open: bool) -> Step:
        """What the outcome of the current attempt leads to.

        Args:
            result: the attempt's outcome.
            now: the loop time.
            took: seconds from sending the attempt to its outcome.
            url: the broker the link was connected to (for an ``UnroutableError``).
            link_open: whether the link the attempt went out on is still open.
        """
        outcome = result.outcome
        if outcome is Outcome.CONFIRMED:
            return _CONFIRMED
        if outcome is Outcome.RETURNED:
            return self._returned(now, took, url)
        if outcome is Outcome.NACKED:
            self._nacks += 1
            nacks = self._nacks
            pause = _NACK_PAUSES[nacks - 1] if nacks <= len(_NACK_PAUSES) else None
            if pause is None or now + pause >= self.until:
                return NotConfirmedError(f"broker nacked the publish to {self.address!r} ({nacks} time(s))")
            # transient during a node loss: try again, after a pause, on a fresh channel
            self.reason = "nack"
            return Retry(pause=pause, renew=True)
        if outcome is Outcome.UNCONFIRMED:
            return OutcomeUnknownError(self.address, result.reason)
        if result.maybe_routed:
            self._maybe_routed = result.reason
        if outcome is Outcome.CHANNEL_CLOSED:
            if self.isolated:  # it was alone on the channel: the broker refused this very message
                return self._refused_now(result, now)
            self.isolated = True  # maybe a bystander of another message's error: retry it alone
            self.reason = "channel_closed"
            return _ISOLATE
        # LINK_LOST or NOT_SENT: the next attempt waits for a link (the publisher drops a lost one); it
        # always yields to the loop first, since a close callback may still have to run
        self.reason = "connection_lost"
        return _RECONNECT if outcome is Outcome.LINK_LOST or not link_open else _RESEND

    def spent(self, blocked: str | None, url: str | None) -> GearError:
        """The error for a budget that ran out before the next attempt could go out.

        Args:
            blocked: why the broker blocks the connection now (None: it does not).
            url: the broker connected to, if any.
        """
        if self._maybe_routed:
            return OutcomeUnknownError(
                self.address, f"sent, then {self._maybe_routed}, and not resent in time"
            )
        if self.returned:
            return UnroutableError(self.address, self.returned, url)
        if blocked is not None:
            return ConnectionLostError(
                f"the broker blocked the connection ({blocked}) for the whole budget; "
                f"nothing was sent to {self.address!r}"
            )
        return ConnectionLostError(
            f"no connection to the broker within the budget; nothing was sent to {self.address!r}"
        )

    def _refused_now(self, result: PublishResult, now: float) -> Step:
        refused = PublishRefusedError(self.address, result.reply_code, result.reason)
        if not self._policy.refused_again or result.reply_code not in NODE_REFUSALS:
            return refused
        self._refusals += 1
        pause = self._policy.delay(self._refusals)
        if now + pause >= self.until:
            return refused
        self.reason = "refused"  # the next attempt stays alone on its channel
        return Retry(pause=pause, bounded=True)

    def _returned(self, now: float, took: float, url: str | None) -> Step:
        self.returned += 1
        policy = self._policy
        if not policy.retry:
            return _NOT_RETRIED
        self._slowest = max(self._slowest, took)
        delay = policy.delay(self.attempt)
        cap = policy.give_up_after
        # an attempt whose verdict could only come too late would end as "outcome unknown" and hide
        # what every verdict so far said
        too_late = now + delay + self._slowest >= self.until + self.verdict_grace
        if too_late or (cap is not None and self.returned >= cap):
            return UnroutableError(self.address, self.returned, url)
        self.reason = "return"
        return Retry(pause=delay)
