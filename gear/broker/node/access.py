"""Who may connect and what they may do: users, salted password hashes, logins and permissions.

Theory of operation
-------------------
Users carry a password *hash* in RabbitMQ's ``rabbit_password_hashing_sha256`` format: base64 of a
4-byte random salt followed by ``sha256(salt + utf8(password))``. A definitions file exported from
RabbitMQ therefore loads as is, and plain passwords given by options or the API are hashed when the
broker starts; nothing here ever writes a password anywhere.

A login (:meth:`AccessControl.authenticate`) always does the same work whether or not the user
exists: an unknown name is checked against a dummy hash, and digests are compared in constant time,
so the answer time does not tell which user names exist. The loopback rule (RabbitMQ's
``loopback_users``, ``guest`` by default) is checked after the password, with the same refusal.

Permissions follow RabbitMQ's internal backend: per user and vhost three regular expressions
(configure, write, read), searched (not anchored) in the resource name; an empty expression matches
nothing; the default exchange is checked under the name ``amq.default``. :class:`Grants` is one user's
view of one vhost, with a small cache because publishes check ``write`` on every message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gear.broker.errors import AMQPError, resource

__all__ = (
    "FULL_ACCESS",
    "HASHING_ALGORITHMS",
    "AccessControl",
    "Grants",
    "LoginRefusedError",
    "Permission",
    "User",
    "hash_password",
    "is_loopback_address",
    "verify_password",
)

#: RabbitMQ's hashing module names -> hashlib constructors.
HASHING_ALGORITHMS = MappingProxyType(
    {
        "rabbit_password_hashing_sha256": hashlib.sha256,
        "rabbit_password_hashing_sha512": hashlib.sha512,
    }
)
_DEFAULT_ALGORITHM = "rabbit_password_hashing_sha256"
_SALT_BYTES = 4
_CACHE_LIMIT = 512


def hash_password(password: str, *, algorithm: str = _DEFAULT_ALGORITHM, salt: bytes | None = None) -> str:
    """``base64(salt + H(salt + password))``, RabbitMQ's stored form (``rabbitmqctl hash_password``).

    Raises:
        ValueError: an unknown hashing algorithm.
    """
    digest = _algorithm(algorithm)
    salt = os.urandom(_SALT_BYTES) if salt is None else salt
    return base64.b64encode(salt + digest(salt + password.encode("utf-8")).digest()).decode("ascii")


def verify_password(stored: str, password: str, *, algorithm: str = _DEFAULT_ALGORITHM) -> bool:
    """True if ``password`` matches ``stored`` (compared in constant time); False for a malformed hash."""
    digest = _algorithm(algorithm)
    try:
        raw = base64.b64decode(stored, validate=True)
    except ValueError:
        raw = b""
    salt, expected = raw[:_SALT_BYTES], raw[_SALT_BYTES:]
    actual = digest(salt + password.encode("utf-8")).digest()
    return hmac.compare_digest(actual, expected)


def _algorithm(name: str) -> Callable[[bytes], Any]:
    try:
        return HASHING_ALGORITHMS[name]
    except KeyError:
        raise ValueError(
            f"unknown hashing algorithm {name!r}; expected one of {', '.join(HASHING_ALGORITHMS)}"
        ) from None


def is_loopback_address(address: str) -> bool:
    """True for 127.0.0.0/8, ::1, an IPv4-mapped loopback and the name ``localhost``."""
    host = address.strip("[]")
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


@dataclass(frozen=True, slots=True)
class User:
    """One user: the password hash as RabbitMQ stores it, and its tags."""

    name: str
    password_hash: str
    algorithm: str = _DEFAULT_ALGORITHM
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _algorithm(self.algorithm)

    def __repr__(self) -> str:
        return f"User(name={self.name!r}, tags={self.tags!r})"


@dataclass(frozen=True, slots=True)
class Permission:
    """The three regular expressions of one user in one vhost (``rabbitmqctl set_permissions``)."""

    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"
    _compiled: dict[str, re.Pattern[str]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for kind in ("configure", "write", "read"):
            expression = getattr(self, kind) or "^$"  # RabbitMQ: an empty permission matches nothing
            try:
                self._compiled[kind] = re.compile(expression)
            except re.error as exc:
                raise ValueError(f"invalid {kind} permission regexp {getattr(self, kind)!r}: {exc}") from None

    def allows(self, kind: str, name: str) -> bool:
        """True if the ``kind`` expression matches ``name`` somewhere."""
        return self._compiled[kind].search(name) is not None

    @property
    def unrestricted(self) -> bool:
        """True when every expression is ``.*`` (no need to check anything)."""
        return self.configure == self.write == self.read == ".*"


FULL_ACCESS = Permission()


class LoginRefusedError(Exception):
    """A login failed. ``reason`` is for the broker log only; the client gets RabbitMQ's safe text."""

    def __init__(self, mechanism: str, user: str | None, reason: str) -> None:
        super().__init__(reason)
        self.mechanism = mechanism
        self.user = user
        self.reason = reason


