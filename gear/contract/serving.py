"""Serving a contract: check that an implementation has every method with the contract's signature.

``svc.implement(Repo, RepoHandlers(...))`` asks :func:`implementation_of` for the handler of each method
before anything is registered, so a service never starts with half a contract. The implementation may
subclass the contract (then ``mypy`` checks its signatures too) or just have the methods; each may be
``async def`` or a plain ``def`` (run in the thread pool, like any plain handler). A signature differs
when the payload is missing or extra, or when the payload or return type accepts other JSON than the
contract's (the types are compared as equal hints, else by what their JSON Schemas let through on the
wire: a payload class of another name or docstring with the same fields is the same payload).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter

from gear.contract.schema import accepts, wire_schema
from gear.contract.spec import (
    NO_PAYLOAD,
    ContractError,
    MethodSpec,
    contract_spec,
    details_problem,
    function_spec,
    is_contract,
)
from gear.errors import ConfigurationError, GearError

__all__ = ("ContractViolationError", "error_check", "implementation_of")

log = logging.getLogger("gear.contract")


class ContractViolationError(GearError):
    """What a caller gets (as a ``RemoteError`` of this type) instead of a declared error whose details
    do not fit its ``details_model``: the server refused to send it."""


def error_check(owner: str, method: str) -> Callable[[Exception], Exception]:
    """The error filter of ``owner.method`` (see ``Handler.on_error``): a :class:`ContractError` whose
    details do not fit its ``details_model`` is logged and replaced by a :class:`ContractViolationError`;
    anything else passes as it is."""

    def check(exc: Exception) -> Exception:
        if not isinstance(exc, ContractError):
            return exc
        problem = details_problem(exc)
        if problem is None:
            return exc
        text = (
            f"{owner}.{method} raised {type(exc).__name__}, but {problem}: not sent as {type(exc).__name__}"
        )
        log.error("%s; fix the details or the model", text)
        return ContractViolationError(text)

    return check


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
    """True when two type hints accept the same JSON: equal, or with the same wire schema (what the
    JSON Schemas let through, compared without class names, titles, docstrings or defaults)."""
    if got is NO_PAYLOAD or want is NO_PAYLOAD:
        return got is want
    if got == want:
        return True
    try:
        mine, theirs = (wire_schema(TypeAdapter(hint).json_schema()) for hint in (got, want))
    except Exception:
        return False
    return bool(mine == theirs or (accepts(mine, theirs) and accepts(theirs, mine)))
