"""The demo's script: each routing form, the nested call, and the errors a caller can get.

``run_scenario`` drives a :class:`~examples.system.System` from its WEB instance and reports every step
through ``say`` (one line at a time), so ``gear demo`` prints it and tests read it. Each step also checks
what the address table promises (who received what) and records the verdict in the returned
:class:`Outcome`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gear
from examples.models import InstanceStatus, ItemFound, Stored
from examples.system import System

__all__ = ("KEYS", "Outcome", "run_scenario")

KEYS = {"alice": "likes tea", "bob": "likes coffee", "carol": "likes water", "dave": "likes juice"}
"""The keys WEB stores and looks up."""

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


async def _statuses(system: System, address: str, expected: int, until: Callable[[InstanceStatus], bool]) -> list[
    InstanceStatus
]:
    """Gather ``status`` from ``address`` until every reply satisfies ``until`` (a cast may still be in flight)."""
    statuses: list[InstanceStatus] = []
    for _ in range(20):
        replies = await system.web.census(address, timeout=2.0, expected=expected)
        statuses = sorted(
            (InstanceStatus.model_validate(r.result) for r in replies if r.error is None),
            key=lambda s: (s.type, s.host),
        )
        if len(statuses) == expected and all(until(s) for s in statuses):
            break
        await asyncio.sleep(0.05)
    return statuses


async def _point_to_point(system: System, say: Say, outcome: Outcome) -> None:
    say("1. point-to-point  REPO.<host>: WEB stores each key on the REPO instance its hash ring picks")
    for key, value in KEYS.items():
        address = system.web.repo_for(key)
        stored: Stored = await system.web.put(key, value)
        say(f"   put {key:<6} -> {address:<14} stored on {stored.host}, version {stored.version}")
        outcome.check(f"p2p {key}", address.endswith(f".{stored.host}"))
    replies = await system.web.census(f"{system.names.repo}.*", expected=len(system.repos))
    held = {InstanceStatus.model_validate(r.result).host: InstanceStatus.model_validate(r.result).items for r in replies}
    say("   keys held: " + ", ".join(f"{h}={n}" for h, n in sorted(held.items())))
    outcome.check("p2p: every key stored once", sum(held.values()) == len(KEYS))


async def _stateless(system: System, say: Say, outcome: Outcome) -> None:
    say("2. stateless       CTRL: WEB asks any CTRL; that CTRL asks the owning REPO itself (nested call)")
    served: dict[str, int] = {}
    timeout = 5.0
    for key, value in KEYS.items():
        found: ItemFound = await system.web.lookup(key, timeout=timeout)
        ctrl_host = found.ctrl_host or "?"
        served[ctrl_host] = served.get(ctrl_host, 0) + 1
        say(
            f"   lookup {key:<6} -> {system.names.ctrl}.{ctrl_host} -> {system.names.repo}.{found.repo_host}: "
            f"{found.value!r} (CTRL had {found.budget_ms} ms of WEB's {timeout * 1000:.0f} ms left)"
        )
        outcome.check(f"nested {key}", found.value == value and found.budget_ms is not None)
        outcome.check(f"nested budget {key}", found.budget_ms is not None and 0 < found.budget_ms <= timeout * 1000)
    say("   round-robin: " + ", ".join(f"{system.names.ctrl}.{h} served {n}" for h, n in sorted(served.items())))
    outcome.check("stateless: more than one CTRL served", len(served) > 1 or len(system.ctrls) == 1)


async def _multicast(system: System, say: Say, outcome: Outcome) -> None:
    version = 2
    say(f"3. multicast       CTRL.*: WEB pushes configuration version {version} to every CTRL instance")
    await system.web.reload(version)
    say(f"   cast reload(version={version}) to {system.names.ctrl}.*; then gather {system.names.ctrl}.* status:")
    statuses = await _statuses(
        system, f"{system.names.ctrl}.*", len(system.ctrls), lambda s: s.config_version == version
    )
    for s in statuses:
        say(f"   {s.type}.{s.host:<6} config version {s.config_version}  {_mark(s.config_version == version)}")
    outcome.check("multicast: every CTRL reloaded", len(statuses) == len(system.ctrls)
                  and all(s.config_version == version for s in statuses))


async def _broadcast(system: System, say: Say, outcome: Outcome) -> None:
    say("4. broadcast       *.*: WEB asks every instance of every type to refresh")
    await system.web.refresh("demo")
    total = len(system.services)
    statuses = await _statuses(system, "*.*", total, lambda s: s.refreshes >= 1)
    say(f"   cast refresh to *.*; then gather *.* status ({len(statuses)} of {total} answered):")
    for s in statuses:
        say(f"   {s.type}.{s.host:<6} refreshed {s.refreshes} time(s)  {_mark(s.refreshes == 1)}")
    outcome.check("broadcast: every instance exactly once",
                  len(statuses) == total and all(s.refreshes == 1 for s in statuses))


async def _errors(system: System, say: Say, outcome: Outcome) -> None:
    say("5. errors          what a caller gets when something is wrong")
    rpc = system.web.service.rpc
    repo_host = f"{system.names.repo}.{system.repos[0].host}"
    attempts: list[tuple[str, str, Any, type[Exception], float]] = [
        (repo_host, "delete", {"key": "alice"}, gear.MethodNotFoundError, 5.0),
        (repo_host, "put", {"key": "alice"}, gear.BadPayloadError, 5.0),
        (f"{system.names.repo}.nohost", "get", {"key": "alice"}, gear.UnroutableError, 0.5),
    ]
    for address, method, payload, expected, timeout in attempts:
        try:
            await rpc.call(address, method, payload, timeout=timeout)
        except gear.GearError as exc:
            got = type(exc)
            first = str(exc).splitlines()[0] if str(exc) else ""
            say(f"   call {address} {method:<6} -> {got.__name__}: {first[:70]}")
            outcome.check(f"error {expected.__name__}", isinstance(exc, expected))
        else:
            say(f"   call {address} {method} -> no error  UNEXPECTED")
            outcome.check(f"error {expected.__name__}", False)


async def run_scenario(system: System, say: Say) -> Outcome:
    """Run every step against ``system``; ``say`` receives the report line by line."""
    outcome = Outcome()
    for step in (_point_to_point, _stateless, _multicast, _broadcast, _errors):
        await step(system, say, outcome)
        say("")
    return outcome
