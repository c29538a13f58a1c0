"""``gear call``, ``gear cast``, ``gear gather`` and ``gear nodes``: one message, and what came back.

The ``run_*`` coroutines are shared with ``gear send``, which only spells the address differently.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

import typer

import gear
from gear import Address
from gear.base.limits import MAX_COUNT
from gear.cli.client import CLI_TYPE, Target, connect
from gear.cli.options import (
    CastTimeoutOpt,
    DataFileOpt,
    DataOpt,
    ExchangeOpt,
    GatherTimeoutOpt,
    JsonOpt,
    MethodArg,
    PingTimeoutOpt,
    TimeoutOpt,
    TraceOpt,
    UrlOpt,
    load_payload,
    target,
)
from gear.cli.output import ExitCode, Renderer, fail, map_errors

__all__ = ("PING_METHOD", "register", "run_call", "run_cast", "run_gather")

PING_METHOD = "gear.ping"
"""The method every Service answers on its own; `gear nodes` and gather's census use it."""


def _address_arg(forms: str) -> Any:
    """The ADDRESS argument, with help that lists only the address forms the command takes."""
    return typer.Argument(metavar="ADDRESS", help=forms, show_default=False)


OneAddressArg = Annotated[
    str, _address_arg("REPO.host2 (that instance) or CTRL (any one CTRL instance, round-robin).")
]
FanoutAddressArg = Annotated[
    str, _address_arg("CTRL.* (every CTRL instance) or *.* (every instance of every type).")
]
AnyAddressArg = Annotated[
    str, _address_arg("REPO.host2 (that instance), CTRL (any one), CTRL.* (every CTRL) or *.* (every one).")
]


def parse_address(text: str, out: Renderer) -> Address:
    """Parse ``text`` or end the command with exit code 2."""
    try:
        return Address.parse(text)
    except ValueError as exc:
        fail(str(exc), ExitCode.USAGE, out)


def run_call(address: Address, method: str, payload: Any, to: Target, out: Renderer) -> None:
    """Call ``method`` on one instance and print the result."""
    if address.is_fanout:
        fail(
            f"{address} reaches several instances: use `gear gather` (or --call with send)",
            ExitCode.USAGE,
            out,
        )

    async def main() -> tuple[Any, float]:
        async with connect(to) as svc:
            started = time.monotonic()
            result = await svc.rpc.call(str(address), method, payload, timeout=to.timeout)
            return result, time.monotonic() - started

    with map_errors(out):
        result, elapsed = gear.run(main())
    out.document({"ok": True, "address": str(address), "method": method, "result": result})
    out.line(f"{address} answered {method} in {elapsed * 1000:.0f} ms:")
    out.line(out.value(result))


def run_cast(address: Address, method: str, payload: Any, to: Target, out: Renderer) -> None:
    """Send ``method`` without waiting for a reply; returns once the broker confirmed it.

    A cast nobody is bound for is republished until the timeout, then fails with exit code 5.
    """

    async def main() -> None:
        async with connect(to) as svc:
            await svc.rpc.cast(str(address), method, payload, retry_budget=to.timeout)

    with map_errors(out):
        gear.run(main())
    out.document({"ok": True, "address": str(address), "method": method, "sent": True})
    out.line(
        f"sent {method} to {address} (routing key {address.routing_key!r}; "
        "confirmed by the broker, no reply expected)"
    )


async def _census(
    svc: Any,
    address: Address,
    timeout: float,  # noqa: ASYNC109 - the gather deadline
) -> list[str] | None:
    """Who is alive behind a fan-out ``address``, by ``gear.ping``; ``None`` if nobody could be asked."""
    try:
        replies = await svc.rpc.gather(str(address), PING_METHOD, {}, timeout=timeout)
    except Exception:
        return None
    # Any reply proves the instance is alive, even an error from one that lacks the built-in ping.
    return sorted({str(r.sender) for r in replies if not _is_cli(str(r.sender))})


def _is_cli(sender: str) -> bool:
    return sender.split(".", 1)[0] == CLI_TYPE


