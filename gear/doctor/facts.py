"""What ``gear doctor`` finds out about a broker: over AMQP (its ``connection.start``, the negotiated
limits, one unroutable publish of ``max_message_bytes``) and, where reachable, its management API."""

from __future__ import annotations

import asyncio
import os
import re
import ssl
from dataclasses import dataclass, field
from typing import Any

from gear.base.redact import mask_url
from gear.link import Link, Outcome, open_link
from gear.ops.management import Management, ManagementUnavailableError
from gear.settings import Settings

__all__ = ("CONNECTION_NAME", "Facts", "SizeProbe", "gather_facts")

CONNECTION_NAME = "gear doctor"
_LIMIT_TEXT = re.compile(r"larger than configured max size (\d+)")


@dataclass(frozen=True, slots=True)
class SizeProbe:
    """How the broker took one unroutable message of ``size`` bytes."""

    size: int
    accepted: bool | None
    """True: returned as unroutable (so its size was accepted); False: refused; None: no verdict."""
    limit: int | None = None
    """The broker's ``max_message_size``, when its refusal says it."""
    detail: str = ""


@dataclass(slots=True)
class Facts:
    """Everything the checks look at; what could not be seen is None (``*_error`` says why)."""

    url: str
    settings: Settings
    longest_deadline: float
    server: dict[str, Any] = field(default_factory=dict)
    heartbeat: int = 0
    frame_max: int = 0
    channel_max: int = 0
    size: SizeProbe | None = None
    management: str | None = None
    management_error: str | None = None
    overview: dict[str, Any] | None = None
    feature_flags: list[dict[str, Any]] | None = None
    deprecated_used: list[dict[str, Any]] | None = None
    deprecated_error: str | None = None
    queues: list[dict[str, Any]] | None = None
    """Gear's queues: every queue bound to Gear's exchange (management API ``/api/queues`` entries)."""
    queue_names: set[str] | None = None
    """Every queue name in the vhost."""
    nodes: list[dict[str, Any]] | None = None
    """The cluster's nodes (management API ``/api/nodes``: ``name``, ``running``, ``partitions``,
    ``net_ticktime``...)."""

    @property
    def product(self) -> str:
        return str(self.server.get("product", "?"))

    @property
    def version(self) -> str:
        return str(self.server.get("version", "?"))

    @property
    def is_rabbitmq(self) -> bool:
        return self.product == "RabbitMQ"

    @property
    def release(self) -> tuple[int, int]:
        """RabbitMQ's (major, minor), or (0, 0) for another broker."""
        found = re.match(r"(\d+)\.(\d+)", self.version) if self.is_rabbitmq else None
        return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


class _Unwatched:
    """Link events of the doctor's short-lived link: nothing to do."""

    def on_blocked(self, reason: str) -> None:
        """The size probe's verdict says what happened."""

    def on_unblocked(self) -> None:
        """Nothing waits for it."""

    def on_closed(self, link: Link, reason: str) -> None:
        """Later steps fail with their own error."""

    def on_consumer_cancelled(self, link: Link, queue: str) -> None:
        """The doctor consumes nothing."""


async def gather_facts(
    url: str,
    settings: Settings,
    *,
    longest_deadline: float,
    management_url: str | None = None,
    use_management: bool = True,
    probe_size: bool = True,
    within: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
) -> Facts:
    """Connect to ``url`` once and collect the facts (management API calls run in a thread).

    Raises:
        ConnectError: the broker cannot be reached, did not finish the handshake, or refused the login.
    """
    facts = Facts(mask_url(url), settings, longest_deadline)
    link = await open_link(
        url,
        _Unwatched(),
        heartbeat=settings.heartbeat,
        handshake_timeout=within,
        prefetch=1,
        name=CONNECTION_NAME,
        ssl_context=ssl_context,
    )
    try:
        facts.server = {
            k: v.decode() if isinstance(v, bytes) else v for k, v in link.server_properties.items()
        }
        facts.heartbeat, facts.frame_max, facts.channel_max = link.heartbeat, link.frame_max, link.channel_max
        if probe_size:
            facts.size = await _probe_size(link, settings.max_message_bytes, within)
    finally:
        await link.close()
    if use_management:
        api = Management.for_amqp_url(url, management_url, timeout=min(within, 5.0), ssl_context=ssl_context)
        await asyncio.to_thread(_read_management, api, facts, settings.exchange)
    else:
        facts.management_error = "not asked (--no-management)"
    return facts


async def _probe_size(link: Link, size: int, within: float) -> SizeProbe:
    """Publish ``size`` bytes to a routing key no queue has (mandatory): a return means the size passed."""
    tag = os.urandom(6).hex()
    until = asyncio.get_running_loop().time() + within
    result = await link.publishing.publish(
        "",
        f"gear.doctor.{tag}",
        bytes(size),
        message_id=f"doctor-{tag}",
        correlation_id=tag,
        kind="gear.doctor",
        app_id=CONNECTION_NAME,
        headers={},
        until=until,
        isolated=True,
    )
    if result.outcome in (Outcome.RETURNED, Outcome.CONFIRMED):
        return SizeProbe(size, True)
    found = _LIMIT_TEXT.search(result.reason or "")
    if found:
        return SizeProbe(size, False, int(found.group(1)), result.reason)
    return SizeProbe(size, None, None, f"{result.outcome.value}: {result.reason}".rstrip(": "))


def _read_management(api: Management, facts: Facts, exchange: str) -> None:
    try:
        overview = api.get("overview")
    except ManagementUnavailableError as exc:
        facts.management_error = str(exc)
        return
    if (other := _another_broker(overview, facts.server)) is not None:
        facts.management_error = f"the API at {api.where} belongs to another broker ({other})"
        return
    facts.overview = overview
    facts.management = api.where
    try:
        facts.feature_flags = list(api.get("feature-flags"))
    except ManagementUnavailableError:
        facts.feature_flags = None
    try:
        facts.deprecated_used = list(api.get("deprecated-features", "used"))
    except ManagementUnavailableError as exc:
        facts.deprecated_error = (
            "this release does not report them (RabbitMQ 3.13 and later do)"
            if exc.status == 404
            else str(exc)
        )
    try:
        facts.nodes = list(api.get("nodes"))
    except ManagementUnavailableError:
        facts.nodes = None
    try:
        bindings = api.get("exchanges", api.vhost, exchange, "bindings", "source")
        queues = api.get("queues", api.vhost)
    except ManagementUnavailableError:
        return
    bound = {b.get("destination") for b in bindings if b.get("destination_type") == "queue"}
    facts.queue_names = {q.get("name") for q in queues}
    facts.queues = [q for q in queues if q.get("name") in bound]


def _another_broker(overview: dict[str, Any], server: dict[str, Any]) -> str | None:
    """Why the management API's broker is not the one the AMQP connection reached, or None."""
    theirs = (overview.get("cluster_name"), overview.get("rabbitmq_version"))
    ours = (server.get("cluster_name"), server.get("version"))
    if theirs[0] and ours[0] and theirs[0] != ours[0]:
        return f"cluster {theirs[0]}, not {ours[0]}"
    if theirs[1] and ours[1] and theirs[1] != ours[1]:
        return f"RabbitMQ {theirs[1]}, not {ours[1]}"
    return None
