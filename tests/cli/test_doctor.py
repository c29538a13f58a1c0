"""``gear doctor``: each check's verdict on known facts, and the whole preflight on real brokers."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiormq
import pytest
from typer.testing import CliRunner

import gear
from gear.cli.main import app
from gear.cli.output import ExitCode
from gear.doctor import Status, diagnose
from gear.doctor.checks import run_checks
from gear.doctor.facts import Facts, SizeProbe
from tests.backends import BrokerHandle, RabbitMQ
from tests.conftest import unique
from tests.fleet import Fleet

RABBITMQ_4_3 = {
    "product": "RabbitMQ",
    "version": "4.3.6",
    "platform": "Erlang/OTP 29.1.1",
    "cluster_name": "c",
}


NODES = ("rabbit@a", "rabbit@b", "rabbit@c")


def _facts(**changes: Any) -> Facts:
    """A healthy RabbitMQ 4.3 with its management API and Gear's quorum queues, changed as asked."""
    settings = changes.pop("settings", gear.Settings(quorum=True))
    topology = gear.Topology.for_service("REPO", "h1", quorum=True).for_broker(RABBITMQ_4_3)
    queues = [
        {
            "name": q.name,
            "type": "quorum",
            "arguments": q.arguments,
            "effective_policy_definition": {},
            "leader": NODES[0],
            "members": list(NODES),
            "online": list(NODES),
        }
        for q in topology.queues
    ]
    facts = Facts(
        url="amqp://guest:***@broker/",
        settings=settings,
        longest_deadline=30.0,
        server=dict(RABBITMQ_4_3),
        heartbeat=5,
        frame_max=131072,
        channel_max=2047,
        size=SizeProbe(settings.max_message_bytes, True),
        management="http://broker:15672/",
        overview={"cluster_name": "c", "erlang_version": "29.1.1", "rabbitmq_version": "4.3.6"},
        feature_flags=[{"name": "quorum_queue", "state": "enabled", "stability": "required"}],
        deprecated_used=[],
        queues=queues,
        queue_names={q.name for q in topology.queues},
        nodes=[{"name": n, "running": True, "partitions": [], "net_ticktime": 15} for n in NODES],
    )
    for key, value in changes.items():
        setattr(facts, key, value)
    return facts


def _verdicts(facts: Facts) -> dict[str, Status]:
    return {f.check: f.status for f in run_checks(facts)}


def _finding(facts: Facts, check: str) -> Any:
    (found,) = [f for f in run_checks(facts) if f.check == check]
    return found


def test_a_healthy_4_3_broker_passes_every_check() -> None:
    verdicts = _verdicts(_facts())
    # the failure detector's interval is not visible: what to set is advice, not a verdict
    assert verdicts.pop("failure detector") is Status.UNKNOWN
    assert set(verdicts.values()) == {Status.OK}


def test_a_quorum_queue_without_dead_letter_target_fails_and_the_advice_is_a_policy() -> None:
    bare = {
        "name": "REPO",
        "type": "quorum",
        "arguments": {"x-queue-type": "quorum"},
        "effective_policy_definition": {},
    }
    finding = _finding(_facts(queues=[bare], queue_names={"REPO"}), "delivery limits")
    assert finding.status is Status.FAIL
    assert "delivery limit 20" in finding.found  # 4.x's default when nothing sets one
    assert "requests past the limit vanish" in finding.found
    assert "rabbitmqctl set_policy gear-dead-letters '^(REPO)$'" in finding.change
    assert '"dead-letter-routing-key":"@dead"' in finding.change
    # the same queue on 3.x has no limit at all: a poison request loops instead
    on_3 = _facts(queues=[bare], queue_names={"REPO"}, server={**RABBITMQ_4_3, "version": "3.13.7"})
    assert _finding(on_3, "delivery limits").status is Status.WARN
    # a policy that dead-letters it is as good as the arguments
    policed = {**bare, "effective_policy_definition": {"dead-letter-exchange": "gear"}}
    both = _facts(queues=[policed], queue_names={"REPO", "gear.@dead", "gear.@dead.notify"})
    assert _finding(both, "delivery limits").status is Status.OK


def test_missing_dead_letter_queues_fail() -> None:
    finding = _finding(_facts(queue_names={"REPO", "REPO.h1"}), "delivery limits")
    assert finding.status is Status.FAIL
    assert finding.data["missing_dead_letter_queues"] == ["gear.@dead", "gear.@dead.notify"]


def test_a_broker_limit_below_max_message_bytes_fails_with_the_number_to_use() -> None:
    probe = SizeProbe(16 << 20, False, 1 << 20, "PRECONDITION_FAILED - message size ... max size 1048576")
    finding = _finding(_facts(size=probe), "max message size")
    assert finding.status is Status.FAIL
    assert "GEAR_MAX_MESSAGE_BYTES=1048576" in finding.change


