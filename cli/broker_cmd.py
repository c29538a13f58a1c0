"""``gear broker``: run the reference AMQP 0-9-1 broker in the foreground."""

from __future__ import annotations

import asyncio
import re
from typing import Annotated, Any

import typer

from cli.options import LogLevelOpt, log_level
from cli.output import ExitCode, configure_logging, fail
from cli.signals import run_until_signal

__all__ = ("broker", "parse_watermark", "register")

_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1024, "mi": 1024**2, "gi": 1024**3}


def parse_watermark(text: str) -> float | int:
    """``0.4`` (a fraction of RAM, as RabbitMQ's ``vm_memory_high_watermark``) or bytes: ``200MB``, ``1GiB``.

    Raises:
        typer.BadParameter: for anything else.
    """
    value = text.strip()
    try:
        fraction = float(value)
    except ValueError:
        fraction = None
    if fraction is not None and "." in value:
        if not 0 < fraction <= 1:
            raise typer.BadParameter(
                "a fraction of RAM must be in (0, 1]", param_hint="--memory-high-watermark"
            )
        return fraction
    match = re.fullmatch(r"(\d+)\s*([kmg]i?)?b?", value.lower())
    if not match or int(match.group(1)) == 0:
        raise typer.BadParameter(
            "expected a fraction of RAM (0.4) or a size in bytes (500000000, 200MB, 1GiB)",
            param_hint="--memory-high-watermark",
        )
    return int(match.group(1)) * _UNITS[match.group(2) or ""]


def broker(
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port; 0 picks a free one.")] = 5672,
    bind: Annotated[
        str, typer.Option(help="Interface to listen on (0.0.0.0 for every interface).")
    ] = "127.0.0.1",
    memory_high_watermark: Annotated[
        str | None,
        typer.Option(
            help="When the messages held exceed this, publishers get connection.blocked: a fraction of RAM "
            "(0.4) or a size (200MB, 1GiB).",
            show_default=False,
        ),
    ] = None,
    max_connections: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="At this many connections, new sockets are accepted but never answered, like RabbitMQ "
            "at its socket limit (to test clients' handshake timeouts).",
            show_default=False,
        ),
    ] = None,
    level: LogLevelOpt = "WARNING",
) -> None:
    """Run Gear's reference broker (AMQP 0-9-1) in the foreground until Ctrl-C or SIGTERM.

    Messages live in memory only: queues, bindings and messages are lost when it stops, even the ones
    declared durable or published as persistent. Use RabbitMQ for anything that must survive a restart
    or span several machines.
    """
    from gear.broker import BrokerConfig, serve

    configure_logging(log_level(level))
    options: dict[str, Any] = {"host": bind, "port": port}
    if memory_high_watermark is not None:
        options["memory_high_watermark"] = parse_watermark(memory_high_watermark)
    if max_connections is not None:
        options["max_connections"] = max_connections
    try:
        config = BrokerConfig(**options)
    except ValueError as exc:
        fail(str(exc), ExitCode.USAGE)

    def ready(url: str) -> None:
        typer.echo(f"gear broker: listening on {url} (AMQP 0-9-1; messages in memory only). Ctrl-C to stop.")

    try:
        asyncio.run(run_until_signal(serve(config, on_ready=ready)))
    except OSError as exc:
        fail(f"cannot listen on {bind}:{port}: {exc.strerror or exc}", ExitCode.CONNECT)
    typer.echo("gear broker: stopped")


def register(app: typer.Typer) -> None:
    """Add ``gear broker`` to ``app``."""
    app.command("broker")(broker)
