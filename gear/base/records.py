"""``@immutable``: a record type that type checkers treat as frozen, built by a plain slots dataclass.

A frozen dataclass sets each field through ``object.__setattr__`` in its ``__init__``, which costs a
few microseconds per instance; the records built for every message (the envelope of each delivery,
each outgoing message, each request's context) use this instead. Instances stay hashable by value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

__all__ = ("immutable",)

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def immutable(cls: type[_T]) -> type[_T]:
    """Make ``cls`` a slots dataclass, frozen for type checkers (not enforced at run time)."""
    return dataclass(slots=True, unsafe_hash=True)(cls)
