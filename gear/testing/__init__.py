"""Tools for testing code that uses Gear: a fault-injecting TCP proxy, a silent server and a fleet of
instances served by a child process."""

from __future__ import annotations

from gear.testing.fleet import Fleet
from gear.testing.proxy import ProxyMode, SilentServer, TCPProxy

__all__ = ("Fleet", "ProxyMode", "SilentServer", "TCPProxy")
