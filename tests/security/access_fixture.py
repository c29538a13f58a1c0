"""The same users, vhost and permissions on both brokers, for the access-control conformance tests.

On RabbitMQ they are made with ``rabbitmqctl`` (unique names) and removed in a ``finally``; on the
reference broker they are its configuration. ``guest`` is unchanged on RabbitMQ except for full
permissions on the test's own vhost, which go away with it.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import aiormq

from gear.broker import Broker
from gear.broker.node.access import FULL_ACCESS, Permission
from tests.backends import REFERENCE_SEMANTICS
from tests.conftest import unique

__all__ = ("RESTRICTED", "Names", "Secured", "rabbitmq_users", "secured_broker")

#: The restricted user's (configure, write, read) regexps.
RESTRICTED = ("^c-", "^w-", "^r-")
QUEUES = ("c-q", "w-q", "r-q", "x-q")
EXCHANGES = ("c-x", "w-x", "r-x", "x-x")


@dataclass
class Secured:
    """Where the test broker is and who may do what there."""

    kind: str
    host: str
    port: int
    vhost: str
    user: str
    """Restricted: configure ``^c-``, write ``^w-``, read ``^r-`` in ``vhost``."""
    stranger: str
    """Exists, with no permissions in ``vhost``."""
    password: str
    broker: Broker | None = None
    semantics: tuple[int, int] = REFERENCE_SEMANTICS
    """The RabbitMQ release whose rules apply (see ``BrokerHandle.semantics``)."""

    def url(self, user: str | None = None, password: str | None = None, vhost: str | None = None) -> str:
        """An AMQP URL (default: the restricted user in the test vhost)."""
        user = self.user if user is None else user
        password = self.password if password is None else password
        vhost = self.vhost if vhost is None else vhost
        quoted = [urllib.parse.quote(v, safe="") for v in (user, password, vhost)]
        return f"amqp://{quoted[0]}:{quoted[1]}@{self.host}:{self.port}/{quoted[2]}"

    @property
    def admin_url(self) -> str:
        """guest, with full permissions in the test vhost."""
        return self.url("guest", "guest")

    @property
    def is_reference(self) -> bool:
        return self.kind == "reference"

    def failed_logins(self) -> int:
        """The reference broker's failed-login count."""
        assert self.broker is not None
        return self.broker.status().failed_logins


async def _populate(url: str) -> None:
    conn = await aiormq.connect(url)
    try:
        channel = await conn.channel()
        for queue in QUEUES:
            await channel.queue_declare(queue)
        for exchange in EXCHANGES:
            await channel.exchange_declare(exchange, exchange_type="direct")
    finally:
        await conn.close()


@dataclass(frozen=True)
class Names:
    """The unique names of one test module's setup."""

    vhost: str
    user: str
    stranger: str
    password: str

    @classmethod
    def new(cls) -> Names:
        return cls(unique("gear-vh-"), unique("gear-user-"), unique("gear-stranger-"), unique("pw-"))


@contextmanager
def rabbitmq_users(ctl: Callable[[Sequence[str]], str], names: Names) -> Iterator[None]:
    """Create the vhost and users with ``rabbitmqctl``; remove them afterwards, whatever happens."""
    made: list[tuple[str, ...]] = []
    try:
        for create, undo in (
            (("add_vhost", names.vhost), ("delete_vhost", names.vhost)),
            (("add_user", names.user, names.password), ("delete_user", names.user)),
            (("add_user", names.stranger, names.password), ("delete_user", names.stranger)),
        ):
            ctl(list(create))
            made.append(undo)
        ctl(["set_permissions", "-p", names.vhost, "guest", ".*", ".*", ".*"])
        ctl(["set_permissions", "-p", names.vhost, names.user, *RESTRICTED])
        yield
    finally:
        failures: list[BaseException] = []
        for made_undo in reversed(made):  # every undo is tried, even after one fails
            try:
                ctl(list(made_undo))
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise failures[0]


@asynccontextmanager
async def secured_broker(
    kind: str, names: Names, rabbitmq_url: str | None = None, semantics: tuple[int, int] = REFERENCE_SEMANTICS
) -> AsyncIterator[Secured]:
    """The setup on ``kind``'s broker (RabbitMQ: already made by :func:`rabbitmq_users`), populated.
    ``semantics``: the RabbitMQ release the broker at ``rabbitmq_url`` is."""
    if kind == "reference":
        permissions: dict[tuple[str, str], Permission] = {
            ("guest", "/"): FULL_ACCESS,
            ("guest", names.vhost): FULL_ACCESS,
            (names.user, names.vhost): Permission(*RESTRICTED),
        }
        fields: dict[str, Any] = {
            "users": {"guest": "guest", names.user: names.password, names.stranger: names.password},
            "vhosts": ("/", names.vhost),
            "permissions": permissions,
        }
        async with Broker(port=0, **fields) as broker:
            secured = Secured(
                kind,
                "127.0.0.1",
                broker.port,
                names.vhost,
                names.user,
                names.stranger,
                names.password,
                broker,
            )
            await _populate(secured.admin_url)
            yield secured
        return
    assert rabbitmq_url is not None
    parts = urllib.parse.urlsplit(rabbitmq_url)
    secured = Secured(
        kind,
        parts.hostname or "127.0.0.1",
        parts.port or 5672,
        names.vhost,
        names.user,
        names.stranger,
        names.password,
        semantics=semantics,
    )
    await _populate(secured.admin_url)
    yield secured
