"""Pure parts of the SDK, without sockets: topology data, envelope, backoff, settings, deadlines."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from pydantic import BaseModel

import gear
from gear.base.context import RequestContext, _current
from gear.base.deadline import Deadline
from gear.base.envelope import ATTEMPT, DEADLINE, METHOD, EnvelopeError, ErrorBody, Kind, parse_meta
from gear.base.reply import decode_reply
from gear.calling.rpc import RPC
from gear.errors import BadPayloadError, MethodNotFoundError, RemoteError
from gear.serving.handler import Handler
from gear.session.publisher import Outgoing, RepublishPolicy
from gear.session.reconnect import Backoff


def test_topology_for_a_serving_instance() -> None:
    topo = gear.Topology.for_service("REPO", "h2", exchange="ex", instance_queue_ttl=30)
    assert topo.exchange.name == "ex"
    assert topo.exchange.type == "topic"
    assert topo.type_queue is not None
    assert topo.type_queue.name == "REPO"
    assert topo.type_queue.durable
    assert topo.host_queue.name == "REPO.h2"
    assert topo.host_queue.durable
    assert not topo.host_queue.exclusive
    assert topo.host_queue.arguments == {"x-expires": 30_000}
    assert [(b.queue, b.routing_key) for b in topo.bindings] == [
        ("REPO", "REPO"),
        ("REPO.h2", "REPO.h2"),
        ("REPO.h2", "REPO.@all"),
        ("REPO.h2", "@all.@all"),
    ]
    data = topo.as_dict()
    assert data["queues"][1]["arguments"] == {"x-expires": 30_000}
    assert all("*" not in b["routing_key"] and "#" not in b["routing_key"] for b in data["bindings"])


def test_topology_options() -> None:
    quorum = gear.Topology.for_service("REPO", "h2", quorum=True, exchange="ops", delivery_limit=5)
    assert quorum.type_queue is not None
    dead_lettered = {
        "x-queue-type": "quorum",
        "x-delivery-limit": 5,
        "x-dead-letter-exchange": "ops",
        "x-dead-letter-routing-key": "@dead",
    }
    assert quorum.type_queue.arguments == dead_lettered
    assert quorum.host_queue.arguments == {**dead_lettered, "x-expires": 600_000}
    assert [q.name for q in quorum.queues] == ["REPO", "REPO.h2", "ops.@dead", "ops.@dead.notify"]
    assert [(b.queue, b.routing_key) for b in quorum.bindings if b.routing_key == "@dead"] == [
        ("ops.@dead", "@dead"),
        ("ops.@dead.notify", "@dead"),
    ]
    with pytest.raises(ValueError, match="delivery_limit"):
        gear.Topology.for_service("REPO", "h2", quorum=True, delivery_limit=0)
    classic = gear.Topology.for_service("REPO", "h2")
    assert (classic.dead_letters, classic.dead_letter_notify) == (None, None)
    assert len(classic.queues) == 2
    client = gear.Topology.for_service("CLI", "c1", serve=False)
    assert client.type_queue is None
    assert [b.routing_key for b in client.bindings] == ["CLI.c1"]
    with pytest.raises(ValueError, match="HOST"):
        gear.Topology.for_service("REPO", "bad.host")
    with pytest.raises(ValueError, match="bytes"):
        gear.Topology.for_service("R", "h" * 260)


def test_parse_meta() -> None:
    meta = parse_meta(
        "gear.call",
        "abc",
        "WEB.h1",
        "WEB.h1",
        {METHOD: b"status", DEADLINE: 123, ATTEMPT: 2, "x-gear-status": "error"},
    )
    assert meta.kind is Kind.CALL
    assert meta.method == "status"
    assert meta.deadline_ms == 123
    assert meta.attempt == 2
    assert not meta.ok
    with pytest.raises(EnvelopeError):
        parse_meta("other", "abc", None, None, {METHOD: "x"})
    with pytest.raises(EnvelopeError):
        parse_meta("gear.call", None, None, None, {METHOD: "x"})
    with pytest.raises(EnvelopeError):
        parse_meta("gear.call", "abc", None, None, {})


def test_decode_reply_maps_error_types() -> None:
    assert decode_reply(True, b'{"a": 1}') == {"a": 1}
    assert decode_reply(True, b"") is None
    body = ErrorBody(type="MethodNotFound", message="no").model_dump_json().encode()
    with pytest.raises(MethodNotFoundError):
        decode_reply(False, body)
    with pytest.raises(BadPayloadError):
        decode_reply(False, ErrorBody(type="BadPayload").model_dump_json().encode())
    with pytest.raises(RemoteError) as info:
        decode_reply(False, b'{"type": "KeyError", "message": "k", "details": {"x": 1}}')
    assert (info.value.type, info.value.message, info.value.details) == ("KeyError", "k", {"x": 1})
    with pytest.raises(RemoteError, match="MalformedErrorReply"):
        decode_reply(False, b"not json")


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    rng = random.Random(7)
    b = Backoff(initial=0.1, maximum=2.0, jitter=0.5)
    delays = [b.delay(n, rng) for n in range(10)]
    for n, d in enumerate(delays):
        cap = min(2.0, 0.1 * 2**n)
        assert cap * 0.5 <= d <= cap
    assert max(delays) <= 2.0
    policy = RepublishPolicy(initial=0.05, maximum=0.4)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [0.05, 0.1, 0.2, 0.4, 0.4]


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEAR_URL", "amqp://a/, amqp://b/")
    monkeypatch.setenv("GEAR_TYPE", "WEB")
    monkeypatch.setenv("GEAR_HOST", "w9")
    monkeypatch.setenv("GEAR_TIMEOUT", "2.5")
    monkeypatch.setenv("GEAR_PREFETCH", "8")
    monkeypatch.setenv("GEAR_BUSY_POLL", "0.001")
    s = gear.Settings()
    assert s.url == ("amqp://a/", "amqp://b/")
    assert (s.type, s.host, s.timeout, s.prefetch, s.busy_poll) == ("WEB", "w9", 2.5, 8, 0.001)
    svc = gear.Service()
    assert svc.identity == "WEB.w9"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"type": "WE.B"}, "TYPE"),
        ({"type": "WEB", "host": "a.b"}, "HOST"),
        ({"type": "WEB", "host": "@all"}, "HOST"),
        ({"type": "WEB", "url": "http://x/"}, "amqp"),
        ({"type": "WEB", "timeout": 0}, "timeout"),
        ({"type": "WEB", "busy_poll": -0.001}, "busy_poll"),
        ({"type": "WEB", "busy_poll": 2}, "busy_poll"),
        ({"type": "*"}, "TYPE"),
    ],
)
def test_bad_configuration_is_refused_early(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(gear.ConfigurationError, match=match):
        gear.Service(**kwargs)


def test_handler_signatures() -> None:
    class Query(BaseModel):
        n: int = 1

    async def with_model(q: Query) -> int:
        return q.n

    def plain() -> None:
        return None

    def two(a: int, b: int) -> None:
        return None

    h = Handler.build("m", with_model, None, {"Query": Query})
    assert h.is_async
    assert h.payload is not None
    assert h.payload.validate_json(b'{"n": 3}') == Query(n=3)
    p = Handler.build("p", plain, 5)
    assert not p.is_async
    assert p.payload is None
    assert p.window == 5
    with pytest.raises(gear.ConfigurationError, match="one payload parameter"):
        Handler.build("t", two, None)
    svc = gear.Service("WEB", "w1")
    svc.handler("x")(plain)

    @svc.handler("local-model")  # a model declared in this function still resolves
    async def local_model(q: Query) -> int:
        return q.n

    assert svc._dispatcher.handlers["local-model"].payload is not None
    with pytest.raises(gear.ConfigurationError, match="already"):
        svc.handler("x")(plain)


class _NoPublisher:
    async def publish(self, msg: Outgoing, until: float, **_: Any) -> bool:
        raise AssertionError("not used")


async def test_deadline_inheritance_inside_a_handler() -> None:
    rpc = RPC(
        identity="CTRL.h1",
        publisher=_NoPublisher(),  # type: ignore[arg-type]
        default_timeout=30,
        cast_retry_budget=5,
    )
    _addr, msg, deadline, remaining = rpc._prepare("REPO.h2", "status", {}, None, Kind.CALL)
    assert remaining == 30
    assert msg.deadline is deadline
    assert msg.headers[DEADLINE] == deadline.unix_ms == pytest.approx((time.time() + 30) * 1000, abs=100)
    assert msg.parent_id is None
    outer = time.time() + 2
    token = _current.set(RequestContext("r1", "page", "WEB.w1", Deadline.from_unix(outer), "t" * 32))
    try:
        _addr, msg, deadline, remaining = rpc._prepare("REPO.h2", "status", {}, 60, Kind.CALL)
        assert remaining < 2
        assert remaining > 1.5
        assert msg.headers[DEADLINE] <= int(outer * 1000)
        assert msg.parent_id == "r1"
        assert msg.trace_id == "t" * 32
        assert gear.current_deadline() == outer
        remaining_budget = gear.remaining_budget()
        assert remaining_budget is not None
        assert 1.5 < remaining_budget <= 2
    finally:
        _current.reset(token)
    assert gear.current_request() is None
    with pytest.raises(gear.ConfigurationError):
        rpc._prepare("REPO.h2", "", {}, None, Kind.CALL)
    with pytest.raises(gear.ConfigurationError):
        rpc._prepare("REPO.h2", "m", {}, -1, Kind.CALL)


async def test_calling_before_start_says_so() -> None:
    svc = gear.Service("WEB", "w1", url="amqp://guest:guest@127.0.0.1:1/")
    with pytest.raises(gear.ConnectionLostError, match="not started"):
        await svc.rpc.call("REPO.h1", "status", timeout=1)
    with pytest.raises(gear.ConnectionLostError, match="not started"):
        await svc.rpc.cast("REPO.h1", "status")


def test_both_encoders_refuse_a_short_string_over_255_bytes() -> None:
    """The publish encoder and the broker's frames agree: no silent truncation (the frames themselves
    are checked against pamqp in tests/wire/test_codec.py)."""
    from gear.wire.content import Publish, encode_publish
    from gear.wire.methods import return_frame
    from gear.wire.properties import Properties

    assert return_frame(1, 312, "NO_ROUTE", "gear", "é" * 127)  # 254 bytes fit
    with pytest.raises(ValueError, match="255"):
        return_frame(1, 312, "NO_ROUTE", "gear", "é" * 128)
    with pytest.raises(ValueError, match="255"):
        encode_publish(1, Publish("gear", "q", Properties(message_id="m" * 256), b"", mandatory=True), 4096)


async def test_the_router_routes_each_delivery_once() -> None:
    """A reply goes to the call waiting for it, else to a reply handler, else counts as late; a
    request goes to the serving side; nothing is routed twice."""
    from concurrent.futures import ThreadPoolExecutor

    from gear.amqp import Delivery
    from gear.base.envelope import Meta
    from gear.base.reply import Reply
    from gear.link import Settle
    from gear.serving.inbound import ReplyHandlers, Router
    from gear.tracing.api import NullTracer
    from gear.tracing.emitter import Emitter
    from gear.wire.properties import Properties

    waiting = {"a" * 16}
    taken: list[str] = []
    served: list[str] = []
    handled: list[Reply] = []

    class Calls:
        def take_reply(self, meta: Meta, body: bytes) -> bool:
            taken.append(meta.request_id)
            return meta.request_id in waiting

        def take_notice(self, meta: Meta) -> None:
            taken.append(f"notice {meta.request_id}")

    class Server:
        def on_request(self, delivery: Delivery, settle: Settle, meta: Meta) -> None:
            served.append(meta.request_id)

        def take_verdict(self, meta: Meta) -> None:
            served.append(f"verdict {meta.request_id}")

    async def on_lookup(reply: Reply) -> None:
        handled.append(reply)

    replies = ReplyHandlers(lambda: ThreadPoolExecutor(1))
    replies.register("lookup", on_lookup)
    router = Router(calls=Calls(), replies=replies, server=Server(), events=Emitter(NullTracer(), "WEB.w1"))

    settled: list[tuple[str, int, bool]] = []

    class Settled:
        def ack(self, delivery_tag: int) -> bool:
            settled.append(("ack", delivery_tag, False))
            return True

        def reject(self, delivery_tag: int, requeue: bool) -> bool:
            settled.append(("reject", delivery_tag, requeue))
            return True

    def delivery(kind: str, rid: str, method: str, tag: int, redelivered: bool = False) -> Delivery:
        headers: dict[str, Any] = {METHOD: method}
        props = Properties(
            message_id=f"{rid}.1", correlation_id=rid, message_type=kind, app_id="REPO.r1", headers=headers
        )
        return Delivery(1, "WEB.w1", "ctag", tag, redelivered, "gear", "WEB.w1", props, b"7")

    s = Settled()
    router.on_delivery(delivery("gear.reply", "a" * 16, "lookup", 1), s)  # its call takes it
    router.on_delivery(delivery("gear.reply", "b" * 16, "lookup", 2), s)  # the reply handler
    router.on_delivery(delivery("gear.reply", "c" * 16, "status", 3), s)  # nobody: late
    router.on_delivery(delivery("gear.call", "d" * 16, "status", 4), s)  # the server settles it
    router.on_delivery(delivery("not-gear", "e" * 16, "status", 5), s)  # foreign: once more
    router.on_delivery(delivery("not-gear", "e" * 16, "status", 6, redelivered=True), s)  # the same: gone
    assert settled == [
        ("ack", 1, False),
        ("ack", 2, False),
        ("ack", 3, False),
        ("reject", 5, True),
        ("reject", 6, False),
    ]
    assert await replies.drain(1.0)
    assert taken == ["a" * 16, "b" * 16, "c" * 16]
    assert [(r.request_id, r.result, r.sender) for r in handled] == [("b" * 16, 7, "REPO.r1")]
    assert router.late_replies == 1
    assert served == ["d" * 16]
    with pytest.raises(gear.ConfigurationError, match="already"):
        replies.register("lookup", on_lookup)


def test_a_service_takes_a_settings_object_as_it_is_or_with_overrides() -> None:
    import gear

    shared = gear.Settings(type="REPO", url="amqp://broker/", timeout=7)
    svc = gear.Service(settings=shared.model_copy(update={"host": "h1"}))
    assert (svc.identity, svc.settings.timeout) == ("REPO.h1", 7)
    other = gear.Service(host="h2", settings=shared)
    assert (other.identity, other.settings.timeout, other.settings.url) == ("REPO.h2", 7, ("amqp://broker/",))
    with pytest.raises(gear.ConfigurationError):
        gear.Service(settings=shared.model_copy(update={"host": "bad host"}))
