"""``gear broker``: run the reference AMQP 0-9-1 broker in the foreground."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from cli.options import LogLevelOpt, log_level
from cli.output import ExitCode, configure_logging, fail
from cli.signals import run_until_signal

__all__ = ("broker", "register")


def broker(
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port; 0 picks a free one.")] = 5672,
    host: Annotated[str, typer.Option("--bind", help="Address to listen on.")] = "127.0.0.1",
    memory_high_watermark: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Bytes of message bodies held in memory above which publishers get connection.blocked.",
            show_default=False,
        ),
    ] = None,
    level: LogLevelOpt = "WARNING",
) -> None:
    """Run Gear's reference broker (AMQP 0-9-1) until Ctrl-C or SIGTERM.

    Messages live in memory only: they are lost when the broker stops. Use RabbitMQ for anything that
    must survive a restart or needs more than one machine.
    """
    from gear.broker import BrokerConfig, serve

    configure_logging(log_level(level))
    options: dict[str, Any] = {"host": host, "port": port}
    if memory_high_watermark is not None:
        options["memory_high_watermark"] = memory_high_watermark
    config = BrokerConfig(**options)

    def ready(server: Any) -> None:
        typer.echo(
            f"gear broker: listening on {server.url} (AMQP 0-9-1; messages in memory only). Ctrl-C to stop.",
        )

    try:
        asyncio.run(run_until_signal(serve(config, on_ready=ready)))
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", ExitCode.CONNECT)
    typer.echo("gear broker: stopped")


def register(app: typer.Typer) -> None:
    """Add ``gear broker`` to ``app``."""
    app.command("broker")(broker)
