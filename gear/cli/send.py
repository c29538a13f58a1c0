"""``gear send p2p|stateless|multicast|broadcast``: the four routing forms, spelled out.

They cast by default (fire-and-forget). With ``--call`` they wait: one reply for p2p and stateless, every
reply (a gather) for multicast and broadcast. The four commands are one implementation: each form only
says which words make its address and how long it waits by default.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from gear import Address
from gear.cli.options import (
    DataFileOpt,
    DataOpt,
    ExchangeOpt,
    JsonOpt,
    MethodArg,
    SendTimeoutOpt,
    TraceOpt,
    UrlOpt,
    load_payload,
    target,
)
from gear.cli.output import ExitCode, Renderer, fail
from gear.cli.rpc_commands import parse_address, run_call, run_cast, run_gather

__all__ = ("app",)

app = typer.Typer(
    help="Send a message with one of the four routing forms (cast by default; --call waits for replies).",
    no_args_is_help=True,
)

TypeArg = Annotated[str, typer.Argument(metavar="TYPE", help="Service TYPE, e.g. REPO.", show_default=False)]
HostArg = Annotated[str, typer.Argument(metavar="HOST", help="The instance's HOST.", show_default=False)]
CallOpt = Annotated[bool, typer.Option("--call", help="Wait for the reply (or every reply, for fan-out).")]


@dataclass(frozen=True)
class Form:
    """One routing form: its help, the words that make its address, its default wait."""

    help: str
    words: tuple[tuple[str, Any], ...]
    address: Callable[..., str]
    timeout: float


FORMS = {
    "p2p": Form(
        "Point-to-point: exactly the instance TYPE.HOST (stateful services).",
        (("type_", TypeArg), ("host", HostArg)),
        lambda type_, host: f"{type_}.{host}",
        5.0,
    ),
    "stateless": Form(
        "Stateless: any one instance of TYPE, round-robin.",
        (("type_", TypeArg),),
        lambda type_: type_,
        5.0,
    ),
    "multicast": Form(
        "Multicast: every instance of TYPE (TYPE.*), once each.",
        (("type_", TypeArg),),
        lambda type_: f"{type_}.*",
        2.0,
    ),
    "broadcast": Form(
        "Broadcast: every instance of every type (*.*), once each.",
        (),
        lambda: "*.*",
        2.0,
    ),
}


def send(
    address_text: str,
    method: str,
    data: str | None,
    data_file: Path | None,
    call: bool,
    timeout: float,
    url: list[str] | None,
    exchange: str,
    as_json: bool,
    trace: str | None = None,
) -> None:
    """Cast to ``address_text``, or with ``call`` wait for its reply (or every reply, for fan-out)."""
    out = Renderer(as_json)
    address = parse_address(address_text, out)
    payload = load_payload(data, data_file)
    to = target(url, exchange, timeout, trace)
    if not call:
        run_cast(address, method, payload, to, out)
    elif address.is_fanout:
        run_gather(address, method, payload, to, None, out)
    else:
        run_call(address, method, payload, to, out)


_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("method", MethodArg, inspect.Parameter.empty),
    ("data", DataOpt, None),
    ("data_file", DataFileOpt, None),
    ("call", CallOpt, False),
    ("timeout", SendTimeoutOpt, None),  # the form's own default
    ("url", UrlOpt, None),
    ("exchange", ExchangeOpt, "gear"),
    ("trace", TraceOpt, None),
    ("as_json", JsonOpt, False),
)


def _check_words(form: Form, typed: list[str], out: Renderer) -> list[str]:
    """The TYPE (and HOST) words as the form needs them, or end with exit code 2 and a line about
    what the user typed (never about an address built from it, like ``CTRL.*.*``).

    ``multicast CTRL.*`` is taken as ``multicast CTRL``: it is the address the user means.
    """
    words = list(typed)
    if form is FORMS["multicast"] and words and words[0].endswith(".*"):
        words[0] = words[0][:-2]
    for (name, _), word, as_typed in zip(form.words, words, typed, strict=True):
        check = _check_host if name == "host" else _check_type
        try:
            check(word)
        except ValueError:
            try:
                check(as_typed)  # invalid too (a dot is): its message quotes what the user typed
            except ValueError as exc:
                hint = _address_hint(as_typed) if name == "type_" else ""
                fail(f"{exc}{hint}", ExitCode.USAGE, out)
    return words


def _check_type(word: str) -> None:
    Address.instance(word, "host")  # raises ValueError naming the TYPE


def _check_host(word: str) -> None:
    Address.instance("TYPE", word)  # raises ValueError naming the HOST


def _address_hint(word: str) -> str:
    """Which ``gear send`` form takes a whole address the user typed where a TYPE belongs."""
    try:
        address = Address.parse(word)
    except ValueError:
        return ""
    if address.is_fanout:
        form = f"multicast {address.type}" if address.type else "broadcast"
    else:
        form = f"p2p {address.type} {address.host}" if address.host else f"stateless {address.type}"
    return f"; {word} is an address: `gear send {form} METHOD`"


def _command(form: Form) -> Callable[..., None]:
    """The typer command of one form: its address words, then the options every form shares."""
    words = [name for name, _ in form.words]

    def command(**given: Any) -> None:
        typed = [given.pop(w) for w in words]
        address = form.address(*_check_words(form, typed, Renderer(given["as_json"])))
        send(address, **given)

    specs = [*((name, kind, inspect.Parameter.empty) for name, kind in form.words), *_OPTIONS]
    params = [
        inspect.Parameter(
            name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=kind,
            default=form.timeout if name == "timeout" else default,
        )
        for name, kind, default in specs
    ]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {name: kind for name, kind, _ in specs}
    command.__doc__ = form.help
    return command


for _name, _form in FORMS.items():
    app.command(_name)(_command(_form))
