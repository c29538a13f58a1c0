"""Contracts: a service's methods declared once, as a typing ``Protocol``, for both sides to import.

::

    class Repo(gear.Contract, Protocol, type="REPO"):
        '''REPO: each instance holds the keys that hash to it.'''

        async def put(self, item: Item) -> Stored: ...

        @gear.raises(ItemMissing)
        async def get(self, query: ItemQuery) -> ItemFound: ...

        @gear.one_way
        async def refresh(self, notice: Refresh) -> None: ...

Each public ``async def`` is a remote method: its name is the method name on the wire, its one
parameter (or none) the payload, its return type the reply; ``@one_way`` methods are sent with a cast
and have no reply; ``@raises`` names the :class:`ContractError` subclasses a method may answer with.
A contract is a ``Protocol`` so that its ``...`` bodies pass ``mypy --strict`` and a caller's proxy
is typed as the contract itself. :func:`contract_spec` reads a contract into a :class:`ContractSpec`
(once per class), which the proxy, the serving side, the AsyncAPI export and the diff share.
"""

from __future__ import annotations

import contextlib
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from gear.base.address import validate_type
from gear.errors import ConfigurationError, GearError, RemoteError, validation_summary
from gear.serving.handler import check_method_name

__all__ = (
    "NO_PAYLOAD",
    "Contract",
    "ContractError",
    "ContractSpec",
    "MethodSpec",
    "contract_spec",
    "details_problem",
    "function_spec",
    "is_contract",
    "one_way",
    "raises",
    "type_text",
)

F = TypeVar("F", bound=Callable[..., Any])

_ONE_WAY = "__gear_one_way__"
_RAISES = "__gear_raises__"


class _NoPayload:
    """The payload type of a method that takes none."""

    def __repr__(self) -> str:
        return "NO_PAYLOAD"


NO_PAYLOAD: Any = _NoPayload()
"""``MethodSpec.payload`` of a method without a payload parameter."""


