"""``gear prune``: the durable TYPE queues no instance serves and the exchanges bound to nothing."""

from __future__ import annotations

from typing import Annotated

import typer

import gear
from gear.cli.options import ExchangeOpt, JsonOpt, UrlOpt, urls
from gear.cli.output import ExitCode, Renderer, fail, map_errors
from gear.ops.management import Management, ManagementUnavailableError
from gear.ops.prune import Removal, Retired, find_retired, remove_retired

__all__ = ("prune", "register")


def prune(
    url: UrlOpt = None,
    exchange: ExchangeOpt = "gear",
    management: Annotated[
        str | None,
        typer.Option(
            help="The management API's base URL (default: the broker's host, port 15672; the reference "
            "broker's is its --management-port).",
            show_default=False,
        ),
    ] = None,
    remove: Annotated[
        bool, typer.Option("--remove", help="Remove what is listed (default: list only).")
    ] = False,
    with_messages: Annotated[
        bool,
        typer.Option("--with-messages", help="With --remove: remove queues that still hold messages too."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """List the durable TYPE queues that no instance serves (with their messages) and the exchanges
    bound to nothing; with --remove, delete them.

    A TYPE queue is the shared queue of a service type: durable, bound from EXCHANGE with its own name.
    Its instances' TYPE.HOST queues expire by themselves; it does not, so every type ever started on a
    broker (tests, demos, renamed services) stays there. The list comes from the management API; removal
    uses AMQP and lets the broker refuse a queue that has a consumer again (it is served: kept) and,
    without --with-messages, one that holds messages (they would be lost). Exit code 10 when something
    listed was kept.
    """
    out = Renderer(as_json)
    amqp_url = urls(url)[0]
    api = Management.for_amqp_url(amqp_url, management)
    try:
        found = find_retired(api, exchange)
    except ManagementUnavailableError as exc:
        fail(f"{exc} (gear prune reads the management API: --management URL)", ExitCode.CONNECT, out)
    if not remove:
        out.document({"ok": True, "removed": False, "retired": [_item(r) for r in found]})
        _listing(found, out)
        return
    with map_errors(out):
        done = gear.run(remove_retired(amqp_url, found, with_messages=with_messages))
    kept = [d for d in done if not d.removed]
    out.document({"ok": not kept, "removed": True, "results": [_result(d) for d in done]})
    for d in done:
        out.line(f"{'removed' if d.removed else 'kept'} {d.item.kind} {d.item.name}{_why(d)}")
    if not done:
        out.line("nothing to remove")
    if kept:
        fail(f"{len(kept)} of {len(done)} kept (see above)", ExitCode.CHECK_FAILED, None if as_json else out)


def _listing(found: list[Retired], out: Renderer) -> None:
    if not found:
        out.line("nothing retired: every TYPE queue has a consumer, every exchange a binding")
        return
    out.table(
        ["kind", "name", "messages"],
        [[r.kind, r.name, str(r.messages) if r.kind == "queue" else "-"] for r in found],
    )
    out.line()
    out.line(
        f"{len(found)} retired (dry run: --remove removes them; queues with messages need --with-messages)"
    )


def _why(done: Removal) -> str:
    return f": {done.reason}" if done.reason else ""


def _item(r: Retired) -> dict[str, object]:
    return {"kind": r.kind, "name": r.name, "messages": r.messages}


def _result(d: Removal) -> dict[str, object]:
    return {**_item(d.item), "removed": d.removed, "reason": d.reason}


def register(app: typer.Typer) -> None:
    """Add ``gear prune`` to ``app``."""
    app.command("prune")(prune)
