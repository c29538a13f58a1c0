#!/usr/bin/env python3
"""The example-system guide's compose tables, from the figures the compose system tests wrote.

``tests/examples/test_compose_system.py`` (one node) and ``test_compose_cluster_system.py`` (the
``cluster`` profile) note each step a user takes, what it shows and how long it took, in
``$GEAR_TEST_ARTIFACTS/compose-single.json`` and ``compose-cluster.json`` (default ``test-artifacts/``)::

    python3 scripts/compose_figures.py                      # print the tables
    python3 scripts/compose_figures.py --write-docs         # put them into docs/guides/example-system.md
    python3 scripts/compose_figures.py --run --write-docs   # run the two test modules first, alone

``--run`` runs them under ``scripts/docker_engine.py run --images`` (the engine and the local images,
started and built if needed), one test at a time, with ``.venv``'s Python. Each table goes between its
``<!-- compose:NAME -->`` and ``<!-- /compose:NAME -->`` markers; the rest of the page is left as it
is. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ("NAMES", "PAGE", "read_figures", "table", "write_docs")

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guides" / "example-system.md"
NAMES = ("single", "cluster")
TESTS = ("tests/examples/test_compose_system.py", "tests/examples/test_compose_cluster_system.py")


def artifacts() -> Path:
    return Path(os.environ.get("GEAR_TEST_ARTIFACTS", ROOT / "test-artifacts"))


def read_figures(name: str, directory: Path | None = None) -> dict[str, object]:
    """The figures of one run (``compose-NAME.json``).

    Raises:
        SystemExit: if the file is missing (the tests did not run).
    """
    path = (directory or artifacts()) / f"compose-{name}.json"
    if not path.is_file():
        raise SystemExit(f"{path}: missing; run the compose tests first (--run)")
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def _seconds(value: object) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def table(figures: dict[str, object]) -> str:
    """One run's steps as a Markdown table, with a line saying where the figures come from."""
    rows = ["| step | command | what you see | time |", "|---|---|---|---|"]
    steps = figures["steps"]
    assert isinstance(steps, list)
    for step in steps:
        seen = str(step["seen"]).replace("|", "\\|")
        rows.append(f"| {step['step']} | `{step['command']}` | {seen} | {_seconds(step['seconds'])} |")
    load = figures.get("load") or [0.0]
    assert isinstance(load, list)
    source = "test_compose_system.py" if figures["name"] == "single" else "test_compose_cluster_system.py"
    rows.append("")
    rows.append(
        f"Measured by `tests/examples/{source}` on {str(figures['written'])[:10]} with {figures['compose']} "
        f"and the RabbitMQ image `{figures['rabbitmq_image'] or 'rabbitmq:4-management'}`, on "
        f"{figures['cpus']} CPUs at load {load[0]:.1f} (`python3 scripts/compose_figures.py --run "
        "--write-docs` measures again)."
    )
    return "\n".join(rows)


def write_docs(tables: dict[str, str], page: Path = PAGE) -> None:
    """Replace what stands between each table's markers in ``page``.

    Raises:
        SystemExit: if a table's markers are missing.
    """
    content = page.read_text()
    for name, text in tables.items():
        begin, end = f"<!-- compose:{name} -->", f"<!-- /compose:{name} -->"
        if begin not in content or end not in content:
            raise SystemExit(f"{page}: no {begin} ... {end} markers")
        head, rest = content.split(begin, 1)
        _, tail = rest.split(end, 1)
        content = f"{head}{begin}\n{text}\n{end}{tail}"
    page.write_text(content)


def run_tests() -> int:
    """The two compose test modules alone, under the engine script; returns pytest's exit status."""
    python = ROOT / ".venv" / "bin" / "python"
    env = {**os.environ, "GEAR_TEST_CONTAINERS": "1", "GEAR_TEST_SLOW": "1"}
    env.pop("GEAR_TEST_AMQP_URL", None)
    command = [sys.executable, str(ROOT / "scripts" / "docker_engine.py"), "run", "--images", "--"]
    pytest = [str(python), "-m", "pytest", *TESTS, "-n", "0", "-p", "no:cacheprovider"]
    return subprocess.call([*command, *pytest], cwd=ROOT, env=env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--run", action="store_true", help="run the compose system tests first")
    parser.add_argument("--write-docs", action="store_true", help="update docs/guides/example-system.md")
    args = parser.parse_args(argv)
    if args.run and (status := run_tests()) != 0:
        print(f"the compose tests failed (exit {status}); the docs are left as they are", file=sys.stderr)
        return status
    tables = {name: table(read_figures(name)) for name in NAMES}
    if args.write_docs:
        write_docs(tables)
        print(f"wrote {', '.join(tables)} into {PAGE.relative_to(ROOT)}")
    else:
        print("\n\n".join(tables.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
