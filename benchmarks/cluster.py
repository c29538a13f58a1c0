"""Gear on a 3-node RabbitMQ cluster: losing a node under load, and what quorum=True costs.

Needs the local cluster (``scripts/rabbitmq-cluster start``). Everything is Gear's public API, so the
same script measures the SDK of the day ("before" and "after" numbers of issue 10).

**Node loss.** Three server instances ``BC<tag>.h1..h3`` run one per node (``hN`` on node N; h1
starts first, so the shared ``TYPE`` queue is declared through node 1), with ``quorum=True``. A caller
(``serve=False``) on node ``--caller-node`` (2) streams, with ``--workers`` calls in flight per form,
each with a ``--timeout`` deadline:

* ``p2p lost``: calls to the server on the lost node; ``p2p kept``: to the server on the next node;
* ``stateless``: calls to ``TYPE``; ``multicast`` / ``broadcast``: gathers on ``TYPE.*`` / ``*.*``
  that must collect all three replies;
* ``casts``: persistent casts to ``TYPE`` carrying a sequence number, recorded by whichever instance
  consumes them.

Node ``--node`` is lost (``stop_app``, then in a second scenario ``kill -9``) for ``--outage``
seconds, then brought back, and the stream goes on for ``--after`` seconds. Per form: attempts, ok,
failed (by error type), hung (no outcome ``--grace`` s after the deadline), and ``recovered``: seconds
from the loss until the form's last run of successes began (0 if it never failed; ``(back+x)`` when
that only came x s after the node returned; ``never``). For casts: confirmed, consumed, lost (confirmed,
never consumed after a drain), duplicates.

**Throughput.** Stateless calls with ``--concurrency`` in flight for ``--seconds``, with ``quorum=False``
and ``quorum=True`` (three servers each, spread over the nodes), in interleaved rounds; the median of
the per-round ratios is reported. ``quorum=True`` makes the TYPE queue a quorum queue, and with an SDK
that does so (see the header line) the instance queues that carry the replies too.

Usage::

    scripts/rabbitmq-cluster start
    .venv/bin/python benchmarks/cluster.py [--loss stop_app,kill] [--outage 15] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import gear

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _nodes import Nodes

__all__ = ("main",)

FORMS = ("p2p lost", "p2p kept", "stateless", "multicast", "broadcast")


@dataclass
class Attempt:
    start: float
    end: float
    ok: bool
    error: str | None = None


@dataclass
class Ledger:
    """Every attempt of one form, and the casts' bookkeeping."""

    attempts: list[Attempt] = field(default_factory=list)
    hung: int = 0


def rotated(urls: tuple[str, ...], first: int) -> list[str]:
    """The URL list starting at node ``first`` (1-based)."""
    i = first - 1
    return [*urls[i:], *urls[:i]]


def node_of(svc: gear.Service, nodes: Nodes) -> int | None:
    """The node (1..3) ``svc`` is connected to, from its public ``health()`` (None if it cannot say)."""
    health = getattr(svc, "health", None)
    if health is None:
        return None
    broker = health().get("broker") or ""
    ports = [urlsplit(u).port for u in nodes.urls]
    port = urlsplit(broker).port if broker else None
    return ports.index(port) + 1 if port in ports else None


