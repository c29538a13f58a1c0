"""Gear: RPC for Python services over RabbitMQ.

The names below are loaded on first use, so that ``import gear.broker`` (the reference broker) and
``import gear.pipeline`` (what Spark executors unpickle) load neither the SDK nor its AMQP client;
``tests/test_package.py`` checks these import rules in fresh interpreters.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gear.address import Address, Route
    from gear.context import (
        RequestContext,
        cancelled,
        current_deadline,
        current_request,
        remaining_budget,
    )
    from gear.contract import (
        Answer,
        Contract,
        ContractError,
        call_sync,
        call_with_callback,
        gather,
        gather_sync,
        one_way,
        raises,
        with_timeout,
    )
    from gear.errors import (
        BadPayloadError,
        BadResultError,
        BrokerBlockedError,
        CallTimeoutError,
        ConfigurationError,
        ConnectError,
        ConnectionLostError,
        DeliveryError,
        DeliveryLimitError,
        GearError,
        MethodNotFoundError,
        NotConfirmedError,
        OutcomeUnknownError,
        PayloadTooLargeError,
        PublishRefusedError,
        RemoteError,
        UnroutableError,
    )
    from gear.eventloop import run
    from gear.reconnect import ServiceState
    from gear.redact import mask_secrets, mask_url
    from gear.reply import Replies, Reply
    from gear.rpc import RPC
    from gear.service import Service
    from gear.settings import Settings
    from gear.sync import SyncRPC
    from gear.topology import Topology

    Client = Service.client

__all__ = (
    "Address",
    "Answer",
    "BadPayloadError",
    "BadResultError",
    "BrokerBlockedError",
    "CallTimeoutError",
    "Client",
    "ConfigurationError",
    "ConnectError",
    "ConnectionLostError",
    "Contract",
    "ContractError",
    "DeliveryError",
    "DeliveryLimitError",
    "GearError",
    "MethodNotFoundError",
    "NotConfirmedError",
    "OutcomeUnknownError",
    "PayloadTooLargeError",
    "PublishRefusedError",
    "RPC",
    "RemoteError",
    "Replies",
    "Reply",
    "RequestContext",
    "Route",
    "Service",
    "ServiceState",
    "Settings",
    "SyncRPC",
    "Topology",
    "UnroutableError",
    "call_sync",
    "call_with_callback",
    "cancelled",
    "current_deadline",
    "current_request",
    "gather",
    "gather_sync",
    "mask_secrets",
    "mask_url",
    "one_way",
    "raises",
    "remaining_budget",
    "run",
    "with_timeout",
)

_HOME = {
    **dict.fromkeys(("Address", "Route"), "gear.address"),
    **dict.fromkeys(
        ("RequestContext", "cancelled", "current_deadline", "current_request", "remaining_budget"),
        "gear.context",
    ),
    **dict.fromkeys(
        (
            "Answer",
            "Contract",
            "ContractError",
            "call_sync",
            "call_with_callback",
            "gather",
            "gather_sync",
            "one_way",
            "raises",
            "with_timeout",
        ),
        "gear.contract",
    ),
    **dict.fromkeys(
        (
            "BadPayloadError",
            "BadResultError",
            "BrokerBlockedError",
            "CallTimeoutError",
            "ConfigurationError",
            "ConnectError",
            "ConnectionLostError",
            "DeliveryError",
            "DeliveryLimitError",
            "GearError",
            "MethodNotFoundError",
            "NotConfirmedError",
            "OutcomeUnknownError",
            "PayloadTooLargeError",
            "PublishRefusedError",
            "RemoteError",
            "UnroutableError",
        ),
        "gear.errors",
    ),
    "ServiceState": "gear.reconnect",
    **dict.fromkeys(("mask_secrets", "mask_url"), "gear.redact"),
    **dict.fromkeys(("Replies", "Reply"), "gear.reply"),
    "run": "gear.eventloop",
    "RPC": "gear.rpc",
    "Service": "gear.service",
    "Settings": "gear.settings",
    "SyncRPC": "gear.sync",
    "Topology": "gear.topology",
}
"""Public name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = importlib.import_module("gear.version").version()
    elif name == "Client":
        # ``gear.Client(url=...)``: a calling-only instance (see ``Service.client``)
        value = importlib.import_module("gear.service").Service.client
    elif name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
    else:
        raise AttributeError(f"module 'gear' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
