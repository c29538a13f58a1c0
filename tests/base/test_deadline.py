"""``Deadline``: one value for a request's deadline, on the monotonic clock and as unix time."""

from __future__ import annotations

import time

import pytest

from gear.base.deadline import Deadline


def test_a_deadline_from_a_timeout_is_that_far_ahead_on_both_clocks() -> None:
    deadline = Deadline.from_timeout(10)
    assert 9 < deadline.remaining() <= 10
    assert deadline.unix == pytest.approx(time.time() + 10, abs=1)
    assert not deadline.expired
    assert deadline.expiration_ms() > 9000


def test_a_passed_deadline_is_expired_and_leaves_no_expiration() -> None:
    deadline = Deadline.from_timeout(-1)
    assert deadline.expired
    assert deadline.remaining() <= -1
    assert deadline.expiration_ms() <= -1000


def test_a_deadline_read_from_the_wire_keeps_its_unix_milliseconds() -> None:
    unix_ms = int((time.time() + 5) * 1000)
    deadline = Deadline.from_unix_ms(unix_ms)
    assert deadline.unix_ms == unix_ms
    assert 4 < deadline.remaining() <= 5


def test_earlier_moves_both_clocks_and_sooner_picks_the_first() -> None:
    deadline = Deadline(at=100.0, unix=1000.0)
    earlier = deadline.earlier(0.5)
    assert earlier == Deadline(at=99.5, unix=999.5)
    assert deadline.sooner(earlier) is earlier
    assert earlier.sooner(deadline) is earlier
