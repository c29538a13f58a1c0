"""The ``gear`` command: a thin typer layer over Gear's public API.

Each command group lives in its own module and registers itself on :data:`app`; behaviour lives in the
SDK (``gear``), the reference broker (``gear.broker``) and the examples (``examples``), never here.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from gear.cli import (
    broker_cmd,
    contract_cmd,
    dead_letters,
    demo,
    doctor,
    prune,
    rpc_commands,
    send,
    serve,
    topology,
    traces,
)
from gear.cli.output import EXIT_CODES_HELP, configure_logging
from gear.cli.usage import GearGroup
from gear.version import DISTRIBUTION, version

__all__ = ("app", "main")

app = typer.Typer(
    name="gear",
    cls=GearGroup,  # usage errors end in Gear's one line (and a JSON document with --json)
    help=(
        "Gear: RPC over RabbitMQ with four address forms.\n\n"
        "REPO.host2 = one instance (point-to-point), CTRL = any one instance (round-robin), "
        "CTRL.* = every CTRL instance (multicast), *.* = every instance (broadcast).\n\n"
        "Connection settings come from options or the environment: GEAR_URL (broker URL, several "
        "separated by commas), GEAR_TYPE and GEAR_HOST (for `gear serve`)."
    ),
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"{DISTRIBUTION} {version()}")
        raise typer.Exit()


@app.callback()
def _options(
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            max=3,
            clamp=True,
            help="Show log messages (-v warnings, -vv debug).",
        ),
    ] = 0,
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help=f"Print {DISTRIBUTION}'s version and exit.",
        ),
    ] = False,
) -> None:
    levels = {0: logging.CRITICAL, 1: logging.WARNING, 2: logging.INFO}
    configure_logging(levels.get(verbose, logging.DEBUG))


app.add_typer(send.app, name="send")
rpc_commands.register(app)
serve.register(app)
broker_cmd.register(app)
topology.register(app)
dead_letters.register(app)
doctor.register(app)
prune.register(app)
demo.register(app)
app.add_typer(traces.app, name="traces")
app.add_typer(contract_cmd.app, name="contract")


def main() -> None:
    """Entry point for ``python -m gear.cli``."""
    app()
