"""The metrics tests' fixtures: the SDK tests' ``fleet`` (services on the broker under test)."""

from tests.sdk.conftest import fleet

__all__ = ("fleet",)