def test_a_consumer_timeout_shorter_than_the_longest_deadline_fails() -> None:
    facts = _facts()
    assert facts.queues is not None
    facts.queues[0]["effective_policy_definition"] = {"consumer-timeout": 10_000}
    finding = _finding(facts, "consumer timeout")
    assert finding.status is Status.FAIL
    assert finding.data["per_queue_ms"] == {"REPO": 10_000}
    assert "quorum queues only" in finding.found  # 4.3's scope, said where it applies


def test_no_heartbeat_and_few_channels_are_named() -> None:
    verdicts = _verdicts(_facts(heartbeat=0, channel_max=2))
    assert (verdicts["heartbeat"], verdicts["connection limits"]) == (Status.WARN, Status.FAIL)


def test_without_the_management_api_its_checks_are_unknown_and_say_how_to_see_them() -> None:
    facts = _facts(
        management=None, management_error="no management API at http://broker:15672/", queues=None, nodes=None
    )
    facts.feature_flags, facts.deprecated_used = None, None
    verdicts = _verdicts(facts)
    unknown = {
        "management API",
        "feature flags",
        "deprecated features",
        "delivery limits",
        "cluster nodes",
        "consumer disconnected timeout",
        "net ticktime",
        "quorum queues",
    }
    assert {check for check, status in verdicts.items() if status is Status.UNKNOWN} == unknown
    assert "rabbitmq-plugins enable rabbitmq_management" in _finding(facts, "management API").change


def test_deprecated_features_in_use_and_disabled_flags_warn() -> None:
    used = [{"name": "transient_nonexcl_queues", "deprecation_phase": "permitted_by_default"}]
    flags = [
        {"name": "quorum_queue", "state": "enabled"},
        {"name": "khepri_db", "state": "disabled", "stability": "stable"},
    ]
    facts = _facts(deprecated_used=used, feature_flags=flags)
    deprecated = _finding(facts, "deprecated features")
    assert deprecated.status is Status.WARN
    assert "Gear declares durable queues" in deprecated.found
    assert _finding(facts, "feature flags").change.startswith("rabbitmqctl enable_feature_flag all")


def test_what_a_crash_costs_is_reported_one_line_each() -> None:
    healthy = {f.check: f for f in run_checks(_facts())}
    assert healthy["cluster nodes"].found.startswith("3 nodes, all running, no partition: 1 can be lost")
    assert healthy["consumer disconnected timeout"].found.startswith("2,000 ms on 3 queue(s)")
    assert healthy["net ticktime"].found.startswith(
        "15 s: a node cut off from the others is declared down after"
    )
    assert healthy["quorum queues"].found == "4 with a leader and every member online on all 3 nodes"
    detector = healthy["failure detector"]
    assert "6-9 s" in detector.found
    assert detector.change.startswith("raft.adaptive_failure_detector.poll_interval = 1000 in rabbitmq.conf")
    single = _facts(nodes=[{"name": NODES[0], "running": True, "partitions": [], "net_ticktime": 60}])
    assert _finding(single, "failure detector").status is Status.OK


def test_the_broker_default_disconnected_timeout_and_net_ticktime_warn_with_the_fix() -> None:
    old = gear.Topology.for_service("REPO", "h1", quorum=True)  # an older Gear: no timeout argument
    queues = [{"name": q.name, "type": "quorum", "arguments": q.arguments} for q in old.queues]
    nodes = [{"name": n, "running": True, "partitions": [], "net_ticktime": 60} for n in NODES]
    facts = _facts(queues=queues, nodes=nodes)
    timeout = _finding(facts, "consumer disconnected timeout")
    assert timeout.status is Status.WARN
    assert "REPO default (60 s)" in timeout.found
    assert "rabbitmqctl set_policy gear-disconnected '^(REPO|REPO.h1|gear.@dead.notify)$'" in timeout.change
    assert '"consumer-disconnected-timeout":2000' in timeout.change
    tick = _finding(facts, "net ticktime")
    assert (tick.status, tick.data["net_ticktime_s"]) == (Status.WARN, 60)
    assert "45-75 s" in tick.found
    assert "net_ticktime, 15" in tick.change
    on_310 = _finding(_facts(server={**RABBITMQ_4_3, "version": "3.10.8"}), "consumer disconnected timeout")
    assert (on_310.status, on_310.found.startswith("no such timeout here")) == (Status.OK, True)


