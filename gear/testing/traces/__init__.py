"""Synthetic Gear trace files with a known truth: the fixture the pipeline's tests and benchmark use.

:func:`~gear.testing.traces.generate.generate` writes JSONL trace files of a simulated system (clock
skew, every call scenario, blocked periods, reconnects, bad lines) and returns the
:class:`~gear.testing.traces.truth.Truth` the analysis must reproduce. It lives here, beside the other
testing tools, so that ``gear.pipeline`` holds only the product::

    python -m gear.testing.traces.generate DIR --events 1000000
"""

from __future__ import annotations

__all__: tuple[str, ...] = ()
