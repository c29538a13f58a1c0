"""Gear: RPC for Python services over RabbitMQ."""

from __future__ import annotations

from gear.address import Address, Route
from gear.context import RequestContext, current_deadline, current_request, remaining_budget
from gear.errors import (
    BadPayloadError,
    CallTimeoutError,
    ConfigurationError,
    ConnectError,
    ConnectionLostError,
    DeliveryError,
    GearError,
    MethodNotFoundError,
    NotConfirmedError,
    OutcomeUnknownError,
    PayloadTooLargeError,
    PublishRefusedError,
    RemoteError,
    UnroutableError,
)
from gear.reconnect import ServiceState
from gear.reply import Reply
from gear.rpc import RPC
from gear.service import Service
from gear.settings import Settings
from gear.topology import Topology

Client = Service.client
"""``gear.Client(url=...)``: a calling-only instance (see :meth:`Service.client`)."""

__all__ = (
    "Address",
    "BadPayloadError",
    "CallTimeoutError",
    "Client",
    "ConfigurationError",
    "ConnectError",
    "ConnectionLostError",
    "DeliveryError",
    "GearError",
    "MethodNotFoundError",
    "NotConfirmedError",
    "OutcomeUnknownError",
    "PayloadTooLargeError",
    "PublishRefusedError",
    "RPC",
    "RemoteError",
    "Reply",
    "RequestContext",
    "Route",
    "Service",
    "ServiceState",
    "Settings",
    "Topology",
    "UnroutableError",
    "current_deadline",
    "current_request",
    "remaining_budget",
)
