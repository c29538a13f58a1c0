"""``gear contract export`` and ``gear contract diff``: AsyncAPI documents of contracts, and what changed
between two versions of one."""

from __future__ import annotations

import inspect
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

import gear
from gear.cli.options import JsonOpt
from gear.cli.output import ExitCode, Renderer, fail, map_errors
from gear.cli.usercode import TargetError, build_service, load_target
from gear.contract import Change, asyncapi_document, diff_documents, is_contract

__all__ = ("app", "diff", "export")

app = typer.Typer(
    help=(
        "Contracts between services: write a contract's (or a service's) AsyncAPI 3.0 document, and "
        "classify the changes between two versions as breaking or compatible."
    ),
    no_args_is_help=True,
)


class Format(StrEnum):
    """What ``export`` writes."""

    ASYNCAPI = "asyncapi"


TargetArg = Annotated[
    str,
    typer.Argument(
        metavar="MODULE:OBJECT",
        help="A gear.Contract class, a gear.Service, or a callable that builds one (as for `gear serve`).",
    ),
]
TypeOpt = Annotated[
    str | None,
    typer.Option(
        "--type", help="The service TYPE in channel addresses (default: the contract's or service's)."
    ),
]
ExchangeArg = Annotated[str, typer.Option("--exchange", help="The topic exchange (Settings.exchange).")]


def _source(target: str) -> Any:
    """What ``module:attr`` names: a contract class, or a service (built if it is a factory).

    Raises:
        TargetError: it is neither, cannot be imported, or its code raised (where it did).
    """
    found = load_target(target)
    if is_contract(found):
        return found
    if inspect.isclass(found):
        raise TargetError(
            f"{target} is not a gear.Contract (class X(gear.Contract, Protocol)) nor a gear.Service"
        )
    return gear.run(build_service(found, target))


def _document(target: str, type_: str | None, exchange: str) -> dict[str, Any]:
    """The AsyncAPI document of ``target``: a JSON file written by ``export``, or ``module:attr``.

    Raises:
        ValueError: unreadable file, not JSON, or not a contract or service.
    """
    path = Path(target)
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read {target}: {exc}") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"{target} is not an AsyncAPI document (a JSON object)")
        return loaded
    if ":" not in target:
        raise ValueError(f"{target}: no such file, and not MODULE:OBJECT")
    return asyncapi_document(_source(target), type=type_, exchange=exchange)


def export(
    target: TargetArg,
    format_: Annotated[Format, typer.Option("--format", help="The document to write.")] = Format.ASYNCAPI,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write it to this file (default: stdout).")
    ] = None,
    type_: TypeOpt = None,
    exchange: ExchangeArg = "gear",
    version: Annotated[
        str | None, typer.Option("--version", help="info.version (default: the contract's version=).")
    ] = None,
    server: Annotated[
        list[str] | None,
        typer.Option(
            "--server",
            metavar="URL",
            help="A broker URL for the document's servers section (repeatable; the password is left "
            "out). Default: one server whose host and port are variables.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Write the AsyncAPI 3.0 document (JSON) of a contract, or of a service's registered handlers:
    channels for the four address forms, request/reply operations, payload, reply and error schemas,
    AMQP bindings."""
    with map_errors():
        try:
            document = asyncapi_document(
                _source(target), type=type_, exchange=exchange, version=version, servers=server or ()
            )
        except ValueError as exc:
            fail(str(exc), ExitCode.USAGE)
        text = json.dumps(document, indent=2) + "\n"
        if out is None:
            typer.echo(text, nl=False)
            return
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write {out}: {exc}", ExitCode.USAGE)
        methods = len(document["x-gear"]["methods"])
        typer.echo(f"wrote {out}: AsyncAPI {document['asyncapi']}, {methods} method(s)", err=True)


def diff(
    old: Annotated[
        str, typer.Argument(metavar="OLD", help="An exported document (JSON file) or MODULE:OBJECT.")
    ],
    new: Annotated[
        str, typer.Argument(metavar="NEW", help="An exported document (JSON file) or MODULE:OBJECT.")
    ],
    type_: TypeOpt = None,
    exchange: ExchangeArg = "gear",
    as_json: JsonOpt = False,
) -> None:
    """List every change from OLD to NEW as breaking or compatible; exit 11 if any is breaking."""
    out = Renderer(as_json)
    with map_errors(out):
        try:
            before = _document(old, type_, exchange)
            after = _document(new, type_, exchange)
        except ValueError as exc:
            fail(str(exc), ExitCode.USAGE, out)
        changes = diff_documents(before, after)
    breaking = [c for c in changes if c.breaking]
    out.document(
        {
            "ok": not breaking,
            "breaking": len(breaking),
            "compatible": len(changes) - len(breaking),
            "changes": [c.as_dict() for c in changes],
        }
    )
    if changes:
        out.table(["class", "method", "where", "change"], [_row(c) for c in changes])
        out.line()
    out.line(f"{len(changes)} change(s): {len(breaking)} breaking, {len(changes) - len(breaking)} compatible")
    if breaking:
        raise typer.Exit(int(ExitCode.BREAKING))


def _row(change: Change) -> list[str]:
    what = change.what
    if change.where != "method" and (change.old is not None or change.new is not None):
        what += f" ({change.old or '-'} -> {change.new or '-'})"
    return [change.compatibility.value, change.method or "-", change.where, what]


app.command("export")(export)
app.command("diff")(diff)
