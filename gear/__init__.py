"""Gear: RPC for Python services over RabbitMQ.

The names below are loaded on first use, so that ``import gear.broker`` (the reference broker) and
``import gear.pipeline`` (what Spark executors unpickle) load neither the SDK nor its AMQP client;
``tests/test_package.py`` checks these import rules in fresh interpreters.

Each public name is written in :data:`_LAZY` (where it lives, for the lazy loader and ``__all__``;
the errors are every exception class :mod:`gear.errors` defines, read from it) and in the
``TYPE_CHECKING`` block (``import X as X``: what mypy and pyright read); a test checks that the two say
the same.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gear import _moved, errors

if TYPE_CHECKING:
    from gear.base.address import (
        Address as Address,
        Route as Route,
    )
    from gear.base.context import (
        RequestContext as RequestContext,
        cancelled as cancelled,
        current_deadline as current_deadline,
        current_request as current_request,
        remaining_budget as remaining_budget,
    )
    from gear.base.redact import (
        mask_secrets as mask_secrets,
        mask_url as mask_url,
    )
    from gear.base.reply import (
        Replies as Replies,
        Reply as Reply,
    )
    from gear.base.topology import Topology as Topology
    from gear.calling.rpc import RPC as RPC
    from gear.calling.sync import SyncRPC as SyncRPC
    from gear.contract import (
        Answer as Answer,
        Contract as Contract,
        ContractError as ContractError,
        call_sync as call_sync,
        call_with_callback as call_with_callback,
        gather as gather,
        gather_sync as gather_sync,
        one_way as one_way,
        raises as raises,
        with_timeout as with_timeout,
    )
    from gear.errors import (
        BadPayloadError as BadPayloadError,
        BadResultError as BadResultError,
        BrokerBlockedError as BrokerBlockedError,
        CallTimeoutError as CallTimeoutError,
        ConfigurationError as ConfigurationError,
        ConnectError as ConnectError,
        ConnectionLostError as ConnectionLostError,
        DeliveryError as DeliveryError,
        DeliveryLimitError as DeliveryLimitError,
        GearError as GearError,
        MethodNotFoundError as MethodNotFoundError,
        NotConfirmedError as NotConfirmedError,
        OutcomeUnknownError as OutcomeUnknownError,
        PayloadTooLargeError as PayloadTooLargeError,
        PublishRefusedError as PublishRefusedError,
        RemoteError as RemoteError,
        UnroutableError as UnroutableError,
    )
    from gear.eventloop import run as run
    from gear.service import Service as Service
    from gear.session.reconnect import ServiceState as ServiceState
    from gear.settings import Settings as Settings

    Client = Service.client

_ERRORS = tuple(name for name in errors.__all__ if name.endswith("Error"))
"""Every exception class :mod:`gear.errors` defines (not its deprecated aliases): all exported here."""

_LAZY: dict[str, tuple[str, ...]] = {
    "gear.base.address": ("Address", "Route"),
    "gear.base.context": (
        "RequestContext",
        "cancelled",
        "current_deadline",
        "current_request",
        "remaining_budget",
    ),
    "gear.base.redact": ("mask_secrets", "mask_url"),
    "gear.base.reply": ("Replies", "Reply"),
    "gear.base.topology": ("Topology",),
    "gear.calling.rpc": ("RPC",),
    "gear.calling.sync": ("SyncRPC",),
    "gear.contract": (
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
    "gear.errors": _ERRORS,
    "gear.eventloop": ("run",),
    "gear.service": ("Service",),
    "gear.session.reconnect": ("ServiceState",),
    "gear.settings": ("Settings",),
}
"""Module -> the public names it defines (``gear.Client`` is ``Service.client``)."""

_HOME = {name: module for module, names in _LAZY.items() for name in names}

__all__ = tuple(sorted([*_HOME, "Client"]))

_moved.install()  # old module paths (gear.rpc...) keep importing, with a DeprecationWarning


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
