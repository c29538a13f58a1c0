"""The demo's script: each routing form, the nested calls (from async and plain handlers), and the
errors a caller can get.

``run_scenario`` drives a :class:`~gear.examples.system.System` from its WEB instance and reports every step
through ``say`` (one line at a time), so ``gear demo`` prints it and tests read it. Each step also checks
what the address table promises (who received what) and records the verdict in the returned
:class:`Outcome`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import gear
from gear.examples.contracts import Repo
from gear.examples.models import InstanceStatus, ItemFound, ItemQuery, Stored
from gear.examples.system import System

__all__ = ("KEYS", "Outcome", "run_scenario")

KEYS = {
    "alice": "tea",
    "bob": "coffee",
    "carol": "water",
    "dave": "juice",
    "grace": "milk",
    "ivan": "cocoa",
}
"""The keys WEB stores and looks up; with the default ring they land two on each of repo1..repo3."""

Say = Callable[[str], None]


@dataclass
class Outcome:
    """What the scenario found: one verdict per check, in order."""

    checks: dict[str, bool] = field(default_factory=dict)

    def check(self, name: str, passed: bool) -> bool:
        self.checks[name] = passed
        return passed

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(self.checks.values())


def _mark(passed: bool) -> str:
    return "ok" if passed else "UNEXPECTED"


def _delivered(system: System, method: str, say: Say) -> dict[str, int]:
    """Say which instances received ``method`` (from their trace sinks) and return the counts."""
    counts = {address: n for address, n in system.received(method).items() if n}
    if set(counts) == set(system.logs) and len(set(counts.values())) == 1:
        reached = f"all {len(counts)} instances, x{next(iter(counts.values()))} each"
    else:
        reached = ", ".join(f"{address} x{n}" for address, n in counts.items()) or "nobody"
    say(f"   {method!r} was delivered to: {reached}")
    return counts


async def _statuses(
    system: System, address: str, expected: int, until: Callable[[InstanceStatus], bool]
) -> list[InstanceStatus]:
    """Gather ``status`` until every reply satisfies ``until``: the cast before it may still be in flight."""
    statuses: list[InstanceStatus] = []
    for _ in range(20):
        answers = await system.web.census(address, timeout=2.0, expected=expected)
        statuses = sorted((a.result for a in answers if a.result is not None), key=lambda s: (s.type, s.host))
        if len(statuses) == expected and all(until(s) for s in statuses):
            break
        await asyncio.sleep(0.05)
    return statuses


async def _point_to_point(system: System, say: Say, outcome: Outcome) -> None:
    say("1. point-to-point  REPO.<host>: WEB stores each key on the REPO instance its hash ring picks")
    width = max(len(system.web.repo_for(key)) for key in KEYS)
    for key, value in KEYS.items():
        address = system.web.repo_for(key)
        stored: Stored = await system.web.put(key, value)
        say(f"   put {key:<6} -> {address:<{width}}  stored on {stored.host}, version {stored.version}")
        outcome.check(f"p2p {key}", address.endswith(f".{stored.host}"))
    counts = _delivered(system, "put", say)
    outcome.check(
        "p2p: each put reached one REPO",
        sum(counts.values()) == len(KEYS) and all(a.startswith(f"{system.names.repo}.") for a in counts),
    )


async def _stateless(system: System, say: Say, outcome: Outcome) -> None:
    say("2. stateless       CTRL: WEB asks any CTRL, round-robin; that CTRL asks the owning REPO itself")
    say("                   (a nested call: it inherits what is left of WEB's deadline)")
    served: dict[str, int] = {}
    timeout = 5.0
    for key, value in KEYS.items():
        found: ItemFound = await system.web.lookup(key, timeout=timeout)
        ctrl_host = found.ctrl_host or "?"
        served[ctrl_host] = served.get(ctrl_host, 0) + 1
        budget = "?" if found.budget_ms is None else f"{found.budget_ms:.0f}"
        route = f"{system.names.ctrl}.{ctrl_host} -> {system.names.repo}.{found.repo_host}"
        say(
            f"   lookup {key:<6} -> {route}: "
            f"{found.value!r:<8} (budget left: {budget} of {timeout * 1000:.0f} ms)"
        )
        # The budget CTRL saw is positive and never more than what WEB gave: the deadline was inherited.
        inherited = found.budget_ms is not None and 0 < found.budget_ms <= timeout * 1000
        outcome.check(f"nested {key}", found.value == value and inherited)
    counts = _delivered(system, "lookup", say)
    outcome.check(
        "stateless: each lookup reached one CTRL",
        sum(counts.values()) == len(KEYS) and all(a.startswith(f"{system.names.ctrl}.") for a in counts),
    )
    outcome.check("stateless: round-robin over the CTRLs", len(served) == min(len(system.ctrls), len(KEYS)))

    # The other way to wait: return at once and let the reply drive a callback.
    replies: asyncio.Queue[ItemFound | gear.GearError] = asyncio.Queue()
    await gear.call_with_callback(system.web.ctrl.lookup, ItemQuery(key="alice"), callback=replies.put_nowait)
    say("   call_with_callback CTRL lookup alice: returned once the broker confirmed the request")
    got = await asyncio.wait_for(replies.get(), timeout)
    if isinstance(got, BaseException):
        say(f"   callback received an error: {type(got).__name__}: {got}  UNEXPECTED")
        outcome.check("callback", False)
    else:
        say(f"   callback received {got.value!r} from {system.names.ctrl}.{got.ctrl_host}")
        outcome.check("callback", got.value == KEYS["alice"])


async def _multicast(system: System, say: Say, outcome: Outcome) -> None:
    version = 2
    say(f"3. multicast       CTRL.*: WEB pushes configuration version {version} to every CTRL instance")
    await system.web.reload(version)
    ctrls = f"{system.names.ctrl}.*"
    say(f"   cast reload(version={version}) to {ctrls}; then gather {ctrls} status:")
    statuses = await _statuses(
        system, f"{system.names.ctrl}.*", len(system.ctrls), lambda s: s.config_version == version
    )
    for s in statuses:
        say(f"   {s.type}.{s.host}  config version {s.config_version}  {_mark(s.config_version == version)}")
    outcome.check(
        "multicast: every CTRL reloaded",
        len(statuses) == len(system.ctrls) and all(s.config_version == version for s in statuses),
    )
    counts = _delivered(system, "reload", say)
    every_ctrl = sorted(f"{system.names.ctrl}.{svc.host}" for svc in system.ctrls)
    outcome.check("multicast: each CTRL once, nobody else", counts == dict.fromkeys(every_ctrl, 1))


async def _broadcast(system: System, say: Say, outcome: Outcome) -> None:
    say("4. broadcast       *.*: WEB asks every instance of every type to refresh")
    await system.web.refresh("demo")
    total = len(system.services)
    statuses = await _statuses(system, "*.*", total, lambda s: s.refreshes >= 1)
    say(f"   cast refresh to *.*; then gather *.* status ({len(statuses)} of {total} answered):")
    width = max((len(f"{s.type}.{s.host}") for s in statuses), default=0)
    for s in statuses:
        name = f"{s.type}.{s.host}"
        say(f"   {name:<{width}}  refreshed {s.refreshes} time(s)  {_mark(s.refreshes == 1)}")
    outcome.check(
        "broadcast: every instance exactly once",
        len(statuses) == total and all(s.refreshes == 1 for s in statuses),
    )
    counts = _delivered(system, "refresh", say)
    outcome.check("broadcast: delivered once to each", counts == dict.fromkeys(system.logs, 1))


async def _errors(system: System, say: Say, outcome: Outcome) -> None:
    say("5. errors          what a caller gets when something is wrong")
    rpc = system.web.service.rpc
    repo_host = f"{system.names.repo}.{system.repos[0].host}"
    nowhere = f"{system.names.repo}.nohost"
    unrouted = gear.with_timeout(system.web.service.proxy(Repo, nowhere), 0.5)
    # A contract's proxy cannot even express the first two (mypy refuses an unknown method or a payload
    # of the wrong type), so they are made with the untyped rpc.call; the proxy raises the same errors.
    attempts: list[tuple[str, str, Callable[[], Awaitable[Any]], type[Exception]]] = [
        (
            repo_host,
            "delete",
            lambda: rpc.call(repo_host, "delete", {"key": "alice"}, timeout=5.0),
            gear.MethodNotFoundError,
        ),
        (
            repo_host,
            "put",
            lambda: rpc.call(repo_host, "put", {"key": "alice"}, timeout=5.0),
            gear.BadPayloadError,
        ),
        (nowhere, "get", lambda: unrouted.get(ItemQuery(key="alice")), gear.UnroutableError),
    ]
    width = max(len(a[0]) for a in attempts)
    for address, method, attempt, expected in attempts:
        try:
            await attempt()
        except gear.GearError as exc:
            text = exc.message if isinstance(exc, gear.RemoteError) else str(exc)
            if isinstance(exc, gear.BadPayloadError) and exc.problems:
                text += f" ({exc.problems})"
            say(f"   call {address:<{width}} {method:<6} -> {type(exc).__name__}: {text}")
            outcome.check(f"error {expected.__name__}", isinstance(exc, expected))
        else:
            say(f"   call {address} {method} -> no error  UNEXPECTED")
            outcome.check(f"error {expected.__name__}", False)


async def _blocking_handler(system: System, say: Say, outcome: Outcome) -> None:
    say("6. plain handler   CTRL export: a blocking def handler asks REPO from its worker thread")
    say("                   (gear.call_sync on a proxy: the same calls and deadline, loop not blocked)")
    keys = list(KEYS)
    report = await system.web.export(keys, timeout=5.0)
    name = f"{system.names.ctrl}.{report.ctrl_host}"
    values_ok = report.values == KEYS and report.complete
    say(
        f"   export {len(keys)} keys -> {name}, in thread {report.thread}: "
        f"{len(report.values)} values  {_mark(values_ok)}"
    )
    say(
        f"   and a gather from the same thread: the REPOs hold {report.repo_items} keys "
        f" {_mark(report.repo_items == len(KEYS))}"
    )
    outcome.check("plain handler: nested calls from its thread", values_ok)
    outcome.check("plain handler: ran in a worker thread", not report.thread.startswith("MainThread"))
    outcome.check("plain handler: gather from its thread", report.repo_items == len(KEYS))


async def _deadline(system: System, say: Say, outcome: Outcome) -> None:
    say("7. deadlines       a REPO instance stops; WEB looks up one of its keys with a 4 s budget")
    victim = system.repos[-1]
    key = next((k for k in KEYS if system.web.repo_for(k).endswith(f".{victim.host}")), "alice")
    await victim.stop()
    # Its queue outlives it (x-expires), so the request waits there: only the deadline ends the wait.
    route = f"{system.names.ctrl} -> {system.web.repo_for(key)}"
    say(f"   {system.names.repo}.{victim.host} stopped; lookup {key} -> {route}")
    started = time.monotonic()
    try:
        await system.web.lookup(key, timeout=4.0)
    except gear.RemoteError as exc:
        elapsed = time.monotonic() - started
        got = f"{type(exc).__name__} ({exc.type})"
        say(f"   CTRL's nested call gave up inside WEB's budget, and WEB got {got}")
        say(f"   after {elapsed:.1f} s: {exc.message}")
        outcome.check("deadline inherited by the nested call", exc.type == "CallTimeoutError")
    except gear.GearError as exc:
        say(f"   WEB got {type(exc).__name__}: {exc}  UNEXPECTED (CTRL should have answered in time)")
        outcome.check("deadline inherited by the nested call", False)
    else:
        say("   lookup succeeded  UNEXPECTED")
        outcome.check("deadline inherited by the nested call", False)


async def run_scenario(system: System, say: Say) -> Outcome:
    """Run every step against ``system``; ``say`` receives the report line by line."""
    outcome = Outcome()
    for step in (_point_to_point, _stateless, _multicast, _broadcast, _errors, _blocking_handler, _deadline):
        await step(system, say, outcome)
        say("")
    return outcome
