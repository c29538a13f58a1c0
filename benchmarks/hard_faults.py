"""What a node fault costs Gear on a 3-node RabbitMQ cluster, per fault kind and broker release.

Needs the clusters: ``scripts/rabbitmq-cluster start`` (3.10) and ``scripts/rabbitmq-cluster43 start``
(4.3, as root). Each fault runs once under the stream of ``tests/cluster/_rig.py`` (calls with a 10 s
deadline to ``TYPE.s1``, ``TYPE.s2`` and ``TYPE``, persistent casts to ``TYPE``; s1 on the faulted node
unless the fault says otherwise) and gives one row: calls ok/failed, hung, the longest call, how long
after the fault the slowest call was answered, the first success after the fault on each address form,
casts confirmed/lost/run twice/run late (more than 5 s after their confirm).

Usage::

    python benchmarks/hard_faults.py                          # every fault on 4.3 and 3.10
    python benchmarks/hard_faults.py --release 4.3 --faults kill-serving,cut-long
    python benchmarks/hard_faults.py --write-docs             # the table into docs/concepts/clusters.md
    python benchmarks/hard_faults.py --json F; ... --from-json F --write-docs   # measure, then write
    python benchmarks/hard_faults.py --release 4.3 --faults cut-short,cut-long --hedge-shared --json G
    python benchmarks/hard_faults.py --from-json F --from-json G --write-docs  # both runs in one table
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # after the installed gear (PYTHONPATH may name another)

from tests.cluster._cluster import find_cluster  # noqa: E402
from tests.cluster._rig import DEADLINE, FAULTS, run_fault  # noqa: E402

__all__ = ("main",)

PAGE = ROOT / "docs" / "concepts" / "clusters.md"
PAGES = (PAGE, ROOT / "docs" / "concepts" / "failures.md")
"""The pages that show the table (the "before" block is on ``PAGE`` only)."""
BLOCK = "hard-faults"
"""The block of ``PAGE`` the table goes to: ``<!-- BLOCK:begin -->`` ... ``<!-- BLOCK:end -->``."""
HEAD = (
    "| broker | fault | calls ok | failed | hung | longest call s | answered within s "
    "| first success s (TYPE.s1 / TYPE.s2 / TYPE) | casts confirmed | lost | run twice | run late "
    "| calls run twice |"
)


def row_text(release: str, name: str, r: dict[str, Any]) -> str:
    first = " / ".join("-" if v is None else f"{v:.2f}" for v in r["first success s"].values())
    failed = str(r["failed"]) + (
        f" ({', '.join(f'{k} {v}' for k, v in r['errors'].items())})" if r["failed"] else ""
    )
    return (
        f"| {release} | {name} | {r['ok']} | {failed} | {r['hung']} | {r['longest call s']:.2f} "
        f"| {r['answered within s']:.2f} | {first} | {r['casts confirmed']} | {r['casts lost']} "
        f"| {r['casts run twice']} | {r['cast run late']} | {r.get('calls run twice', '-')} |"
    )


def table(rows: list[tuple[str, str, dict[str, Any]]]) -> str:
    sep = "|" + "---|" * HEAD.count(" | ") + "---|"
    return "\n".join([HEAD, sep, *(row_text(rel, name, r) for rel, name, r in rows)])


def write_docs(text: str, page: Path = PAGE, block: str = BLOCK) -> None:
    """Replace what lies between ``block``'s markers in ``page`` with ``text``.

    Raises:
        SystemExit: the page has no such markers.
    """
    begin, end = f"<!-- {block}:begin -->", f"<!-- {block}:end -->"
    content = page.read_text()
    if begin not in content or end not in content:
        raise SystemExit(f"{page}: no {begin} ... {end} markers")
    head, rest = content.split(begin, 1)
    _, tail = rest.split(end, 1)
    page.write_text(f"{head}{begin}\n{text}\n{end}{tail}")


async def amain(args: argparse.Namespace) -> list[tuple[str, str, dict[str, Any]]]:
    rows = []
    for release in args.release.split(","):
        cluster, reason = find_cluster(may_start=False, release=release)
        if cluster is None:
            raise SystemExit(f"RabbitMQ {release}: {reason}")
        names = [n for n in args.faults.split(",") if release in FAULTS[n].releases]
        for name in names:
            print(f"# {release} {name} ...", file=sys.stderr, flush=True)
            began = time.monotonic()
            settings = {"hedge_shared": True} if args.hedge_shared else None
            row = await run_fault(cluster, FAULTS[name], settings=settings)
            print(f"#   {time.monotonic() - began:.0f}s: {json.dumps(row)}", file=sys.stderr, flush=True)
            rows.append((release, f"{name}, hedge_shared" if args.hedge_shared else name, row))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", default="4.3,3.10", help="comma-separated: 4.3, 3.10")
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated: {', '.join(FAULTS)}")
    parser.add_argument("--write-docs", action="store_true", help=f"write the table into {PAGE.name}")
    parser.add_argument("--label", help="what code was measured (default: the version and commit)")
    parser.add_argument(
        "--block", default=BLOCK, help=f"the block of {PAGE.name} to write (hard-faults, hard-faults-before)"
    )
    parser.add_argument(
        "--hedge-shared", action="store_true", help="copy silent calls to TYPE too (hedge_shared=True)"
    )
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    parser.add_argument(
        "--from-json",
        type=Path,
        action="append",
        help="run nothing: print (and --write-docs) the rows --json runs wrote (repeat to join runs)",
    )
    args = parser.parse_args()
    saved_header = ""
    if args.from_json:
        runs = [json.loads(path.read_text()) for path in args.from_json]
        saved_header = "; ".join(run["note"] for run in runs)
        rows = [(r.pop("release"), r.pop("fault"), r) for run in runs for r in run["rows"]]
    else:
        rows = asyncio.run(amain(args))
    out = table(rows)
    load = os.getloadavg()
    header = saved_header or (
        f"`python benchmarks/hard_faults.py` ({time.strftime('%Y-%m-%d')}, gear {args.label or _version()}, "
        f"deadline {DEADLINE:g} s, load {load[0]:.1f} at the end{', hedge_shared' * args.hedge_shared})"
    )
    note = f"{header}:\n\n{out}"
    print(note)
    if args.json:
        saved_rows = [{"release": r, "fault": n, **row} for r, n, row in rows]
        args.json.write_text(json.dumps({"note": header, "rows": saved_rows}, indent=1))
    if args.write_docs:
        for page in PAGES if args.block == BLOCK else (PAGE,):
            write_docs(note, page, block=args.block)


def _version() -> str:
    """The installed version and the commit measured (the figures change with the code)."""
    import subprocess

    from gear.version import version

    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return f"{version()} at {done.stdout.strip() or 'an unknown commit'}"


if __name__ == "__main__":
    main()
