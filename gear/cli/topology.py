"""``gear topology``: what one instance declares on the broker."""

from __future__ import annotations

from typing import Annotated

import typer

from gear import Settings, Topology
from gear.base.limits import MAX_SECONDS
from gear.cli.options import JsonOpt
from gear.cli.output import ExitCode, Renderer, fail

__all__ = ("register", "topology")


def topology(
    type_: Annotated[str, typer.Argument(metavar="TYPE", help="Service TYPE, e.g. REPO.")],
    host: Annotated[
        str | None,
        typer.Argument(metavar="HOST", help="Instance HOST (default: this machine's short host name)."),
    ] = None,
    exchange: Annotated[str, typer.Option(help="The topic exchange.")] = "gear",
    quorum: Annotated[bool, typer.Option(help="Declare the shared TYPE queue as a quorum queue.")] = False,
    instance_queue_ttl: Annotated[
        float,
        typer.Option(
            min=0.001,
            max=7 * MAX_SECONDS,
            help="Seconds the TYPE.HOST queue outlives its instance (x-expires).",
        ),
    ] = 600.0,
    client: Annotated[
        bool, typer.Option("--client", help="A calling-only instance (like the CLI): no shared queue.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Show the exchange, queues and bindings that instance TYPE.HOST declares (no broker needed)."""
    out = Renderer(as_json)
    try:
        topo = Topology.for_service(
            type_,
            host or Settings().host,
            exchange=exchange,
            quorum=quorum,
            instance_queue_ttl=instance_queue_ttl,
            serve=not client,
        )
    except ValueError as exc:
        fail(str(exc), ExitCode.USAGE, out)
    out.document(topo.as_dict())
    out.line(f"exchange  {topo.exchange.name} ({topo.exchange.type}, durable={topo.exchange.durable})")
    out.line()
    rows = []
    for queue in topo.queues:
        role = "shared, round-robin" if queue is topo.type_queue else "this instance only"
        args = ", ".join(f"{k}={v}" for k, v in sorted(queue.arguments.items())) or "-"
        rows.append([queue.name, role, "yes" if queue.durable else "no", args])
    out.table(["queue", "consumed by", "durable", "arguments"], rows)
    out.line()
    out.table(
        ["binding key", "queue", "delivers"],
        [[b.routing_key, b.queue, _meaning(b.routing_key, topo)] for b in topo.bindings],
    )


def _meaning(key: str, topo: Topology) -> str:
    if topo.type_queue is not None and key == topo.type_queue.name:
        return f"stateless: {key} (one instance)"
    if key == topo.host_queue.name:
        return f"point-to-point: {key}"
    if key.startswith("@all."):
        return "broadcast: *.*"
    return f"multicast: {key.split('.', 1)[0]}.*"


def register(app: typer.Typer) -> None:
    """Add ``gear topology`` to ``app``."""
    app.command("topology")(topology)
