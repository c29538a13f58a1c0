"""Broker configuration: one frozen dataclass, shared by the API, ``serve`` and the CLI."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gear.broker.node.access import AccessControl, Permission, User, hash_password, is_loopback_address
from gear.broker.node.definitions import Definitions

__all__ = ("DEFAULT_MAX_MESSAGE_SIZE", "DEFAULT_USER", "MAX_MESSAGE_SIZE_LIMIT", "BrokerConfig")

#: RabbitMQ's default user, created when nothing else defines users.
DEFAULT_USER = ("guest", "guest")
#: RabbitMQ 4.x's default ``max_message_size`` (3.x allowed 128 MiB).
DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024
#: The largest ``max_message_size`` RabbitMQ accepts.
MAX_MESSAGE_SIZE_LIMIT = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Everything the reference broker can be told. Defaults follow RabbitMQ 4.x unless noted.

    Without ``data_dir`` everything lives in memory and goes with the process. With it, durable
    exchanges, queues and bindings and the persistent messages in durable queues survive a restart or a
    crash, and message bodies are paged to disk under memory pressure.
    """

    host: str = "127.0.0.1"
    """Interface to listen on."""
    port: int = 5672
    """TCP port; 0 picks a free one (see ``Broker.port``)."""
    users: Mapping[str, str] | None = None
    """User name -> password, kept in this process's memory only and hashed when the broker starts.

    None: ``guest``/``guest``, unless ``definitions`` has users (RabbitMQ creates its default user only
    when no definitions are imported)."""
    vhosts: tuple[str, ...] | list[str] = ("/",)
    """Virtual hosts that exist (with those of ``definitions``); ``connection.open`` of another gets 530."""
    definitions: Definitions | None = None
    """Users (password hashes), vhosts and permissions from a RabbitMQ-style definitions file."""
    permissions: Mapping[tuple[str, str], Permission] | None = None
    """(user, vhost) -> permission. When neither this nor ``definitions`` lists any permission, every
    user may do everything in every vhost; otherwise exactly the listed ones apply (530 elsewhere)."""
    loopback_users: tuple[str, ...] | list[str] = ("guest",)
    """Users who may log in from loopback addresses only (RabbitMQ's ``loopback_users``)."""
    tls_cert: str | None = None
    """PEM certificate (chain) file: the listener speaks TLS only (``amqps://``)."""
    tls_key: str | None = None
    """PEM private key of ``tls_cert``."""
    tls_ca: str | None = None
    """PEM CA bundle for client certificates: clients may present one (EXTERNAL login by its CN)."""
    tls_require_client_cert: bool = False
    """Refuse TLS clients without a certificate signed by ``tls_ca`` (``fail_if_no_peer_cert``)."""
    heartbeat: int = 60
    """Heartbeat interval proposed in ``connection.tune`` (seconds; the client's choice wins)."""
    frame_max: int = 131072
    """Largest frame proposed in ``connection.tune``."""
    channel_max: int = 2047
    """Highest channel number proposed in ``connection.tune``."""
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    """Largest message body in bytes; larger ones get 406 PRECONDITION_FAILED. RabbitMQ 4.x's default is
    16 MiB, 3.x's was 128 MiB; both cap it at 512 MiB."""
    max_connections: int | None = None
    """At this many AMQP connections, new sockets are accepted but never answered (like RabbitMQ)."""
    memory_high_watermark: float | int = 0.4
    """Alarm threshold for message memory: a float in (0, 1] is a fraction of total RAM, an int is bytes.

    The default is RabbitMQ 3.x's 0.4 rather than 4.x's 0.6, because here the measure is the bytes of
    messages the broker holds, and a Python process needs roughly as much again for bookkeeping.
    """
    disk_free_limit: int | None = None
    """Free bytes below which a disk alarm blocks publishers (RabbitMQ's ``disk_free_limit``, default
    50 MB there). None: no disk alarm (the default here)."""
    credit: tuple[int, int] = (400, 200)
    """Credit flow ``(InitialCredit, MoreCreditAfter)`` for each channel -> queue link."""
    handshake_timeout: float = 10.0
    """Seconds a new socket has to complete the AMQP handshake."""
    listen_backlog: int = 4096
    """Connections the kernel queues for the listener before the broker accepts them (the kernel caps
    it at ``net.core.somaxconn``). A socket past a full queue has its SYN dropped and retried after 1,
    3, 7 s..., which turns a fleet reconnecting at once into a long tail. RabbitMQ's default is 128;
    its networking guide advises 4096 where thousands of clients may reconnect together."""
    consumer_timeout: int | None = 1_800_000
    """Milliseconds a delivery may stay unacknowledged before its channel is closed with 406 (RabbitMQ's
    ``consumer_timeout``, 30 minutes); a queue's ``x-consumer-timeout`` overrides it. None: no limit."""
    data_dir: str | None = None
    """Directory for durable state (created if missing; one broker at a time). None: memory only."""
    memory_paging_ratio: float = 0.5
    """With ``data_dir``: above this fraction of the memory watermark, queues page message bodies out
    to disk and read them back on delivery (RabbitMQ's ``vm_memory_high_watermark_paging_ratio``)."""
    management_port: int | None = None
    """Port of a read-only subset of RabbitMQ's management HTTP API (``gear prune`` and ``gear doctor``
    read it), on ``host``; 0 picks a free one (see ``Broker.management_port``). None: no API."""

    def __post_init__(self) -> None:
        _check_range("port", self.port, 0, 65535)
        if self.management_port is not None:
            _check_range("management_port", self.management_port, 0, 65535)
        _check_range("heartbeat", self.heartbeat, 0, 65535)
        _check_range("handshake_timeout", self.handshake_timeout, 0.001, 86_400.0)
        _check_range("listen_backlog", self.listen_backlog, 1, 65535)
        if self.max_connections is not None:
            _check_range("max_connections", self.max_connections, 1, 1_000_000)
        if not 4096 <= self.frame_max <= 2**31 - 1:
            raise ValueError(f"frame_max must be from 4096 to {2**31 - 1}, got {self.frame_max}")
        if not 1 <= self.channel_max <= 65535:
            raise ValueError(f"channel_max must be in 1..65535, got {self.channel_max}")
        if not 1 <= self.max_message_size <= MAX_MESSAGE_SIZE_LIMIT:
            raise ValueError(
                f"max_message_size must be in 1..{MAX_MESSAGE_SIZE_LIMIT} (512 MiB), "
                f"got {self.max_message_size}"
            )
        if self.consumer_timeout is not None and self.consumer_timeout < 0:
            raise ValueError(f"consumer_timeout must not be negative, got {self.consumer_timeout}")
        if self.disk_free_limit is not None and self.disk_free_limit < 0:
            raise ValueError(f"disk_free_limit must not be negative, got {self.disk_free_limit}")
        initial, more = self.credit
        if not 0 < more <= initial:
            raise ValueError(
                f"credit must be (initial, more_after) with 0 < more_after <= initial, got {self.credit}"
            )
        if isinstance(self.memory_high_watermark, float) and not 0 < self.memory_high_watermark <= 1:
            raise ValueError("a fractional memory_high_watermark must be in (0, 1]")
        if not 0 < self.memory_paging_ratio <= 1:
            raise ValueError("memory_paging_ratio must be in (0, 1]")
        self._check_access()

    def _check_access(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both a certificate and its key (tls_cert and tls_key)")
        if (self.tls_ca is not None or self.tls_require_client_cert) and self.tls_cert is None:
            raise ValueError("client certificates (tls_ca, tls_require_client_cert) need tls_cert, tls_key")
        if self.tls_require_client_cert and self.tls_ca is None:
            raise ValueError("tls_require_client_cert needs tls_ca to verify client certificates")
        names = self.user_names()
        if not names:
            raise ValueError("no users: give at least one user (or leave users unset for guest/guest)")
        local_only = set(self.loopback_users)
        if not is_loopback_address(self.host) and all(name in local_only for name in names):
            raise ValueError(
                f"refusing to listen on {self.host or 'every interface'}: the only user"
                f"{'s are' if len(names) > 1 else ' is'} {', '.join(repr(n) for n in names)}, who may log in "
                "from loopback only (as RabbitMQ's guest), so nobody could connect from the network. Add a "
                "user of your own (--user NAME:PASSWORD or --users-file FILE), or pass --allow-guest-remote "
                "(loopback_users=()) to accept the default user from any address, which is unsafe."
            )

    def plain_users(self) -> dict[str, str]:
        """The users given with plain passwords (the default user when nothing defines users)."""
        if self.users is not None:
            return dict(self.users)
        if self.definitions is not None and self.definitions.users:
            return {}
        return dict([DEFAULT_USER])

    def user_names(self) -> list[str]:
        """Every user name, plain-password users first."""
        names = list(self.plain_users())
        if self.definitions is not None:
            names += [u.name for u in self.definitions.users if u.name not in names]
        return names

    def all_vhosts(self) -> tuple[str, ...]:
        """``vhosts`` plus the definitions' vhosts, in order, without repeats."""
        extra = self.definitions.vhosts if self.definitions is not None else ()
        return tuple(dict.fromkeys([*self.vhosts, *extra]))

    def access_control(self) -> AccessControl:
        """The user database (hashes plain passwords: call once, when the broker starts)."""
        users = [User(name, hash_password(password)) for name, password in self.plain_users().items()]
        table: dict[tuple[str, str], Permission] | None = None
        listed = self.definitions.permissions if self.definitions is not None else ()
        if self.permissions is not None or listed:
            table = dict(self.permissions or {})
            table.update({(user, vhost): permission for user, vhost, permission in listed})
        if self.definitions is not None:
            plain = {u.name for u in users}
            users += [u for u in self.definitions.users if u.name not in plain]
        return AccessControl(users, table, loopback_users=self.loopback_users)

    def memory_limit_bytes(self) -> int:
        """The watermark in bytes (fractions are taken of the machine's physical memory)."""
        mark = self.memory_high_watermark
        if isinstance(mark, float):
            return int(mark * _total_memory())
        return int(mark)

    @classmethod
    def from_fields(cls, **fields: Any) -> BrokerConfig:
        """Build a config from keyword fields, rejecting unknown names with a clear error."""
        unknown = set(fields) - set(cls.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown broker option(s): {', '.join(sorted(unknown))}")
        return cls(**fields)


def _check_range(name: str, value: float, low: float, high: float) -> None:
    """Refuse ``value`` unless it is a finite number in ``[low, high]`` (bools are not numbers here).

    Raises:
        ValueError: naming ``name`` and the range.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ValueError(f"{name} must be a number from {low:g} to {high:g}, got {value!r}")


def _total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume 4 GiB
        return 4 * 1024**3
