"""``gear.run``: run a coroutine on uvloop when it is installed (a dependency of ``gear-rpc`` on
CPython outside Windows: faster one call at a time and cheaper per call than asyncio's loop).

Gear's own entry points (``gear serve``, the other CLI commands, ``python -m gear.broker``) start
their event loop through :func:`run`. A library user who runs their own loop keeps it: nothing here
changes the global event-loop policy, and the SDK works on either loop. ``GEAR_LOOP=asyncio`` keeps
the standard loop even when uvloop is installed (for comparisons and bug reports).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ("call_in_loop", "loop_factory", "loop_name", "run")

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory if uvloop is importable and ``GEAR_LOOP`` is not ``asyncio``, else None."""
    if os.environ.get("GEAR_LOOP", "").strip().lower() == "asyncio":
        return None
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def loop_name() -> str:
    """``"uvloop"`` or ``"asyncio"``: the loop :func:`run` would use."""
    return "asyncio" if loop_factory() is None else "uvloop"


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """Run ``main`` to completion on a new loop (uvloop if available) and close the loop, like
    :func:`asyncio.run`.

    Raises:
        RuntimeError: called from a running event loop.
    """
    with asyncio.Runner(debug=debug, loop_factory=loop_factory()) as runner:
        return runner.run(main)


def call_in_loop(loop: asyncio.AbstractEventLoop, func: Callable[[], T], timeout: float) -> T:
    """Run ``func`` on ``loop`` from another thread and return its result (what an HTTP endpoint
    served in a thread uses to read state that the loop owns).

    Raises:
        TimeoutError: the loop did not run it within ``timeout`` seconds (it is stuck or closed).
        Exception: whatever ``func`` raised.
    """
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if done.set_running_or_notify_cancel():
            try:
                done.set_result(func())
            except BaseException as exc:  # handed to the waiting thread
                done.set_exception(exc)

    try:
        loop.call_soon_threadsafe(run)
    except RuntimeError as exc:  # the loop is closed
        raise TimeoutError(f"the event loop is closed: {exc}") from None
    try:
        return done.result(timeout)
    except concurrent.futures.TimeoutError:
        done.cancel()
        raise TimeoutError(f"the event loop did not answer within {timeout:g}s") from None
