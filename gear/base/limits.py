"""The ranges Gear's numeric inputs are checked against, in one place.

A timeout of ``inf``, ``nan`` or ``1e300`` is not "wait forever": the deadline travels in every request
as whole milliseconds in a 64-bit header, and timers and the wire would fail on it deep inside the
stack. :func:`seconds` refuses such values where a user gives them (``rpc.call(timeout=...)``, the CLI's
``-t``, :class:`gear.Settings`), with a :class:`~gear.errors.ConfigurationError` that states the range.
"""

from __future__ import annotations

import math
from typing import Any

from gear.errors import ConfigurationError

__all__ = ("MAX_COUNT", "MAX_PORT", "MAX_SECONDS", "seconds")

MAX_SECONDS = 86_400.0
"""The longest timeout, deadline or retry budget Gear takes: one day, in seconds."""
MAX_PORT = 65_535
"""The highest TCP port."""
MAX_COUNT = 1_000_000
"""The largest count (replies expected, instances, rows) a command or call takes."""


def seconds(value: Any, what: str = "timeout", *, maximum: float = MAX_SECONDS) -> float:
    """``value`` as seconds if it is a finite number in ``(0, maximum]``.

    Raises:
        ConfigurationError: not a number (bools are not), not finite, not positive or over ``maximum``;
            the message names ``what`` and the range.
    """
    shown = repr(value) if len(repr(value)) <= 24 else f"{repr(value)[:21]}..."
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{what} must be a number of seconds, not {shown}")
    number = float(value) if isinstance(value, float) or abs(value) <= 2**53 else math.inf
    if not (math.isfinite(number) and 0 < number <= maximum):
        raise ConfigurationError(f"{what} must be more than 0 and at most {maximum:g} seconds, not {shown}")
    return number
