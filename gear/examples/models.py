"""The payloads the example services exchange.

They are pydantic models because they cross a trust boundary: a handler whose first parameter is typed
``ItemQuery`` receives a validated ``ItemQuery``, and a request with a missing ``key`` is answered with a
``BadPayloadError`` before the handler runs. Results are models too; they travel as JSON and the caller
rebuilds them with ``Model.model_validate(result)``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = (
    "ExportQuery",
    "ExportReport",
    "InstanceStatus",
    "Item",
    "ItemFound",
    "ItemQuery",
    "Refresh",
    "ReloadConfig",
    "Stored",
    "StatusQuery",
)


class _Payload(BaseModel):
    # Unknown fields are an error, not silently dropped: a typo in a request is caught at once.
    model_config = ConfigDict(extra="forbid")


class Item(_Payload):
    """WEB -> REPO.<host> ``put``: store a value under a key."""

    key: str = Field(min_length=1, max_length=200)
    value: str


class Stored(_Payload):
    """REPO's answer to ``put``."""

    host: str
    key: str
    version: int = Field(description="how many times this key was written on that host")


class ItemQuery(_Payload):
    """WEB -> CTRL ``lookup`` and CTRL -> REPO.<host> ``get``."""

    key: str = Field(min_length=1, max_length=200)


class ItemFound(_Payload):
    """The answer to ``get`` (from REPO) and to ``lookup`` (from CTRL, which adds who served it)."""

    key: str
    value: str | None = Field(description="None when the key is unknown")
    repo_host: str = Field(description="the REPO instance that holds the key")
    ctrl_host: str | None = Field(default=None, description="the CTRL instance that answered, if any")
    budget_ms: float | None = Field(
        default=None, description="time left of the caller's deadline when CTRL asked REPO"
    )


class ExportQuery(_Payload):
    """Which keys CTRL's ``export`` puts in its report."""

    keys: list[str] = Field(min_length=1, max_length=100)


class ExportReport(_Payload):
    """What ``export`` (a plain handler) found, and how it ran."""

    ctrl_host: str
    thread: str = Field(description="the worker thread the plain handler ran in")
    values: dict[str, str | None] = Field(description="key -> value, each asked of its REPO")
    repo_items: int = Field(description="keys held by all REPO instances that answered the gather")
    complete: bool = Field(description="False when the deadline passed before every key was asked")


class StatusQuery(_Payload):
    """Any type's ``status``."""

    verbose: bool = False


class InstanceStatus(_Payload):
    """What an instance reports about itself."""

    type: str
    host: str
    config_version: int = 0
    refreshes: int = Field(default=0, description="broadcast 'refresh' messages received")
    items: int = Field(default=0, description="keys held (REPO only)")
    keys: list[str] = Field(default_factory=list, description="the keys themselves, with verbose=True")
    handled: int = Field(default=0, description="requests handled by this instance")


class ReloadConfig(_Payload):
    """The multicast ``CTRL.*`` ``reload``: a new configuration for every CTRL instance."""

    version: int = Field(ge=0)
    repo_hosts: list[str] = Field(default_factory=list, description="the REPO hash ring; empty keeps it")


class Refresh(_Payload):
    """The broadcast ``*.*`` ``refresh``: every instance of every type drops its caches."""

    reason: str = ""
