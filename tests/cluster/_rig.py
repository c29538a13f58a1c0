"""A hard-fault rig for a 3-node cluster: instances placed on purpose, a call and cast stream, one fault.

Two server instances ``TYPE.s1`` and ``TYPE.s2`` and a caller are each given the URL list that starts at
the node a scenario wants them on (``spread_urls=False``; :meth:`Rig.start` checks where they are).
The caller streams calls (deadline :data:`DEADLINE`) to ``TYPE.s1``, ``TYPE.s2`` and ``TYPE``, and
persistent casts to ``TYPE``; the servers record every handler run (request id, host, loop time). One
fault (:data:`FAULTS`) hits one node while the stream runs, is undone after ``outage`` seconds, and the
stream goes on. :meth:`Rig.result` says per run: calls ok and failed, hung, the longest call, how long
after the fault the slowest call was answered, the first success of each form after the fault, casts
confirmed, lost, run twice, and the longest time from a cast's confirm to its run.

``tests/cluster/test_hard_faults.py`` asserts on it; ``benchmarks/hard_faults.py`` prints it as the table
of docs/concepts/clusters.md. Everything the rig does to a node goes through the cluster scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiormq

import gear
from gear.base.context import current_request
from tests.cluster._cluster import ClusterHandle

__all__ = ("DEADLINE", "FAULTS", "Fault", "Rig", "run_fault")

DEADLINE = 10.0
"""Each call's deadline, as in issue 36's measurements."""
HANG_MARGIN = 0.5
LATE_CAST = 5.0
"""Seconds from a cast's confirm to its first run past which it counts as late."""

FORMS = ("p2p s1", "p2p s2", "stateless")


@dataclass(frozen=True)
class Fault:
    """One fault: what it does to which node, where the instances are, and how it is undone."""

    name: str
    kind: str
    """``stop_app``, ``kill``, ``disk-error``, ``disk-eio``, ``disk-full`` or ``cut``."""
    places: tuple[int, int, int]
    """Nodes of s1, s2 and the caller."""
    target: int = 1
    """The node that is faulted."""
    declare_on: int | None = None
    """Declare ``TYPE`` and ``TYPE.s1`` through this node first (their quorum leaders start there)."""
    releases: tuple[str, ...] = ("3.10", "4.3")
    polite: bool = False

    def outage(self, cluster: ClusterHandle) -> float:
        """Seconds the fault lasts: a long cut outlasts ``net_tick_timeout`` (1.25 x net_ticktime)."""
        if self.name == "cut-long":
            return 1.25 * cluster.net_ticktime + 8
        if self.name == "cut-short":
            return min(20.0, 0.5 * cluster.net_ticktime)
        return 12.0


FAULTS = {
    f.name: f
    for f in (
        Fault("stop_app", "stop_app", (1, 2, 3), polite=True),
        Fault("kill-serving", "kill", (1, 2, 3)),
        Fault("kill-leaders", "kill", (2, 3, 3), declare_on=1),
        Fault("kill-caller", "kill", (2, 3, 1)),
        Fault("disk-error", "disk-error", (1, 2, 3), releases=("4.3",)),
        Fault("disk-eio", "disk-eio", (1, 2, 3), releases=("4.3",)),
        Fault("disk-full", "disk-full", (1, 2, 3), releases=("4.3",)),
        Fault("cut-short", "cut", (1, 2, 3), releases=("4.3",)),
        Fault("cut-long", "cut", (1, 2, 3), releases=("4.3",)),
    )
}
"""Every fault the rig knows, by name. ``s1`` sits on the faulted node except for ``kill-leaders``
(only the quorum leaders of ``TYPE`` and ``TYPE.s1`` are there) and ``kill-caller``."""


