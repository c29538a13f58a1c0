"""Masking credentials: broker URLs lose their password before any log line, error, trace or output.

Every place that shows a URL goes through :func:`mask_url`; text that may quote one (a library's
exception message, a validation error) goes through :func:`mask_secrets`.
"""

from __future__ import annotations

import re
import urllib.parse

__all__ = ("MASK", "mask_secrets", "mask_url")

#: What a password is replaced with.
MASK = "***"

# scheme://user:password@ in free text; the password runs up to the last "@" before the host part.
_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/?#@]*:)(?P<password>[^\s/?#]*)@")


def mask_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``; host, port, vhost and query kept."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return mask_secrets(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.partition(":")[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def mask_secrets(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` inside it masked."""
    return _USERINFO.sub(lambda m: f"{m.group('head')}{MASK}@", text)
