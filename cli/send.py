"""``gear send p2p|stateless|multicast|broadcast``: the four routing forms, spelled out.

They cast by default (fire-and-forget). With ``--call`` they wait: one reply for p2p and stateless, every
reply (a gather) for multicast and broadcast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.options import (
    DataFileOpt,
    DataOpt,
    ExchangeOpt,
    JsonOpt,
    TimeoutOpt,
    TraceOpt,
    UrlOpt,
    load_payload,
    target,
)
from cli.output import Renderer
from cli.rpc_commands import parse_address, run_call, run_cast, run_gather

__all__ = ("app",)

app = typer.Typer(
    help="Send a message with one of the four routing forms (cast by default; --call waits for replies).",
    no_args_is_help=True,
)

TypeArg = Annotated[str, typer.Argument(metavar="TYPE", help="Service TYPE, e.g. REPO.", show_default=False)]
MethodArg = Annotated[str, typer.Argument(help="The remote method name.", show_default=False)]
CallOpt = Annotated[bool, typer.Option("--call", help="Wait for the reply (or every reply, for fan-out).")]


def _send(
    address_text: str,
    method: str,
    data: str | None,
    data_file: Path | None,
    wait: bool,
    timeout: float,
    url: list[str] | None,
    exchange: str,
    as_json: bool,
    trace: str | None = None,
) -> None:
    out = Renderer(as_json)
    address = parse_address(address_text, out)
    payload = load_payload(data, data_file)
    to = target(url, exchange, timeout, trace)
    if not wait:
        run_cast(address, method, payload, to, out)
    elif address.is_fanout:
        run_gather(address, method, payload, to, None, out)
    else:
        run_call(address, method, payload, to, out)


@app.command()
def p2p(
    type_: TypeArg,
    host: Annotated[str, typer.Argument(help="The instance's HOST.", show_default=False)],
    method: MethodArg,
    data: DataOpt = None,
    data_file: DataFileOpt = None,
    call: CallOpt = False,
    timeout: TimeoutOpt = 5.0,
    url: UrlOpt = None,
    exchange: ExchangeOpt = "gear",
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Point-to-point: exactly the instance TYPE.HOST (stateful services)."""
    _send(f"{type_}.{host}", method, data, data_file, call, timeout, url, exchange, as_json, trace)


@app.command()
def stateless(
    type_: TypeArg,
    method: MethodArg,
    data: DataOpt = None,
    data_file: DataFileOpt = None,
    call: CallOpt = False,
    timeout: TimeoutOpt = 5.0,
    url: UrlOpt = None,
    exchange: ExchangeOpt = "gear",
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Stateless: any one instance of TYPE, round-robin."""
    _send(type_, method, data, data_file, call, timeout, url, exchange, as_json, trace)


@app.command()
def multicast(
    type_: TypeArg,
    method: MethodArg,
    data: DataOpt = None,
    data_file: DataFileOpt = None,
    call: CallOpt = False,
    timeout: TimeoutOpt = 2.0,
    url: UrlOpt = None,
    exchange: ExchangeOpt = "gear",
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Multicast: every instance of TYPE (TYPE.*), once each."""
    _send(f"{type_}.*", method, data, data_file, call, timeout, url, exchange, as_json, trace)


@app.command()
def broadcast(
    method: MethodArg,
    data: DataOpt = None,
    data_file: DataFileOpt = None,
    call: CallOpt = False,
    timeout: TimeoutOpt = 2.0,
    url: UrlOpt = None,
    exchange: ExchangeOpt = "gear",
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Broadcast: every instance of every type (*.*), once each."""
    _send("*.*", method, data, data_file, call, timeout, url, exchange, as_json, trace)
