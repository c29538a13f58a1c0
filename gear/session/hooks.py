"""Service events and their hooks: the one way to be told what happens to a service instance.

=================  ==============================  ==================================================
hook               called as                       when
=================  ==============================  ==================================================
``on_ready``       ``fn()``                        a link is up, topology declared, consumers running
                                                   (at start, after every reconnect, after a failback)
``on_lost``        ``fn(reason)``                  the link was lost; reconnecting starts
``on_blocked``     ``fn(reason)``                  the broker blocks publishing (memory or disk alarm)
``on_unblocked``   ``fn()``                        the broker lets publishing go on again
``on_undeliverable`` ``fn(address, method, payload)``  a cast was returned (no queue bound) for its
                                                   whole retry budget; without this hook the cast
                                                   raises ``UnroutableError`` instead
=================  ==============================  ==================================================

Set a hook by assignment or as a decorator, and clear it with ``None``::

    svc.on_blocked = lambda reason: log.warning("blocked: %s", reason)

    @svc.on_lost
    async def lost(reason: str) -> None: ...

    svc.on_blocked = None

A hook may be a plain or an async function. Gear calls it in the event loop: a plain one inline (keep
it short), an async one as a task; an exception it raises is logged, never raised into Gear, except for
``on_undeliverable``, which the cast awaits and whose exception the cast raises.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, Protocol, overload

__all__ = ("Hook", "HookAttr", "Hooks")

log = logging.getLogger("gear.session.hooks")

P = ParamSpec("P")

_tasks: set[asyncio.Future[Any]] = set()


class Hook(Generic[P]):
    """The slot of one event: at most one function, called by :meth:`fire` or :meth:`run`."""

    __slots__ = ("func", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.func: Callable[P, object] | None = None

    def __call__(self, func: Callable[P, object]) -> Callable[P, object]:
        """Set ``func`` as the hook (so ``@svc.on_lost`` works as a decorator); returns it."""
        self.func = func
        return func

    def __bool__(self) -> bool:
        return self.func is not None

    def fire(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Call the hook, if set, without waiting for it: an async one runs as a task; exceptions
        are logged."""
        func = self.func
        if func is None:
            return
        try:
            out = func(*args, **kwargs)
        except Exception:
            log.exception("the %s hook %r failed", self.name, func)
            return
        if asyncio.iscoroutine(out):
            task = asyncio.ensure_future(out)
            _tasks.add(task)
            task.add_done_callback(self._done)

    async def run(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Call the hook, if set, and wait for it.

        Raises:
            Exception: whatever the hook raises.
        """
        func = self.func
        if func is not None:
            out = func(*args, **kwargs)
            if asyncio.iscoroutine(out):
                await out

    def _done(self, task: asyncio.Future[Any]) -> None:
        _tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("the %s hook failed", self.name, exc_info=task.exception())


class Hooks:
    """The hooks of one service instance (see the module docstring for when each is called)."""

    __slots__ = ("blocked", "lost", "ready", "unblocked", "undeliverable")

    def __init__(self) -> None:
        self.ready: Hook[[]] = Hook("on_ready")
        self.lost: Hook[[str]] = Hook("on_lost")
        self.blocked: Hook[[str]] = Hook("on_blocked")
        self.unblocked: Hook[[]] = Hook("on_unblocked")
        self.undeliverable: Hook[[str, str, Any]] = Hook("on_undeliverable")


class _HasHooks(Protocol):
    """What :class:`HookAttr` needs from its owner: a ``hooks`` attribute."""

    @property
    def hooks(self) -> Hooks: ...


class HookAttr(Generic[P]):
    """``svc.on_<event>``: reads as the :class:`Hook` (a decorator), assigning sets or clears it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._event = name.removeprefix("on_")

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> HookAttr[P]: ...
    @overload
    def __get__(self, obj: _HasHooks, objtype: type | None = None) -> Hook[P]: ...
    def __get__(self, obj: _HasHooks | None, objtype: type | None = None) -> Hook[P] | HookAttr[P]:
        if obj is None:
            return self
        hook: Hook[P] = getattr(obj.hooks, self._event)
        return hook

    def __set__(self, obj: _HasHooks, value: Callable[P, object] | None) -> None:
        getattr(obj.hooks, self._event).func = value
