"""The publisher's retry policy (``gear.session.attempts``), driven without I/O: each outcome of an attempt
and what it leads to, down to the typed error a caller sees when the budget runs out."""

from __future__ import annotations

from typing import Any

import pytest

from gear.errors import (
    ConnectionLostError,
    NotConfirmedError,
    OutcomeUnknownError,
    PublishRefusedError,
    UnroutableError,
)
from gear.link import Outcome, PublishResult
from gear.session.attempts import RETRY_PAUSE, Attempts, RepublishPolicy, Retry, Settled, Step

URL = "amqp://guest:***@broker:5672/"


def _attempts(until: float = 10.0, grace: float = 0.0, **policy: Any) -> Attempts:
    attempts = Attempts("REPO.h1", RepublishPolicy(**policy), until, grace)
    attempts.next()
    return attempts


def _judge(attempts: Attempts, outcome: Outcome, now: float = 0.0, took: float = 0.01, **result: Any) -> Step:
    """The step after an attempt ending with ``outcome``; a retry starts the next attempt."""
    step = attempts.judge(PublishResult(outcome, **result), now, took, URL, link_open=True)
    if isinstance(step, Retry):
        attempts.next()
    return step


def test_a_confirmed_attempt_settles_it_as_routed() -> None:
    attempts = _attempts()
    assert _judge(attempts, Outcome.CONFIRMED) == Settled(routed=True)
    assert attempts.reason == ""


def test_returns_are_republished_after_a_doubling_backoff_capped_at_the_maximum() -> None:
    attempts = _attempts(initial=0.05, maximum=0.15)
    pauses = [_judge(attempts, Outcome.RETURNED) for _ in range(4)]
    assert pauses == [Retry(pause=0.05), Retry(pause=0.1), Retry(pause=0.15), Retry(pause=0.15)]
    assert attempts.attempt == 5
    assert attempts.reason == "return"
    assert attempts.returned == 4


def test_a_return_not_to_be_retried_settles_it_as_not_routed() -> None:
    assert _judge(_attempts(retry=False), Outcome.RETURNED) == Settled(routed=False)


def test_no_republish_starts_whose_return_could_only_come_after_the_deadline() -> None:
    # returns take 0.2 s, backoff 0.05 s: at 0.5 s a republish would be returned at 0.75 s, past 0.7 s
    attempts = _attempts(until=0.7, initial=0.05, maximum=0.05)
    assert _judge(attempts, Outcome.RETURNED, now=0.2, took=0.2) == Retry(pause=0.05)
    step = _judge(attempts, Outcome.RETURNED, now=0.5, took=0.2)
    assert isinstance(step, UnroutableError)
    assert (step.attempts, step.broker) == (2, URL)


def test_the_verdict_grace_leaves_room_for_one_more_return() -> None:
    attempts = _attempts(until=0.7, grace=0.25, initial=0.05, maximum=0.05)
    _judge(attempts, Outcome.RETURNED, now=0.2, took=0.2)
    assert _judge(attempts, Outcome.RETURNED, now=0.5, took=0.2) == Retry(pause=0.05)


def test_a_call_gives_up_once_the_broker_returned_it_give_up_after_times() -> None:
    attempts = _attempts(give_up_after=2)
    assert isinstance(_judge(attempts, Outcome.RETURNED), Retry)
    step = _judge(attempts, Outcome.RETURNED)
    assert isinstance(step, UnroutableError)
    assert step.attempts == 2


def test_nacks_are_retried_twice_on_a_fresh_channel_and_the_third_is_not_confirmed() -> None:
    attempts = _attempts()
    assert _judge(attempts, Outcome.NACKED) == Retry(pause=0.25, renew=True)
    assert attempts.reason == "nack"
    assert _judge(attempts, Outcome.NACKED, now=0.3) == Retry(pause=0.75, renew=True)
    step = _judge(attempts, Outcome.NACKED, now=1.1)
    assert isinstance(step, NotConfirmedError)
    assert "3 time(s)" in str(step)


def test_a_nack_whose_pause_would_pass_the_budget_is_not_confirmed_at_once() -> None:
    step = _judge(_attempts(until=0.2), Outcome.NACKED)
    assert isinstance(step, NotConfirmedError)
    assert "1 time(s)" in str(step)


def test_a_closed_channel_is_retried_alone_once_then_the_refusal_is_this_messages() -> None:
    attempts = _attempts()
    assert not attempts.isolated
    assert _judge(attempts, Outcome.CHANNEL_CLOSED, reason="PRECONDITION_FAILED", reply_code=406) == Retry()
    assert attempts.isolated
    assert attempts.reason == "channel_closed"
    step = _judge(attempts, Outcome.CHANNEL_CLOSED, reason="PRECONDITION_FAILED - too big", reply_code=406)
    assert isinstance(step, PublishRefusedError)
    assert step.reply_code == 406
    assert "too big" in str(step)


