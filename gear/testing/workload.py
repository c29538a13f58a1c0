"""A fault-test workload: calls, gathers and persistent casts streamed through a fleet, every outcome
recorded, then checked like a Jepsen history (nothing hung, only typed errors, nothing confirmed lost).

::

    ledger = Ledger()
    for svc in servers:
        serve_workload(svc, ledger)          # registers "wl.echo" and "wl.note" on each server
    async with Workload(client, "REPO", ledger, hosts=["h1", "h2"]) as load:
        ...                                  # inject faults while the load runs
    ledger.check()                           # AssertionError naming what went wrong
    print(ledger.row())

The workload calls ``TYPE.HOST`` (point-to-point) and ``TYPE`` (round-robin), gathers ``TYPE.*`` now and
then, and casts persistent messages to ``TYPE``. A call *hangs* when it ends later than its deadline
plus :data:`HANG_MARGIN`; a cast is *lost* when the broker confirmed it and no server received it.
Handler runs per request id are counted, so at-least-once duplicates are shown, not hidden.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gear.base.context import current_request
from gear.errors import GearError, OutcomeUnknownError
from gear.service import Service

__all__ = ("HANG_MARGIN", "Ledger", "Workload", "serve_workload")

HANG_MARGIN = 0.5
"""Seconds past its deadline after which an operation counts as hung."""

# A gather that ends with fewer replies than servers is not a success: it is counted as the error
# ``gather:partial`` (a gather returns what it has at its timeout, by contract).


@dataclass
class Ledger:
    """Everything that happened to one workload run."""

    calls: int = 0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    untyped: list[str] = field(default_factory=list)
    hung: list[str] = field(default_factory=list)
    casts_confirmed: set[str] = field(default_factory=set)
    cast_started: dict[str, float] = field(default_factory=dict)
    """Loop time at which each cast was sent (its first attempt)."""
    casts_unknown: set[str] = field(default_factory=set)
    casts_received: Counter[str] = field(default_factory=Counter)
    handled: Counter[str] = field(default_factory=Counter)
    handled_on: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Handler runs per (request id, server HOST)."""
    successes: list[tuple[float, float, str]] = field(default_factory=list)
    """(start, end, form) of every successful call or gather; form is ``p2p:HOST``, ``stateless``,
    ``multicast`` or ``broadcast``."""
    max_loop_lag: float = 0.0

    @property
    def typed_errors(self) -> int:
        """Operations that ended in a ``GearError``."""
        return sum(self.errors.values())

    @property
    def lost(self) -> set[str]:
        """Casts the broker confirmed that no server received."""
        return self.casts_confirmed - set(self.casts_received)

    def only_casts_sent_after(self, since: float) -> None:
        """Forget the casts sent before loop time ``since`` (e.g. into a queue that was deleted)."""
        self.casts_confirmed = {t for t in self.casts_confirmed if self.cast_started[t] >= since}

    @property
    def handled_twice(self) -> int:
        """Requests whose handler ran more than once (at-least-once redeliveries)."""
        return sum(1 for n in self.handled.values() if n > 1)

    @property
    def handled_twice_on_one_instance(self) -> int:
        """Requests whose handler ran more than once on the same server: what the duplicate window
        must prevent (the rest are round-robin redeliveries to the other server)."""
        return sum(1 for n in self.handled_on.values() if n > 1)

    def recovery(self, since: float, form: str | None = None) -> float | None:
        """Seconds from loop time ``since`` to the end of the first successful call (of ``form``, if
        given) that started after it (None: none yet)."""
        later = [end for start, end, f in self.successes if start >= since and form in (None, f)]
        return min(later) - since if later else None

    def check(self) -> None:
        """Raise AssertionError if anything hung, failed untyped, or a confirmed cast was lost."""
        problems = []
        if self.hung:
            problems.append(f"{len(self.hung)} hung past their deadline: {self.hung[:3]}")
        if self.untyped:
            problems.append(f"{len(self.untyped)} untyped errors: {self.untyped[:3]}")
        if self.lost:
            problems.append(f"{len(self.lost)} confirmed casts lost: {sorted(self.lost)[:5]}")
        assert not problems, "; ".join(problems)

    def row(self) -> dict[str, Any]:
        """The figures of this run, for a table."""
        return {
            "calls": self.calls,
            "ok": self.ok,
            "typed errors": self.typed_errors,
            "hung": len(self.hung),
            "untyped": len(self.untyped),
            "casts confirmed": len(self.casts_confirmed),
            "outcome unknown": len(self.casts_unknown),
            "lost": len(self.lost),
            "handled twice": self.handled_twice,
            "twice on one instance": self.handled_twice_on_one_instance,
            "max loop lag s": round(self.max_loop_lag, 3),
            "errors": dict(self.errors),
        }


