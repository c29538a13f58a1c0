"""``gear doctor URL``: a preflight of a broker against what Gear needs, and what to change.

It connects once (as Gear would, with the same heartbeat), reads the broker's ``connection.start`` and
the negotiated limits, publishes one unroutable message of ``max_message_bytes`` to see whether the
broker takes that size, and reads the management HTTP API where it answers (feature flags, deprecated
features in use, the queues bound to Gear's exchange with their delivery limits, dead-letter targets
and consumer timeouts). Every check says what it saw and, if something should change, what.
"""

from __future__ import annotations

import ssl
from dataclasses import asdict, dataclass
from typing import Any

from gear.doctor.checks import Finding, Status, run_checks
from gear.doctor.facts import Facts, gather_facts
from gear.settings import Settings

__all__ = ("Diagnosis", "Finding", "Status", "diagnose", "diagnose_facts")


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The doctor's report on one broker."""

    url: str
    """The broker URL, password masked."""
    broker: dict[str, Any]
    """``product``, ``version``, ``platform`` from its ``connection.start``."""
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        """No check failed (warnings and unknowns are not failures)."""
        return all(f.status is not Status.FAIL for f in self.findings)

    @property
    def changes(self) -> list[str]:
        """What to change, in check order."""
        return [f"{f.check}: {f.change}" for f in self.findings if f.change]

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form, for ``gear doctor --json``."""
        return {
            "ok": self.ok,
            "url": self.url,
            "broker": self.broker,
            "checks": [{**asdict(f), "status": f.status.value} for f in self.findings],
            "changes": self.changes,
        }


def diagnose_facts(facts: Facts) -> Diagnosis:
    """The report for facts already gathered."""
    broker = {k: facts.server.get(k) for k in ("product", "version", "platform")}
    return Diagnosis(facts.url, broker, tuple(run_checks(facts)))


async def diagnose(
    url: str,
    settings: Settings | None = None,
    *,
    longest_deadline: float | None = None,
    management_url: str | None = None,
    use_management: bool = True,
    probe_size: bool = True,
    within: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
) -> Diagnosis:
    """Check the broker at ``url`` against ``settings`` (default: ``GEAR_*`` from the environment).

    Args:
        url: the broker's AMQP URL (its user also logs in to the management API).
        settings: what Gear will ask for: ``exchange``, ``max_message_bytes``, ``heartbeat``,
            ``quorum``, ``timeout``.
        longest_deadline: the longest deadline a handler may run to, in seconds (default:
            ``settings.timeout``, the default call deadline).
        management_url: the management API's base URL (default: the broker's host, port 15672).
        use_management: False to skip the management API.
        probe_size: False to skip publishing one unroutable message of ``max_message_bytes``.
        within: seconds for the connection and each step.
        ssl_context: for ``amqps://`` and ``https://``.

    Raises:
        ConnectError: the broker cannot be reached, or refused the login.
    """
    settings = settings or Settings()
    facts = await gather_facts(
        url,
        settings,
        longest_deadline=settings.timeout if longest_deadline is None else longest_deadline,
        management_url=management_url,
        use_management=use_management,
        probe_size=probe_size,
        within=within,
        ssl_context=ssl_context,
    )
    return diagnose_facts(facts)
