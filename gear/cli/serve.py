"""``gear serve module:attr``: run a service defined in a module until SIGINT or SIGTERM."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

import gear
from gear.cli.options import LogLevelOpt, TraceOpt, UrlOpt, given_urls, log_level
from gear.cli.output import ExitCode, configure_logging, fail, map_errors, masked_url as _masked
from gear.cli.usercode import TargetError, build_service, load_target

__all__ = ("load_service", "register", "serve")


def load_service(target: str) -> Any:
    """Import ``module:attr`` and return what it names: a Service, or a callable that builds one.

    Raises:
        TargetError: if ``target`` is not ``module:attr``, or it cannot be imported or found; a
            :class:`~gear.cli.usercode.UserCodeError` when the module itself raised at import.
    """
    return load_target(target)


def serve(
    target: Annotated[
        str, typer.Argument(metavar="MODULE:ATTR", help="A gear.Service, or a callable returning one.")
    ],
    url: UrlOpt = None,
    type_: Annotated[
        str | None, typer.Option("--type", envvar="GEAR_TYPE", help="Service TYPE (env GEAR_TYPE).")
    ] = None,
    host: Annotated[
        str | None, typer.Option("--host", envvar="GEAR_HOST", help="Instance HOST (env GEAR_HOST).")
    ] = None,
    trace: TraceOpt = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            envvar="GEAR_METRICS_PORT",
            help="Serve /metrics (Prometheus; needs gear-rpc[metrics]), /livez and /readyz on this port "
            "(env GEAR_METRICS_PORT).",
            show_default=False,
        ),
    ] = None,
    level: LogLevelOpt = "INFO",
) -> None:
    """Run a service until Ctrl-C or SIGTERM, then stop gracefully (handlers in flight finish).

    --url, --type, --host, --trace and --metrics-port are put in the environment (GEAR_URL, GEAR_TYPE,
    GEAR_HOST, GEAR_TRACE, GEAR_METRICS_PORT) before the module is imported, so services that read
    gear.Settings pick them up. On SIGTERM /readyz turns 503 at once, then the drain starts.
    """
    settings = (
        ("GEAR_URL", ",".join(given_urls(url))),
        ("GEAR_TYPE", type_),
        ("GEAR_HOST", host),
        ("GEAR_TRACE", trace),
        ("GEAR_METRICS_PORT", None if metrics_port is None else str(metrics_port)),
    )
    for name, value in settings:
        if value:
            os.environ[name] = value
    try:
        found = load_service(target)
    except TargetError as exc:
        fail(str(exc), ExitCode.USAGE)

    async def main() -> gear.Service:
        try:
            svc = await build_service(found, target)
        except TargetError as exc:
            fail(str(exc), ExitCode.USAGE)
        typer.echo(
            f"gear serve: starting {svc.address} on {_hosts(svc)}; Ctrl-C or SIGTERM stops it", err=True
        )
        if svc.settings.metrics_port is not None:
            where = f"{svc.settings.metrics_bind}:{svc.settings.metrics_port}"
            typer.echo(f"gear serve: /metrics, /livez and /readyz on {where}", err=True)
        # run_forever connects, serves, and on SIGINT/SIGTERM stops consuming, lets handlers in flight
        # finish (GEAR_DRAIN_TIMEOUT) and closes the connection.
        await svc.run_forever()
        return svc

    configure_logging(log_level(level))
    with map_errors():
        svc = gear.run(main())
    typer.echo(f"gear serve: {svc.address} stopped", err=True)


def _hosts(svc: gear.Service) -> str:
    return ", ".join(_masked(u) for u in svc.settings.url)


def register(app: typer.Typer) -> None:
    """Add ``gear serve`` to ``app``."""
    app.command("serve")(serve)
