"""AsyncAPI 3.0 documents for a contract, or for a service's registered handlers.

The document describes one service TYPE as the application that *receives* requests:

* channels: the four address forms as routing keys on the topic exchange (``REPO.{host}``, ``REPO``,
  ``REPO.@all`` for ``REPO.*``, ``@all.@all`` for ``*.*``), the two queues they land in (the instance
  queue ``REPO.{host}``, the shared queue ``REPO``), and the reply channel (the caller's own
  ``TYPE.HOST``, read from ``reply_to``), each with its AMQP binding;
* operations: per method and address form, a ``receive`` with its ``reply`` (the result message and
  the error message), or without one for ``@one_way`` methods (casts);
* messages: request, gather, cast, reply and error messages with Gear's headers, the payload and
  result schemas from pydantic, and the error envelope with each declared error's own schema;
* servers: the broker (given URLs without their credentials, else a host and port to fill in);
* ``x-gear``: the methods with their request and reply schemas and declared errors, which
  ``gear contract diff`` compares.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from yarl import URL

from gear.base.address import ALL_WORD
from gear.base.envelope import ATTEMPT, DEADLINE, METHOD, PARENT, STATUS, TRACE, ErrorBody, Kind
from gear.base.redact import mask_url
from gear.contract.spec import MethodSpec, contract_spec, function_spec, is_contract
from gear.errors import ConfigurationError

__all__ = ("ASYNCAPI_VERSION", "Surface", "asyncapi_document", "surface_of")

ASYNCAPI_VERSION = "3.0.0"
_AMQP = "0.3.0"
_REF = "#/components/schemas/{model}"
_ENVELOPE = "gear.ErrorBody"


@dataclass(frozen=True, slots=True)
class Surface:
    """What a document describes: a TYPE's methods, from a contract or a service."""

    title: str
    type: str | None
    version: str
    doc: str
    methods: tuple[MethodSpec, ...]


def surface_of(source: Any, *, type: str | None = None) -> Surface:
    """The methods of a contract class or of a :class:`gear.Service` (the contracts it implements,
    then its other handlers, built-in ones left out).

    Raises:
        ConfigurationError: ``source`` is neither, or a contract is not well formed.
    """
    if is_contract(source):
        spec = contract_spec(source)
        return Surface(spec.name, type or spec.type, spec.version, spec.doc, spec.methods)
    contracts = getattr(source, "contracts", None)
    methods = getattr(source, "methods", None)
    if contracts is None or methods is None or not hasattr(source, "type"):
        raise ConfigurationError(f"{source!r} is neither a gear.Contract nor a gear.Service")
    found: dict[str, MethodSpec] = {}
    for contract in contracts:
        for method in contract_spec(contract).methods:
            found.setdefault(method.name, method)
    for name, func in methods.items():
        if name not in found and not name.startswith("gear."):
            found[name] = function_spec(name, func, owner=source.type, bound=True, strict=False)
    names = ", ".join(contract_spec(c).name for c in contracts)
    return Surface(
        source.type if not names else f"{source.type} ({names})",
        type or source.type,
        "1.0.0",
        (inspect.getdoc(contracts[0]) or "") if len(contracts) == 1 else "",
        tuple(found.values()),
    )


