"""Serving a contract: check that an implementation has every method with the contract's signature.

``svc.implement(Repo, RepoHandlers(...))`` asks :func:`implementation_of` for the handler of each method
before anything is registered, so a service never starts with half a contract. The implementation may
subclass the contract (then ``mypy`` checks its signatures too) or just have the methods; each may be
``async def`` or a plain ``def`` (run in the thread pool, like any plain handler). A signature differs
when the payload is missing or extra, or when the payload or return type accepts other JSON than the
contract's (the types are compared as equal hints, else by their JSON Schemas).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter

from gear.contract.spec import NO_PAYLOAD, MethodSpec, contract_spec, function_spec, is_contract
from gear.errors import ConfigurationError

__all__ = ("implementation_of",)


def implementation_of(contract: Any, implementation: object) -> list[tuple[MethodSpec, Callable[..., Any]]]:
    """Each method of ``contract`` with ``implementation``'s function for it.

    Raises:
        ConfigurationError: ``contract`` is not a contract, ``implementation`` is a class, or methods
            are missing or differ (the message names every one of them).
    """
    spec = contract_spec(contract)
    if isinstance(implementation, type):
        raise ConfigurationError(
            f"implement({spec.name}, ...) takes an instance, not the class {implementation.__name__}"
        )
    owner = type(implementation).__name__
    found: list[tuple[MethodSpec, Callable[..., Any]]] = []
    problems: list[str] = []
    for method in spec.methods:
        func = _member(implementation, method.name)
        if func is None:
            problems.append(f"{owner} does not implement {spec.name}.{method.name}{method.signature}")
            continue
        try:
            got = function_spec(method.name, func, owner=owner, bound=True)
        except ConfigurationError as exc:
            problems.append(f"{exc} (the contract says {spec.name}.{method.name}{method.signature})")
            continue
        if not (_same(got.payload, method.payload) and _same(got.result, method.result)):
            problems.append(
                f"{owner}.{method.name}{got.signature} differs from the contract "
                f"{spec.name}.{method.name}{method.signature}"
            )
            continue
        found.append((method, func))
    if problems:
        raise ConfigurationError("; ".join(problems))
    return found


def _member(implementation: object, name: str) -> Callable[..., Any] | None:
    """``implementation``'s callable ``name``; ``None`` when it has none of its own (a contract's
    declaration inherited by subclassing the contract does not count)."""
    if name not in getattr(implementation, "__dict__", {}):
        defined_by = next((cls for cls in type(implementation).__mro__ if name in vars(cls)), None)
        if defined_by is None or is_contract(defined_by):
            return None
    member = getattr(implementation, name, None)
    return member if callable(member) else None


def _same(got: Any, want: Any) -> bool:
    """True when two type hints accept the same JSON: equal, or with equal JSON Schemas."""
    if got is NO_PAYLOAD or want is NO_PAYLOAD:
        return got is want
    if got == want:
        return True
    try:
        return bool(TypeAdapter(got).json_schema() == TypeAdapter(want).json_schema())
    except Exception:
        return False
