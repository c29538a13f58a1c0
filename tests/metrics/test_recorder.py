"""The in-process aggregation: labels, buckets, bounded cardinality, and the exposition it turns into."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

import gear
from gear.metrics import BUCKETS, LINK_STATES, READ, Measured, Recorder
from gear.metrics.names import MAX_SERIES
from gear.metrics.prometheus import Reading, ServiceCollector
from gear.tracing.metering import error_type


def _exposition(recorder: Recorder, state: str = "ready", stats: dict[str, int] | None = None) -> dict:
    from prometheus_client import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    reading = Reading(recorder.snapshot(), stats or {}, state, state == "ready")
    registry.register(ServiceCollector(lambda: reading))
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_the_buckets_span_one_millisecond_to_thirty_seconds() -> None:
    assert BUCKETS[0] == 0.001
    assert BUCKETS[-1] == 30.0
    assert list(BUCKETS) == sorted(BUCKETS)


def test_a_call_is_recorded_by_callee_method_form_and_error() -> None:
    recorder = Recorder("WEB")
    recorder.client_call("REPO", "put", 0.0015, None)
    recorder.client_call("REPO.host7", "put", 0.004, gear.RemoteError("KeyError", "no such key"))
    recorder.client_call("REPO", "put", 40.0, gear.CallTimeoutError("REPO", "put", 30))
    found = _exposition(recorder)
    ok = (("error_type", ""), ("gear_route", "type"), ("rpc_method", "REPO/put"), ("rpc_system_name", "gear"))
    assert found["rpc_client_call_duration_seconds_count", ok] == 1
    assert found["rpc_client_call_duration_seconds_bucket", (*ok[:2], ("le", "0.001"), *ok[2:])] == 0
    assert found["rpc_client_call_duration_seconds_bucket", (*ok[:2], ("le", "0.002"), *ok[2:])] == 1
    remote = (("error_type", "KeyError"), ("gear_route", "type_host"), *ok[2:])
    assert found["rpc_client_call_duration_seconds_count", remote] == 1
    late = (("error_type", "timeout"), *ok[1:])
    assert found["rpc_client_call_duration_seconds_bucket", (*late[:2], ("le", "30"), *late[2:])] == 0
    assert found["rpc_client_call_duration_seconds_bucket", (*late[:2], ("le", "+Inf"), *late[2:])] == 1
    assert found["rpc_client_call_duration_seconds_sum", late] == 40.0


def test_no_host_reaches_a_label() -> None:
    recorder = Recorder("WEB")
    for n in range(500):
        recorder.client_call(f"REPO.host{n}", "get", 0.01, None)
        recorder.published("gear.reply", f"WEB.cli{n}", 0.001, "confirmed")
        recorder.consumed(f"WEB.web{n}", "gear.call")
    found = _exposition(recorder)
    hosts = re.compile(r"(host|cli|web)\d")
    assert not [key for key in found if any(hosts.search(v) for _, v in key[1])]
    calls = [k for k in found if k[0] == "rpc_client_call_duration_seconds_count"]
    assert len(calls) == 1
    assert found[calls[0]] == 500
    sent = [k for k in found if k[0] == "messaging_client_sent_messages_total"]
    assert [dict(k[1])["messaging_destination_template"] for k in sent] == ["gear:WEB.{host}"]


def test_unknown_methods_are_one_series_and_past_the_limit_everything_shares_one() -> None:
    recorder = Recorder("REPO")
    for n in range(50):
        recorder.served(f"m{n}", "gear.call", 0.001, "MethodNotFound")
    found = _exposition(recorder)
    unknown = [k for k in found if k[0] == "rpc_server_call_duration_seconds_count"]
    assert [dict(k[1])["rpc_method"] for k in unknown] == ["_OTHER"]
    for n in range(MAX_SERIES + 10):
        recorder.client_call("REPO", f"method{n}", 0.001, None)
    found = _exposition(recorder)
    counts = {k: v for k, v in found.items() if k[0] == "rpc_client_call_duration_seconds_count"}
    assert len(counts) == MAX_SERIES + 1
    overflow = [v for k, v in counts.items() if dict(k[1])["rpc_method"] == ""]
    assert overflow == [10]


def test_casts_are_measured_as_processing_and_publish_outcomes_as_errors() -> None:
    recorder = Recorder("REPO")
    recorder.served("reload", "gear.cast", 0.02, ValueError("bad"))
    recorder.published("gear.call", "CTRL", 0.002, "confirmed")
    recorder.published("gear.call", "CTRL", 0.002, "returned")
    recorder.published("gear.cast", "CTRL.@all", 0.003, "nacked")
    found = _exposition(recorder)
    process = (
        ("error_type", "ValueError"),
        ("messaging_operation_name", "process"),
        ("messaging_system", "rabbitmq"),
        ("rpc_method", "REPO/reload"),
    )
    assert found["messaging_process_duration_seconds_count", process] == 1
    sent = {
        (labels["gear_rpc_kind"], labels["messaging_destination_name"], labels["error_type"]): v
        for (name, key), v in found.items()
        if name == "messaging_client_sent_messages_total"
        for labels in [dict(key)]
    }
    assert sent == {
        ("call", "gear:CTRL", ""): 1,
        ("call", "gear:CTRL", "returned"): 1,
        ("cast", "gear:CTRL.@all", "nacked"): 1,
    }
    ops = [k for k in found if k[0] == "messaging_client_operation_duration_seconds_count"]
    assert {dict(k[1])["messaging_operation_type"] for k in ops} == {"send"}


def test_the_read_instruments_follow_the_state_and_the_stats() -> None:
    found = _exposition(Recorder("REPO"), "reconnecting", {"reconnects": 3, "calls_in_flight": 2, "nacks": 1})
    assert found["gear_link_up", ()] == 0
    assert found["gear_ready", ()] == 0
    states = {dict(k[1])["gear_link_state"]: v for k, v in found.items() if k[0] == "gear_link_state"}
    assert states == {s: float(s == "reconnecting") for s in LINK_STATES}
    assert found["gear_link_reconnects_total", ()] == 3
    assert found["gear_client_calls_in_flight", ()] == 2
    assert found["gear_publish_nacks_total", ()] == 1


def test_link_states_are_the_service_states() -> None:
    assert set(LINK_STATES) == {s.value for s in gear.ServiceState}


def test_every_read_instrument_comes_from_a_stat_or_the_state() -> None:
    svc = gear.Service("REPO", "r1")
    assert set(READ) - {"link_up", "link_state", "ready"} <= set(svc.stats)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (gear.RemoteError("KeyError", "x"), "KeyError"),
        (gear.CallTimeoutError("REPO", "get", 1.0), "timeout"),
        (gear.UnroutableError("REPO", 3), "UnroutableError"),
        ("MethodNotFound", "MethodNotFound"),
    ],
)
def test_error_types_are_class_names_not_messages(error: BaseException | str, expected: str) -> None:
    assert error_type(error) == expected


def test_instrument_names_follow_the_conventions() -> None:
    names = {i.name for i in vars(Measured).values() if hasattr(i, "kind")}
    assert names == {
        "rpc.client.call.duration",
        "rpc.server.call.duration",
        "messaging.client.operation.duration",
        "messaging.client.sent.messages",
        "messaging.client.consumed.messages",
        "messaging.process.duration",
    }
    assert Measured.CLIENT_CALL.prometheus == "rpc_client_call_duration_seconds"
    assert Measured.SENT.prometheus == "messaging_client_sent_messages_total"
