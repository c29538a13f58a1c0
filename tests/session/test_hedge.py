"""The pieces of hedged calls without a broker: the headers, which deliveries must be granted before
they run, and how a caller grants. (With a broker and a stale consumer: ``test_stale_consumer.py``.)"""

from __future__ import annotations

import time
from typing import Any

import pytest

import gear
from gear.amqp import Delivery
from gear.base.envelope import (
    DEADLINE,
    HEDGE,
    HEDGE_AFTER,
    METHOD,
    NOTICE,
    Kind,
    Meta,
    Notice,
    attempt_message_id,
    parse_meta,
)
from gear.session.hedge import Holder, Servers, at_risk, copy_of, notice
from gear.session.publisher import Outgoing
from gear.wire.properties import Properties


def _meta(headers: dict[str, Any], kind: str = "gear.call") -> Meta:
    return parse_meta(kind, "r1", "WEB.w1", "WEB.w1", {METHOD: "m", **headers})


def _delivery(*, redelivered: bool = False, expiration: str | None = None) -> Delivery:
    props = Properties(expiration=expiration)
    return Delivery(1, "REPO", "ctag", 1, redelivered, "gear", "REPO", props, b"1")


def test_the_hedge_headers_are_read_and_bad_ones_ignored() -> None:
    meta = _meta({HEDGE: 2, HEDGE_AFTER: 1000})
    assert (meta.hedge, meta.hedge_after_ms, meta.notice) == (2, 1000, None)
    assert _meta({}).hedge is None
    for bad in (True, -1, "1", 1.5):
        assert _meta({HEDGE: bad, HEDGE_AFTER: 1000}).hedge is None
    for bad_wait in ("x", 0, -5, True):  # no known wait before copies: served as unhedged
        assert (_meta({HEDGE: 0, HEDGE_AFTER: bad_wait}).hedge, _meta({HEDGE: 0}).hedge) == (None, None)
    assert _meta({NOTICE: "claim"}, "gear.reply").notice is Notice.CLAIM
    assert _meta({NOTICE: b"grant"}, "gear.reply").notice is Notice.GRANT
    assert _meta({NOTICE: "maybe"}, "gear.reply").notice is None


def test_copies_have_message_ids_of_their_own() -> None:
    assert attempt_message_id("r1", 1) == "r1.1"
    assert attempt_message_id("r1", 1, 2) == "r1.c2.1"
    msg = Outgoing("REPO", "REPO", b"1", "r1", Kind.CALL.value, {METHOD: "m", HEDGE: 0})
    second = copy_of(msg, 2)
    assert (second.request_id, second.copy, second.headers[HEDGE]) == ("r1", 2, 2)
    assert msg.headers[HEDGE] == 0  # the original is left as it was


def test_a_notice_is_a_reply_kind_message_about_the_request() -> None:
    msg = notice(_meta({HEDGE: 0}), "WEB.w1", Notice.CLAIM)
    assert (msg.kind, msg.routing_key, msg.request_id) == ("gear.reply", "WEB.w1", "r1")
    assert msg.headers == {METHOD: "m", NOTICE: "claim"}
    assert msg.body == b""


def test_which_deliveries_must_be_granted_before_they_run() -> None:
    now = time.time()
    deadline_ms = int((now + 9) * 1000)

    def meta(hedge: int | None) -> Meta:
        extra = {} if hedge is None else {HEDGE: hedge, HEDGE_AFTER: 1000}
        return _meta({DEADLINE: deadline_ms, **extra})

    fresh = _delivery(expiration="9000")  # sent just now
    assert not at_risk(fresh, meta(0), now)
    assert at_risk(fresh, meta(1), now)  # a copy
    assert at_risk(_delivery(redelivered=True, expiration="9000"), meta(0), now)
    assert at_risk(_delivery(expiration="9600"), meta(0), now)  # sent 0.6 s ago: over half of 1 s
    assert not at_risk(_delivery(expiration="9400"), meta(0), now)
    assert not at_risk(_delivery(redelivered=True), meta(None), now)  # its caller sends no copies
    assert not at_risk(_delivery(), meta(0), now)  # age unknown, fresh otherwise


def test_a_caller_grants_one_instance_per_call() -> None:
    holder = Holder()
    assert holder.claim("REPO.r2")
    assert holder.claim("REPO.r2")  # its copy, or its own late original: the window runs it once
    assert not holder.claim("REPO.r1")
    holder.running("REPO.r2")
    assert holder.conflicts == 0


@pytest.mark.parametrize("first", ["running", "claim"])
def test_an_instance_that_said_running_first_holds_the_call(first: str) -> None:
    holder = Holder()
    if first == "running":
        holder.running("REPO.r1")
    else:
        assert holder.claim("REPO.r1")
    assert not holder.claim("REPO.r2")
    holder.running("REPO.r2")  # a notice that came too late to stop a copy: counted
    assert holder.conflicts == 1


def test_calls_to_a_shared_type_are_copied_only_with_hedge_shared() -> None:
    for shared, expected in ((True, {"REPO", "REPO.r1"}), (False, {"REPO.r1"})):
        svc = gear.Service("WEB", "w1", url="amqp://guest:guest@127.0.0.1:1/", hedge_shared=shared)
        hedged = {
            address
            for address in ("REPO", "REPO.r1")
            if HEDGE in svc.rpc._prepare(address, "m", None, 5.0, Kind.CALL, "WEB.w1")[1].headers
        }
        assert hedged == expected
    default = gear.Service("WEB", "w1", url="amqp://guest:guest@127.0.0.1:1/")  # never twice: TYPE.HOST only
    assert HEDGE not in default.rpc._prepare("REPO", "m", None, 5.0, Kind.CALL, "WEB.w1")[1].headers
    assert HEDGE in default.rpc._prepare("REPO.r1", "m", None, 5.0, Kind.CALL, "WEB.w1")[1].headers
    off = gear.Service("WEB", "w1", url="amqp://guest:guest@127.0.0.1:1/", hedge_after=0)
    assert HEDGE not in off.rpc._prepare("REPO.r1", "m", None, 5.0, Kind.CALL, "WEB.w1")[1].headers
    assert HEDGE not in off.rpc._prepare("REPO.r1", "m", None, 5.0, Kind.CAST)[1].headers


def test_the_instances_a_copy_can_go_to_straight() -> None:
    servers = Servers()
    assert servers.pick("REPO", 0) is None
    for sender in ("REPO.r1", "REPO.r2", "REPO.r1", "REPO.r3"):
        servers.seen("REPO", sender)
    assert [servers.pick("REPO", n) for n in range(4)] == ["REPO.r3", "REPO.r1", "REPO.r2", "REPO.r3"]
    for n in range(10):
        servers.seen("REPO", f"REPO.x{n}")
    assert {servers.pick("REPO", n) for n in range(8)} == {f"REPO.x{n}" for n in range(6, 10)}
    assert servers.pick("WEB", 0) is None


def test_a_redelivery_is_granted_only_to_the_instance_known_to_run_the_call() -> None:
    """The instance that took it first may have run it, its reply lost with its link: while nobody is
    known to run the call, its copies carry it instead."""
    holder = Holder()
    assert not holder.claim("REPO.r2", again=True)
    assert holder.instance is None  # a copy may still be granted
    assert holder.claim("REPO.r1")
    assert holder.claim("REPO.r1", again=True)
    assert not holder.claim("REPO.r2", again=True)


def test_a_redelivered_request_asks_with_a_reclaim() -> None:
    assert _meta({NOTICE: "reclaim"}, "gear.reply").notice is Notice.RECLAIM
