"""Gear: RPC for Python services over RabbitMQ."""

from __future__ import annotations

from gear.address import Address, Route
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
    RemoteError,
    UnroutableError,
)

__all__ = (
    "Address",
    "BadPayloadError",
    "CallTimeoutError",
    "ConfigurationError",
    "ConnectError",
    "ConnectionLostError",
    "DeliveryError",
    "GearError",
    "MethodNotFoundError",
    "NotConfirmedError",
    "RemoteError",
    "Route",
    "UnroutableError",
)