class Grants:
    """What one user may do in one vhost; :meth:`check` raises RabbitMQ's 403 refusal."""

    __slots__ = ("_cache", "permission", "unrestricted", "user", "vhost")

    def __init__(self, user: str, vhost: str, permission: Permission) -> None:
        self.user = user
        self.vhost = vhost
        self.permission = permission
        self.unrestricted = permission.unrestricted
        self._cache: dict[tuple[str, str, str], bool] = {}

    def check(self, permission: str, kind: str, name: str) -> None:
        """Allow ``permission`` (configure, write, read) on ``kind`` ``name`` or refuse.

        Raises:
            AMQPError: 403 ``access to queue 'q' in vhost '/' refused for user 'u'``.
        """
        if self.unrestricted:
            return
        if kind == "exchange" and name == "":
            name = "amq.default"
        key = (permission, kind, name)
        allowed = self._cache.get(key)
        if allowed is None:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            allowed = self._cache[key] = self.permission.allows(permission, name)
        if not allowed:
            what = resource(kind, name, self.vhost)
            raise AMQPError(403, f"access to {what} refused for user '{self.user}'")


class AccessControl:
    """The user database of one broker: logins, vhost access and per-vhost permissions."""

    def __init__(
        self,
        users: Iterable[User],
        permissions: Mapping[tuple[str, str], Permission] | None,
        *,
        loopback_users: Iterable[str] = ("guest",),
    ) -> None:
        self.users: dict[str, User] = {user.name: user for user in users}
        self.permissions = None if permissions is None else dict(permissions)
        """(user, vhost) -> permission; None gives every user full access to every vhost."""
        self.loopback_users = frozenset(loopback_users)
        self.failed_logins = 0
        self._dummy = User("", hash_password(os.urandom(8).hex()))

    @classmethod
    def from_plain(
        cls,
        passwords: Mapping[str, str],
        permissions: Mapping[tuple[str, str], Permission] | None = None,
        *,
        loopback_users: Iterable[str] = ("guest",),
    ) -> AccessControl:
        """Users from plain passwords (hashed here; the plain text is not kept)."""
        users = [User(name, hash_password(password)) for name, password in passwords.items()]
        return cls(users, permissions, loopback_users=loopback_users)

    def authenticate(
        self,
        mechanism: str,
        user: str,
        password: str | None,
        *,
        peer_address: str,
    ) -> str:
        """Check a login (``password`` None: EXTERNAL, the identity was proven by a certificate).

        Raises:
            LoginRefusedError: unknown user, wrong password, or a loopback-only user from elsewhere.
        """
        known = self.users.get(user)
        if password is not None:
            stored = known or self._dummy  # the same work for unknown users: no timing oracle
            matches = verify_password(stored.password_hash, password, algorithm=stored.algorithm)
            ok = matches and known is not None
        else:
            ok = known is not None
        if not ok:
            self.failed_logins += 1
            reason = "invalid credentials" if known is not None else "no such user"
            raise LoginRefusedError(mechanism, user, f"user '{user}' - {reason}")
        if user in self.loopback_users and not is_loopback_address(peer_address):
            self.failed_logins += 1
            raise LoginRefusedError(mechanism, user, f"user '{user}' can only connect via localhost")
        return user

    def refused(self) -> None:
        """Count a failed login that never reached :meth:`authenticate` (bad mechanism or response)."""
        self.failed_logins += 1

    def grants(self, user: str, vhost: str) -> Grants | None:
        """``user``'s permissions in ``vhost``, or None when the user has no access to it."""
        if self.permissions is None:
            return Grants(user, vhost, FULL_ACCESS) if user in self.users else None
        permission = self.permissions.get((user, vhost))
        return None if permission is None else Grants(user, vhost, permission)