def test_a_node_down_and_queues_short_of_members_warn() -> None:
    nodes = [{"name": n, "running": n != NODES[2], "partitions": [], "net_ticktime": 15} for n in NODES]
    facts = _facts(nodes=nodes)
    assert facts.queues is not None
    facts.queues[0]["online"] = list(NODES[:2])
    facts.queues[1]["leader"] = None
    nodes_finding = _finding(facts, "cluster nodes")
    assert (nodes_finding.status, nodes_finding.found) == (Status.WARN, "2 of 3 running; down: rabbit@c")
    health = _finding(facts, "quorum queues")
    assert health.status is Status.WARN
    assert health.found.startswith("2 of 4 short of members: REPO 2/3 online; REPO.h1 3/3 online, no leader")
    assert "rabbitmq-queues grow NODE all" in health.change
    single = _finding(
        _facts(nodes=[{"name": "rabbit@a", "running": True, "net_ticktime": 60}]), "cluster nodes"
    )
    assert single.status is Status.WARN
    assert "run 3 nodes" in single.change


def test_rabbitmq_3_is_out_of_support() -> None:
    finding = _finding(_facts(server={**RABBITMQ_4_3, "version": "3.10.8"}), "broker")
    assert finding.status is Status.WARN
    assert "upgrade to RabbitMQ 4.x" in finding.change


# -- on real brokers ---------------------------------------------------------------------------------


async def test_the_reference_broker() -> None:
    from gear.broker import Broker

    async with Broker(port=0) as broker:
        await _check_the_reference_broker(broker.url)


async def _check_the_reference_broker(url: str) -> None:
    report = await diagnose(url, gear.Settings(), management_url="http://127.0.0.1:1/", within=5)
    verdicts = {f.check: f.status for f in report.findings}
    assert report.broker["product"] == "Gear reference broker"
    assert verdicts["max message size"] is Status.OK  # 16 MiB, as RabbitMQ 4.x
    assert verdicts["management API"] is Status.UNKNOWN
    assert report.ok
    too_big = await diagnose(url, gear.Settings(max_message_bytes=(16 << 20) + 1), use_management=False)
    size = next(f for f in too_big.findings if f.check == "max message size")
    assert (size.status, size.data["broker_limit"]) == (Status.FAIL, 16 << 20)
    result = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["doctor", url, "--no-management", "--max-message-bytes", str((16 << 20) + 1), "--json"],
    )
    assert result.exit_code == ExitCode.CHECK_FAILED
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert any(
        change.startswith("max message size: set GEAR_MAX_MESSAGE_BYTES=16777216")
        for change in document["changes"]
    )


@pytest.mark.rabbitmq
async def test_rabbitmq_with_gear_quorum_queues_and_a_silent_one(rabbitmq: RabbitMQ) -> None:
    fleet = Fleet(BrokerHandle.of(rabbitmq))
    settings = gear.Settings(exchange=fleet.exchange, quorum=True)
    silent = unique("SILENT")
    try:
        svc = fleet.service(unique("REPO"), "h1", quorum=True)

        @svc.handler("work")
        async def work(_: Any = None) -> None: ...

        await fleet.start()
        report = await diagnose(
            rabbitmq.url, settings, management_url=rabbitmq.management_url or "http://127.0.0.1:1/"
        )
        verdicts = {f.check: f.status for f in report.findings}
        version = BrokerHandle.of(rabbitmq).version
        assert report.broker["version"] == ".".join(map(str, version))
        assert verdicts["broker"] is (Status.OK if version >= (4, 0) else Status.WARN)
        expected_size = Status.OK  # 16 MiB is within 4.x's 16 MiB and 3.x's 128 MiB
        assert verdicts["max message size"] is expected_size
        assert verdicts["heartbeat"] is Status.OK
        if rabbitmq.management_url is None:
            assert verdicts["delivery limits"] is Status.UNKNOWN
            return
        assert verdicts["management API"] is Status.OK
        assert verdicts["delivery limits"] is Status.OK, report.as_dict()
        async with _channel(rabbitmq.url) as channel:  # a quorum queue of another making, bound to Gear
            await channel.queue_declare(silent, durable=True, arguments={"x-queue-type": "quorum"})
            await channel.queue_bind(silent, fleet.exchange, routing_key=silent)
        report = await diagnose(rabbitmq.url, settings, management_url=rabbitmq.management_url)
        limits = next(f for f in report.findings if f.check == "delivery limits")
        assert limits.status is (Status.FAIL if version >= (4, 0) else Status.WARN), limits
        assert silent in limits.found
    finally:
        await fleet.stop()
        async with _channel(rabbitmq.url) as channel:
            await channel.queue_delete(silent)


@contextlib.asynccontextmanager
async def _channel(url: str) -> AsyncIterator[Any]:
    connection = await aiormq.connect(url)
    try:
        yield await connection.channel()
    finally:
        await connection.close()
