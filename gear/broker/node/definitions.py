"""Users, vhosts and permissions from a small JSON file in RabbitMQ's definitions format.

The file is the ``users``/``vhosts``/``permissions`` part of what ``rabbitmqctl export_definitions``
writes, so a RabbitMQ export loads as is (its other sections are ignored)::

    {"users": [{"name": "app", "password_hash": "<gear hash-password>",
                "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []}],
     "vhosts": [{"name": "/"}, {"name": "orders"}],
     "permissions": [{"user": "app", "vhost": "orders",
                      "configure": "^app\\\\.", "write": ".*", "read": ".*"}]}

Passwords are stored as salted hashes only: an entry with a plain ``password`` is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gear.broker.node.access import HASHING_ALGORITHMS, Permission, User

__all__ = ("Definitions", "DefinitionsError", "load_definitions", "parse_definitions")


class DefinitionsError(ValueError):
    """The definitions file cannot be used; the message says where and why."""


class _UserEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)
    password_hash: str | None = None
    password: str | None = Field(default=None, repr=False)
    hashing_algorithm: str = "rabbit_password_hashing_sha256"
    tags: list[str] | str = Field(default_factory=list)

    @field_validator("hashing_algorithm")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in HASHING_ALGORITHMS:
            raise ValueError(f"unsupported hashing_algorithm {value!r}; use {', '.join(HASHING_ALGORITHMS)}")
        return value


class _VhostEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)


class _PermissionEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    user: str
    vhost: str
    configure: str
    write: str
    read: str


class _File(BaseModel):
    model_config = ConfigDict(extra="ignore")

    users: list[_UserEntry] = Field(default_factory=list)
    vhosts: list[_VhostEntry] = Field(default_factory=list)
    permissions: list[_PermissionEntry] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Definitions:
    """What a definitions file holds, validated."""

    users: tuple[User, ...] = ()
    vhosts: tuple[str, ...] = ()
    permissions: tuple[tuple[str, str, Permission], ...] = ()
    """(user, vhost, permission) triples."""


def parse_definitions(data: Any, *, source: str = "definitions") -> Definitions:
    """Validate decoded JSON.

    Raises:
        DefinitionsError: wrong shape, a plain-text password, a bad regexp or hash algorithm.
    """
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors(include_input=False)
        )
        raise DefinitionsError(f"{source}: {problems}") from None
    users: list[User] = []
    for entry in parsed.users:
        if entry.password_hash is None:
            hint = "a plain 'password'" if entry.password is not None else "no 'password_hash'"
            raise DefinitionsError(
                f"{source}: user {entry.name!r} has {hint}; passwords are stored as salted hashes only "
                "(make one with `gear hash-password`)"
            )
        tags = tuple(entry.tags.split(",") if isinstance(entry.tags, str) else entry.tags)
        tags = tuple(tag for tag in tags if tag)
        users.append(User(entry.name, entry.password_hash, entry.hashing_algorithm, tags))
    permissions: list[tuple[str, str, Permission]] = []
    for p in parsed.permissions:
        try:
            permissions.append((p.user, p.vhost, Permission(p.configure, p.write, p.read)))
        except ValueError as exc:
            raise DefinitionsError(f"{source}: permissions of {p.user!r} in {p.vhost!r}: {exc}") from None
    return Definitions(tuple(users), tuple(v.name for v in parsed.vhosts), tuple(permissions))


def load_definitions(path: str | Path) -> Definitions:
    """Read and validate a definitions file.

    Raises:
        DefinitionsError: the file is missing, unreadable, not JSON, or invalid.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DefinitionsError(f"cannot read definitions file {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DefinitionsError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return parse_definitions(data, source=str(path))