def asyncapi_document(
    source: Any,
    *,
    type: str | None = None,
    exchange: str = "gear",
    version: str | None = None,
    servers: Sequence[str] = (),
) -> dict[str, Any]:
    """The AsyncAPI 3.0 document of a contract class or a :class:`gear.Service`, as JSON-able data.

    Args:
        source: a contract class, or a service (its implemented contracts and other handlers).
        type: the service TYPE in the channel addresses (default: the contract's ``type=``, the
            service's TYPE, else an address parameter ``{type}``).
        exchange: the topic exchange (``Settings.exchange``).
        version: ``info.version`` (default: the contract's ``version=``).
        servers: broker URLs for the ``servers`` section (credentials are left out); none: one
            server whose host and port are variables (``localhost:5672`` by default).

    Raises:
        ConfigurationError: not a contract or service; a type pydantic cannot describe; a server URL
            that is not ``amqp://`` or ``amqps://``.
    """
    surface = surface_of(source, type=type)
    schemas, payloads, errors = _schemas(surface.methods)
    doc = _Document(surface, exchange, schemas)
    for method in surface.methods:
        doc.add(method, payloads[method.name], errors)
    info: dict[str, Any] = {"title": surface.title, "version": version or surface.version}
    info["description"] = _description(surface)
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": info,
        "servers": _servers(servers),
        "defaultContentType": "application/json",
        "channels": doc.channels,
        "operations": doc.operations,
        "components": {"schemas": doc.schemas, "messages": doc.messages},
        "x-gear": {
            "type": surface.type,
            "exchange": exchange,
            "methods": {
                m.name: {
                    "kind": "cast" if m.one_way else "call",
                    "request": payloads[m.name][0],
                    "reply": None if m.one_way else payloads[m.name][1],
                    "errors": sorted(e.__name__ for e in m.errors),
                }
                for m in surface.methods
            },
        },
    }


def _servers(urls: Sequence[str]) -> dict[str, Any]:
    """The ``servers`` section: one AMQP 0-9-1 server per broker URL, without its credentials.

    Raises:
        ConfigurationError: a URL that is not ``amqp://`` or ``amqps://`` with a host.
    """
    if not urls:
        return {
            "broker": {
                "host": "{host}:{port}",
                "protocol": "amqp",
                "protocolVersion": "0.9.1",
                "title": "the broker",
                "description": "The RabbitMQ (or Gear reference broker) every instance connects to.",
                "variables": {
                    "host": {"default": "localhost", "description": "the broker's host"},
                    "port": {"default": "5672", "description": "its AMQP port (5671 for amqps)"},
                },
            }
        }
    found: dict[str, Any] = {}
    for number, url in enumerate(urls, start=1):
        parsed = URL(url)
        if parsed.scheme not in ("amqp", "amqps") or not parsed.host:
            raise ConfigurationError(
                f"server {mask_url(url)!r} is not an amqp:// or amqps:// URL with a host"
            )
        server: dict[str, Any] = {
            "host": f"{parsed.host}:{parsed.port or (5671 if parsed.scheme == 'amqps' else 5672)}",
            "protocol": parsed.scheme,
            "protocolVersion": "0.9.1",
        }
        vhost = parsed.path[1:] if len(parsed.path) > 1 else ""
        if vhost:
            server["pathname"] = f"/{vhost}"
        found["broker" if len(urls) == 1 else f"broker{number}"] = server
    return found


def _description(surface: Surface) -> str:
    intro = (
        "Gear RPC over AMQP 0-9-1: requests and replies are JSON, published to one topic exchange with "
        "wildcard-free routing keys (`TYPE.HOST` one instance, `TYPE` any one instance, `TYPE.@all` "
        "every instance of TYPE, `@all.@all` every instance). Calls carry their absolute deadline "
        f"(`{DEADLINE}`, unix ms) and are answered on the caller's `reply_to`; errors are typed."
    )
    return f"{surface.doc}\n\n{intro}" if surface.doc else intro