@dataclass
class Ledger:
    """Every outcome of one run, on the rig's loop clock."""

    calls: list[tuple[float, float, str, str | None]] = field(default_factory=list)
    """(start, end, form, error or None)."""
    hung: int = 0
    cast_confirmed: dict[str, float] = field(default_factory=dict)
    cast_errors: Counter[str] = field(default_factory=Counter)
    cast_runs: dict[str, list[tuple[float, str]]] = field(default_factory=lambda: defaultdict(list))
    call_runs: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Handler runs per (request id, host)."""


class Rig:
    """Servers s1, s2 and a caller on the nodes a :class:`Fault` names, and their ledger."""

    def __init__(
        self,
        cluster: ClusterHandle,
        fault: Fault,
        *,
        settings: dict[str, Any] | None = None,
        deadline: float = DEADLINE,
    ) -> None:
        self.deadline = deadline
        self.cluster = cluster
        self.fault = fault
        tag = uuid.uuid4().hex[:6].upper()
        self.type = f"HF{tag}"
        self.exchange = f"gear-hf-{tag.lower()}"
        self.ledger = Ledger()
        self.servers: dict[str, gear.Service] = {}
        self.caller: gear.Service | None = None
        self._extra = settings or {}
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._seq = itertools.count()

    def _settings(self) -> dict[str, Any]:
        return {
            "exchange": self.exchange,
            "quorum": True,
            "spread_urls": False,
            "timeout": self.deadline,
            "connect_wait": 60.0,
            "drain_timeout": 2.0,
            "instance_queue_ttl": 300.0,
            "failback_interval": 5.0,
            **self._extra,
        }

    def _server(self, host: str, node: int) -> gear.Service:
        svc = gear.Service(self.type, host, url=self.cluster.urls_from(node), **self._settings())
        loop = asyncio.get_running_loop()
        ledger = self.ledger

        @svc.handler("echo")
        async def echo(n: int) -> int:
            ctx = current_request()
            if ctx is not None:
                ledger.call_runs[ctx.request_id, host] += 1
            return n

        @svc.handler("note")
        async def note(token: str) -> None:
            ledger.cast_runs[token].append((loop.time(), host))

        return svc

    def node_of(self, svc: gear.Service) -> int | None:
        broker = svc.health().get("broker")
        masked = [gear.mask_url(u) for u in self.cluster.urls]
        return masked.index(broker) + 1 if broker in masked else None

    async def start(self) -> None:
        """Declare where asked, start s1, s2 and the caller on their nodes, check where they are.

        Raises:
            AssertionError: an instance is not on its node.
        """
        s1, s2, caller = self.fault.places
        if self.fault.declare_on is not None:
            first = self._server("s1", self.fault.declare_on)
            await first.start()
            await first.stop()
        self.servers = {"s1": self._server("s1", s1), "s2": self._server("s2", s2)}
        for svc in self.servers.values():  # s1 first: it declares TYPE (leader on its node)
            await svc.start()
        self.caller = gear.Service(
            f"HC{self.type[2:]}", "c", url=self.cluster.urls_from(caller), serve=False, **self._settings()
        )
        await self.caller.start()
        where = {name: self.node_of(svc) for name, svc in [*self.servers.items(), ("caller", self.caller)]}
        assert where == {"s1": s1, "s2": s2, "caller": caller}, f"instances not where they belong: {where}"

    async def stop(self) -> None:
        for svc in [*self.servers.values(), *([self.caller] if self.caller else [])]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(svc.stop(), 20)
        await self._delete()

    async def _delete(self) -> None:
        names = {q.name for svc in [*self.servers.values(), self.caller] if svc for q in svc.topology.queues}
        for url in self.cluster.urls:
            with contextlib.suppress(Exception):
                conn = await asyncio.wait_for(aiormq.connect(url), 10)
                try:
                    for name in sorted(names):
                        ch = await conn.channel()
                        with contextlib.suppress(Exception):
                            await asyncio.wait_for(ch.queue_delete(name), 10)
                    ch = await conn.channel()
                    await ch.exchange_delete(self.exchange)
                finally:
                    await conn.close()
                return

    # -- the stream ------------------------------------------------------------------------------------

    async def _calls(self, form: str) -> None:
        assert self.caller is not None
        rpc, loop = self.caller.rpc, asyncio.get_running_loop()
        target = {"p2p s1": f"{self.type}.s1", "p2p s2": f"{self.type}.s2", "stateless": self.type}[form]
        while not self._stop.is_set():
            n = next(self._seq)
            start = loop.time()
            error: str | None = None
            try:
                if await asyncio.wait_for(rpc.call(target, "echo", n), self.deadline + 5) != n:
                    error = "wrong result"
            except gear.GearError as exc:
                error = type(exc).__name__
            except TimeoutError:
                error = "HUNG"
            end = loop.time()
            if end - start > self.deadline + HANG_MARGIN:
                self.ledger.hung += 1
            self.ledger.calls.append((start, end, form, error))
            await asyncio.sleep(0.05)

    async def _casts(self) -> None:
        assert self.caller is not None
        rpc, loop = self.caller.rpc, asyncio.get_running_loop()
        while not self._stop.is_set():
            token = f"t{next(self._seq)}"
            try:
                if await asyncio.wait_for(
                    rpc.cast(self.type, "note", token, retry_budget=self.deadline), self.deadline + 5
                ):
                    self.ledger.cast_confirmed[token] = loop.time()
            except gear.GearError as exc:
                self.ledger.cast_errors[type(exc).__name__] += 1
            except TimeoutError:
                self.ledger.hung += 1
            await asyncio.sleep(0.05)

    @contextlib.asynccontextmanager
    async def streaming(self, per_form: int = 2) -> AsyncIterator[None]:
        """Calls in every form and casts, ``per_form`` at a time each, until the block ends."""
        self._tasks = [asyncio.create_task(self._calls(form)) for form in FORMS for _ in range(per_form)]
        self._tasks += [asyncio.create_task(self._casts()) for _ in range(per_form)]
        try:
            yield
        finally:
            self._stop.set()
            await asyncio.gather(*self._tasks)

    async def drained(self, limit: float = 60.0) -> None:
        """Wait (bounded) until every confirmed cast ran."""
        give_up = asyncio.get_running_loop().time() + limit
        while set(self.ledger.cast_confirmed) - set(self.ledger.cast_runs):
            if asyncio.get_running_loop().time() > give_up:
                return
            await asyncio.sleep(0.2)

    # -- faults ------------------------------------------------------------------------------------------

    async def inflict(self) -> None:
        kind, n = self.fault.kind, self.fault.target
        if kind == "stop_app":
            await self.cluster.stop_app(n)
        elif kind == "kill":
            await self.cluster.kill(n)
        elif kind == "cut":
            await self.cluster.cut(n)
        else:
            await self.cluster.disk(n, kind.removeprefix("disk-"))

    async def undo(self) -> None:
        kind, n = self.fault.kind, self.fault.target
        if kind == "stop_app":
            await self.cluster.start_app(n)
        elif kind == "kill":
            await self.cluster.restart(n)
        elif kind == "cut":
            await self.cluster.uncut()
        else:
            await self.cluster.heal_async()

    # -- figures -----------------------------------------------------------------------------------------

    def result(self, fault_at: float) -> dict[str, Any]:
        """The run's figures (see the module docstring); times in seconds."""
        led = self.ledger
        failed = [c for c in led.calls if c[3] is not None]
        after = [c for c in led.calls if c[1] >= fault_at]
        first_ok = {}
        for form in FORMS:
            ends = [
                end for start, end, f, err in led.calls if f == form and err is None and start >= fault_at
            ]
            first_ok[form] = round(min(ends) - fault_at, 2) if ends else None
        runs_after_confirm = [
            led.cast_runs[t][0][0] - at for t, at in led.cast_confirmed.items() if led.cast_runs.get(t)
        ]
        lost = sorted(set(led.cast_confirmed) - {t for t, r in led.cast_runs.items() if r})
        return {
            "calls": len(led.calls),
            "ok": len(led.calls) - len(failed),
            "failed": len(failed),
            "errors": dict(Counter(f"{c[2]}: {c[3]}" for c in failed)),
            "failed calls started s": sorted(round(c[0] - fault_at, 1) for c in failed),
            "hung": led.hung,
            "slowest calls": [
                (form, round(start - fault_at, 1), round(end - start, 2))
                for start, end, form, _ in sorted(led.calls, key=lambda c: c[0] - c[1])[:3]
            ],
            "longest call s": round(max((end - start for start, end, _, _ in led.calls), default=0.0), 2),
            "answered within s": round(
                max((end - max(start, fault_at) for start, end, _, _ in after), default=0.0), 2
            ),
            "first success s": first_ok,
            "casts confirmed": len(led.cast_confirmed),
            "cast errors": dict(led.cast_errors),
            "casts lost": len(lost),
            "casts run twice": sum(1 for runs in led.cast_runs.values() if len(runs) > 1),
            "casts run twice on one instance": sum(
                1 for runs in led.cast_runs.values() if len(runs) > len({host for _, host in runs})
            ),
            "cast run late": sum(1 for d in runs_after_confirm if d > LATE_CAST),
            "latest cast run s": round(max(runs_after_confirm, default=0.0), 2),
            "calls run twice on one instance": sum(1 for n in led.call_runs.values() if n > 1),
            "calls run twice": sum(
                1 for n in Counter(rid for rid, _ in led.call_runs.elements()).values() if n > 1
            ),
        }


