"""From facts to findings: each check says what it saw, how that stands for Gear, and what to change.

Pure functions of :class:`gear.doctor.facts.Facts` (no I/O), so every verdict is testable without a
broker.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gear.base.topology import DEAD_LETTER_KEY, dead_letter_notify_queue, dead_letter_queue
from gear.doctor.cluster import (
    cluster_nodes,
    consumer_disconnected,
    failure_detector,
    net_ticktime,
    quorum_health,
)
from gear.doctor.facts import Facts
from gear.doctor.finding import Finding, Status

__all__ = ("CHECKS", "DEFAULT_CONSUMER_TIMEOUT_MS", "Finding", "Status", "run_checks")

DEFAULT_CONSUMER_TIMEOUT_MS = 30 * 60 * 1000
"""RabbitMQ's default ``consumer_timeout`` (3.8.15 and later): 30 minutes."""
TESTED = ("3.10", "4.0", "4.3")
"""The RabbitMQ releases Gear's CI or its maintainers ran the suite against."""
WANTED_FLAGS = {
    "quorum_queue": "quorum=True (quorum queues)",
    "khepri_db": "metadata in Khepri: declaring Gear's queues needs a majority of nodes up",
    "message_containers": "4.x message format (x-death as Gear reads it)",
    "stream_queue": "streams (not used by Gear)",
}
"""Feature flags whose state matters to Gear, and why."""
NOT_USED_BY_GEAR = {
    "transient_nonexcl_queues": "Gear declares durable queues",
    "global_qos": "Gear sets per-consumer prefetch only",
    "classic_queue_mirroring": "Gear replicates with quorum queues",
    "queue_master_locator": "Gear sets no locator",
    "ram_node_type": "not a client setting",
    "management_metrics_collection": "not a client setting",
}
"""Deprecated features and why Gear does not depend on them."""


def broker(facts: Facts) -> Finding:
    """Which broker and release."""
    data = {"product": facts.product, "version": facts.version, "platform": facts.server.get("platform")}
    name = f"{facts.product} {facts.version}"
    if facts.product == "Gear reference broker":
        found = f"{name}: Gear's own, one process, no clustering (for development and tests)"
        return Finding("broker", Status.OK, found, "", data)
    if not facts.is_rabbitmq:
        return Finding("broker", Status.WARN, f"{name}: not RabbitMQ, untested", "use RabbitMQ 4.x", data)
    release = "{}.{}".format(*facts.release)
    tested = release in TESTED
    data["tested_by_gear"] = tested
    if facts.release < (4, 0):
        change = "upgrade to RabbitMQ 4.x (Gear's CI runs 4.3); enable all feature flags first"
        return Finding("broker", Status.WARN, f"{name}: RabbitMQ 3.x is out of support", change, data)
    found = f"{name}" + ("" if tested else f" (Gear's suite ran on {', '.join(TESTED)}, not on {release})")
    return Finding("broker", Status.OK, found, "", data)


def management(facts: Facts) -> Finding:
    """Whether the management API answered (the checks below that need it say unknown otherwise)."""
    if facts.management is None:
        found = f"not used: {facts.management_error}"
        change = (
            "to see feature flags, deprecated features, consumer timeouts and Gear's queues: enable "
            "rabbitmq_management (rabbitmq-plugins enable rabbitmq_management) or pass --management URL"
        )
        return Finding("management API", Status.UNKNOWN, found, change, {"url": None})
    overview = facts.overview or {}
    erlang = overview.get("erlang_version", "?")
    found = f"{facts.management} (cluster {overview.get('cluster_name', '?')}, Erlang {erlang})"
    return Finding("management API", Status.OK, found, "", {"url": facts.management, "erlang": erlang})