def _schemas(
    methods: Sequence[MethodSpec],
) -> tuple[dict[str, Any], dict[str, tuple[Any, Any]], dict[str, dict[str, Any]]]:
    """``(component schemas, {method: (request schema, reply schema)}, {error name: schema})``."""
    inputs: list[tuple[Any, Any, TypeAdapter[Any]]] = []
    for m in methods:
        if m.has_payload:
            inputs.append((("request", m.name), "validation", _adapter(m, m.payload)))
        if not m.one_way:
            inputs.append((("reply", m.name), "validation", _adapter(m, m.result)))
        for error in m.errors:
            if error.details_model is not None:
                inputs.append((("error", error.__name__), "validation", TypeAdapter(error.details_model)))
    found, defs = TypeAdapter.json_schemas(inputs, ref_template=_REF) if inputs else ({}, {})
    schemas: dict[str, Any] = {name: _clean(schema) for name, schema in defs.get("$defs", {}).items()}
    schemas[_ENVELOPE] = _clean(ErrorBody.model_json_schema(ref_template=_REF))
    schemas[_ENVELOPE]["description"] = (
        "An error reply (header x-gear-status: error): `type` is the remote exception's class name "
        "(MethodNotFound, BadPayload, a declared error, or what the handler raised), `message` its text."
    )
    payloads = {
        m.name: (
            _clean(found[(("request", m.name), "validation")]) if m.has_payload else None,
            None if m.one_way else _clean(found[(("reply", m.name), "validation")]),
        )
        for m in methods
    }
    errors: dict[str, dict[str, Any]] = {}
    for m in methods:
        for error in m.errors:
            key = (("error", error.__name__), "validation")
            details = _clean(found[key]) if key in found else {"type": "object"}
            errors[error.__name__] = {
                "type": "object",
                "title": error.__name__,
                "description": inspect.getdoc(error) or f"{error.__name__} (declared by the contract)",
                "properties": {
                    "type": {"type": "string", "const": error.__name__},
                    "message": {"type": "string"},
                    "details": details,
                },
                "required": ["type"],
            }
    return schemas, payloads, errors


def _key(name: str) -> str:
    """A method name as a component key (``^[\\w.-]+$``)."""
    return re.sub(r"[^\w.\-]", "_", name)


def _adapter(method: MethodSpec, hint: Any) -> TypeAdapter[Any]:
    try:
        return TypeAdapter(hint)
    except Exception as exc:
        raise ConfigurationError(f"{method.name}: pydantic cannot describe {hint!r}: {exc}") from None


def _clean(schema: Any) -> Any:
    """A pydantic (JSON Schema 2020-12) schema as an AsyncAPI Schema Object: an OpenAPI-style
    ``discriminator`` object becomes its property name."""
    if isinstance(schema, dict):
        out = {key: _clean(value) for key, value in schema.items()}
        if isinstance(out.get("discriminator"), dict):
            out["discriminator"] = out["discriminator"].get("propertyName", "")
            if not out["discriminator"]:
                del out["discriminator"]
        return out
    if isinstance(schema, list):
        return [_clean(item) for item in schema]
    return schema


def _headers(method: str, kind: Kind, *, error: bool = False) -> dict[str, Any]:
    """The headers of a request, cast or reply; a reply's ``x-gear-status`` is ``error`` on an error
    reply, and absent on a result."""
    properties: dict[str, Any] = {
        METHOD: {"type": "string", "const": method, "description": "the method name"},
    }
    if kind is Kind.REPLY and error:
        properties[STATUS] = {"type": "string", "const": "error", "description": "this reply is an error"}
        return {"type": "object", "properties": properties, "required": [METHOD, STATUS]}
    if kind is Kind.REPLY:
        absent = {"required": [STATUS], "description": "x-gear-status is absent: the reply is a result"}
        return {"type": "object", "properties": properties, "required": [METHOD], "not": absent}
    if kind is not Kind.CAST:
        properties[DEADLINE] = {"type": "integer", "description": "the absolute deadline, unix ms"}
    properties[ATTEMPT] = {"type": "integer", "minimum": 2, "description": "republish attempt (2nd on)"}
    properties[TRACE] = {"type": "string", "description": "trace id (32 hex chars)"}
    properties[PARENT] = {"type": "string", "description": "the request id of the request being served"}
    required = [METHOD] if kind is Kind.CAST else [METHOD, DEADLINE]
    return {"type": "object", "properties": properties, "required": required}


_CORRELATION = {
    "location": "$message.header#/correlation_id",
    "description": "the AMQP correlation_id property: the request id, the same on the reply",
}