def run_gather(
    address: Address,
    method: str,
    payload: Any,
    to: Target,
    expected: int | None,
    out: Renderer,
) -> None:
    """Send ``method`` to every instance behind ``address`` and print who answered what.

    Alongside the request, a ``gear.ping`` census lists the live instances, so the table also shows who
    is alive but did not answer in time. Exit code 4 if someone did not answer (or fewer than
    ``expected``), 6 if someone answered with an error.
    """
    if not address.is_fanout:
        fail(f"{address} reaches one instance: use `gear call`", ExitCode.USAGE, out)

    async def main() -> tuple[gear.Replies, list[str] | None, str]:
        async with connect(to) as svc:
            broker = _broker_of(svc)
            gathered = svc.rpc.gather(str(address), method, payload, timeout=to.timeout, expected=expected)
            if method == PING_METHOD:
                return await gathered, None, broker
            census = asyncio.ensure_future(_census(svc, address, to.timeout))
            try:
                replies = await gathered
                if not replies.routed or (expected is not None and len(replies) >= expected):
                    return replies, None, broker  # nobody there, or everyone expected answered
                return replies, await census, broker
            finally:
                census.cancel()

    with map_errors(out):
        gathered, alive, broker = gear.run(main())
    if not gathered.routed:
        fail(_nobody_there(address, to, broker), ExitCode.UNROUTABLE, out)
    replies = [r for r in gathered if not _is_cli(str(r.sender))]
    answered = {str(r.sender) for r in replies}
    missing = sorted(set(alive or ()) - answered)
    errors = [r for r in replies if r.error is not None]

    rows = [
        {
            "sender": str(r.sender),
            "ok": r.error is None,
            "result": r.result if r.error is None else None,
            "error": None if r.error is None else _error_dict(r.error),
        }
        for r in sorted(replies, key=lambda r: str(r.sender))
    ]
    problem = _gather_problem(method, address, to.timeout, len(replies), len(errors), missing, expected)
    document: dict[str, Any] = {
        "ok": problem is None,
        "address": str(address),
        "method": method,
        "replies": rows,
        "missing": missing,
        "expected": expected,
    }
    if problem is not None:
        document["error"] = {"type": "Error", "message": problem[0], "exit_code": int(problem[1])}
    out.document(document)
    table: list[list[str]] = [
        [
            str(row["sender"]),
            "ok" if row["ok"] else "error",
            out.value(row["result"]) if row["ok"] else _error_text(row),
        ]
        for row in rows
    ]
    table += [[sender, "no reply", f"alive, but no answer within {to.timeout:g}s"] for sender in missing]
    if table:  # else the error line says it all
        out.table(["instance", "status", "result"], table)
        out.line(
            f"{len(replies)} replied, {len(errors)} with an error, {len(missing)} did not answer in time"
        )
    if problem is not None:
        if not out.as_json:
            typer.echo(f"gear: {problem[0]}", err=True)
        raise typer.Exit(int(problem[1]))


def _gather_problem(
    method: str,
    address: Address,
    timeout: float,
    replied: int,
    errors: int,
    missing: list[str],
    expected: int | None,
) -> tuple[str, ExitCode] | None:
    """What went wrong in a gather, as its line and exit code; ``None`` when every instance answered."""
    if not replied and not missing:
        return f"nobody answered {method} on {address} within {timeout:g}s", ExitCode.TIMEOUT
    if not replied or missing or (expected is not None and replied < expected):
        what = f"{replied} of {expected}" if expected is not None else f"{replied} replies"
        return f"{method} on {address}: {what} within {timeout:g}s", ExitCode.TIMEOUT
    if errors:
        return f"{errors} instance(s) answered {method} with an error", ExitCode.REMOTE
    return None


def _broker_of(svc: gear.Service) -> str:
    """The broker the CLI's instance is connected to (URL without password)."""
    return str(svc.health().get("broker") or "the broker")


def _nobody_there(address: Address, to: Target, broker: str) -> str:
    """The line for a fan-out the broker returned: no instance is bound for ``address``."""
    who = f"no {address.type} instance" if address.type else "no Gear instance"
    exchange = "" if to.exchange == "gear" else f", exchange {to.exchange!r}"
    return f"{who} on {broker}{exchange} (nothing is bound for {address}: the broker returned the request)"


def _error_dict(error: Any) -> dict[str, Any]:
    if isinstance(error, BaseException):
        return {
            "type": getattr(error, "type", type(error).__name__),
            "message": getattr(error, "message", str(error)),
            "details": getattr(error, "details", {}),
        }
    return dict(error) if isinstance(error, dict) else {"type": "Error", "message": str(error), "details": {}}


def _error_text(row: dict[str, Any]) -> str:
    error = row["error"]
    return f"{error['type']}: {error['message']}" if error["message"] else str(error["type"])