def feature_flags(facts: Facts) -> Finding:
    """Feature flags: all stable ones enabled (needed before an upgrade), and those Gear cares about."""
    if facts.feature_flags is None:
        return Finding("feature flags", Status.UNKNOWN, "not visible without the management API")
    states = {f.get("name"): f.get("state") for f in facts.feature_flags}
    wanted = {name: states.get(name, "absent") for name in WANTED_FLAGS}
    disabled = sorted(
        str(f.get("name"))
        for f in facts.feature_flags
        if f.get("state") != "enabled" and f.get("stability") != "experimental"
    )
    data = {"wanted": wanted, "disabled": disabled}
    shown = ", ".join(
        f"{name} {state}" for name, state in wanted.items() if state not in ("absent", "enabled")
    )
    if facts.settings.quorum and wanted["quorum_queue"] != "enabled":
        change = "enable quorum_queue (rabbitmqctl enable_feature_flag quorum_queue): quorum=True needs it"
        return Finding("feature flags", Status.FAIL, shown or "quorum_queue absent", change, data)
    if disabled:
        found = f"not enabled: {', '.join(disabled)}"
        change = "rabbitmqctl enable_feature_flag all (an upgrade needs every stable flag enabled)"
        return Finding("feature flags", Status.WARN, found, change, data)
    listed = ", ".join(name for name, state in wanted.items() if state == "enabled")
    return Finding("feature flags", Status.OK, f"all {len(states)} enabled, {listed} among them", "", data)


def deprecated_features(facts: Facts) -> Finding:
    """Deprecated features something on this broker uses now (Gear itself uses none)."""
    if facts.management is None:
        return Finding("deprecated features", Status.UNKNOWN, "not visible without the management API")
    if facts.deprecated_used is None:
        return Finding("deprecated features", Status.UNKNOWN, facts.deprecated_error or "not visible")
    used = {str(f.get("name")): str(f.get("deprecation_phase", "?")) for f in facts.deprecated_used}
    if not used:
        return Finding("deprecated features", Status.OK, "none in use", "", {"used": used})
    parts = [
        f"{name} ({phase}; {NOT_USED_BY_GEAR.get(name, 'not used by Gear')})" for name, phase in used.items()
    ]
    change = "find the other clients that use them: later releases deny or remove them"
    return Finding("deprecated features", Status.WARN, "in use: " + "; ".join(parts), change, {"used": used})


def max_message_size(facts: Facts) -> Finding:
    """The broker's size limit against Gear's ``max_message_bytes``."""
    ours = facts.settings.max_message_bytes
    probe = facts.size
    data: dict[str, Any] = {"max_message_bytes": ours}
    if probe is None:
        default = "16 MiB" if facts.release >= (4, 0) or not facts.is_rabbitmq else "128 MiB"
        found = f"not probed (--no-size-probe); the default is {default}, max_message_bytes is {ours:,}"
        return Finding("max message size", Status.UNKNOWN, found, "", data)
    data.update(accepted=probe.accepted, broker_limit=probe.limit)
    if probe.accepted:
        found = f"a {ours:,}-byte message (max_message_bytes) is accepted"
        return Finding("max message size", Status.OK, found, "", data)
    if probe.accepted is False and probe.limit is not None:
        found = f"the broker refuses messages over {probe.limit:,} bytes; max_message_bytes is {ours:,}"
        change = (
            f"set GEAR_MAX_MESSAGE_BYTES={probe.limit} (or raise max_message_size in rabbitmq.conf: "
            "RabbitMQ 4.x reads it at boot)"
        )
        return Finding("max message size", Status.FAIL, found, change, data)
    return Finding(
        "max message size", Status.UNKNOWN, f"no verdict on a {ours:,}-byte message: {probe.detail}"
    )


