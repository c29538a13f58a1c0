"""``gear dead-letters``: the requests quorum queues dropped after too many deliveries, kept for you."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

import gear
from gear.base.topology import dead_letter_queue
from gear.cli.options import ExchangeOpt, JsonOpt, ReadTimeoutOpt, UrlOpt, urls
from gear.cli.output import Renderer, map_errors
from gear.serving.deadletter import ParkedLetter, list_dead_letters

__all__ = ("dead_letters", "register")


def dead_letters(
    url: UrlOpt = None,
    exchange: ExchangeOpt = "gear",
    limit: Annotated[int, typer.Option(min=1, max=65535, help="Show at most this many, oldest first.")] = 100,
    timeout: ReadTimeoutOpt = 10.0,
    as_json: JsonOpt = False,
) -> None:
    """List the dead letters kept in EXCHANGE.@dead (quorum=True only), leaving them there.

    A request lands there when its quorum queue dropped it after too many deliveries (each time its
    server crashed or lost its connection before answering; the delivery limit is GEAR_DELIVERY_LIMIT,
    20 by default). Its caller was told at once (DeliveryLimitError) if it still waited.
    """
    out = Renderer(as_json)
    queue = dead_letter_queue(exchange)
    with map_errors(out):
        found = gear.run(list_dead_letters(urls(url)[0], exchange=exchange, limit=limit, within=timeout))
    out.document({"ok": True, "queue": queue, "dead_letters": [asdict(d) for d in found]})
    if not found:
        out.line(f"{queue}: no dead letters")
        return
    out.line(f"{queue}: {len(found)} dead letter(s){' (limit reached)' if len(found) == limit else ''}")
    out.line()
    out.table(["dead at", "kind", "method", "from", "request", "queue", "reason", "deliveries"], _rows(found))


def _rows(found: list[ParkedLetter]) -> list[list[str]]:
    return [
        [
            d.dead_at or "?",
            (d.kind or "?").removeprefix("gear."),
            d.method or "?",
            d.sender or "?",
            d.request_id or "?",
            d.queue,
            d.reason,
            "?" if d.deliveries is None else str(d.deliveries),
        ]
        for d in found
    ]


def register(app: typer.Typer) -> None:
    """Add ``gear dead-letters`` to ``app``."""
    app.command("dead-letters")(dead_letters)
