"""Tools for testing code that uses Gear: a fault-injecting TCP proxy and a silent server."""

from __future__ import annotations

from gear.testing.proxy import ProxyMode, SilentServer, TCPProxy

__all__ = ("ProxyMode", "SilentServer", "TCPProxy")