def serve_workload(svc: Service, ledger: Ledger) -> None:
    """Register the workload's handlers on a server: ``wl.echo`` (calls: runs per request id are
    counted), ``wl.ping`` (gathers: every instance answers) and ``wl.note`` (casts)."""

    @svc.handler("wl.echo")
    async def echo(n: int) -> int:
        ctx = current_request()
        if ctx is not None:
            ledger.handled[ctx.request_id] += 1
            ledger.handled_on[ctx.request_id, svc.host] += 1
        return n

    @svc.handler("wl.ping")
    async def ping(n: int) -> int:
        return n

    @svc.handler("wl.note")
    async def note(token: str) -> None:
        ledger.casts_received[token] += 1


class Workload:
    """Streams the workload from ``client`` to the servers of ``type_`` until the context exits.

    Args:
        client: the calling service (started).
        type_: the servers' TYPE.
        ledger: where outcomes go.
        hosts: the servers' HOST words (point-to-point targets).
        concurrency: calls in flight at once.
        call_timeout: each call's deadline in seconds.
        cast_every: one cast after this many calls (0: no casts).
        gather_every: one gather after this many calls (0: no gathers).
        broadcast: every other gather goes to ``*.*`` instead of ``TYPE.*`` (the exchange must be
            this workload's own, or other instances answer too).
    """

    def __init__(
        self,
        client: Service,
        type_: str,
        ledger: Ledger,
        *,
        hosts: Sequence[str],
        concurrency: int = 8,
        call_timeout: float = 2.0,
        cast_every: int = 4,
        gather_every: int = 25,
        broadcast: bool = False,
    ) -> None:
        self._client = client
        self._type = type_
        self._ledger = ledger
        self._hosts = list(hosts)
        self._concurrency = concurrency
        self._timeout = call_timeout
        self._cast_every = cast_every
        self._gather_every = gather_every
        self._broadcast = broadcast
        self._counter = itertools.count()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._casts: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Workload:
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(self._concurrency)]
        self._tasks.append(asyncio.create_task(self._lag_meter()))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop starting new operations and wait for those in flight (each bounded by its deadline)."""
        self._stop.set()
        await asyncio.gather(*self._tasks, *self._casts)

    async def _worker(self) -> None:
        while not self._stop.is_set():
            n = next(self._counter)
            if self._cast_every and n % self._cast_every == 0:
                task = asyncio.create_task(self._cast(n))
                self._casts.add(task)
                task.add_done_callback(self._casts.discard)
            if self._gather_every and n % self._gather_every == 0:
                wide = self._broadcast and (n // self._gather_every) % 2
                form, address = ("broadcast", "*.*") if wide else ("multicast", f"{self._type}.*")
                await self._op(
                    form,
                    self._client.rpc.gather(
                        address, "wl.ping", n, timeout=self._timeout, expected=len(self._hosts)
                    ),
                    self._timeout,
                )
                continue
            host = self._hosts[(n // 2) % len(self._hosts)]
            form, target = ("stateless", self._type) if n % 2 else (f"p2p:{host}", f"{self._type}.{host}")
            await self._op(
                form, self._client.rpc.call(target, "wl.echo", n, timeout=self._timeout), self._timeout
            )

    async def _op(self, form: str, op: Any, budget: float) -> None:
        loop = asyncio.get_running_loop()
        ledger = self._ledger
        ledger.calls += 1
        started = loop.time()
        failed = True
        try:
            result = await op
            if form in ("multicast", "broadcast") and len(result) < len(self._hosts):
                ledger.errors["gather:partial"] += 1
            else:
                failed = False
        except GearError as exc:
            ledger.errors[type(exc).__name__] += 1
        except Exception as exc:
            ledger.untyped.append(f"{form}: {exc!r}")
        ended = loop.time()
        if ended - started - budget > HANG_MARGIN:
            ledger.hung.append(f"{form} ended {ended - started - budget:.2f}s after its deadline")
        if failed:
            await asyncio.sleep(0.01)  # a failing stream must not spin
        else:
            ledger.ok += 1
            ledger.successes.append((started, ended, form))

    async def _cast(self, n: int) -> None:
        loop = asyncio.get_running_loop()
        ledger = self._ledger
        token = f"c{n}"
        budget = 3 * self._timeout
        started = loop.time()
        ledger.cast_started[token] = started
        try:
            if await self._client.rpc.cast(self._type, "wl.note", token, retry_budget=budget):
                ledger.casts_confirmed.add(token)
        except GearError as exc:
            ledger.errors[f"cast:{type(exc).__name__}"] += 1
            if isinstance(exc, OutcomeUnknownError):
                ledger.casts_unknown.add(token)
        except Exception as exc:
            ledger.untyped.append(f"cast: {exc!r}")
        late = loop.time() - started - budget
        if late > HANG_MARGIN:
            ledger.hung.append(f"cast ended {late:.2f}s after its budget")

    async def _lag_meter(self) -> None:
        loop = asyncio.get_running_loop()
        tick = 0.05
        last = loop.time()
        while not self._stop.is_set():
            await asyncio.sleep(tick)
            now = loop.time()
            self._ledger.max_loop_lag = max(self._ledger.max_loop_lag, now - last - tick)
            last = now
