"""``gear demo``: the seed's WEB/REPO/CTRL system, every routing form, in one command.

Without ``--url`` it starts the reference broker in this process on a free port; with ``--url`` it runs
the same against a RabbitMQ, under TYPE names and an exchange of its own so that services already running
there (``docker compose up``) neither see its messages nor take its requests.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

import gear
from cli.options import JsonOpt, TraceOpt
from cli.output import ExitCode, Renderer, fail, map_errors, masked_url
from cli.traces import run_analysis
from examples.scenario import Outcome, run_scenario
from examples.system import Names, running_system

__all__ = ("demo", "register")


@asynccontextmanager
async def _broker(urls: Sequence[str], say: Any) -> AsyncIterator[tuple[list[str], Names]]:
    if urls:
        names = Names.isolated("demo")
        say(f"broker: {', '.join(masked_url(u) for u in urls)}")
        types = f"{names.repo}/{names.ctrl}/{names.web}"
        say(f"        (exchange {names.exchange!r} and TYPEs {types}, so services already running")
        say("        there neither see the demo's messages nor take its requests)")
        yield list(urls), names
        return
    from gear.broker import Broker

    async with Broker(port=0) as server:
        say(f"broker: Gear's reference broker, in this process, at {masked_url(server.url)}")
        yield [server.url], Names()


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
            help="Trace the demo into DIR/traces, analyse it with Spark (needs gear[spark]) and write "
            "DIR/report.html.",
            show_default=False,
            file_okay=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Start REPO, CTRL and WEB instances and walk through p2p, stateless, multicast and broadcast."""
    out = Renderer(as_json)
    lines: list[str] = []
    if report is not None:  # the report's own traces, whatever --trace or GEAR_TRACE say
        traces = report / "traces"
        if traces.exists():
            shutil.rmtree(traces)  # one run per report: older traces would mix into it
        trace = str(traces)

    def say(text: str) -> None:
        lines.append(text)
        out.line(text)

    async def main() -> Outcome:
        say("Gear demo: the seed's WEB/REPO/CTRL system")
        async with (
            _broker(url or [], say) as (urls, names),
            running_system(
                urls,
                repo_hosts=[f"repo{i}" for i in range(1, repos + 1)],
                ctrl_hosts=[f"ctrl{i}" for i in range(1, ctrls + 1)],
                names=names,
                trace=trace,
            ) as system,
        ):
            say("instances: " + " ".join(str(s.address) for s in system.services))
            say("")
            return await run_scenario(system, say)

    with map_errors(out):
        outcome = gear.run(main())
    failed = [name for name, passed in outcome.checks.items() if not passed]
    document: dict[str, Any] = {"ok": outcome.ok, "checks": outcome.checks, "report": lines}
    if trace:
        document["traces"] = trace
    if report is not None:
        summary = run_analysis(str(report / "traces"), str(report), out)
        document["html"] = summary.get("report") if isinstance(summary, dict) else None
    out.document(document)
    if failed:
        fail(f"demo: {len(failed)} check(s) did not hold: {', '.join(failed)}", ExitCode.INTERNAL, None)
    say(f"done: {len(outcome.checks)} checks passed; every address form routed as the table says")
    if trace and report is None:
        say(f"traces: {trace}  (analyse them: gear traces analyze {trace} --out DIR)")
    if report is not None:
        say(f"report: {document['html']}  (tables and summary.json in {report})")


def register(app: typer.Typer) -> None:
    """Add ``gear demo`` to ``app``."""
    app.command("demo")(demo)