def call(
    address: OneAddressArg,
    method: MethodArg,
    data: DataOpt = None,
    data_file: DataFileOpt = None,
    timeout: TimeoutOpt = 5.0,
    url: UrlOpt = None,
    exchange: ExchangeOpt = "gear",
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Call METHOD on one instance (REPO.host2) or any one instance (CTRL) and print its reply."""
    out = Renderer(as_json)
    payload = load_payload(data, data_file)
    run_call(parse_address(address, out), method, payload, target(url, exchange, timeout, trace), out)


def cast(
    address: AnyAddressArg,
    method: MethodArg,
    data: DataOpt = None,
    data_file: DataFileOpt = None,
    timeout: CastTimeoutOpt = 5.0,
    url: UrlOpt = None,
    exchange: ExchangeOpt = "gear",
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send METHOD to any address without waiting for a reply (fire-and-forget, broker-confirmed)."""
    out = Renderer(as_json)
    payload = load_payload(data, data_file)
    run_cast(parse_address(address, out), method, payload, target(url, exchange, timeout, trace), out)


def gather(
    address: FanoutAddressArg,
    method: MethodArg,
    data: DataOpt = None,
    data_file: DataFileOpt = None,
    timeout: GatherTimeoutOpt = 2.0,
    expected: Annotated[
        int | None,
        typer.Option(min=1, max=MAX_COUNT, help="Stop as soon as this many replied.", show_default=False),
    ] = None,
    url: UrlOpt = None,
    exchange: ExchangeOpt = "gear",
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Call METHOD on every instance of CTRL.* or *.* and show who answered what, and who did not."""
    out = Renderer(as_json)
    run_gather(
        parse_address(address, out),
        method,
        load_payload(data, data_file),
        target(url, exchange, timeout, trace),
        expected,
        out,
    )


def nodes(
    type_: Annotated[
        str | None, typer.Argument(metavar="TYPE", help="Only this TYPE (default: every type).")
    ] = None,
    timeout: PingTimeoutOpt = 1.0,
    url: UrlOpt = None,
    exchange: ExchangeOpt = "gear",
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the live instances: a broadcast (or TYPE.*) gear.ping, and who answered it in time.

    Exit code 5 when no instance is bound for the address at all, 4 when some are but none answered.
    """
    out = Renderer(as_json)
    address = parse_address(f"{type_}.*" if type_ else "*.*", out)
    to = target(url, exchange, timeout, trace)

    async def main() -> tuple[gear.Replies, str]:
        async with connect(to) as svc:
            return await svc.rpc.gather(str(address), PING_METHOD, {}, timeout=to.timeout), _broker_of(svc)

    with map_errors(out):
        replies, broker = gear.run(main())
    if not replies.routed:
        fail(_nobody_there(address, to, broker), ExitCode.UNROUTABLE, out)
    found = sorted((r for r in replies if not _is_cli(str(r.sender))), key=lambda r: str(r.sender))
    if not found:
        fail(f"no instance answered {PING_METHOD} on {address} within {to.timeout:g}s", ExitCode.TIMEOUT, out)
    info = {str(r.sender): _ping_info(r) for r in found}
    out.document({"ok": True, "nodes": [{"instance": k, "info": v} for k, v in info.items()]})
    out.table(
        ["instance", "state", "broker", "pid", "uptime", "reconnects", "methods"],
        [_node_row(k, v, out) for k, v in info.items()],
    )
    out.line(f"{len(found)} instance(s) alive")


def _node_row(instance: str, info: Any, out: Renderer) -> list[str]:
    """One line of `gear nodes`: the built-in ping's fields, or whatever the instance said."""
    if not isinstance(info, dict) or "pid" not in info:
        return [instance, "-", "-", "-", "-", "-", out.value(info)]
    uptime = info.get("uptime_s")
    return [
        instance,
        str(info.get("state", "-")),
        str(info.get("broker") or "-"),
        str(info.get("pid", "-")),
        f"{uptime:.0f}s" if isinstance(uptime, int | float) else "-",
        str(info.get("reconnects", "-")),
        ", ".join(str(m) for m in info.get("methods", [])) or "-",
    ]


def _ping_info(reply: Any) -> Any:
    """What an instance said about itself; an error reply still proves it is alive."""
    if reply.error is None:
        return reply.result
    error = _error_dict(reply.error)
    if error["type"] == "MethodNotFound":
        return "alive (it has no built-in gear.ping, so no details)"
    return {"error": f"{error['type']}: {error['message']}"}


def register(app: typer.Typer) -> None:
    """Add ``call``, ``cast``, ``gather`` and ``nodes`` to ``app``."""
    app.command("call")(call)
    app.command("cast")(cast)
    app.command("gather")(gather)
    app.command("nodes")(nodes)