def consumer_timeout(facts: Facts) -> Finding:
    """The consumer timeout on Gear's queues against the longest handler deadline."""
    deadline_ms = int(facts.longest_deadline * 1000)
    data: dict[str, Any] = {"longest_deadline_ms": deadline_ms}
    scope = " (4.3: quorum queues only)" if facts.release >= (4, 3) else ""
    per_queue = {
        str(q.get("name")): timeout
        for q in facts.queues or ()
        if (timeout := _setting(q, "x-consumer-timeout", "consumer-timeout")) is not None
    }
    data["per_queue_ms"] = per_queue
    short = {name: ms for name, ms in per_queue.items() if isinstance(ms, int) and ms <= deadline_ms}
    if short:
        found = ", ".join(f"{name}: {ms:,} ms" for name, ms in short.items())
        change = (
            f"raise the consumer timeout of these queues above the longest deadline ({deadline_ms:,} ms): a "
            "handler still running then gets its channel closed and its request redelivered"
        )
        return Finding("consumer timeout", Status.FAIL, found + scope, change, data)
    if not facts.is_rabbitmq:
        found = (
            f"{facts.product} has no consumer timeout; the longest deadline is {facts.longest_deadline:g} s"
        )
        return Finding("consumer timeout", Status.OK, found, "", data)
    longest = f"longest deadline {facts.longest_deadline:g} s"
    if facts.queues is None:
        found = f"per queue: not visible without the management API; default 30 min{scope}; {longest}"
    elif per_queue:
        found = "on Gear's queues: " + ", ".join(f"{n} {ms:,} ms" for n, ms in per_queue.items())
        found += f"; {longest}"
    else:
        found = f"none on Gear's queues; default 30 min{scope}; {longest}"
    if deadline_ms >= DEFAULT_CONSUMER_TIMEOUT_MS:
        change = "a handler may run past RabbitMQ's default consumer timeout (30 min): raise consumer_timeout"
        return Finding("consumer timeout", Status.WARN, found, change, data)
    return Finding("consumer timeout", Status.OK, found + " (rabbitmq.conf's value is not visible)", "", data)


def delivery_limits(facts: Facts) -> Finding:
    """Quorum delivery limits and dead-lettering on the queues bound to Gear's exchange."""
    exchange = facts.settings.exchange
    if facts.queues is None:
        why = (
            "not visible without the management API"
            if facts.management is None
            else f"no exchange {exchange!r}"
        )
        return Finding("delivery limits", Status.UNKNOWN, why)
    own = [q for q in facts.queues if not str(q.get("name", "")).startswith(f"{exchange}.{DEAD_LETTER_KEY}")]
    if not own:
        return Finding(
            "delivery limits", Status.UNKNOWN, f"no queue is bound to {exchange!r} yet (start a service)"
        )
    quorum = [q for q in own if q.get("type") == "quorum"]
    if not quorum:
        found = f"{len(own)} classic queue(s) on {exchange!r}: no delivery limit"
        return Finding("delivery limits", Status.OK, found, "", {"quorum_queues": {}})
    rows = {str(q.get("name")): _quorum_row(q, facts) for q in quorum}
    silent = sorted(name for name, row in rows.items() if row["dead_letter_exchange"] is None)
    unlimited = sorted(name for name, row in rows.items() if row["delivery_limit"] is None)
    missing = sorted(
        q
        for q in (dead_letter_queue(exchange), dead_letter_notify_queue(exchange))
        if q not in (facts.queue_names or set())
    )
    data = {"quorum_queues": rows, "missing_dead_letter_queues": missing}
    limits = sorted({str(row["delivery_limit"]) for row in rows.values()})
    summary = f"{len(quorum)} quorum queue(s), delivery limit {'/'.join(limits)}"
    if silent and not unlimited:
        found = f"{summary}; no dead-letter target on {', '.join(silent)}: requests past the limit vanish"
        return Finding("delivery limits", Status.FAIL, found, _dead_letter_advice(exchange, silent), data)
    if unlimited:
        found = (
            f"{summary}; no limit on {', '.join(unlimited)}: a request that crashes its servers loops forever"
        )
        return Finding("delivery limits", Status.WARN, found, _dead_letter_advice(exchange, unlimited), data)
    if missing:
        found = (
            f"{summary}, dead-lettered to {exchange!r}, but {', '.join(missing)} missing: dead letters vanish"
        )
        change = "start one Gear instance with quorum=True (it declares them)"
        return Finding("delivery limits", Status.FAIL, found, change, data)
    found = f"{summary}, dead letters to {exchange!r} ({DEAD_LETTER_KEY}); `gear dead-letters` lists them"
    return Finding("delivery limits", Status.OK, found, "", data)


