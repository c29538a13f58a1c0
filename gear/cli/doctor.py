"""``gear doctor URL``: check a broker against what Gear needs, and say what to change."""

from __future__ import annotations

from typing import Annotated, Any

import typer

import gear
from gear.base.limits import MAX_SECONDS
from gear.cli.options import ExchangeOpt, JsonOpt
from gear.cli.output import ExitCode, Renderer, fail, map_errors
from gear.doctor import Diagnosis, Status, diagnose

__all__ = ("doctor", "register")

_MARK = {Status.OK: "ok", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.UNKNOWN: "?"}


def doctor(
    url: Annotated[
        str, typer.Argument(metavar="URL", help="The broker's AMQP URL, e.g. amqp://guest:guest@localhost/.")
    ],
    exchange: ExchangeOpt = "gear",
    management: Annotated[
        str | None,
        typer.Option(
            help="The management API's base URL (default: the broker's host, port 15672).", show_default=False
        ),
    ] = None,
    no_management: Annotated[
        bool, typer.Option("--no-management", help="Do not use the management API.")
    ] = False,
    size_probe: Annotated[
        bool,
        typer.Option(
            help="Publish one unroutable message of max_message_bytes: does the broker take that size?"
        ),
    ] = True,
    max_message_bytes: Annotated[
        int | None,
        typer.Option(
            min=1024,
            max=512 * 1024 * 1024,
            help="Gear's size limit to check (default GEAR_MAX_MESSAGE_BYTES or 16 MiB).",
        ),
    ] = None,
    longest_deadline: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            max=MAX_SECONDS,
            help="The longest deadline a handler may run to, in seconds (default GEAR_TIMEOUT or 30).",
        ),
    ] = None,
    quorum: Annotated[
        bool | None, typer.Option(help="Gear runs with quorum=True (default GEAR_QUORUM).")
    ] = None,
    timeout: Annotated[
        float, typer.Option(min=0.1, max=MAX_SECONDS, help="Seconds for the connection and each step.")
    ] = 10.0,
    as_json: JsonOpt = False,
) -> None:
    """Check the broker at URL against what Gear needs: release, feature flags, deprecated features in use,
    max message size, consumer timeout, quorum delivery limits and dead-lettering on Gear's queues,
    heartbeat and connection limits. Exit code 10 when a check failed."""
    out = Renderer(as_json)
    overrides: dict[str, Any] = {"exchange": exchange}
    if max_message_bytes is not None:
        overrides["max_message_bytes"] = max_message_bytes
    if quorum is not None:
        overrides["quorum"] = quorum
    with map_errors(out):
        settings = gear.Settings(**overrides)
        report = gear.run(
            diagnose(
                url,
                settings,
                longest_deadline=longest_deadline,
                management_url=management,
                use_management=not no_management,
                probe_size=size_probe,
                within=timeout,
            )
        )
    out.document(report.as_dict())
    _show(report, out)
    if not report.ok:
        failed = ", ".join(f.check for f in report.findings if f.status is Status.FAIL)
        fail(f"{failed}: see what to change above", ExitCode.CHECK_FAILED, None if as_json else out)


def _show(report: Diagnosis, out: Renderer) -> None:
    out.line(f"{report.url}: {report.broker.get('product')} {report.broker.get('version')}")
    out.line()
    out.table(["check", "status", "found"], [[f.check, _MARK[f.status], f.found] for f in report.findings])
    if report.changes:
        out.line()
        out.line("What to change:")
        for change in report.changes:
            out.line(f"  - {change}")


def register(app: typer.Typer) -> None:
    """Add ``gear doctor`` to ``app``."""
    app.command("doctor")(doctor)
