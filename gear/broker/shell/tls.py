"""TLS for the broker's listener: the server context and the user a client certificate names."""

from __future__ import annotations

import ssl
from typing import Any

from gear.broker.node.config import BrokerConfig

__all__ = ("certificate_user", "server_context")


def server_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The listener's TLS context (TLS 1.2 or later), or None when ``config`` has no certificate.

    With ``tls_ca``, clients may present a certificate (verified against it); with
    ``tls_require_client_cert`` they must.

    Raises:
        ValueError: a certificate, key or CA file that cannot be read or does not fit.
    """
    if config.tls_cert is None or config.tls_key is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.tls_cert, config.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(
            f"cannot use TLS certificate {config.tls_cert} with key {config.tls_key}: {_reason(exc)}"
        ) from None
    if config.tls_ca is not None:
        try:
            context.load_verify_locations(cafile=config.tls_ca)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"cannot use TLS CA file {config.tls_ca}: {_reason(exc)}") from None
        context.verify_mode = ssl.CERT_REQUIRED if config.tls_require_client_cert else ssl.CERT_OPTIONAL
    return context


def certificate_user(peer_certificate: Any) -> str | None:
    """The common name (CN) of a verified client certificate's subject, or None."""
    if not isinstance(peer_certificate, dict):
        return None
    for rdn in peer_certificate.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and isinstance(value, str) and value:
                return value
    return None


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc)
