"""Typed proxies: ``repo = svc.proxy(Repo, "REPO.host2")``, then ``await repo.get(ItemQuery(key="a"))``.

A proxy is an instance of a class made once per contract (and per kind of address) that subclasses the
contract, so type checkers see the contract's own signatures: ``mypy --strict`` checks the payload
and the result of every call. Everything a call needs is resolved when the class is made (the
method name, the reply's validator, the declared errors), so a call is one ``await rpc.call(...)``
plus the reply's validation; one-way methods are one ``await rpc.cast(...)``.

Deadlines: a call's timeout is the proxy's (``svc.proxy(..., timeout=2)``, or a copy made by
:func:`with_timeout`), else ``Settings.timeout``; inside a handler it never outlives the request being
served (the inherited budget). Errors are ``rpc.call``'s, plus the contract's declared errors raised as
their own classes and ``BadResultError`` for a reply that does not fit the declared type.

Fan-out addresses (``TYPE.*``, ``*.*``): one-way methods cast to every instance; a call goes through
:func:`gather` (``await gear.gather(ctrls.status, StatusQuery())``), which returns one
:class:`Answer` per instance. :func:`call_with_callback` returns once the request is confirmed and
hands the typed result to a callback; plain (threaded) handlers use :func:`call_sync` and
:func:`gather_sync`.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from pydantic import TypeAdapter, ValidationError

from gear.base.address import Address
from gear.base.limits import seconds
from gear.base.reply import Reply, validation_errors
from gear.contract.spec import ContractError, ContractSpec, MethodSpec, contract_spec, details_problem
from gear.errors import BadResultError, ConfigurationError, GearError, RemoteError

if TYPE_CHECKING:
    from gear.calling.rpc import RPC

__all__ = (
    "Answer",
    "call_sync",
    "call_with_callback",
    "gather",
    "gather_sync",
    "make_proxy",
    "proxy_address",
    "with_timeout",
)

C = TypeVar("C")
R = TypeVar("R")
A = TypeVar("A")

_PLAN = "__gear_plan__"
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class Answer(Generic[R]):
    """One instance's answer to a :func:`gather`: its result, validated into the declared type, or
    its error (a ``RemoteError``, a declared ``ContractError``, or ``BadResultError``).

    Attributes:
        sender: the answering instance, ``TYPE.HOST``.
    """

    sender: str
    result: R | None = None
    error: GearError | None = None

    @property
    def ok(self) -> bool:
        """True when the instance answered with a result."""
        return self.error is None

    def value(self) -> R:
        """The result.

        Raises:
            GearError: this instance's error.
        """
        if self.error is not None:
            raise self.error
        return cast(R, self.result)


class _Plan:
    """What a proxy method resolved when its class was made."""

    __slots__ = ("declared", "default", "method", "name", "validate")

    def __init__(self, method: MethodSpec) -> None:
        self.method = method
        self.name = method.name
        self.default = None if method.default is inspect.Parameter.empty else method.default
        self.declared: dict[str, type[ContractError]] = {e.__name__: e for e in method.errors}
        try:
            self.validate: Callable[[Any], Any] = TypeAdapter(method.result).validate_python
        except Exception as exc:
            raise ConfigurationError(f"{method.name}: its return type cannot be validated: {exc}") from None

    def finish(self, result: Any, address: str) -> Any:
        """The result validated into the declared type.

        Raises:
            BadResultError: it does not fit.
        """
        try:
            return self.validate(result)
        except ValidationError as exc:
            raise BadResultError(address, self.name, result, {"errors": validation_errors(exc)}) from None

    def error(self, exc: RemoteError, address: str) -> GearError:
        """A remote error as its declared class, when the method declares it; ``BadResultError`` when
        it does, but its details do not fit the error's ``details_model``."""
        declared = self.declared.get(exc.type)
        if declared is None:
            return exc
        error = declared(exc.message, exc.details)
        problem = details_problem(error)
        if problem is None:
            return error
        body = {"type": exc.type, "message": exc.message, "details": exc.details}
        found = type(error).details_model
        assert found is not None  # a problem needs a model
        try:
            found.model_validate(exc.details)
        except ValidationError as invalid:
            bad = BadResultError(address, self.name, body, {"errors": validation_errors(invalid)})
            bad.args = (f"the {exc.type} error of {self.name!r} on {address!r} arrived, but {problem}",)
            return bad
        return error

    def answer(self, reply: Reply, address: str) -> Answer[Any]:
        """One gathered reply as an :class:`Answer`."""
        if reply.error is not None:
            return Answer(reply.sender, None, self.error(reply.error, address))
        try:
            return Answer(reply.sender, self.finish(reply.result, address))
        except BadResultError as exc:
            return Answer(reply.sender, None, exc)


