"""Registered handlers: what a handler function is (async or plain), how its payload is validated, and
the policies it was registered with (duplicate window, cancellation at the deadline)."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from gear.errors import ConfigurationError

__all__ = ("Handler", "check_method_name", "validate_payload")

_ANY = TypeAdapter(Any)


@dataclass(slots=True, eq=False)
class Handler:
    """A registered method: the function, how its payload is validated, and its policies."""

    name: str
    func: Callable[..., Any]
    is_async: bool
    payload: TypeAdapter[Any] | None
    window: float | None = None
    """Seconds a request id is remembered after it is first seen (calls: at least until their
    deadline anyway); casts are remembered only with it."""
    dedupe: bool = True
    """A call's request id seen again before its deadline does not run the handler again."""
    cancel_at_deadline: bool = True
    """Async: cancelled at the request's deadline; plain: ``gear.cancelled()`` turns True. No reply."""
    on_error: Callable[[Exception], Exception] | None = None
    """What an exception the handler raised becomes before it is sent as the error reply (a contract
    refuses a declared error whose details do not fit its model); ``None``: sent as it is."""

    @classmethod
    def build(
        cls,
        name: str,
        func: Callable[..., Any],
        window: float | None,
        localns: dict[str, Any] | None = None,
        *,
        dedupe: bool = True,
        cancel_at_deadline: bool = True,
        on_error: Callable[[Exception], Exception] | None = None,
    ) -> Handler:
        """Inspect ``func``: async or plain, and the type hint of its first parameter.

        Raises:
            ConfigurationError: ``func`` takes more than one required parameter, a hint cannot be
                resolved, or the window settings contradict each other.
        """
        if not callable(func):
            raise ConfigurationError(f"handler for {name!r} is not callable")
        params = [
            p
            for p in inspect.signature(func).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        required = [p for p in params[1:] if p.default is p.empty]
        if required:
            raise ConfigurationError(
                f"handler {name!r} takes one payload parameter; {required[0].name!r} has no default"
            )
        payload: TypeAdapter[Any] | None = None
        if params:
            try:
                hints = typing.get_type_hints(func, localns=localns)
            except Exception as exc:
                raise ConfigurationError(f"cannot resolve type hints of handler {name!r}: {exc}") from exc
            hint = hints.get(params[0].name)
            payload = _ANY if hint is None else TypeAdapter(hint)
        if window is not None and window <= 0:
            raise ConfigurationError("idempotency_window must be > 0 seconds")
        if window is not None and not dedupe:
            raise ConfigurationError(f"handler {name!r}: idempotency_window needs dedupe=True")
        is_async = inspect.iscoroutinefunction(func)
        return cls(name, func, is_async, payload, window, dedupe, cancel_at_deadline, on_error)


def validate_payload(adapter: TypeAdapter[Any], body: bytes) -> Any:
    """The JSON ``body`` validated by ``adapter``; an empty body is ``null`` (or ``{}`` for a model whose
    fields all have defaults).

    Raises:
        pydantic.ValidationError: the payload does not fit.
    """
    if body and body != b"null":
        return adapter.validate_json(body)
    try:
        return adapter.validate_json(b"null")
    except ValidationError:
        try:  # no payload for a model whose fields all have defaults
            return adapter.validate_json(b"{}")
        except ValidationError:
            pass
        raise


def check_method_name(name: str) -> None:
    """Refuse a method name that is empty or longer than 200 bytes.

    Raises:
        ConfigurationError: with the reason.
    """
    if not isinstance(name, str) or not name or len(name.encode()) > 200:
        raise ConfigurationError(f"a method name is a non-empty string up to 200 bytes, not {name!r}")
