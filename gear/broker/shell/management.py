"""A read-only subset of RabbitMQ's management HTTP API, so that tools written for RabbitMQ (``gear prune``,
``gear doctor``) work against the reference broker too.

``GET`` only, HTTP/1.1 with one request per connection, Basic authentication by the broker's own users
(a user with access to a vhost sees that vhost). The answers have RabbitMQ's shapes, with the fields
Gear's tools read:

* ``/api/overview``: ``product_name``, ``product_version``, ``management_version``;
* ``/api/vhosts``: ``name`` of each;
* ``/api/queues[/VHOST]``: ``name``, ``vhost``, ``durable``, ``auto_delete``, ``exclusive``,
  ``arguments``, ``consumers``, ``messages``, ``messages_ready``, ``messages_unacknowledged``, ``type``;
* ``/api/exchanges[/VHOST]``: ``name``, ``vhost``, ``type``, ``durable``, ``auto_delete``,
  ``internal``, ``arguments``;
* ``/api/bindings[/VHOST]``: ``source``, ``vhost``, ``destination``, ``destination_type``,
  ``routing_key``, ``arguments``.

The broker's server reads each request and answers it on the broker's own event loop, between two
turns, so every answer is one consistent moment; this module holds no socket. Anything else is a 404
(``gear doctor`` then says what it could not see), a wrong login a 401, a method other than ``GET`` a
405.
"""

from __future__ import annotations

import base64
import binascii
import json
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from gear.broker.model.exchange import Exchange
from gear.broker.model.queue import Queue
from gear.broker.model.vhost import VirtualHost
from gear.broker.node.access import AccessControl, LoginRefusedError
from gear.broker.protocol.handshake import server_properties

__all__ = ("PRODUCT_VERSION", "Management")

PRODUCT_VERSION = str(server_properties()["version"])


class _Core(Protocol):
    """What the API reads from the broker."""

    vhosts: dict[str, VirtualHost]
    access: AccessControl


class Management:
    """The management API's answers for one broker (sans I/O: the broker's server serves them)."""

    def __init__(self, core: _Core) -> None:
        self._core = core

    def respond(self, head: bytes, peer: str) -> bytes:
        """The whole HTTP response to one request's head (request line and headers), ``peer`` being
        the client's address (loopback-only users)."""
        status, body = self.handle(head, peer)
        data = json.dumps(body, default=_plain).encode()
        extra = 'WWW-Authenticate: Basic realm="gear"\r\n' if status == 401 else ""
        return (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n{extra}Connection: close\r\n\r\n".encode()
            + data
        )

    def handle(self, head: bytes, peer: str) -> tuple[int, Any]:
        """The status and JSON body for one request's head."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return 400, {"error": "bad_request", "reason": "malformed request line"}
        method, target, _ = parts
        if method != "GET":
            return 405, {"error": "method_not_allowed", "reason": "this API is read-only"}
        user = self._login(lines[1:], peer)
        if user is None:
            return 401, {"error": "not_authorised", "reason": "Login failed"}
        path = [urllib.parse.unquote(p) for p in urllib.parse.urlsplit(target).path.split("/")[1:] if p]
        if not path or path[0] != "api":
            return 404, {"error": "Object Not Found", "reason": "Not Found"}
        return self._route(path[1:], user)

    def _login(self, headers: list[str], peer: str) -> str | None:
        for line in headers:
            name, _, value = line.partition(":")
            if name.strip().lower() != "authorization":
                continue
            scheme, _, token = value.strip().partition(" ")
            if scheme.lower() != "basic":
                return None
            try:
                user, _, password = base64.b64decode(token, validate=True).decode().partition(":")
                return self._core.access.authenticate("PLAIN", user, password, peer_address=peer)
            except (binascii.Error, UnicodeDecodeError, LoginRefusedError):
                return None
        return None

    def _route(self, path: list[str], user: str) -> tuple[int, Any]:
        access = self._core.access
        visible = [v for v in self._core.vhosts.values() if access.grants(user, v.name) is not None]
        if path == ["overview"]:
            return 200, {
                "product_name": "Gear reference broker",
                "product_version": PRODUCT_VERSION,
                "management_version": PRODUCT_VERSION,
            }
        if path == ["vhosts"]:
            return 200, [{"name": v.name} for v in visible]
        listing: dict[str, Callable[[VirtualHost], Iterable[dict[str, Any]]]] = {
            "queues": _queues,
            "exchanges": _exchanges,
            "bindings": _bindings,
        }
        if not path or path[0] not in listing or len(path) > 2:
            return 404, {"error": "Object Not Found", "reason": "Not Found"}
        if len(path) == 2:
            visible = [v for v in visible if v.name == path[1]]
            if not visible:
                return 404, {"error": "Object Not Found", "reason": "Not Found"}
        return 200, [item for v in visible for item in listing[path[0]](v)]


def _queues(vhost: VirtualHost) -> Iterable[dict[str, Any]]:
    for q in vhost.queues.values():
        ready = len(q.ready) + len(q.inbox)
        yield {
            "name": q.name,
            "vhost": vhost.name,
            "durable": q.durable,
            "auto_delete": q.auto_delete,
            "exclusive": q.exclusive_owner is not None,
            "arguments": q.arguments,
            "consumers": len(q.consumers),
            "messages": ready + q.unacked,
            "messages_ready": ready,
            "messages_unacknowledged": q.unacked,
            "type": str(q.arguments.get("x-queue-type", "classic")),
        }


def _exchanges(vhost: VirtualHost) -> Iterable[dict[str, Any]]:
    for ex in vhost.exchanges.values():
        yield {
            "name": ex.name,
            "vhost": vhost.name,
            "type": ex.kind,
            "durable": ex.durable,
            "auto_delete": ex.auto_delete,
            "internal": ex.internal,
            "arguments": ex.arguments,
        }


def _bindings(vhost: VirtualHost) -> Iterable[dict[str, Any]]:
    for ex in vhost.exchanges.values():
        if ex.name == "":
            continue
        for b in ex.bindings:
            dest = b.destination
            kind = "queue" if isinstance(dest, Queue) else "exchange"
            name = dest.name if isinstance(dest, Queue | Exchange) else str(dest)
            yield {
                "source": ex.name,
                "vhost": vhost.name,
                "destination": name,
                "destination_type": kind,
                "routing_key": b.key,
                "arguments": b.arguments,
            }


def _plain(value: object) -> object:
    """JSON for the AMQP table values that JSON lacks (bytes, decimals, timestamps)."""
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8", "replace")
    return str(value)


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed"}