class Bench:
    """One node-loss scenario: servers, a caller, the streams and their ledgers.

    Server ``hN`` is placed on node N and the caller on ``--caller-node``: each is given the URL list
    starting at its node; an SDK that spreads instances by itself may put it elsewhere, so an instance
    that reports (``health()``) another node is stopped and started again under the next host name
    (``h1b``, ``h1c``...) until it lands where the scenario needs it.
    """

    def __init__(self, nodes: Nodes, args: argparse.Namespace, quorum: bool) -> None:
        self.nodes, self.args, self.quorum = nodes, args, quorum
        tag = uuid.uuid4().hex[:6].upper()
        self.type = f"BC{tag}"
        self.caller_type = f"BCC{tag}"
        self.exchange = f"gear-bench-{tag.lower()}"  # broadcasts stay inside this run
        self.consumed: Counter[int] = Counter()
        self.servers: dict[int, gear.Service] = {}
        self.caller: gear.Service | None = None
        self.tried: list[str] = []  # every instance queue name, for the clean-up
        self.ledgers = {form: Ledger() for form in (*FORMS, "casts")}
        self.cast_outcomes: dict[int, str] = {}
        self.stop = asyncio.Event()

    def _common(self) -> dict[str, Any]:
        return {
            "exchange": self.exchange,
            "timeout": self.args.timeout,
            "quorum": self.quorum,
            "reconnect_initial": 0.1,
            "reconnect_max": 1.0,
            "connect_wait": 30.0,
            "handshake_timeout": 5.0,
            "instance_queue_ttl": 600.0,
            "drain_timeout": 2.0,
        }

    def _server(self, host: str, n: int) -> gear.Service:
        svc = gear.Service(self.type, host, url=rotated(self.nodes.urls, n), **self._common())

        @svc.handler("echo")
        async def echo(value: int) -> int:
            return value

        @svc.handler("record")
        async def record(seq: int) -> None:
            self.consumed[seq] += 1

        return svc

    async def _placed(self, make: Callable[[str], gear.Service], base: str, n: int) -> gear.Service:
        for suffix in ("", *"bcdefghijklmnop"):
            svc = make(base + suffix)
            self.tried.append(svc.identity)
            await svc.start()
            where = node_of(svc, self.nodes)
            if where in (None, n):
                return svc
            await svc.stop()
        raise RuntimeError(f"could not place an instance on node {n}")

    async def start(self) -> None:
        for n in (1, 2, 3):  # h1 first: the TYPE queue is declared through node 1
            self.servers[n] = await self._placed(functools.partial(self._server, n=n), f"h{n}", n)
        c = self.args.caller_node
        self.caller = await self._placed(
            lambda host: gear.Service(
                self.caller_type, host, url=rotated(self.nodes.urls, c), serve=False, **self._common()
            ),
            "c",
            c,
        )

    async def close(self) -> None:
        for svc in (self.caller, *self.servers.values()):
            if svc is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(svc.stop(), 15)
        await _delete(self.nodes.urls[self.args.caller_node - 1], [self.type, *self.tried], self.exchange)

    # -- streams -------------------------------------------------------------------------------------

    def _operation(self, form: str, lost: int) -> Callable[[int], Awaitable[bool]]:
        assert self.caller is not None
        rpc, t = self.caller.rpc, self.args.timeout
        kept = lost % 3 + 1

        async def p2p(n: int, i: int) -> bool:
            return bool(await rpc.call(self.servers[n].identity, "echo", i, timeout=t) == i)

        async def stateless(i: int) -> bool:
            return bool(await rpc.call(self.type, "echo", i, timeout=t) == i)

        async def gather(address: str, i: int) -> bool:
            replies = await rpc.gather(address, "echo", i, timeout=t, expected=3)
            return len(replies) == 3 and all(r.error is None for r in replies)

        return {
            "p2p lost": lambda i: p2p(lost, i),
            "p2p kept": lambda i: p2p(kept, i),
            "stateless": stateless,
            "multicast": lambda i: gather(f"{self.type}.*", i),
            "broadcast": lambda i: gather("*.*", i),
        }[form]

    async def _worker(self, form: str, op: Callable[[int], Awaitable[bool]], seq: list[int]) -> None:
        ledger = self.ledgers[form]
        limit = self.args.timeout + self.args.grace
        while not self.stop.is_set():
            seq[0] += 1
            start = time.monotonic()
            try:
                ok = await asyncio.wait_for(op(seq[0]), limit)
                ledger.attempts.append(Attempt(start, time.monotonic(), ok, None if ok else "incomplete"))
            except gear.GearError as exc:  # first: CallTimeoutError is a TimeoutError too
                ledger.attempts.append(Attempt(start, time.monotonic(), False, type(exc).__name__))
            except TimeoutError:
                ledger.hung += 1
                ledger.attempts.append(Attempt(start, time.monotonic(), False, "HUNG"))
            except Exception as exc:  # anything not a GearError is a finding too
                ledger.attempts.append(Attempt(start, time.monotonic(), False, f"!{type(exc).__name__}"))
            await asyncio.sleep(self.args.pause)

    async def _caster(self, seq: list[int]) -> None:
        ledger = self.ledgers["casts"]
        while not self.stop.is_set():
            seq[0] += 1
            n = seq[0]
            start = time.monotonic()
            try:
                assert self.caller is not None
                ok = await asyncio.wait_for(
                    self.caller.rpc.cast(self.type, "record", n, retry_budget=self.args.timeout),
                    self.args.timeout + self.args.grace,
                )
                self.cast_outcomes[n] = "confirmed" if ok else "undeliverable"
                ledger.attempts.append(Attempt(start, time.monotonic(), ok, None if ok else "undeliverable"))
            except gear.GearError as exc:
                self.cast_outcomes[n] = type(exc).__name__
                ledger.attempts.append(Attempt(start, time.monotonic(), False, type(exc).__name__))
            except TimeoutError:
                self.cast_outcomes[n] = "HUNG"
                ledger.hung += 1
                ledger.attempts.append(Attempt(start, time.monotonic(), False, "HUNG"))
            await asyncio.sleep(self.args.pause)

    async def run(self, how: str) -> list[dict[str, Any]]:
        """Stream, lose node ``--node`` ``how``, bring it back, stream on; one row per form."""
        lost = self.args.node
        tasks = []
        for form in FORMS:
            op, seq = self._operation(form, lost), [0]
            tasks += [asyncio.create_task(self._worker(form, op, seq)) for _ in range(self.args.workers)]
        cast_seq = [0]
        tasks += [asyncio.create_task(self._caster(cast_seq)) for _ in range(self.args.workers)]
        await asyncio.sleep(self.args.warmup)
        t_loss = time.monotonic()
        await self.nodes.lose(lost, how)
        await asyncio.sleep(max(0.0, t_loss + self.args.outage - time.monotonic()))
        t_back_cmd = time.monotonic()
        await self.nodes.bring_back(lost, how)
        t_back = time.monotonic()
        await asyncio.sleep(self.args.after)
        self.stop.set()
        await asyncio.gather(*tasks)
        await self._drain_casts()
        rows = [self._row(form, how, t_loss, t_back_cmd, t_back) for form in (*FORMS, "casts")]
        confirmed = {n for n, o in self.cast_outcomes.items() if o == "confirmed"}
        rows[-1]["lost"] = len(confirmed - set(self.consumed))
        rows[-1]["duplicates"] = sum(c - 1 for c in self.consumed.values() if c > 1)
        rows[-1]["confirmed"] = len(confirmed)
        return rows

    async def _drain_casts(self) -> None:
        """Wait (bounded) until every confirmed cast was consumed, or nothing moves for 5 s."""
        confirmed = {n for n, o in self.cast_outcomes.items() if o == "confirmed"}
        last, still = -1, time.monotonic()
        while time.monotonic() - still < 5 and not confirmed <= set(self.consumed):
            if len(self.consumed) != last:
                last, still = len(self.consumed), time.monotonic()
            await asyncio.sleep(0.2)

    def _row(self, form: str, how: str, t_loss: float, t_back_cmd: float, t_back: float) -> dict[str, Any]:
        ledger = self.ledgers[form]
        attempts = sorted(ledger.attempts, key=lambda a: a.start)
        failed = [a for a in attempts if not a.ok and a.end >= t_loss]
        errors = Counter(a.error for a in failed)
        if not failed:
            recovered = "0"
        else:
            last_fail = max(failed, key=lambda a: a.start)
            later_ok = [a for a in attempts if a.ok and a.start > last_fail.start]
            if not later_ok:
                recovered = "never"
            elif later_ok[0].start < t_back_cmd:
                recovered = f"{later_ok[0].start - t_loss:.1f}"
            else:  # only once the node was back
                back = max(0.0, later_ok[0].start - t_back)
                recovered = f"{later_ok[0].start - t_loss:.1f} (back+{back:.1f})"
        return {
            "loss": how,
            "form": form,
            "attempts": len(attempts),
            "ok": sum(a.ok for a in attempts),
            "failed": len(failed),
            "errors": dict(errors),
            "hung": ledger.hung,
            "recovered": recovered,
        }


