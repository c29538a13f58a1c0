"""The contract tests run their services on the broker under test (``broker``: reference and RabbitMQ),
through the ``fleet`` fixture of ``tests/fleet.py``."""

from __future__ import annotations

from tests.fleet import fleet

__all__ = ("fleet",)
