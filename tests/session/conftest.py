"""The session tests' integration fixture: ``fleet``, services on the broker under test (tests/fleet.py)."""

from tests.fleet import fleet

__all__ = ("fleet",)
