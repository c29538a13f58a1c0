"""RabbitMQ's management HTTP API, read-only, for ``gear doctor`` (standard library only).

The API is a plugin (``rabbitmq_management``) on its own port (15672, or 15671 for HTTPS): where it is
not enabled or not reachable, :class:`ManagementUnavailableError` says why and the doctor reports what
it could not see. The credentials are the AMQP URL's.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from gear.base.redact import mask_url

__all__ = ("DEFAULT_PORT", "Management", "ManagementUnavailableError", "management_url_for")

DEFAULT_PORT = 15672
DEFAULT_TLS_PORT = 15671


class ManagementUnavailableError(Exception):
    """The management API did not answer a request (not enabled, not reachable, refused, or a 404 for
    an endpoint this release lacks); the message says which."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def management_url_for(amqp_url: str) -> str:
    """The management API's usual base URL for a broker URL: same host, port 15672 (15671 for amqps)."""
    parts = urllib.parse.urlsplit(amqp_url)
    tls = parts.scheme == "amqps"
    host = parts.hostname or "localhost"
    if ":" in host:
        host = f"[{host}]"
    return f"{'https' if tls else 'http'}://{host}:{DEFAULT_TLS_PORT if tls else DEFAULT_PORT}/"


@dataclass(frozen=True, slots=True)
class Management:
    """A read-only client of one broker's management API, logged in as the AMQP URL's user."""

    base: str
    user: str
    password: str
    vhost: str
    timeout: float = 5.0
    ssl_context: ssl.SSLContext | None = None

    @classmethod
    def for_amqp_url(
        cls,
        amqp_url: str,
        base: str | None = None,
        *,
        timeout: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> Management:
        """The API of the broker at ``amqp_url`` (at ``base``, default :func:`management_url_for`)."""
        parts = urllib.parse.urlsplit(amqp_url)
        user = urllib.parse.unquote(parts.username or "guest")
        password = urllib.parse.unquote(parts.password or "guest")
        vhost = urllib.parse.unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        base = (base or management_url_for(amqp_url)).rstrip("/") + "/"
        return cls(base, user, password, vhost, timeout, ssl_context)

    @property
    def where(self) -> str:
        """The base URL, for messages."""
        return mask_url(self.base)

    def get(self, *path: str) -> Any:
        """``GET /api/<path>`` (each part URL-quoted, so a vhost ``/`` is ``%2F``) as parsed JSON.

        Raises:
            ManagementUnavailableError: the API did not answer with JSON (status in ``.status``).
        """
        url = self.base + "api/" + "/".join(urllib.parse.quote(p, safe="") for p in path)
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.ssl_context) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as exc:
            raise ManagementUnavailableError(
                f"{self.where}api/{'/'.join(path)}: HTTP {exc.code}", exc.code
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ManagementUnavailableError(f"no management API at {self.where} ({reason})") from None