class _Proxy:
    """What every proxy instance holds (the generated classes add the contract's methods)."""

    __slots__ = ("_address", "_rpc", "_timeout")
    __gear_contract__: ContractSpec
    _rpc: RPC
    _address: str
    _timeout: float | None

    def __repr__(self) -> str:
        return f"<{self.__gear_contract__.name} proxy for {self._address!r}>"


def _call(plan: _Plan) -> Callable[..., Awaitable[Any]]:
    name, validate, declared = plan.name, plan.validate, plan.declared

    async def call(self: _Proxy, payload: Any = None) -> Any:
        try:
            result = await self._rpc.call(self._address, name, payload, timeout=self._timeout)
        except RemoteError as exc:
            if exc.type in declared:
                raise plan.error(exc, self._address) from None
            raise
        try:
            return validate(result)
        except ValidationError:
            return plan.finish(result, self._address)  # raises BadResultError with the details

    return call


def _cast(plan: _Plan) -> Callable[..., Awaitable[None]]:
    name = plan.name

    async def cast_(self: _Proxy, payload: Any = None) -> None:
        await self._rpc.cast(self._address, name, payload, retry_budget=self._timeout)

    return cast_


def _refuse(plan: _Plan) -> Callable[..., Awaitable[Any]]:
    name = plan.name

    async def refuse(self: _Proxy, payload: Any = None) -> Any:
        raise ConfigurationError(
            f"{self._address!r} reaches several instances: gather the replies with "
            f"gear.gather(proxy.{name}, ...), or call one instance"
        )

    return refuse


_classes: dict[tuple[type[Any], bool], type[Any]] = {}


def _proxy_class(spec: ContractSpec, fanout: bool) -> type[Any]:
    key = (spec.contract, fanout)
    found = _classes.get(key)
    if found is not None:
        return found
    namespace: dict[str, Any] = {
        "__slots__": (),
        "__module__": spec.contract.__module__,
        "__qualname__": f"{spec.contract.__qualname__}Proxy",
        "__gear_contract__": spec,
    }
    for method in spec.methods:
        plan = _Plan(method)
        make = _cast if method.one_way else _refuse if fanout else _call
        func = make(plan)
        func.__name__ = method.name
        func.__qualname__ = f"{spec.name}Proxy.{method.name}"
        func.__doc__ = method.doc or None
        if method.has_payload and method.default is inspect.Parameter.empty:
            func.__defaults__ = None  # the payload is required, as the contract says
        elif method.has_payload:
            func.__defaults__ = (method.default,)
        setattr(func, _PLAN, plan)
        namespace[method.name] = func
    cls = types.new_class(
        f"{spec.name}Proxy", (_Proxy, spec.contract), exec_body=lambda ns: ns.update(namespace)
    )
    _classes[key] = cls
    return cls