class Contract(Protocol):
    """The base of every contract: ``class Repo(gear.Contract, Protocol, type="REPO", version="1.2")``.

    Args (class keywords):
        type: the service TYPE that usually implements it (documentation and AsyncAPI channels).
        version: the contract's version, for the AsyncAPI ``info.version`` (default ``"1.0.0"``).
    """

    def __init_subclass__(cls, *, type: str | None = None, version: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if type is not None:
            try:
                validate_type(type)
            except ValueError as exc:
                raise ConfigurationError(f"contract {cls.__name__}: {exc}") from None
            cls.__gear_type__ = type  # type: ignore[attr-defined]
        if version is not None:
            cls.__gear_version__ = version  # type: ignore[attr-defined]


class ContractError(RemoteError):
    """An error a contract method declares (``@gear.raises(ItemMissing)``): the implementation raises
    it, it travels as a typed error reply (its class name is the wire type) and a proxy raises it
    again as the same class. ``str()`` is the message.

    With a ``details_model``, both ends hold the details to it: the server refuses to send an error
    whose details do not fit (it logs why and the caller gets a ``ContractViolationError`` instead),
    and a caller whose declared error arrives with details that do not fit gets ``BadResultError``.

    Attributes:
        details_model: optionally, the pydantic model of ``details`` (also in the AsyncAPI document).
        details: the details as JSON (what travels).
        data: the details as an instance of ``details_model`` (``None`` without one); annotate it in
            the subclass (``data: OutOfStockDetails``) for mypy to know its type.
    """

    details_model: ClassVar[type[BaseModel] | None] = None
    data: Any

    def __init__(self, message: str = "", details: Mapping[str, Any] | BaseModel | None = None) -> None:
        GearError.__init__(self, message)
        self.type = type(self).__name__
        self.message = message
        model = type(self).details_model
        self.data = details if model is not None and isinstance(details, model) else None
        if isinstance(details, BaseModel):
            details = details.model_dump(mode="json")
        self.details = dict(details or {})
        if model is not None and self.data is None:
            with contextlib.suppress(ValidationError):  # details_problem() says what does not fit
                self.data = model.model_validate(self.details)


def details_problem(error: ContractError) -> str | None:
    """What in ``error``'s details does not fit its ``details_model``, in one line (``field: what``);
    ``None`` when they fit or the class declares no model."""
    model = type(error).details_model
    if model is None or error.data is not None:
        return None
    try:
        model.model_validate(error.details)
    except ValidationError as exc:
        found = validation_summary({"errors": exc.errors(include_url=False, include_input=False)})
        return f"its details do not fit {model.__name__} ({found or 'invalid'})"
    return None


def one_way(func: F) -> F:
    """Declare a contract method one-way: proxies send it with a cast (no reply, no deadline) and it
    returns ``None``."""
    setattr(func, _ONE_WAY, True)
    return func


def raises(*errors: type[ContractError]) -> Callable[[F], F]:
    """Declare the :class:`ContractError` subclasses a contract method may answer with.

    Raises:
        ConfigurationError: one of ``errors`` is not a ``ContractError`` subclass.
    """
    for error in errors:
        if not (isinstance(error, type) and issubclass(error, ContractError)):
            raise ConfigurationError(f"@raises takes ContractError subclasses, not {error!r}")

    def declare(func: F) -> F:
        setattr(func, _RAISES, (*getattr(func, _RAISES, ()), *errors))
        return func

    return declare


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """One remote method as a contract (or a registered handler) declares it."""

    name: str
    payload: Any
    """The payload's type hint, or :data:`NO_PAYLOAD`."""
    default: Any
    """The payload parameter's default, or ``inspect.Parameter.empty``."""
    result: Any
    """The return type hint (``None`` for one-way methods)."""
    one_way: bool = False
    errors: tuple[type[ContractError], ...] = ()
    doc: str = ""
    parameter: str = ""
    """The payload parameter's name (documentation only)."""

    @property
    def has_payload(self) -> bool:
        """True when the method takes a payload."""
        return self.payload is not NO_PAYLOAD

    @property
    def signature(self) -> str:
        """``(query: ItemQuery) -> ItemFound``, as messages show it."""
        arg = f"{self.parameter}: {type_text(self.payload)}" if self.has_payload else ""
        return f"({arg}) -> {type_text(self.result)}"


@dataclass(frozen=True, slots=True)
class ContractSpec:
    """A contract read once: its methods in declaration order, and what it says about itself."""

    contract: type[Any]
    name: str
    type: str | None
    version: str
    doc: str
    methods: tuple[MethodSpec, ...]

    def method(self, name: str) -> MethodSpec | None:
        """The method called ``name``, if the contract has it."""
        return next((m for m in self.methods if m.name == name), None)


def is_contract(obj: object) -> bool:
    """True for a class declared ``class X(gear.Contract, Protocol)`` (not for ``Contract`` itself,
    nor for implementations or proxies that subclass a contract)."""
    return (
        isinstance(obj, type)
        and obj is not Contract
        and Contract in obj.__mro__
        and Protocol in obj.__bases__
    )


_specs: dict[type[Any], ContractSpec] = {}


def contract_spec(contract: Any) -> ContractSpec:
    """Read ``contract`` (cached per class).

    Raises:
        ConfigurationError: ``contract`` is not a contract class, or one of its members is not an
            ``async def`` with at most one annotated payload parameter and an annotated return type.
    """
    found = _specs.get(contract)
    if found is not None:
        return found
    if not is_contract(contract):
        raise ConfigurationError(
            f"{contract!r} is not a contract: declare it as class X(gear.Contract, typing.Protocol)"
        )
    methods: dict[str, MethodSpec] = {}
    for cls in reversed(contract.__mro__):
        if not is_contract(cls):
            continue
        for name, member in vars(cls).items():
            if name.startswith("_"):
                continue
            if not inspect.iscoroutinefunction(member):
                raise ConfigurationError(
                    f"{cls.__name__}.{name}: a contract member must be an 'async def' method"
                )
            methods[name] = function_spec(name, member, owner=cls.__name__, bound=False)
    if not methods:
        raise ConfigurationError(f"contract {contract.__name__} declares no methods")
    spec = ContractSpec(
        contract=contract,
        name=contract.__name__,
        type=getattr(contract, "__gear_type__", None),
        version=getattr(contract, "__gear_version__", "1.0.0"),
        doc=inspect.getdoc(contract) or "",
        methods=tuple(methods.values()),
    )
    _specs[contract] = spec
    return spec


def function_spec(
    name: str, func: Callable[..., Any], *, owner: str, bound: bool, strict: bool = True
) -> MethodSpec:
    """The :class:`MethodSpec` of a contract method (``bound=False``: it takes ``self`` first) or of a
    handler function or bound method (``bound=True``). With ``strict=False`` (a plain handler's), a
    missing type hint means any JSON.

    Raises:
        ConfigurationError: a bad name, more than one payload parameter, a missing type hint, or a
            one-way method that returns something.
    """
    where = f"{owner}.{name}"
    try:
        check_method_name(name)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
    params = list(inspect.signature(func).parameters.values())
    if not bound:
        if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
            raise ConfigurationError(f"{where}: a contract method takes self first")
        params = params[1:]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not strict:  # as gear.serving.handler does: the first positional parameter is the payload
        params = [p for p in params if p.kind in positional][:1]
    odd = [p.name for p in params if p.kind not in positional]
    if odd or len(params) > 1:
        raise ConfigurationError(
            f"{where}: takes one payload parameter at most, not {[p.name for p in params]}"
        )
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:
        raise ConfigurationError(f"{where}: cannot resolve its type hints: {exc}") from None
    if strict and "return" not in hints:
        raise ConfigurationError(f"{where}: annotate its return type")
    result = _plain(hints.get("return", Any))
    payload, default, parameter = NO_PAYLOAD, inspect.Parameter.empty, ""
    if params:
        parameter, default = params[0].name, params[0].default
        if strict and parameter not in hints:
            raise ConfigurationError(f"{where}: annotate its payload parameter {parameter!r}")
        payload = hints.get(parameter, Any)
    is_one_way = bool(getattr(func, _ONE_WAY, False))
    if is_one_way and result is not None:
        raise ConfigurationError(f"{where}: a one-way method returns None, not {type_text(result)}")
    errors: tuple[type[ContractError], ...] = getattr(func, _RAISES, ())
    if is_one_way and errors:
        raise ConfigurationError(f"{where}: a one-way method has no reply, so it declares no errors")
    names = [e.__name__ for e in errors]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"{where}: two declared errors share a class name: {names}")
    return MethodSpec(
        name=name,
        payload=payload,
        default=default,
        result=result,
        one_way=is_one_way,
        errors=errors,
        doc=inspect.getdoc(func) or "",
        parameter=parameter,
    )


def _plain(hint: Any) -> Any:
    """``None`` for a ``-> None`` hint (``get_type_hints`` gives ``NoneType``)."""
    return None if hint is type(None) else hint


def type_text(hint: Any) -> str:
    """A type hint as a person reads it: ``ItemQuery``, ``list[Stock]``, ``str | None``."""
    if hint is NO_PAYLOAD:
        return "(no payload)"
    if hint is None or hint is type(None):
        return "None"
    if hint is Any:
        return "Any"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(arg) for arg in args)
    if origin is typing.Literal:
        return f"Literal[{', '.join(repr(arg) for arg in args)}]"
    if origin is not None and args:
        name = getattr(origin, "__name__", repr(origin).replace("typing.", ""))
        return f"{name}[{', '.join('...' if a is Ellipsis else type_text(a) for a in args)}]"
    if isinstance(hint, type):
        return hint.__name__
    return repr(hint).replace("typing.", "")
