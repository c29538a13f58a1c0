"""Options shared by several commands, and the parsing of ``--data`` / ``--data-file``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from gear.base.limits import MAX_SECONDS
from gear.cli.client import Target

__all__ = (
    "DEFAULT_URL",
    "CastTimeoutOpt",
    "DataFileOpt",
    "DataOpt",
    "ExchangeOpt",
    "GatherTimeoutOpt",
    "JsonOpt",
    "LogLevelOpt",
    "MethodArg",
    "PingTimeoutOpt",
    "ReadTimeoutOpt",
    "SendTimeoutOpt",
    "TimeoutOpt",
    "TraceOpt",
    "UrlOpt",
    "given_urls",
    "load_payload",
    "log_level",
    "target",
    "urls",
)

DEFAULT_URL = "amqp://guest:guest@localhost/"

UrlOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--url",
        "-u",
        envvar="GEAR_URL",
        help="Broker URL; repeat it (or separate with commas) for a cluster, tried in turn. Env: GEAR_URL. "
        f"Default: {DEFAULT_URL}",
        show_default=False,
    ),
]
ExchangeOpt = Annotated[
    str,
    typer.Option(
        "--exchange", envvar="GEAR_EXCHANGE", help="The topic exchange Gear uses (env GEAR_EXCHANGE)."
    ),
]
MethodArg = Annotated[
    str, typer.Argument(metavar="METHOD", help="The remote method name.", show_default=False)
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout, for scripts.")]
TraceOpt = Annotated[
    str | None,
    typer.Option(
        "--trace",
        envvar="GEAR_TRACE",
        metavar="DIR",
        help="Write trace events (JSON lines) to DIR; `gear traces analyze DIR` reads them. Env: GEAR_TRACE.",
        show_default=False,
    ),
]


def _timeout(meaning: str) -> Any:
    """The ``--timeout``/``-t`` option, with help that says what the command waits for."""
    return typer.Option("--timeout", "-t", min=0.001, max=MAX_SECONDS, help=meaning)


TimeoutOpt = Annotated[float, _timeout("Seconds to wait for the reply (the call's deadline).")]
GatherTimeoutOpt = Annotated[float, _timeout("Seconds to wait for replies (the gather's deadline).")]
PingTimeoutOpt = Annotated[float, _timeout("Seconds to wait for answers to the ping.")]
CastTimeoutOpt = Annotated[
    float,
    _timeout(
        "Seconds the broker may take to route and confirm the cast (a returned cast is resent until then)."
    ),
]
SendTimeoutOpt = Annotated[
    float,
    _timeout(
        "Seconds to wait: with --call for the reply (fan-out: every reply), else for the broker to route "
        "and confirm the cast."
    ),
]
ReadTimeoutOpt = Annotated[float, _timeout("Seconds to connect and read.")]
DataOpt = Annotated[
    str | None,
    typer.Option("--data", "-d", help="Payload as JSON, e.g. '{\"verbose\": true}'.", show_default=False),
]
DataFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--data-file",
        "-f",
        help="Read the JSON payload from a file ('-' for stdin).",
        show_default=False,
        allow_dash=True,
    ),
]


def given_urls(given: list[str] | None) -> list[str]:
    """The broker URLs given with ``--url`` (or ``GEAR_URL``); ``[]`` when none was given.

    Commas separate URLs as in :class:`gear.Settings`; click already split ``GEAR_URL`` on whitespace.

    Raises:
        typer.BadParameter: ``--url`` was given but holds no URL (``--url ''``): an empty value must
            not quietly mean the default broker.
    """
    found = [u.strip() for item in (given or []) for u in item.split(",") if u.strip()]
    if given and not found:
        raise typer.BadParameter(
            "empty: give a broker URL such as amqp://guest:guest@localhost/", param_hint="--url"
        )
    return found


def urls(given: list[str] | None) -> list[str]:
    """The broker URLs to try: the options, else ``GEAR_URL``, else the default.

    Raises:
        typer.BadParameter: ``--url ''`` (see :func:`given_urls`).
    """
    return given_urls(given) or [DEFAULT_URL]


def log_level(name: str) -> int:
    """The ``logging`` level called ``name``.

    Raises:
        typer.BadParameter: for an unknown level name.
    """
    level = logging.getLevelName(name.upper())
    if not isinstance(level, int):
        raise typer.BadParameter("use DEBUG, INFO, WARNING, ERROR or CRITICAL", param_hint="--log-level")
    return level


LogLevelOpt = Annotated[str, typer.Option("--log-level", help="DEBUG, INFO, WARNING, ERROR or CRITICAL.")]


def target(url: list[str] | None, exchange: str, timeout: float, trace: str | None = None) -> Target:
    """The connection settings of one command (``trace``: a directory for its trace events)."""
    return Target(tuple(urls(url)), exchange, timeout, trace)


def load_payload(data: str | None, data_file: Path | None) -> Any:
    """The request payload from ``--data`` or ``--data-file``; ``{}`` when neither is given.

    Raises:
        typer.BadParameter: for both options at once, an unreadable file or invalid JSON (exit code 2).
    """
    if data is not None and data_file is not None:
        raise typer.BadParameter("give --data or --data-file, not both", param_hint="--data")
    if data_file is not None:
        try:
            text = typer.get_text_stream("stdin").read() if str(data_file) == "-" else data_file.read_text()
        except OSError as exc:
            raise typer.BadParameter(
                f"cannot read {data_file}: {exc.strerror}", param_hint="--data-file"
            ) from None
        hint = "--data-file"
    elif data is not None:
        text, hint = data, "--data"
    else:
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(
            f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", param_hint=hint
        ) from None
