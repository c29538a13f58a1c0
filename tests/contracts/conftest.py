"""The contract tests run their services on the broker under test (``broker``: reference and RabbitMQ),
through the SDK tests' ``fleet`` fixture."""

from __future__ import annotations

from tests.sdk.conftest import fleet

__all__ = ("fleet",)