_FORMS = (
    ("pointToPoint", "exactly that instance"),
    ("stateless", "any one instance, round-robin"),
    ("multicast", "every instance of the TYPE, once each"),
    ("broadcast", "every instance of every TYPE, once each"),
)


class _Document:
    """Channels, operations and messages, filled method by method."""

    def __init__(self, surface: Surface, exchange: str, schemas: dict[str, Any]) -> None:
        self.exchange = exchange
        self.schemas = schemas
        self.messages: dict[str, Any] = {}
        self.operations: dict[str, Any] = {}
        kind = surface.type or "{type}"
        self._type = kind
        self._params: dict[str, Any] = {"host": {"description": "the instance's HOST word"}}
        if surface.type is None:
            self._params["type"] = {"description": "the service TYPE"}
        self.channels: dict[str, Any] = {}
        addresses = {
            "pointToPoint": (f"{kind}.{{host}}", f"{kind}.HOST"),
            "stateless": (kind, kind),
            "multicast": (f"{kind}.{ALL_WORD}", f"{kind}.*"),
            "broadcast": (f"{ALL_WORD}.{ALL_WORD}", "*.*"),
        }
        for name, reaches in _FORMS:
            key, written = addresses[name]
            queue = kind if name == "stateless" else f"{kind}.{{host}}"
            self.channels[name] = {
                "address": key,
                "title": f"address {written}",
                "description": (
                    f"Routing key `{key}` on exchange `{exchange}` reaches {reaches} (queue `{queue}`)."
                ),
                "messages": {},
                **self._parameters(key),
                "bindings": {
                    "amqp": {"is": "routingKey", "exchange": self._exchange(), "bindingVersion": _AMQP}
                },
            }
        self.channels["instanceQueue"] = self._queue(
            f"{kind}.{{host}}",
            f"The instance's own queue, bound to `{kind}.{{host}}`, `{kind}.{ALL_WORD}` and "
            f"`{ALL_WORD}.{ALL_WORD}`; not exclusive, it expires (x-expires) once its instance is gone.",
        )
        self.channels["sharedQueue"] = self._queue(
            kind, f"The TYPE's shared queue (durable; classic, or quorum as an option), bound to `{kind}`."
        )
        self.channels["replies"] = {
            "address": None,
            "title": "the caller's reply_to",
            "description": (
                "Replies and error replies, published to the routing key the request's reply_to names: "
                "the caller's own TYPE.HOST (or a TYPE with reply handlers)."
            ),
            "messages": {},
            "bindings": {"amqp": {"is": "routingKey", "exchange": self._exchange(), "bindingVersion": _AMQP}},
        }

    def _exchange(self) -> dict[str, Any]:
        return {"name": self.exchange, "type": "topic", "durable": True, "autoDelete": False, "vhost": "/"}

    def _parameters(self, address: str) -> dict[str, Any]:
        used = {name: p for name, p in self._params.items() if f"{{{name}}}" in address}
        return {"parameters": used} if used else {}

    def _queue(self, name: str, description: str) -> dict[str, Any]:
        queue = {"name": name, "durable": True, "exclusive": False, "autoDelete": False, "vhost": "/"}
        return {
            "address": name,
            "title": f"queue {name}",
            "description": description,
            "messages": {},
            **self._parameters(name),
            "bindings": {"amqp": {"is": "queue", "queue": queue, "bindingVersion": _AMQP}},
        }

    def _message(self, key: str, body: dict[str, Any], channels: Sequence[str]) -> None:
        self.messages[key] = body
        for channel in channels:
            self.channels[channel]["messages"][key] = {"$ref": f"#/components/messages/{key}"}

    def add(self, method: MethodSpec, payloads: tuple[Any, Any], errors: dict[str, dict[str, Any]]) -> None:
        """The messages and operations of one method."""
        name, key_of = method.name, _key(method.name)
        request, reply = payloads
        summary = method.doc.split("\n", 1)[0] if method.doc else f"{name}{method.signature}"
        queues = ("instanceQueue", "sharedQueue")
        if method.one_way:
            kinds = {form: (f"{key_of}.cast", Kind.CAST) for form, _ in _FORMS}
        else:
            kinds = {
                "pointToPoint": (f"{key_of}.request", Kind.CALL),
                "stateless": (f"{key_of}.request", Kind.CALL),
                "multicast": (f"{key_of}.gather", Kind.GATHER),
                "broadcast": (f"{key_of}.gather", Kind.GATHER),
            }
        for key, kind in dict(kinds.values()).items():
            forms = [form for form, (k, _) in kinds.items() if k == key]
            body: dict[str, Any] = {
                "name": key,
                "title": f"{name} ({kind.value})",
                "summary": summary,
                "headers": _headers(name, kind),
                "bindings": {"amqp": {"messageType": kind.value, "bindingVersion": _AMQP}},
            }
            if request is not None:
                body["payload"] = request
            if method.doc:
                body["description"] = method.doc
            if kind is not Kind.CAST:
                body["correlationId"] = _CORRELATION
            self._message(key, body, [*forms, *queues])
        replies: list[str] = []
        if not method.one_way:
            self._message(
                f"{key_of}.reply",
                {
                    "name": f"{name}.reply",
                    "title": f"{name} reply",
                    "summary": f"The result of {name}: {method.signature.split('-> ', 1)[1]}",
                    "headers": _headers(name, Kind.REPLY),
                    "payload": reply,
                    "correlationId": _CORRELATION,
                    "bindings": {"amqp": {"messageType": Kind.REPLY.value, "bindingVersion": _AMQP}},
                },
                ["replies"],
            )
            declared = [e.__name__ for e in method.errors]
            for error in declared:
                self.schemas.setdefault(f"error.{error}", errors[error])
            alternatives = [{"$ref": f"#/components/schemas/error.{e}"} for e in declared]
            self._message(
                f"{key_of}.error",
                {
                    "name": f"{name}.error",
                    "title": f"{name} error",
                    "summary": "An error reply: "
                    + (f"the declared {', '.join(declared)}, or " if declared else "")
                    + "Gear's MethodNotFound, BadPayload, or what the handler raised",
                    "headers": _headers(name, Kind.REPLY, error=True),
                    "payload": {"anyOf": [*alternatives, {"$ref": f"#/components/schemas/{_ENVELOPE}"}]},
                    "correlationId": _CORRELATION,
                    "bindings": {"amqp": {"messageType": Kind.REPLY.value, "bindingVersion": _AMQP}},
                },
                ["replies"],
            )
            replies = [f"{key_of}.reply", f"{key_of}.error"]
        for form, (key, kind) in kinds.items():
            operation: dict[str, Any] = {
                "action": "receive",
                "channel": {"$ref": f"#/channels/{form}"},
                "title": f"{name} via {self.channels[form]['title']}",
                "summary": summary,
                "messages": [{"$ref": f"#/channels/{form}/messages/{key}"}],
                "bindings": {
                    "amqp": {
                        "cc": [self.channels[form]["address"]],
                        "mandatory": True,
                        "deliveryMode": 2 if kind is Kind.CAST else 1,
                        "ack": True,
                        "bindingVersion": _AMQP,
                    }
                },
                "x-gear-method": name,
                "x-gear-kind": kind.value,
            }
            if method.doc:
                operation["description"] = method.doc
            if replies:
                operation["reply"] = {
                    "address": {
                        "location": "$message.header#/reply_to",
                        "description": "the AMQP reply_to property: the caller's TYPE.HOST",
                    },
                    "channel": {"$ref": "#/channels/replies"},
                    "messages": [{"$ref": f"#/channels/replies/messages/{r}"} for r in replies],
                }
            self.operations[f"{key_of}.{form}"] = operation