async def _delete(url: str, queues: list[str], exchange: str) -> None:
    import aiormq

    with contextlib.suppress(Exception):
        conn = await aiormq.connect(url)
        try:
            ch = await conn.channel()
            for name in queues:
                with contextlib.suppress(Exception):
                    await ch.queue_delete(name)
                    ch = await conn.channel() if ch.is_closed else ch
            with contextlib.suppress(Exception):
                await ch.exchange_delete(exchange)
        finally:
            await conn.close()


# -- throughput ----------------------------------------------------------------------------------------


async def throughput(nodes: Nodes, args: argparse.Namespace, quorum: bool) -> float:
    """Stateless calls per second with ``--concurrency`` in flight for ``--seconds``."""
    tag = uuid.uuid4().hex[:6].upper()
    type_, exchange = f"BT{tag}", f"gear-bench-{tag.lower()}"
    common: dict[str, Any] = {"exchange": exchange, "quorum": quorum, "timeout": 30.0, "prefetch": 64}
    servers = []
    for n in (1, 2, 3):
        svc = gear.Service(type_, f"h{n}", url=rotated(nodes.urls, n), **common)

        @svc.handler("echo")
        async def echo(value: int) -> int:
            return value

        servers.append(svc)
    caller = gear.Service(f"BTC{tag}", "c1", url=rotated(nodes.urls, 2), serve=False, **common)
    try:
        for svc in (*servers, caller):
            await svc.start()
        done = 0
        end = time.monotonic() + args.seconds

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < end:
                await caller.rpc.call(type_, "echo", done)
                done += 1

        for _ in range(min(50, args.concurrency)):  # warm-up
            await caller.rpc.call(type_, "echo", 0)
        begin = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        return done / (time.monotonic() - begin)
    finally:
        for svc in (caller, *servers):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(svc.stop(), 15)
        await _delete(nodes.urls[1], [type_, *(s.identity for s in (*servers, caller))], exchange)


