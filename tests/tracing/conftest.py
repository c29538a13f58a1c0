"""The tracing tests' integration fixture: the SDK tests' ``fleet`` (services on the broker under test)."""

from tests.sdk.conftest import fleet

__all__ = ("fleet",)
