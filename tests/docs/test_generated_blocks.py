"""The generated blocks live in the docs: ``benchmarks/all.py --write-docs`` and
``scripts/platforms.py --write-docs`` find their markers there and replace only what lies between."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.docs._blocks import ROOT, load_script


def test_every_benchmark_block_has_one_home_in_the_docs() -> None:
    bench = load_script(ROOT / "benchmarks" / "all.py")
    names = ["machine", *(b.name for b in bench.BENCHMARKS)]
    homes = {
        name: [p.name for p in bench.PAGES if f"<!-- bench:{name} -->" in p.read_text()] for name in names
    }
    assert {name: pages for name, pages in homes.items() if pages != ["benchmarks.md"]} == {}
    assert "<!-- bench:" not in (ROOT / "README.md").read_text()


def test_write_blocks_replaces_only_between_the_markers(tmp_path: Path) -> None:
    bench = load_script(ROOT / "benchmarks" / "all.py")
    page = tmp_path / "benchmarks.md"
    shutil.copy(ROOT / "docs" / "benchmarks.md", page)
    before = page.read_text()
    missing = bench.write_blocks(
        {"dispatch": "`python benchmarks/dispatch.py` (new):\n\nNEW", "nope": "x"}, [page]
    )
    after = page.read_text()
    assert missing == ["nope"]
    assert (
        "<!-- bench:dispatch -->\n`python benchmarks/dispatch.py` (new):\n\nNEW\n<!-- /bench:dispatch -->"
        in after
    )
    head, tail = before.split("<!-- bench:dispatch -->")[0], before.split("<!-- /bench:dispatch -->")[1]
    assert after.startswith(head)
    assert after.endswith(tail)


def test_the_platform_table_is_written_into_its_page(tmp_path: Path) -> None:
    platforms = load_script(ROOT / "scripts" / "platforms.py")
    assert platforms.PAGE == ROOT / "docs" / "reference" / "platforms.md"
    page = tmp_path / "platforms.md"
    shutil.copy(platforms.PAGE, page)
    platforms.write_docs("| CI step |\n|---|", page)
    assert f"{platforms.BEGIN}\n| CI step |\n|---|\n{platforms.END}" in page.read_text()
