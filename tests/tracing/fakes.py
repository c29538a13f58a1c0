"""Stand-ins for what the typed emitters read: an outgoing message, a delivery and its parsed envelope."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ("Delivered", "Meta", "Msg")


@dataclass
class Msg:
    routing_key: str = "REPO.r1"
    request_id: str = "ab" * 8
    kind: str = "gear.call"
    method: str = "put"
    body: bytes = b"{}"
    trace_id: str | None = "cd" * 16
    parent_id: str | None = None
    deadline_unix: float | None = None
    headers: dict[str, Any] = field(default_factory=dict)


@dataclass
class Delivered:
    body: bytes = b"{}"
    queue: str = "REPO.r1"
    routing_key: str = "REPO.r1"
    delivery_tag: int = 3
    redelivered: bool = False
    message_id: str | None = "ab.1"


@dataclass
class Meta:
    kind: str = "gear.call"
    request_id: str = "ab" * 8
    method: str = "put"
    sender: str = "WEB.w1"
    attempt: int = 1
    trace_id: str | None = "cd" * 16
    parent_id: str | None = "ef" * 8
