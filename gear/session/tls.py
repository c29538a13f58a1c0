"""TLS for the SDK: the client context for ``amqps://`` brokers, built from :class:`gear.Settings`.

Certificates are verified by default (the system's CA store, or ``tls_ca``), host name included.
A client certificate (``tls_cert`` / ``tls_key``) is presented to brokers that ask for one.
"""

from __future__ import annotations

import logging
import ssl

from gear.errors import ConfigurationError
from gear.settings import Settings

__all__ = ("client_context",)

log = logging.getLogger("gear.session.tls")


def client_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context for the ``amqps://`` URLs of ``settings``; None when every URL is plain ``amqp://``.

    Raises:
        ConfigurationError: a CA, certificate or key file that is missing or unusable.
    """
    if not any(url.startswith("amqps://") for url in settings.url):
        return None
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=settings.tls_ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigurationError(f"cannot use TLS CA file {settings.tls_ca}: {_reason(exc)}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if settings.tls_cert is not None:
        try:
            context.load_cert_chain(settings.tls_cert, settings.tls_key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"cannot use TLS client certificate {settings.tls_cert}"
                f"{f' with key {settings.tls_key}' if settings.tls_key else ''}: {_reason(exc)}"
            ) from None
    if not settings.tls_verify:
        log.warning("TLS certificate verification is off (tls_verify=False): anyone in between can listen")
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc)