# -- report --------------------------------------------------------------------------------------------


def print_table(
    rows: list[dict[str, Any]], rates: dict[str, list[float]], args: argparse.Namespace, nodes: Nodes
) -> None:
    print(f"\ngear {_gear_version()}; instance queues: {args.instance_queues}")
    if rows:
        print(
            f"node {args.node} ({nodes.names[args.node - 1]}) lost for {args.outage:g}s; servers h1..h3 "
            f"on nodes 1..3, caller on node {args.caller_node}; quorum TYPE queue; {args.workers} in "
            f"flight per form, deadline {args.timeout:g}s"
        )
        _print_loss_rows(rows)
    if rates["classic"]:
        c, q = statistics.median(rates["classic"]), statistics.median(rates["quorum"])
        ratio = statistics.median(qq / cc for cc, qq in zip(rates["classic"], rates["quorum"], strict=True))
        print(
            f"\nstateless calls/s, {args.concurrency} in flight, {len(rates['classic'])} rounds x "
            f"{args.seconds:g}s: quorum=False {c:.0f}, quorum=True {q:.0f}; True/False {ratio:.2f} "
            f"(median of per-round ratios)"
        )


def _print_loss_rows(rows: list[dict[str, Any]]) -> None:
    head = ("loss", "form", "attempts", "ok", "failed", "hung", "recovered s", "errors / casts")
    widths = (8, 10, 8, 6, 6, 4, 16, 0)
    print(" | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    print("-|-".join("-" * max(w, len(h)) for h, w in zip(head, widths, strict=True)))
    for r in rows:
        extra = ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items(), key=lambda kv: -kv[1]))
        if r["form"] == "casts":
            extra = f"confirmed {r['confirmed']}, lost {r['lost']}, duplicates {r['duplicates']}" + (
                f"; {extra}" if extra else ""
            )
        cells = (r["loss"], r["form"], r["attempts"], r["ok"], r["failed"], r["hung"], r["recovered"], extra)
        print(" | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())


def _gear_version() -> str:
    from importlib.metadata import version

    return version("gear")


def prototype_quorum_instance_queues() -> str:
    """Make ``quorum=True`` declare ``TYPE.HOST`` as a quorum queue too, by wrapping
    ``Topology.for_service`` in this process (a benchmark-only preview of docs/cluster-instance-queues.md's
    recommendation). A no-op once the SDK does it itself."""
    from dataclasses import replace

    from gear.base.topology import Topology

    probe = Topology.for_service("PROBE", "h1", quorum=True)
    if probe.host_queue.arguments.get("x-queue-type") == "quorum":
        return "the SDK's own (it declares quorum instance queues)"
    original = Topology.for_service.__func__  # type: ignore[attr-defined]

    def for_service(cls: type[Topology], *args: Any, **kwargs: Any) -> Topology:
        topo: Topology = original(cls, *args, **kwargs)
        if not kwargs.get("quorum"):
            return topo
        queue = topo.host_queue
        quorum_queue = replace(queue, arguments={**queue.arguments, "x-queue-type": "quorum"})
        return replace(topo, host_queue=quorum_queue)

    Topology.for_service = classmethod(for_service)  # type: ignore[method-assign, assignment]
    return "PROTOTYPE: quorum instance queues patched in by the benchmark"


async def amain(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.ERROR)
    from gear.base.topology import Topology

    sdk_queue = Topology.for_service("PROBE", "h1", quorum=True).host_queue.arguments.get("x-queue-type")
    args.instance_queues = f"{sdk_queue or 'durable classic'} (the SDK's)"
    if args.quorum_instance_queues:
        args.instance_queues = prototype_quorum_instance_queues()
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)
    nodes = Nodes()
    rates: dict[str, list[float]] = {"classic": [], "quorum": []}
    for round_ in range(args.rounds):
        for mode in ("classic", "quorum") if round_ % 2 == 0 else ("quorum", "classic"):
            rate = await throughput(nodes, args, quorum=mode == "quorum")
            rates[mode].append(rate)
            print(f"# throughput round {round_ + 1} {mode}: {rate:.0f} calls/s", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    for how in [h for h in args.loss.split(",") if h]:
        print(f"# {how} of node {args.node} for {args.outage:g}s under load", file=sys.stderr)
        bench = Bench(nodes, args, quorum=True)
        try:
            await bench.start()
            rows += await bench.run(how)
        finally:
            await bench.close()
            await nodes.heal()
    print_table(rows, rates, args, nodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loss", default="stop_app,kill", help="stop_app, kill, both, or '' (none)")
    parser.add_argument(
        "--node", type=int, default=1, choices=(1, 2, 3), help="the node to lose (server hN sits on node N)"
    )
    parser.add_argument(
        "--caller-node", type=int, default=2, choices=(1, 2, 3), help="the node the caller is connected to"
    )
    parser.add_argument("--outage", type=float, default=15.0, help="seconds the node stays lost")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--after", type=float, default=10.0, help="seconds streamed after it is back")
    parser.add_argument("--timeout", type=float, default=5.0, help="deadline of each call")
    parser.add_argument("--grace", type=float, default=2.0, help="past the deadline = hung")
    parser.add_argument("--workers", type=int, default=2, help="in flight per form")
    parser.add_argument("--pause", type=float, default=0.05, help="between one worker's attempts")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (0: none)")
    parser.add_argument("--seconds", type=float, default=4.0, help="per throughput round")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--quorum-instance-queues",
        action="store_true",
        help="preview: TYPE.HOST as a quorum queue too when quorum=True (patched in here)",
    )
    asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    main()
