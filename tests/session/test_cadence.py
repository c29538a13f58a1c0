"""The zombie probe's cadence, without I/O: jittered waits, doubling intervals, a timeout that follows
the broker's pace."""

from __future__ import annotations

import pytest

from gear.session.cadence import RTT_FACTOR, SETUP_ROUND_TRIPS, ProbeCadence


def test_waits_are_jittered_below_the_interval_and_the_interval_doubles_up_to_the_longest() -> None:
    cadence = ProbeCadence(quiet=2.0, longest=30.0, timeout=2.0)
    assert [cadence.wait(d) for d in (0.0, 0.5, 0.999)] == pytest.approx([2.0, 1.5, 1.001])
    intervals = []
    for _ in range(6):
        cadence.came_back(0.001)
        intervals.append(cadence.interval)
    assert intervals == [4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    cadence.seen()
    assert cadence.interval == 2.0


def test_the_longest_wait_is_never_shorter_than_the_first() -> None:
    cadence = ProbeCadence(quiet=5.0, longest=1.0, timeout=2.0)
    cadence.came_back(0.001)
    assert cadence.interval == 5.0


def test_the_timeout_is_the_setting_while_the_broker_answers_quickly() -> None:
    cadence = ProbeCadence(quiet=2.0, longest=30.0, timeout=2.0)
    assert cadence.deadline() == 2.0  # nothing measured yet
    cadence.link_set_up(0.004)
    cadence.came_back(0.002)
    assert cadence.deadline() == 2.0


def test_a_slow_setup_gives_the_first_probe_of_its_link_longer() -> None:
    cadence = ProbeCadence(quiet=2.0, longest=30.0, timeout=2.0)
    cadence.link_set_up(3.0)  # a storm: the broker took seconds to answer
    assert cadence.deadline() == pytest.approx(RTT_FACTOR * 3.0 / SETUP_ROUND_TRIPS)


def test_the_round_trip_follows_the_probes_that_came_back() -> None:
    cadence = ProbeCadence(quiet=2.0, longest=30.0, timeout=0.1)
    cadence.link_set_up(2.0)
    before = cadence.deadline()
    for _ in range(80):
        cadence.came_back(0.01)  # the storm is over
    assert cadence.deadline() < before / 10
    assert cadence.rtt == pytest.approx(0.01, rel=0.1)
    cadence.link_set_up(0.02)  # a new link: its own measure replaces the old one
    assert cadence.rtt == pytest.approx(0.02 / SETUP_ROUND_TRIPS)


def test_a_late_probe_is_sent_again_with_twice_as_long_and_only_the_second_is_the_verdict() -> None:
    cadence = ProbeCadence(quiet=2.0, longest=30.0, timeout=2.0)
    assert cadence.was_late() is False  # a busy broker is slow: once is not a zombie
    assert cadence.deadline() == 4.0
    assert cadence.was_late() is True  # late again: the verdict
    assert cadence.deadline() == 2.0  # the next link starts afresh
    assert cadence.was_late() is False
    cadence.came_back(0.01)  # back in time: the late one is forgotten
    assert (cadence.late, cadence.deadline()) == (0, 2.0)
    assert cadence.was_late() is False
