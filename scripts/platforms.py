#!/usr/bin/env python3
"""The docs' platform table, from a CI log: which Python and RabbitMQ each step ran, and how it went.

    bash .ci/run 2>&1 | tee ci.log
    python3 scripts/platforms.py ci.log                  # print the table
    python3 scripts/platforms.py ci.log --write-docs     # put it between the platform markers of
                                                         # docs/reference/platforms.md

Each step of ``.ci/run`` starts with ``== NAME`` and ends with ``== NAME: N s (exit S; ...)``. Inside a
step, pytest's header names the Python (``platform linux -- Python 3.12.1``), the summary line gives
the result, and the suite's own summary names the RabbitMQ its rabbitmq tests ran against
(``RabbitMQ under test: RabbitMQ 4.3.6 (container ... (gear-rabbitmq:forky-...) ...)``). Steps without
pytest (making a venv) are left out. Standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ("PAGE", "Step", "read_steps", "table", "write_docs")

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "platforms.md"
"""The page with the platform markers."""
BEGIN, END = "<!-- platforms:begin -->", "<!-- platforms:end -->"

_START = re.compile(r"^== (?P<name>.+?)$")
_END = re.compile(r"^== (?P<name>.+): (?P<seconds>\d+) s \(exit (?P<status>\d+)")
_PYTHON = re.compile(r"^platform \S+ -- Python (?P<version>\d+\.\d+\.\d+)")
_RESULT = re.compile(
    r"^=* ?(?P<result>(?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|deselected)(?:, )?)+)"
)
_RABBITMQ = re.compile(r"^RabbitMQ under test: RabbitMQ (?P<version>[\d.]+) \((?P<where>.*)\)$")
_IMAGE = re.compile(r"\((?P<image>[\w.-]+:[\w.-]+)\)")


@dataclass
class Step:
    """One pytest step of a CI run."""

    name: str
    python: str = ""
    rabbitmq: str = ""
    result: str = ""
    seconds: int | None = None
    status: int | None = None


def read_steps(log: str) -> list[Step]:
    """The steps of a CI log that ran pytest, in order."""
    steps: list[Step] = []
    current: Step | None = None
    for line in log.splitlines():
        line = line.rstrip()
        if (end := _END.match(line)) and current is not None and end.group("name") == current.name:
            current.seconds, current.status = int(end.group("seconds")), int(end.group("status"))
            if current.python:
                steps.append(current)
            current = None
        elif start := _START.match(line):
            current = Step(start.group("name"))
        elif current is None:
            continue
        elif python := _PYTHON.match(line):
            current.python = python.group("version")
        elif rabbitmq := _RABBITMQ.match(line):
            current.rabbitmq = _describe(rabbitmq.group("version"), rabbitmq.group("where"))
        elif result := _RESULT.match(line):
            current.result = result.group("result").rstrip(", ")
    return steps


def _describe(version: str, where: str) -> str:
    image = _IMAGE.search(where)
    if where.startswith("container") and image:
        suite = image.group("image").split(":", 1)[1].split("-", 1)[0]
        return f"{version} (container, Debian {suite} package)"
    return f"{version} ({where.split(' ', 1)[0]})" if where else version


def table(steps: list[Step]) -> str:
    """The steps as a Markdown table."""
    rows = ["| CI step | Python | RabbitMQ (rabbitmq tests) | result | time |", "|---|---|---|---|---|"]
    for step in steps:
        status = "" if step.status in (0, None) else f" (exit {step.status})"
        seconds = "?" if step.seconds is None else f"{step.seconds} s"
        rows.append(
            f"| {step.name} | {step.python} | {step.rabbitmq or '-'} | {step.result}{status} | {seconds} |"
        )
    return "\n".join(rows)


def write_docs(text: str, page: Path = PAGE) -> None:
    """Replace what stands between the platform markers in ``page``.

    Raises:
        SystemExit: if the markers are missing.
    """
    content = page.read_text()
    if BEGIN not in content or END not in content:
        raise SystemExit(f"{page}: no {BEGIN} ... {END} markers")
    head, rest = content.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    page.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("log", type=Path, help="the output of `bash .ci/run`")
    parser.add_argument(
        "--write-docs",
        "--write-readme",
        dest="write_docs",
        action="store_true",
        help="update the platform table in docs/reference/platforms.md",
    )
    args = parser.parse_args(argv)
    steps = read_steps(args.log.read_text(errors="replace"))
    if not steps:
        print(f"{args.log}: no pytest step found (is it the output of .ci/run?)", file=sys.stderr)
        return 1
    text = table(steps)
    print(text)
    if args.write_docs:
        write_docs(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