def test_a_refused_reply_is_sent_again_alone_after_a_growing_pause_until_its_budget_ends() -> None:
    """A reply's policy (``refused_again``): a zombie node refuses every publish until the link moves,
    and the reply's caller would wait until its deadline anyway."""
    attempts = _attempts(until=1.0, refused_again=True, initial=0.1, maximum=0.4)
    refusal = PublishResult(Outcome.CHANNEL_CLOSED, "ACCESS_REFUSED", 403)
    assert attempts.judge(refusal, 0.0, 0.01, URL, True) == Retry()  # maybe a bystander: alone next
    steps = []
    for now in (0.0, 0.1, 0.3):
        attempts.next()
        steps.append(attempts.judge(refusal, now, 0.01, URL, True))
    assert steps == [Retry(0.1, bounded=True), Retry(0.2, bounded=True), Retry(0.4, bounded=True)]
    assert attempts.reason == "refused"
    assert attempts.isolated
    # the budget ends while the link is away: the first attempt's channel closed, so it may have
    # been routed before (a bystander of another message's error)
    spent = attempts.spent(None, URL)
    assert isinstance(spent, OutcomeUnknownError)
    assert "ACCESS_REFUSED" in str(spent)
    attempts.next()
    last = attempts.judge(refusal, 0.7, 0.01, URL, True)  # its pause would pass the budget
    assert isinstance(last, PublishRefusedError)


def test_a_reply_refused_over_itself_is_not_sent_again() -> None:
    """A 406 is about the message, not the node: sending it again would close the channel under the
    instance's other messages for nothing."""
    attempts = _attempts(refused_again=True)
    too_big = PublishResult(Outcome.CHANNEL_CLOSED, "PRECONDITION_FAILED - message size", 406)
    assert attempts.judge(too_big, 0.0, 0.01, URL, True) == Retry()
    attempts.next()
    assert isinstance(attempts.judge(too_big, 0.0, 0.01, URL, True), PublishRefusedError)


def test_a_lost_link_is_dropped_and_the_attempt_repeated_within_the_budget() -> None:
    attempts = _attempts()
    step = _judge(attempts, Outcome.LINK_LOST, reason="connection reset")
    assert step == Retry(pause=RETRY_PAUSE, drop_link=True, bounded=True)
    assert attempts.reason == "connection_lost"
    # it may have reached the broker: a budget spent now means the outcome is unknown
    spent = attempts.spent(None, URL)
    assert isinstance(spent, OutcomeUnknownError)
    assert "connection reset" in str(spent)


def test_an_attempt_not_sent_is_repeated_and_its_link_dropped_only_when_closed() -> None:
    attempts = _attempts()
    result = PublishResult(Outcome.NOT_SENT, "channel not free")
    assert attempts.judge(result, 0.0, 0.0, URL, link_open=True) == Retry(pause=RETRY_PAUSE, bounded=True)
    step = attempts.judge(result, 0.0, 0.0, URL, link_open=False)
    assert step == Retry(pause=RETRY_PAUSE, drop_link=True, bounded=True)
    spent = attempts.spent(None, None)  # nothing reached the broker
    assert isinstance(spent, ConnectionLostError)
    assert "nothing was sent to 'REPO.h1'" in str(spent)


def test_no_verdict_by_the_deadline_is_an_unknown_outcome() -> None:
    step = _judge(_attempts(), Outcome.UNCONFIRMED, reason="no confirm")
    assert isinstance(step, OutcomeUnknownError)


@pytest.mark.parametrize(
    ("history", "blocked", "expected", "says"),
    [
        ([], None, ConnectionLostError, "no connection to the broker within the budget"),
        ([], "low on memory", ConnectionLostError, "blocked the connection (low on memory)"),
        ([Outcome.RETURNED], None, UnroutableError, "REPO.h1"),
        ([Outcome.RETURNED, Outcome.LINK_LOST], None, OutcomeUnknownError, "not resent in time"),
        ([Outcome.NOT_SENT], "low on memory", ConnectionLostError, "blocked"),
    ],
)
def test_a_spent_budget_ends_with_the_error_that_says_what_happened(
    history: list[Outcome], blocked: str | None, expected: type[Exception], says: str
) -> None:
    attempts = _attempts()
    for outcome in history:
        assert isinstance(_judge(attempts, outcome, reason="gone"), Retry)
    error = attempts.spent(blocked, URL)
    assert type(error) is expected
    assert says in str(error)