def make_proxy(rpc: RPC, contract: Callable[..., C], address: str, timeout: float | None = None) -> C:
    """A proxy for ``contract`` at ``address`` (what :meth:`gear.Service.proxy` returns).

    Raises:
        ConfigurationError: not a contract, a bad address or a timeout that is not > 0.
    """
    spec = contract_spec(contract)
    try:
        parsed = Address.parse(address)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    _check_timeout(timeout)
    proxy: Any = object.__new__(_proxy_class(spec, parsed.is_fanout))
    proxy._rpc, proxy._address, proxy._timeout = rpc, address, timeout
    return cast(C, proxy)


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None:
        seconds(timeout)  # a finite number of seconds in range, as rpc.call takes


def _as_proxy(obj: object) -> _Proxy:
    if not isinstance(obj, _Proxy):
        raise ConfigurationError(f"{obj!r} is not a contract proxy (svc.proxy(Contract, address))")
    return obj


def with_timeout(proxy: C, timeout: float) -> C:
    """A copy of ``proxy`` whose calls have ``timeout`` seconds (casts: that retry budget)::

        found = await gear.with_timeout(repo, 0.5).get(query)

    Raises:
        ConfigurationError: not a proxy, or ``timeout`` is not > 0.
    """
    source = _as_proxy(proxy)
    _check_timeout(timeout)
    copy: Any = object.__new__(type(source))
    copy._rpc, copy._address, copy._timeout = source._rpc, source._address, timeout
    return cast(C, copy)


def proxy_address(proxy: object) -> str:
    """The address a proxy calls.

    Raises:
        ConfigurationError: not a proxy.
    """
    return _as_proxy(proxy)._address


def _bound(method: Callable[..., Any]) -> tuple[_Proxy, _Plan]:
    owner = getattr(method, "__self__", None)
    plan = getattr(getattr(method, "__func__", None), _PLAN, None)
    if not isinstance(owner, _Proxy) or not isinstance(plan, _Plan):
        raise ConfigurationError(f"{method!r} is not a method of a contract proxy (proxy.get, not Repo.get)")
    return owner, plan


def _payload(plan: _Plan, payload: Any) -> Any:
    return plan.default if payload is _MISSING else payload


def _request(
    method: Callable[..., Any], payload: Any, timeout: float | None
) -> tuple[_Proxy, _Plan, tuple[str, str, Any], float | None]:
    """``(proxy, plan, (address, method name, payload), timeout)`` of a request that has a reply.

    Raises:
        ConfigurationError: not a proxy's method, or a one-way one.
    """
    proxy, plan = _bound(method)
    if plan.method.one_way:
        raise ConfigurationError(f"{plan.name!r} is one-way: it has no reply; call it to cast it")
    request = (proxy._address, plan.name, _payload(plan, payload))
    return proxy, plan, request, proxy._timeout if timeout is None else timeout


@overload
async def gather(
    method: Callable[[], Awaitable[R]],
    *,
    timeout: float | None = ...,  # noqa: ASYNC109 - a gather's deadline is the API
    expected: int | None = ...,
) -> list[Answer[R]]: ...
@overload
async def gather(
    method: Callable[[A], Awaitable[R]],
    payload: A,
    *,
    timeout: float | None = ...,  # noqa: ASYNC109
    expected: int | None = ...,
) -> list[Answer[R]]: ...
async def gather(
    method: Callable[..., Awaitable[Any]],
    payload: Any = _MISSING,
    *,
    timeout: float | None = None,  # noqa: ASYNC109
    expected: int | None = None,
) -> list[Answer[Any]]:
    """Call ``method`` (a proxy's, e.g. ``ctrls.status``) on every instance behind the proxy's address
    and collect one :class:`Answer` per instance, until ``expected`` answered or the timeout (default:
    the proxy's, else ``Settings.timeout``) ran out, as :meth:`gear.RPC.gather` does.

    Raises:
        ConfigurationError: not a proxy's method, a one-way method, or bad arguments.
        NotConfirmedError, ConnectionLostError: as :meth:`gear.RPC.gather`.
    """
    proxy, plan, request, limit = _request(method, payload, timeout)
    replies = await proxy._rpc.gather(*request, timeout=limit, expected=expected)
    return [plan.answer(reply, proxy._address) for reply in replies]


