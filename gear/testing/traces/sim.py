"""The simulator behind :mod:`gear.testing.traces.generate`: instances with skewed clocks that write events.

Times passed around are "true" nanoseconds; each instance adds its own clock skew when it writes, as a
real node would. Event shapes follow the contract in :mod:`gear.tracing.event`. With a sample rate every
instance samples at it (see :class:`~gear.testing.traces.instance.Instance`); the truth stays whole.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from typing import Any

from gear.testing.traces.instance import MS, Instance
from gear.testing.traces.truth import Call, Truth
from gear.tracing.api import Attr, EventName

__all__ = ("MS", "Call", "Instance", "Sim", "Truth")


TIMEOUT_MS = 1000
_TOPOLOGY = {
    "WEB": ("web1", "web2"),
    "CTRL": ("ctrl1", "ctrl2"),
    "REPO": ("repo1", "repo2", "repo3"),
    "AUDIT": ("audit1",),
}


class Sim:
    """Builds calls event by event and records the truth."""

    def __init__(self, directory: Path, rng: random.Random, sample_rate: float | None = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.rng = rng
        self.base = 1_763_784_000_000_000_000
        self.truth = Truth()
        self.instances: dict[str, Instance] = {}
        self.by_type: dict[str, list[Instance]] = defaultdict(list)
        for type_, hosts in _TOPOLOGY.items():
            for n, host in enumerate(hosts):
                inst = Instance(directory, type_, host, (n * 3 - 2) * 1_000 * MS, sample_rate)
                self.instances[inst.id] = inst
                self.by_type[type_].append(inst)

    def instance(self, instance_id: str) -> Instance:
        """The instance with this id."""
        return self.instances[instance_id]

    def new_trace(self) -> str:
        """A fresh 32-hex trace id."""
        return f"{self.rng.getrandbits(128):032x}"

    def _span(self) -> str:
        return f"{self.rng.getrandbits(64):016x}"

    def _attrs(
        self,
        caller: Instance,
        callee: str,
        route: str,
        method: str,
        kind: str,
        span: str,
        attempt: int,
        rk: str,
    ) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            Attr.MESSAGING_SYSTEM: "rabbitmq",
            Attr.OPERATION_TYPE: "send",
            Attr.OPERATION_NAME: "publish",
            Attr.DESTINATION: f"gear:{rk}",
            Attr.ROUTING_KEY: rk,
            Attr.MESSAGE_ID: f"{span}-{attempt}",
            Attr.RPC_SYSTEM: "gear",
            Attr.RPC_METHOD: method,
            Attr.PEER_SERVICE: callee,
            Attr.ROUTE: route,
            Attr.RPC_KIND: kind,
            Attr.REQUEST_ID: span,
            Attr.ATTEMPT: attempt,
            Attr.CALLER: caller.id,
            Attr.TIMEOUT_MS: float(TIMEOUT_MS),
        }
        if route == "type_host":
            attrs[Attr.CALLEE_HOST] = rk.split(".", 1)[1]
        return attrs

    def _publish_attempts(
        self, caller: Instance, call: Call, t0: int, trace: str, parent: str | None, rk: str, scenario: str
    ) -> int | None:
        """Publish (with returns/nacks/republishes); return the true time of the routed publish."""
        span, kind = call.span_id, call.kind
        base = self._attrs(caller, call.callee, call.route, call.method, kind, span, 1, rk)
        caller.emit(t0, EventName.PUBLISH, span, trace, parent, base)
        small = {Attr.RPC_KIND: kind, Attr.REQUEST_ID: span}
        t = t0
        failures = {"unroutable": 3, "return_ok": 1}.get(scenario, 0)
        for attempt in range(1, failures + 1):
            returned = {**small, Attr.REPLY_CODE: 312, Attr.ERROR_TYPE: "NO_ROUTE", Attr.ATTEMPT: attempt}
            caller.emit(t + MS, EventName.RETURN, span, trace, parent, returned)
            caller.emit(t + MS, EventName.CONFIRM, span, trace, parent, {**small, Attr.ATTEMPT: attempt})
            call.returns += 1
            if attempt == 3:
                caller.emit(
                    t + 2 * MS,
                    EventName.UNROUTABLE,
                    span,
                    trace,
                    parent,
                    {**small, Attr.ERROR_TYPE: "unroutable"},
                )
                call.outcome = "unroutable"
                return None
            t += 5 * MS
            self._republish(caller, call, t, trace, parent, rk, attempt=attempt + 1, why="return")
        if scenario in ("nack_ok", "nacked"):
            caller.emit(t + MS, EventName.NACK, span, trace, parent, {**small, Attr.ERROR_TYPE: "nack"})
            call.nacks += 1
            if scenario == "nacked":
                call.outcome = "nacked"
                return None
            t += 4 * MS
            self._republish(caller, call, t, trace, parent, rk, attempt=2, why="nack")
        caller.emit(t + MS, EventName.CONFIRM, span, trace, parent, small)
        return t

    def _republish(
        self,
        caller: Instance,
        call: Call,
        t: int,
        trace: str,
        parent: str | None,
        rk: str,
        *,
        attempt: int,
        why: str,
    ) -> None:
        """Attempt ``attempt`` of ``call`` goes out at ``t``, ``why`` the one before failed (return, nack)."""
        span = call.span_id
        attrs = self._attrs(caller, call.callee, call.route, call.method, call.kind, span, attempt, rk)
        attrs[Attr.REPUBLISH_REASON] = why
        caller.emit(t, EventName.REPUBLISH, span, trace, parent, attrs)
        call.republishes += 1

    def _deliver(
        self,
        inst: Instance,
        t: int,
        call: Call,
        trace: str,
        parent: str | None,
        redelivered: bool = False,
        duplicate: bool = False,
    ) -> None:
        attrs = {
            Attr.MESSAGING_SYSTEM: "rabbitmq",
            Attr.OPERATION_TYPE: "process",
            Attr.OPERATION_NAME: "deliver",
            Attr.RPC_KIND: call.kind,
            Attr.RPC_METHOD: call.method,
            Attr.REQUEST_ID: call.span_id,
            Attr.REDELIVERED: redelivered,
            Attr.ROUTE: call.route,
            Attr.DELIVERY_TAG: inst.count + 1,
        }
        if duplicate:
            attrs[Attr.DUPLICATE] = True
        inst.emit(t, EventName.DELIVER, call.span_id, trace, parent, attrs)
        self.truth.deliveries[(inst.id, call.span_id)] += 1
        self.truth.redelivered[inst.id] += redelivered
        call.callee_types.add(inst.type)

    def _settle(self, inst: Instance, t: int, call: Call, trace: str, op: str, requeue: bool = False) -> None:
        attrs = {
            Attr.OPERATION_TYPE: "settle",
            Attr.OPERATION_NAME: op,
            Attr.REQUEST_ID: call.span_id,
            Attr.RPC_KIND: call.kind,
            Attr.REQUEUE: requeue,
        }
        inst.emit(t, EventName.SETTLE, call.span_id, trace, None, attrs)
        self.truth.requeued[inst.id] += requeue

    def _reply(self, callee: Instance, caller: Instance, t: int, call: Call, trace: str, error: bool) -> None:
        """The callee's reply events at true time ``t``: rpc.reply, the reply publish and its confirm."""
        span = call.span_id
        reply = {
            Attr.CONVERSATION_ID: span,
            Attr.RPC_METHOD: call.method,
            Attr.RPC_KIND: "reply",
            Attr.DURATION_MS: 1.0,
        }
        if error:
            reply[Attr.ERROR_TYPE] = "ValueError"
        callee.emit(t, EventName.REPLY_SENT, span, trace, None, reply)
        publish = {
            Attr.OPERATION_TYPE: "send",
            Attr.OPERATION_NAME: "publish",
            Attr.RPC_KIND: "reply",
            Attr.ROUTING_KEY: caller.id,
            Attr.CONVERSATION_ID: span,
            Attr.ATTEMPT: 1,
        }
        callee.emit(t, EventName.PUBLISH, span, trace, None, publish)
        callee.emit(t + MS // 2, EventName.CONFIRM, span, trace, None, {Attr.RPC_KIND: "reply"})

    def call(
        self,
        caller: Instance,
        callee: Instance,
        callee_type: str,
        route: str,
        method: str,
        t0: int,
        trace: str,
        parent: str | None,
        scenario: str,
    ) -> Call:
        """One point-to-point or stateless call played out as ``scenario``."""
        call = Call(caller.type, caller.id, callee_type, route, method, "call", self._span())
        self.truth.calls.append(call)
        rk = callee.id if route == "type_host" else callee_type
        sent = self._publish_attempts(caller, call, t0, trace, parent, rk, scenario)
        if sent is None:
            return call
        td = sent + 2 * MS
        self._deliver(callee, td, call, trace, parent)
        if scenario == "redelivery":
            self._settle(callee, td + MS, call, trace, "nack", requeue=True)
            td += 3 * MS
            self._deliver(callee, td, call, trace, parent, redelivered=True)
        if scenario in ("expired", "timeout", "late", "no_outcome"):
            if scenario == "expired":
                callee.emit(
                    td + MS,
                    EventName.EXPIRED,
                    call.span_id,
                    trace,
                    parent,
                    {Attr.RPC_KIND: "call", Attr.ERROR_TYPE: "expired"},
                )
                self._settle(callee, td + MS, call, trace, "ack")
            if scenario == "late":
                self._reply(callee, caller, t0 + (TIMEOUT_MS + 40) * MS, call, trace, False)
                caller.emit(
                    t0 + (TIMEOUT_MS + 42) * MS,
                    EventName.LATE_REPLY,
                    call.span_id,
                    trace,
                    parent,
                    {Attr.CONVERSATION_ID: call.span_id, Attr.RPC_KIND: "call"},
                )
                call.late = 1
            if scenario != "no_outcome":
                caller.emit(
                    t0 + TIMEOUT_MS * MS,
                    EventName.TIMEOUT,
                    call.span_id,
                    trace,
                    parent,
                    {Attr.TIMEOUT_MS: float(TIMEOUT_MS), Attr.ERROR_TYPE: "timeout", Attr.RPC_KIND: "call"},
                )
                call.outcome = "timeout"
            return call
        call.handler_start = td + MS
        latency = (td - t0) // MS + self.rng.randint(3, 150)
        error = scenario == "remote_error"
        self._reply(callee, caller, t0 + (latency - 1) * MS, call, trace, error)
        self._settle(callee, t0 + latency * MS - MS // 2, call, trace, "ack")
        if scenario == "duplicate":
            self._deliver(callee, td + 4 * MS, call, trace, parent, redelivered=True, duplicate=True)
            self._settle(callee, td + 5 * MS, call, trace, "ack")
        self._response(caller, t0, latency, call, trace, parent, error)
        call.outcome = "remote_error" if error else "ok"
        call.latency_ms = float(latency)
        return call

    def _response(
        self, caller: Instance, t0: int, latency: int, call: Call, trace: str, parent: str | None, error: bool
    ) -> None:
        # a reply's delivery is recorded by gear.rpc.response alone, as the SDK does
        attrs: dict[str, Any] = {
            Attr.CONVERSATION_ID: call.span_id,
            Attr.RPC_METHOD: call.method,
            Attr.RPC_KIND: call.kind,
            Attr.DURATION_MS: float(latency),
        }
        if error:
            attrs[Attr.ERROR_TYPE] = "ValueError"
        caller.emit(t0 + latency * MS, EventName.REPLY_RECEIVED, call.span_id, trace, parent, attrs)

    def cast(
        self, caller: Instance, callee_type: str, t0: int, trace: str, parent: str | None, unroutable: bool
    ) -> None:
        """A fire-and-forget message to a stateless TYPE."""
        call = Call(caller.type, caller.id, callee_type, "type", f"{callee_type}/log", "cast", self._span())
        self.truth.calls.append(call)
        sent = self._publish_attempts(
            caller, call, t0, trace, parent, callee_type, "unroutable" if unroutable else "ok"
        )
        if sent is None:
            return
        target = self.rng.choice(self.by_type[callee_type])
        self._deliver(target, sent + 2 * MS, call, trace, parent)
        self._settle(target, sent + 3 * MS, call, trace, "ack")
        call.outcome = "ok"

    def gather(self, caller: Instance, callee_type: str, t0: int, trace: str) -> None:
        """Scatter-gather to ``TYPE.*`` (multicast) or ``*.*`` (broadcast); every target answers."""
        wide = callee_type == "*"
        route, method = ("all", "ping") if wide else ("type_all", f"{callee_type}/status")
        call = Call(caller.type, caller.id, callee_type, route, method, "gather", self._span())
        self.truth.calls.append(call)
        rk = "@all.@all" if wide else f"{callee_type}.@all"
        sent = self._publish_attempts(caller, call, t0, trace, None, rk, "ok")
        assert sent is not None
        targets = list(self.instances.values()) if wide else self.by_type[callee_type]
        latencies = []
        for target in targets:
            self._deliver(target, sent + 2 * MS, call, trace, None)
            latency = 5 + self.rng.randint(1, 60)
            self._reply(target, caller, t0 + (latency - 1) * MS, call, trace, False)
            self._settle(target, t0 + latency * MS, call, trace, "ack")
            self._response(caller, t0, latency, call, trace, None, False)
            latencies.append(latency)
        call.outcome = "ok"
        call.latency_ms = float(min(latencies))

    def close(self) -> None:
        """Flush every file and total the lines."""
        for inst in self.instances.values():
            inst.flush()
            self.truth.lines += inst.count
