"""Gear: RPC for Python services over RabbitMQ.

The names below are loaded on first use, so that ``import gear.broker`` (the reference broker) and
``import gear.pipeline`` (what Spark executors unpickle) load neither the SDK nor its AMQP client;
``tests/test_package.py`` checks these import rules in fresh interpreters.

Each public name is written in :data:`_LAZY` (where it lives, for the lazy loader and ``__all__``) and
in the ``TYPE_CHECKING`` block (``import X as X``: what mypy and pyright read); a test checks that the
two say the same.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gear import _moved

if TYPE_CHECKING:
    from gear.base.address import (
        Address as Address,
    )
    from gear.base.address import (
        Route as Route,
    )
    from gear.base.context import (
        RequestContext as RequestContext,
    )
    from gear.base.context import (
        cancelled as cancelled,
    )
    from gear.base.context import (
        current_deadline as current_deadline,
    )
    from gear.base.context import (
        current_request as current_request,
    )
    from gear.base.context import (
        remaining_budget as remaining_budget,
    )
    from gear.base.redact import (
        mask_secrets as mask_secrets,
    )
    from gear.base.redact import (
        mask_url as mask_url,
    )
    from gear.base.reply import (
        Replies as Replies,
    )
    from gear.base.reply import (
        Reply as Reply,
    )
    from gear.base.topology import Topology as Topology
    from gear.calling.rpc import RPC as RPC
    from gear.calling.sync import SyncRPC as SyncRPC
    from gear.contract import (
        Answer as Answer,
    )
    from gear.contract import (
        Contract as Contract,
    )
    from gear.contract import (
        ContractError as ContractError,
    )
    from gear.contract import (
        call_sync as call_sync,
    )
    from gear.contract import (
        call_with_callback as call_with_callback,
    )
    from gear.contract import (
        gather as gather,
    )
    from gear.contract import (
        gather_sync as gather_sync,
    )
    from gear.contract import (
        one_way as one_way,
    )
    from gear.contract import (
        raises as raises,
    )
    from gear.contract import (
        with_timeout as with_timeout,
    )
    from gear.errors import (
        BadPayloadError as BadPayloadError,
    )
    from gear.errors import (
        BadResultError as BadResultError,
    )
    from gear.errors import (
        BrokerBlockedError as BrokerBlockedError,
    )
    from gear.errors import (
        CallTimeoutError as CallTimeoutError,
    )
    from gear.errors import (
        ConfigurationError as ConfigurationError,
    )
    from gear.errors import (
        ConnectError as ConnectError,
    )
    from gear.errors import (
        ConnectionLostError as ConnectionLostError,
    )
    from gear.errors import (
        DeliveryError as DeliveryError,
    )
    from gear.errors import (
        DeliveryLimitError as DeliveryLimitError,
    )
    from gear.errors import (
        GearError as GearError,
    )
    from gear.errors import (
        MethodNotFoundError as MethodNotFoundError,
    )
    from gear.errors import (
        NotConfirmedError as NotConfirmedError,
    )
    from gear.errors import (
        OutcomeUnknownError as OutcomeUnknownError,
    )
    from gear.errors import (
        PayloadTooLargeError as PayloadTooLargeError,
    )
    from gear.errors import (
        PublishRefusedError as PublishRefusedError,
    )
    from gear.errors import (
        RemoteError as RemoteError,
    )
    from gear.errors import (
        UnroutableError as UnroutableError,
    )
    from gear.eventloop import run as run
    from gear.service import Service as Service
    from gear.session.reconnect import ServiceState as ServiceState
    from gear.settings import Settings as Settings

    Client = Service.client

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
    "gear.errors": (
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
