"""Pure parts of the SDK, without sockets: topology data, envelope, backoff, settings, deadlines."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from pydantic import BaseModel

import gear
from gear.context import RequestContext, _current
from gear.envelope import ATTEMPT, DEADLINE, METHOD, EnvelopeError, ErrorBody, Kind, parse_meta
from gear.errors import BadPayloadError, MethodNotFoundError, RemoteError
from gear.handler import Handler
from gear.publisher import Outgoing, RepublishPolicy
from gear.reconnect import Backoff
from gear.reply import decode_reply
from gear.rpc import RPC


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
    _addr, msg, remaining, _until = rpc._prepare("REPO.h2", "status", {}, None, Kind.CALL)
    assert remaining == pytest.approx(30, abs=0.1)
    assert msg.parent_id is None
    outer = time.time() + 2
    token = _current.set(RequestContext("r1", "page", "WEB.w1", outer, "t" * 32))
    try:
        _addr, msg, remaining, _until = rpc._prepare("REPO.h2", "status", {}, 60, Kind.CALL)
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
    """The SDK's publish encoder and the broker's codec agree: no silent truncation."""
    from gear.amqp import encode_publish
    from gear.broker.codec import return_frame

    assert return_frame(1, 312, "NO_ROUTE", "gear", "é" * 127)  # 254 bytes fit
    with pytest.raises(ValueError, match="255"):
        return_frame(1, 312, "NO_ROUTE", "gear", "é" * 128)
    with pytest.raises(ValueError, match="255"):
        encode_publish(
            1,
            "gear",
            "q",
            b"",
            frame_body_max=4096,
            mandatory=True,
            content_type=None,
            delivery_mode=1,
            correlation_id=None,
            reply_to=None,
            expiration=None,
            message_id="m" * 256,
            message_type=None,
            app_id=None,
            headers=None,
        )


def test_fast_publish_encoding_decodes_with_pamqp() -> None:
    import pamqp.frame

    from gear.amqp import encode_publish

    headers = {"x-gear-method": "status", "x-gear-deadline": 1_790_000_000_123, "x-flag": True}
    data = encode_publish(
        5,
        "gear",
        "REPO.h2",
        b'{"a": 1}',
        frame_body_max=4096,
        mandatory=True,
        content_type="application/json",
        delivery_mode=2,
        correlation_id="c" * 16,
        reply_to="WEB.w1",
        expiration="1500",
        message_id="c" * 16 + ".1",
        message_type="gear.call",
        app_id="WEB.w1",
        headers=headers,
    )
    frames: list[Any] = []
    while data:
        used, channel, frame = pamqp.frame.unmarshal(data)
        assert channel == 5
        frames.append(frame)
        data = data[used:]
    method, header, body = frames
    assert (method.exchange, method.routing_key, method.mandatory) == ("gear", "REPO.h2", True)
    assert header.body_size == len(b'{"a": 1}')
    p = header.properties
    assert (p.content_type, p.delivery_mode, p.correlation_id, p.reply_to) == (
        "application/json",
        2,
        "c" * 16,
        "WEB.w1",
    )
    assert (p.expiration, p.message_id) == ("1500", "c" * 16 + ".1")
    assert (p.message_type, p.app_id) == ("gear.call", "WEB.w1")
    assert p.headers == headers
    assert body.value == b'{"a": 1}'

    empty = encode_publish(
        1,
        "",
        "q",
        b"",
        frame_body_max=4096,
        mandatory=False,
        content_type=None,
        delivery_mode=1,
        correlation_id=None,
        reply_to=None,
        expiration=None,
        message_id="m",
        message_type=None,
        app_id=None,
        headers=None,
    )
    used, _, _method = pamqp.frame.unmarshal(empty)
    _, _, head = pamqp.frame.unmarshal(empty[used:])
    assert isinstance(head, pamqp.header.ContentHeader)
    assert head.body_size == 0
    assert head.properties.message_id == "m"
    with pytest.raises(TypeError):
        encode_publish(
            1,
            "",
            "q",
            b"",
            frame_body_max=4096,
            mandatory=False,
            content_type=None,
            delivery_mode=1,
            correlation_id=None,
            reply_to=None,
            expiration=None,
            message_id="m",
            message_type=None,
            app_id=None,
            headers={"x": 1.5},
        )

    # a body larger than the frame size is split into body frames that add up to it
    big = bytes(range(256)) * 40
    data = encode_publish(
        2,
        "gear",
        "q",
        big,
        frame_body_max=1000,
        mandatory=True,
        content_type=None,
        delivery_mode=1,
        correlation_id=None,
        reply_to=None,
        expiration=None,
        message_id="m",
        message_type=None,
        app_id=None,
        headers=None,
    )
    chunks: list[Any] = []
    while data:
        used, _, frame = pamqp.frame.unmarshal(data)
        chunks.append(frame)
        data = data[used:]
    assert chunks[1].body_size == len(big)
    assert [len(f.value) for f in chunks[2:]] == [1000] * 10 + [240]
    assert b"".join(f.value for f in chunks[2:]) == big


async def test_the_router_routes_each_delivery_once() -> None:
    """A reply goes to the call waiting for it, else to a reply handler, else counts as late; a
    request goes to the serving side; nothing is routed twice."""
    from concurrent.futures import ThreadPoolExecutor

    from gear.amqp import Delivery
    from gear.envelope import Meta
    from gear.inbound import ReplyHandlers, Router
    from gear.reply import Reply
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

    class Server:
        def on_request(self, delivery: Delivery, meta: Meta) -> None:
            served.append(meta.request_id)

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
        return Delivery("WEB.w1", "ctag", tag, redelivered, "gear", "WEB.w1", props, b"7", Settled())

    router.on_delivery(delivery("gear.reply", "a" * 16, "lookup", 1))  # its call takes it
    router.on_delivery(delivery("gear.reply", "b" * 16, "lookup", 2))  # the reply handler
    router.on_delivery(delivery("gear.reply", "c" * 16, "status", 3))  # nobody: late
    router.on_delivery(delivery("gear.call", "d" * 16, "status", 4))  # the server settles it
    router.on_delivery(delivery("not-gear", "e" * 16, "status", 5))  # foreign: once more
    router.on_delivery(delivery("not-gear", "e" * 16, "status", 6, redelivered=True))  # the same: gone
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
