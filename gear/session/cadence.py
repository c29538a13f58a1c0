"""When the zombie probe runs and how long it waits for its message: a policy without I/O.

The probe (:mod:`gear.session.probe`) waits ``quiet`` seconds without a delivery, then sends a message to its
own queue; each one that comes back doubles the wait, up to ``longest``; a delivery starts it afresh.
Two things keep thousands of instances from straining a broker with their probes:

* **Jitter.** Instances that (re)connected together would probe together, wave after wave; each wait
  is drawn between ``1 - jitter`` and 1 times the interval, so the waves spread out.
* **A late probe is sent again.** A probe that is not back (or not confirmed) in time is sent again at
  once with twice as long; only a second late one in a row is the verdict. A refusal needs no second.
* **A timeout that follows the broker's pace.** A broker busy with a reconnect storm answers in
  seconds, not milliseconds; a probe judged by a fixed timeout would then declare healthy links
  zombies, and each dropped link reconnects, loading the broker further. The probe's timeout is
  ``timeout`` or :data:`RTT_FACTOR` times the smoothed round trip, whichever is longer; the round trip
  is seeded, for each new link, by how long its setup took per round trip, then follows the probes
  that came back (weighted as TCP weighs its samples).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ("LATE_VERDICT", "RTT_FACTOR", "SETUP_ROUND_TRIPS", "ProbeCadence")

RTT_FACTOR = 4.0
"""A probe has this many smoothed round trips to come back (and at least ``timeout``)."""
SETUP_ROUND_TRIPS = 2
"""Round trips of a link's setup after its channels are open (the topology, then the consumes)."""
LATE_VERDICT = 2
"""Probes late in a row that make a link a zombie."""
_WEIGHT = 0.125
"""The weight of a new round-trip sample in the smoothed one."""


@dataclass(slots=True)
class ProbeCadence:
    """The probe's waits and timeouts (see the module docstring)."""

    quiet: float
    """Seconds without a delivery before the first probe."""
    longest: float
    """The longest wait between probes of a link that stays quiet."""
    timeout: float
    """The least a probe has to come back, in seconds."""
    jitter: float = 0.5
    """Each wait is drawn between ``1 - jitter`` and 1 times the interval."""
    interval: float = field(init=False)
    """The wait before the next probe, before jitter."""
    rtt: float = field(init=False, default=0.0)
    """The smoothed round trip in seconds (0: no sample yet)."""
    late: int = field(init=False, default=0)
    """Probes late in a row."""

    def __post_init__(self) -> None:
        self.longest = max(self.quiet, self.longest)
        self.interval = self.quiet

    def wait(self, draw: float) -> float:
        """The wait before the next probe, for a uniform ``draw`` in [0, 1)."""
        return self.interval * (1.0 - self.jitter * draw)

    def seen(self) -> None:
        """A delivery arrived: the next probe waits ``quiet`` again."""
        self.interval = self.quiet

    def link_set_up(self, took: float) -> None:
        """A new link's setup took ``took`` seconds: its round trip replaces what was known of the
        old link's."""
        self.rtt = took / SETUP_ROUND_TRIPS
        self.late = 0

    def came_back(self, took: float) -> None:
        """A probe came back after ``took`` seconds: the next waits twice as long (up to ``longest``)."""
        self.rtt = took if self.rtt <= 0 else (1 - _WEIGHT) * self.rtt + _WEIGHT * took
        self.late = 0
        self.interval = min(self.longest, 2 * self.interval)

    def deadline(self) -> float:
        """Seconds the next probe has to come back (twice as long after a late one)."""
        return max(self.timeout, RTT_FACTOR * self.rtt) * (1 + self.late)

    def was_late(self) -> bool:
        """A probe was not back in time: True when that is the verdict (the second in a row); else
        the next probe goes at once, with twice as long."""
        self.late += 1
        if self.late < LATE_VERDICT:
            return False
        self.late = 0
        return True
