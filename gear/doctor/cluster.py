"""The doctor's checks of what decides the cost of a crash on a cluster: how many nodes run, how soon
a node that dies or is cut off gives back what its consumers held, how soon the cluster notices a
cut-off node at all, and whether Gear's quorum queues have all their members.

Pure functions of :class:`gear.doctor.facts.Facts`, like :mod:`gear.doctor.checks`.
"""

from __future__ import annotations

import json
from typing import Any

from gear.base.topology import CONSUMER_DISCONNECTED_TIMEOUT
from gear.doctor.facts import Facts
from gear.doctor.finding import Finding, Status

__all__ = (
    "BROKER_DISCONNECTED_DEFAULT_MS",
    "cluster_nodes",
    "consumer_disconnected",
    "failure_detector",
    "net_ticktime",
    "quorum_health",
)

BROKER_DISCONNECTED_DEFAULT_MS = 60_000
"""RabbitMQ 4.3's default ``consumer_disconnected_timeout``."""
SLOW_DISCONNECTED_MS = 10_000
"""Past this, requests a lost node had handed out wait out their callers' deadlines."""
SLOW_TICKTIME_S = 30
"""Past this ``net_ticktime``, a cut-off node keeps its consumers for most of a minute."""


def cluster_nodes(facts: Facts) -> Finding:
    """How many nodes the cluster has and runs, and whether any is partitioned away."""
    if facts.nodes is None:
        return Finding("cluster nodes", Status.UNKNOWN, "not visible without the management API")
    names = sorted(str(n.get("name")) for n in facts.nodes)
    down = sorted(str(n.get("name")) for n in facts.nodes if not n.get("running"))
    cut = sorted({str(p) for n in facts.nodes for p in n.get("partitions") or ()})
    data = {"nodes": names, "down": down, "partitioned": cut}
    if len(names) == 1:
        found = f"1 node ({names[0]}): its loss stops every service, whatever the queues"
        change = "run 3 nodes (or 5) and give Gear every node's URL with quorum=True to survive a lost node"
        status = Status.WARN if facts.settings.quorum else Status.OK
        return Finding("cluster nodes", status, found, change if status is Status.WARN else "", data)
    if down or cut:
        found = f"{len(names) - len(down)} of {len(names)} running" + (
            f"; down: {', '.join(down)}" if down else ""
        )
        found += f"; partitioned from: {', '.join(cut)}" if cut else ""
        change = "bring the missing node back: quorum queues lose their majority when one more goes"
        return Finding("cluster nodes", Status.WARN, found, change, data)
    spare = (len(names) - 1) // 2
    found = f"{len(names)} nodes, all running, no partition: {spare} can be lost at once"
    return Finding("cluster nodes", Status.OK, found, "", data)


def consumer_disconnected(facts: Facts) -> Finding:
    """How long a quorum queue keeps what it handed to a consumer on a node that died or was cut off."""
    if not facts.is_rabbitmq or facts.release < (4, 3):
        found = (
            "no such timeout here: what a consumer on a lost node held goes back to its queue at once"
            if facts.is_rabbitmq
            else f"{facts.product} is a single node"
        )
        return Finding("consumer disconnected timeout", Status.OK, found)
    if facts.queues is None:
        return Finding(
            "consumer disconnected timeout",
            Status.UNKNOWN,
            "per queue: not visible without the management API",
        )
    quorum = [q for q in facts.queues if q.get("type") == "quorum" and _consumed(q)]
    values = {str(q.get("name")): _disconnected_ms(q) for q in quorum}
    data: dict[str, Any] = {"per_queue_ms": values, "broker_default_ms": BROKER_DISCONNECTED_DEFAULT_MS}
    if not values:
        return Finding(
            "consumer disconnected timeout", Status.UNKNOWN, "no quorum queue of Gear's yet", "", data
        )
    slow = {name: ms for name, ms in values.items() if ms is None or ms > SLOW_DISCONNECTED_MS}
    if slow:
        shown = ", ".join(f"{n} {'default (60 s)' if ms is None else f'{ms:,} ms'}" for n, ms in slow.items())
        found = (
            f"{shown}: requests a node that dies had handed to an instance wait this long (their calls "
            "fail at their deadline)"
        )
        return Finding(
            "consumer disconnected timeout", Status.WARN, found, _disconnected_advice(facts, slow), data
        )
    shown = "/".join(sorted({f"{ms:,} ms" for ms in values.values() if ms is not None}))
    found = f"{shown} on {len(values)} queue(s)"
    return Finding(
        "consumer disconnected timeout",
        Status.OK,
        found + ": a dead node's deliveries come back soon",
        "",
        data,
    )


