"""Gear's distribution name and installed version.

The import package is ``gear``; it is published as ``gear-rpc`` because ``gear`` on PyPI is an
unrelated project (a Gearman client). Install hints everywhere name :data:`DISTRIBUTION`.
"""

from __future__ import annotations

from importlib import metadata

__all__ = ("DISTRIBUTION", "version")

DISTRIBUTION = "gear-rpc"
"""The name to ``pip install`` (``pip install gear-rpc``)."""


def version() -> str:
    """The installed distribution's version (``0+unknown`` when run from a tree that was never installed)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"