async def queues_healthy(cluster: ClusterHandle, prefix: str, limit: float = 60.0) -> list[str]:
    """Wait (bounded) until every quorum queue named ``prefix...`` has all three members online; the
    queues still short of that (empty when healthy)."""
    give_up = time.monotonic() + limit
    while True:
        short = []
        with contextlib.suppress(Exception):
            rows = await cluster.ctl_json(2, "list_queues", "name", "type", "members", "online")
            short = [
                r["name"]
                for r in rows
                if str(r.get("name", "")).startswith(prefix)
                and r.get("type") == "quorum"
                and len(r.get("online") or []) < 3
            ]
            if not short:
                return []
        if time.monotonic() > give_up:
            return short or ["(list_queues did not answer)"]
        await asyncio.sleep(1.0)


async def run_fault(
    cluster: ClusterHandle,
    fault: Fault,
    *,
    warmup: float = 3.0,
    after: float = 8.0,
    outage: float | None = None,
    settings: dict[str, Any] | None = None,
    on_fault: Callable[[Rig], Awaitable[None]] | None = None,
    repair_under_load: bool = True,
    deadline: float = DEADLINE,
) -> dict[str, Any]:
    """One run of ``fault`` under the stream; its figures, plus whether the queues were healthy after.

    ``repair_under_load=False`` leaves a node whose disk failed as it is until the stream has ended
    (it is repaired afterwards: it joins again from an empty disk, which takes 20-130 s and moves
    quorum queue members), so the figures are those of the fault alone."""
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)
    rig = Rig(cluster, fault, settings=settings, deadline=deadline)
    loop = asyncio.get_running_loop()
    phases: dict[str, float] = {}
    mark = loop.time()

    def phase(name: str) -> None:
        nonlocal mark
        phases[name] = round(loop.time() - mark, 1)
        mark = loop.time()

    try:
        await rig.start()
        phase("start")
        async with rig.streaming():
            await asyncio.sleep(warmup)
            fault_at = loop.time()
            await rig.inflict()
            if on_fault is not None:
                await on_fault(rig)
            await asyncio.sleep(max(0.0, fault_at + (outage or fault.outage(cluster)) - loop.time()))
            phase("warm-up and fault")
            undo_at = loop.time()
            if repair_under_load or not fault.kind.startswith("disk"):
                await rig.undo()
            phase("undo")
            await asyncio.sleep(after)
        phase("after")
        await rig.drained()
        phase("casts drained")
        row = rig.result(fault_at)
        row["undone s"] = [round(undo_at - fault_at, 1), round(undo_at - fault_at + phases["undo"], 1)]
        await cluster.heal_async()
        row["unhealthy queues"] = await queues_healthy(cluster, rig.type)
        phase("queues healthy")
        row["reconnects"] = {h: s.stats["reconnects"] for h, s in rig.servers.items()}
        row["zombies"] = {h: s.stats.get("zombies", 0) for h, s in rig.servers.items()}
        return row
    finally:
        await rig.stop()
        phase("stop")
        print(f"[hard fault] {fault.name} phases s: {phases}")