def net_ticktime(facts: Facts) -> Finding:
    """How soon the cluster declares a cut-off node down (until then its consumers keep their share)."""
    if facts.nodes is None:
        return Finding("net ticktime", Status.UNKNOWN, "not visible without the management API")
    ticks = sorted({int(t) for n in facts.nodes if isinstance(t := n.get("net_ticktime"), int)})
    if not ticks or len(facts.nodes) < 2:
        return Finding(
            "net ticktime", Status.OK, "single node: no distribution to time out", "", {"net_ticktime": ticks}
        )
    longest = ticks[-1]
    data = {"net_ticktime_s": longest}
    found = (
        f"{longest} s: a node cut off from the others is declared down after "
        f"{0.75 * longest:g}-{1.25 * longest:g} s; "
        "until then the consumers registered through it keep what they took (up to prefetch each): "
        "calls among it are answered through copies (hedge_after), casts run late"
    )
    if longest > SLOW_TICKTIME_S:
        change = (
            "on a reliable network, lower it (advanced.config: {kernel, [{net_ticktime, 15}]}, on every "
            "node, with a rolling restart); a shorter one declares nodes down on a short network hiccup too"
        )
        return Finding("net ticktime", Status.WARN, found, change, data)
    return Finding("net ticktime", Status.OK, found, "", data)


def failure_detector(facts: Facts) -> Finding:
    """How soon the quorum queues a cut-off node led get new leaders: RabbitMQ's failure detector polls
    the other nodes every ``raft.adaptive_failure_detector.poll_interval``, which the management API
    does not show, so this says what to check rather than what was seen."""
    multi_node = facts.nodes is not None and len(facts.nodes) > 1
    if not (facts.is_rabbitmq and facts.settings.quorum and multi_node):
        return Finding(
            "failure detector", Status.OK, "no quorum queues on a cluster here: nothing to re-elect"
        )
    found = (
        "not shown by the management API (rabbitmq-diagnostics environment lists aten's poll_interval); "
        "at RabbitMQ's default of 5000 ms, the quorum queues a cut-off node led get new leaders after "
        "6-9 s, and calls waiting on them may meet a 10 s deadline"
    )
    change = (
        "raft.adaptive_failure_detector.poll_interval = 1000 in rabbitmq.conf on every node (leaders back "
        "within 1-3 s), unless the network is congested enough to make a second look like a lost node"
    )
    return Finding("failure detector", Status.UNKNOWN, found, change, {"default_poll_interval_ms": 5000})


def quorum_health(facts: Facts) -> Finding:
    """Whether Gear's quorum queues have a leader and every member online, on every node."""
    if facts.queues is None:
        return Finding("quorum queues", Status.UNKNOWN, "not visible without the management API")
    quorum = [q for q in facts.queues if q.get("type") == "quorum"]
    if not quorum:
        return Finding(
            "quorum queues", Status.OK, "none on Gear's exchange (quorum=False)", "", {"queues": 0}
        )
    nodes = len(facts.nodes) if facts.nodes else None
    short = {}
    for q in quorum:
        members, online = q.get("members") or [], q.get("online") or []
        if not q.get("leader") or len(online) < len(members) or (nodes and len(members) < nodes):
            short[str(q.get("name"))] = f"{len(online)}/{len(members)} online" + (
                "" if q.get("leader") else ", no leader"
            )
    data = {"queues": len(quorum), "short": short}
    if short:
        shown = "; ".join(f"{n} {why}" for n, why in list(short.items())[:5]) + (
            " ..." if len(short) > 5 else ""
        )
        change = (
            "bring the missing nodes back; a node that joined again gets its members with "
            "rabbitmq-queues grow NODE all"
        )
        return Finding(
            "quorum queues",
            Status.WARN,
            f"{len(short)} of {len(quorum)} short of members: {shown}",
            change,
            data,
        )
    where = f" on all {nodes} nodes" if nodes else ""
    return Finding(
        "quorum queues", Status.OK, f"{len(quorum)} with a leader and every member online{where}", "", data
    )


def _consumed(queue: dict[str, Any]) -> bool:
    """Gear's queues that have consumers: all but the kept dead letters."""
    return not str(queue.get("name", "")).endswith(".@dead")


def _disconnected_ms(queue: dict[str, Any]) -> int | None:
    value = (queue.get("arguments") or {}).get(CONSUMER_DISCONNECTED_TIMEOUT)
    policy = (queue.get("effective_policy_definition") or {}).get("consumer-disconnected-timeout")
    found = [v for v in (value, policy) if isinstance(v, int)]
    return min(found) if found else None


def _disconnected_advice(facts: Facts, slow: dict[str, int | None]) -> str:
    wanted = facts.settings.consumer_disconnected_timeout
    ms = int((wanted if wanted is not None else 2.0) * 1000)
    pattern = "^(" + "|".join(sorted(slow)) + ")$"
    definition = json.dumps({"consumer-disconnected-timeout": ms}, separators=(",", ":"))
    return (
        f"queues this Gear declares get {ms:,} ms (consumer_disconnected_timeout); for these set a policy: "
        f"rabbitmqctl set_policy gear-disconnected '{pattern}' '{definition}' --apply-to quorum_queues "
        "(a policy joins a gear-dead-letters one only if merged into it: one policy applies per queue)"
    )