def heartbeat(facts: Facts) -> Finding:
    """The heartbeat the connection runs with, against the one Gear asks for."""
    asked, granted = facts.settings.heartbeat, facts.heartbeat
    data = {"asked_s": asked, "granted_s": granted}
    if granted == 0:
        change = (
            "set GEAR_HEARTBEAT=5 (and allow heartbeats on the broker): without them a dead link shows late"
        )
        return Finding(
            "heartbeat", Status.WARN, "none: a silent partition is found by TCP only (minutes)", change, data
        )
    found = f"{granted} s (Gear asked {asked} s): a silent link counts as dead after {1.5 * granted:g} s"
    if asked and granted != asked:
        return Finding(
            "heartbeat", Status.WARN, found, f"the broker changed Gear's {asked} s: check its heartbeat", data
        )
    return Finding("heartbeat", Status.OK, found, "", data)


def connection_limits(facts: Facts) -> Finding:
    """frame_max and channel_max: Gear needs 3 channels (4 while it renews its publish channel)."""
    data = {"frame_max": facts.frame_max, "channel_max": facts.channel_max}
    found = f"frame_max {facts.frame_max:,} bytes, channel_max {facts.channel_max}"
    if 0 < facts.channel_max < 4:
        change = "allow at least 4 channels per connection (channel_max in rabbitmq.conf)"
        return Finding("connection limits", Status.FAIL, found, change, data)
    return Finding("connection limits", Status.OK, found, "", data)


CHECKS: tuple[Callable[[Facts], Finding], ...] = (
    broker,
    management,
    feature_flags,
    deprecated_features,
    max_message_size,
    consumer_timeout,
    delivery_limits,
    heartbeat,
    connection_limits,
    cluster_nodes,
    consumer_disconnected,
    net_ticktime,
    failure_detector,
    quorum_health,
)
"""Every check, in report order."""


def run_checks(facts: Facts) -> list[Finding]:
    """Every check's finding, in report order."""
    return [check(facts) for check in CHECKS]


def _setting(queue: dict[str, Any], argument: str, policy_key: str) -> Any:
    """A queue's setting: its x-argument, else its effective policy's key, else None."""
    value = (queue.get("arguments") or {}).get(argument)
    if value is None:
        value = (queue.get("effective_policy_definition") or {}).get(policy_key)
    return value


def _quorum_row(queue: dict[str, Any], facts: Facts) -> dict[str, Any]:
    limit = queue.get("delivery_limit")  # RabbitMQ 4.3 reports the effective one
    if limit is None:
        limit = _setting(queue, "x-delivery-limit", "delivery-limit")
    if limit is None and facts.release >= (4, 0):
        limit = 20  # 4.x's default when neither argument nor policy sets one
    if isinstance(limit, int) and limit < 0:
        limit = None  # -1: unlimited (4.x)
    return {
        "delivery_limit": limit,
        "dead_letter_exchange": _setting(queue, "x-dead-letter-exchange", "dead-letter-exchange"),
    }


def _dead_letter_advice(exchange: str, names: list[str]) -> str:
    pattern = "^(" + "|".join(names) + ")$"
    definition = json.dumps(
        {"dead-letter-exchange": exchange, "dead-letter-routing-key": DEAD_LETTER_KEY, "delivery-limit": 20},
        separators=(",", ":"),
    )
    return (
        "redeclare them with this Gear (quorum=True declares a delivery limit and a dead-letter target; "
        f"delete the old queues first), or set a policy: rabbitmqctl set_policy gear-dead-letters "
        f"'{pattern}' '{definition}' --apply-to quorum_queues"
    )