@overload
async def call_with_callback(
    method: Callable[[], Awaitable[R]], *, callback: Callable[[R | GearError], Awaitable[None] | None]
) -> str: ...
@overload
async def call_with_callback(
    method: Callable[[A], Awaitable[R]],
    payload: A,
    *,
    callback: Callable[[R | GearError], Awaitable[None] | None],
) -> str: ...
async def call_with_callback(
    method: Callable[..., Awaitable[Any]],
    payload: Any = _MISSING,
    *,
    callback: Callable[[Any], Awaitable[None] | None],
) -> str:
    """Send ``method``'s request (a proxy's, e.g. ``ctrl.lookup``) and return its request id once the
    broker confirmed it; ``callback`` runs later, once, with the result validated into the declared
    type, or with the error (a declared error as its own class), as :meth:`gear.RPC.call_with_callback`.

    Raises:
        ConfigurationError: not a proxy's method, a one-way method, or a fan-out address.
        UnroutableError, NotConfirmedError, CallTimeoutError...: the request was not sent.
    """
    proxy, plan, request, limit = _request(method, payload, None)
    address = proxy._address

    def deliver(value: Any) -> Awaitable[None] | None:
        if isinstance(value, RemoteError):
            value = plan.error(value, address)
        elif not isinstance(value, BaseException):
            try:
                value = plan.finish(value, address)
            except BadResultError as exc:
                value = exc
        return callback(value)

    return await proxy._rpc.call_with_callback(*request, callback=deliver, timeout=limit)


@overload
def call_sync(method: Callable[[], Awaitable[R]]) -> R: ...
@overload
def call_sync(method: Callable[[A], Awaitable[R]], payload: A) -> R: ...
def call_sync(method: Callable[..., Awaitable[Any]], payload: Any = _MISSING) -> Any:
    """``await method(payload)`` from a thread that is not the service's event loop (a plain
    handler's worker thread): blocks this thread only, inherits the request's deadline, raises the
    same errors (see ``svc.rpc.sync``)::

        found = gear.call_sync(repo.get, ItemQuery(key="a"))

    Raises:
        ConfigurationError: not a proxy's method, or called from a thread that runs an event loop.
        CallTimeoutError, UnroutableError, RemoteError, BadResultError...: as the awaited call.
    """
    proxy, plan = _bound(method)
    sync = proxy._rpc.sync
    if plan.method.one_way:
        sync.cast(proxy._address, plan.name, _payload(plan, payload), retry_budget=proxy._timeout)
        return None
    try:
        result = sync.call(proxy._address, plan.name, _payload(plan, payload), timeout=proxy._timeout)
    except RemoteError as exc:
        raise plan.error(exc, proxy._address) from None
    return plan.finish(result, proxy._address)


@overload
def gather_sync(
    method: Callable[[], Awaitable[R]], *, timeout: float | None = ..., expected: int | None = ...
) -> list[Answer[R]]: ...
@overload
def gather_sync(
    method: Callable[[A], Awaitable[R]],
    payload: A,
    *,
    timeout: float | None = ...,
    expected: int | None = ...,
) -> list[Answer[R]]: ...
def gather_sync(
    method: Callable[..., Awaitable[Any]],
    payload: Any = _MISSING,
    *,
    timeout: float | None = None,
    expected: int | None = None,
) -> list[Answer[Any]]:
    """:func:`gather` from a thread that is not the service's event loop (a plain handler's).

    Raises:
        ConfigurationError, NotConfirmedError, ConnectionLostError: as :func:`gather`.
    """
    proxy, plan, request, limit = _request(method, payload, timeout)
    replies = proxy._rpc.sync.gather(*request, timeout=limit, expected=expected)
    return [plan.answer(reply, proxy._address) for reply in replies]
