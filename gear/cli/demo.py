"""``gear demo``: the example WEB/REPO/CTRL system, every routing form, in one command.

The system and its script are an example (``gear/examples/``), not part of the CLI: the command loads the
demo's entry point by its import path, :data:`DEMO_ENTRY`, and calls it. Without ``--url`` it starts the
reference broker in this process on a free port; with ``--url`` it runs the same against a RabbitMQ,
under TYPE names and an exchange of its own so that services already running there
(``docker compose up``) neither see its messages nor take its requests.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any

import typer

import gear
from gear.cli.options import JsonOpt, TraceOpt, given_urls
from gear.cli.output import ExitCode, Renderer, fail, map_errors
from gear.cli.signals import run_until_signal
from gear.cli.traces import run_analysis

__all__ = ("DEMO_ENTRY", "SERVE_ENTRY", "demo", "register")

DEMO_ENTRY = "gear.examples.demo:run"
"""``module:function`` of the demo: ``run(urls, *, repos, ctrls, trace, say)`` returning
``{check: passed}``."""
SERVE_ENTRY = "gear.examples.demo:serve"
"""``module:function`` of ``--serve``: ``serve(urls, *, repos, ctrls, http_port, bind, trace, say)``,
running until cancelled."""


def _entry(path: str) -> Callable[..., Coroutine[Any, Any, Any]]:
    """The function named by ``module:function``."""
    module, _, name = path.partition(":")
    func: Callable[..., Coroutine[Any, Any, Any]] = getattr(importlib.import_module(module), name)
    return func


def demo(
    url: Annotated[
        list[str] | None,
        typer.Option(
            "--url",
            "-u",
            help="Run against this broker (e.g. a RabbitMQ) instead of an embedded reference broker.",
            show_default=False,
        ),
    ] = None,
    repos: Annotated[int, typer.Option(min=1, max=9, help="How many REPO instances.")] = 3,
    ctrls: Annotated[int, typer.Option(min=1, max=9, help="How many CTRL instances.")] = 2,
    trace: TraceOpt = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Trace the demo into DIR/traces, analyse it with Spark (needs gear-rpc[spark]) and write "
            "DIR/report.html.",
            show_default=False,
            file_okay=False,
        ),
    ] = None,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Keep the system running until Ctrl-C instead of walking through it, and print the "
            "broker's URL, WEB's HTTP address and commands to try.",
        ),
    ] = False,
    http_port: Annotated[
        int,
        typer.Option(
            min=0, max=65535, help="With --serve: WEB's HTTP port (a free one if it is taken; 0: any)."
        ),
    ] = 8080,
    bind: Annotated[
        str, typer.Option(help="With --serve: the interface WEB's HTTP front end listens on.")
    ] = "127.0.0.1",
    as_json: JsonOpt = False,
) -> None:
    """Start REPO, CTRL and WEB instances and walk through p2p, stateless, multicast and broadcast.

    With --serve they keep running (on an embedded broker unless --url is given) so that you can try
    `gear send ...`, `gear nodes` and WEB's HTTP front end yourself; Ctrl-C stops them.
    """
    out = Renderer(as_json)
    if serve:
        if report is not None or as_json:
            fail("--serve runs until Ctrl-C: it takes neither --report nor --json", ExitCode.USAGE)
        _serve(given_urls(url), repos=repos, ctrls=ctrls, http_port=http_port, bind=bind, trace=trace)
        return
    lines: list[str] = []
    if report is not None:  # the report's own traces, whatever --trace or GEAR_TRACE say
        traces = report / "traces"
        if traces.exists():
            shutil.rmtree(traces)  # one run per report: older traces would mix into it
        trace = str(traces)

    def say(text: str) -> None:
        lines.append(text)
        out.line(text)

    run = _entry(DEMO_ENTRY)
    with map_errors(out):
        checks = gear.run(run(given_urls(url), repos=repos, ctrls=ctrls, trace=trace, say=say))
    failed = [name for name, passed in checks.items() if not passed]
    document: dict[str, Any] = {"ok": not failed, "checks": checks, "report": lines}
    if trace:
        document["traces"] = trace
    if report is not None:
        summary = run_analysis(str(report / "traces"), str(report), out)
        document["html"] = summary.get("report") if isinstance(summary, dict) else None
    out.document(document)
    if failed:
        fail(f"demo: {len(failed)} check(s) did not hold: {', '.join(failed)}", ExitCode.INTERNAL, None)
    say(f"done: {len(checks)} checks passed; every address form routed as the table says")
    if trace and report is None:
        say(f"traces: {trace}  (analyse them: gear traces analyze {trace} --out DIR)")
    if report is not None:
        say(f"report: {document['html']}  (tables and summary.json in {report})")


def _serve(urls: list[str], **options: Any) -> None:
    """Run ``SERVE_ENTRY`` until SIGINT or SIGTERM, printing its lines as they come."""

    def say(text: str) -> None:
        typer.echo(text)

    run = _entry(SERVE_ENTRY)
    with map_errors():
        gear.run(run_until_signal(run(urls, say=say, **options)))
    typer.echo("gear demo: stopped")


def register(app: typer.Typer) -> None:
    """Add ``gear demo`` to ``app``."""
    app.command("demo")(demo)
