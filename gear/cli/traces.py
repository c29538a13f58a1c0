"""``gear traces analyze``: the Spark job over trace files (``gear.pipeline.run_analyze``)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from gear.cli.options import JsonOpt
from gear.cli.output import ExitCode, Renderer, fail, map_errors
from gear.cli.progress import stage_progress

__all__ = ("analyze", "app", "run_analysis")

INSTALL_HINT = "PySpark is not installed: pip install 'gear-rpc[spark]' (Spark also needs Java 17+)"

app = typer.Typer(help="Analyse Gear trace files (JSON lines) with Spark.", no_args_is_help=True)


def _parse_time(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(
            "expected an ISO 8601 time, e.g. 2026-11-22T05:30:00+00:00", param_hint=option
        ) from None


def _parse_conf(items: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--conf")
        found[key.strip()] = value
    return found


def run_analysis(
    path: str,
    out: str,
    render: Renderer,
    *,
    master: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    conf: dict[str, str] | None = None,
) -> Any:
    """Run the Spark job with a progress bar (quiet under ``--json`` or off a terminal); exit with a
    clear message when PySpark or the input is missing."""
    from gear import pipeline

    local = Path(path) if "://" not in path else None
    if local is not None and not local.exists():  # before Spark starts (or is found missing)
        fail(f"no trace files at {path}: no such file or directory", ExitCode.USAGE, render)
    if local is not None and local.is_dir() and next(local.rglob("*.jsonl"), None) is None:
        fail(f"no trace files at {path}: the directory holds no *.jsonl file", ExitCode.USAGE, render)
    with map_errors(render), stage_progress(pipeline.STAGES, quiet=render.as_json) as progress:
        try:
            return pipeline.run_analyze(
                path, out, master=master, since=since, until=until, progress=progress, conf=conf
            )
        except pipeline.SparkMissingError as exc:
            fail(str(exc) or INSTALL_HINT, ExitCode.MISSING_DEPENDENCY, render)
        except FileNotFoundError as exc:
            # the pipeline's message names the path already ("no trace files at PATH")
            fail(str(exc) if path in str(exc) else f"no trace files at {path}: {exc}", ExitCode.USAGE, render)


@app.command()
def analyze(
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH",
            help="A trace file or directory of *.jsonl files (local, or a URL Spark can read).",
        ),
    ],
    out: Annotated[
        str, typer.Option("--out", "-o", help="Directory for the tables, summary.json and report.html.")
    ],
    master: Annotated[
        str | None, typer.Option(help="Spark master URL (default: local mode).", show_default=False)
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only events at or after this ISO 8601 time.", show_default=False)
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Only events before this ISO 8601 time.", show_default=False)
    ] = None,
    conf: Annotated[
        list[str] | None,
        typer.Option(
            "--conf",
            metavar="KEY=VALUE",
            help="A Spark property, e.g. spark.sql.shuffle.partitions=8 (repeatable).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Dependency links, latency percentiles, rates, duplicates, blocked periods and an HTML report."""
    render = Renderer(as_json)
    start, end = _parse_time(since, "--since"), _parse_time(until, "--until")
    properties = _parse_conf(conf or [])
    summary = run_analysis(path, out, render, master=master, since=start, until=end, conf=properties)
    render.document(summary)
    tables = summary.get("tables", {}) if isinstance(summary, dict) else {}
    render.table(
        ["table", "rows"],
        [[name, str(info.get("rows", "?"))] for name, info in tables.items() if isinstance(info, dict)],
    )
    sampling = summary.get("sampling") if isinstance(summary, dict) else None
    if sampling:
        render.line(str(sampling["note"]))
    report = summary.get("report") if isinstance(summary, dict) else None
    render.line(f"report: {report or Path(out, 'report.html')}  (tables in {out})")
