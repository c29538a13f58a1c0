"""The generated blocks live in the docs: ``benchmarks/all.py --write-docs``,
``scripts/platforms.py --write-docs`` and ``scripts/docs_hooks.py --write`` find their markers there and
replace only what lies between; the reference pages' parts are kept fresh by a test, so they read on
GitHub as the code says."""

from __future__ import annotations

import re
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


def test_the_compose_tables_are_written_between_their_markers(tmp_path: Path) -> None:
    figures = load_script(ROOT / "scripts" / "compose_figures.py")
    assert figures.PAGE == ROOT / "docs" / "guides" / "example-system.md"
    page = tmp_path / "example-system.md"
    shutil.copy(figures.PAGE, page)
    before = page.read_text()
    figures.write_docs({"single": "| one |", "cluster": "| three |"}, page)
    after = page.read_text()
    assert "<!-- compose:single -->\n| one |\n<!-- /compose:single -->" in after
    assert "<!-- compose:cluster -->\n| three |\n<!-- /compose:cluster -->" in after
    assert after.split("<!-- compose:single -->")[0] == before.split("<!-- compose:single -->")[0]
    assert after.split("<!-- /compose:cluster -->")[1] == before.split("<!-- /compose:cluster -->")[1]


def test_a_compose_table_says_what_was_seen_how_long_and_where_it_was_measured() -> None:
    figures = load_script(ROOT / "scripts" / "compose_figures.py")
    run = {
        "name": "single",
        "compose": "compose v2 2.26.1",
        "rabbitmq_image": "gear-rabbitmq:forky-abc",
        "cpus": 2,
        "load": [1.5, 1.0, 0.5],
        "written": "2026-11-27 23:00:00 UTC",
        "steps": [
            {"step": "up", "command": "docker compose up -d", "seen": "a | b", "seconds": 9.14},
            {"step": "read", "command": "curl x", "seen": "200", "seconds": 0.0123},
            {"step": "meanwhile", "command": "curl y", "seen": "0 failed", "seconds": None},
        ],
    }
    lines = figures.table(run).splitlines()
    assert lines[2] == "| up | `docker compose up -d` | a \\| b | 9.1 s |"
    assert lines[3] == "| read | `curl x` | 200 | 12 ms |"
    assert lines[4] == "| meanwhile | `curl y` | 0 failed | - |"
    assert "test_compose_system.py` on 2026-11-27 with compose v2 2.26.1" in lines[-1]
    assert "load 1.5" in lines[-1]


def test_the_reference_pages_generated_parts_are_fresh() -> None:
    """The CLI's help, the settings, the exceptions and exit codes and the API index are written into
    the pages, so they read on GitHub too; a change to the code that changes them fails here until
    ``python scripts/docs_hooks.py --write`` is run."""
    hooks = load_script(ROOT / "scripts" / "docs_hooks.py")
    names = {
        m for page in hooks.PAGES for m in re.findall(r"^<!-- gen:([\w-]+) -->$", page.read_text(), re.M)
    }
    assert names == set(hooks.GENERATORS), "every generator has a home, and every marker a generator"
    assert hooks.stale() == [], "run: python scripts/docs_hooks.py --write"


def test_the_cli_help_fits_a_code_block() -> None:
    """80 columns: a code block's width on the site at 1280 px (it used to be 100, and cut off)."""
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    blocks = re.findall(r"```text\n(.*?)```", page, re.S)
    assert len(blocks) > 20
    assert [line for block in blocks for line in block.splitlines() if len(line) > 80] == []


def test_the_hard_fault_tables_are_written_into_their_pages(tmp_path: Path) -> None:
    hard = load_script(ROOT / "benchmarks" / "hard_faults.py")
    assert {p.name for p in hard.PAGES} == {"clusters.md", "failures.md"}
    for page in hard.PAGES:  # the after-table on both pages, the before-table beside it on one
        assert page.read_text().count("<!-- hard-faults:begin -->") == 1
    assert "<!-- hard-faults-before:begin -->" in hard.PAGE.read_text()
    page = tmp_path / "clusters.md"
    shutil.copy(hard.PAGE, page)
    hard.write_docs("| broker | fault |\n|---|---|", page, block="hard-faults-before")
    text = page.read_text()
    assert (
        "<!-- hard-faults-before:begin -->\n| broker | fault |\n|---|---|\n<!-- hard-faults-before:end -->"
        in text
    )
    assert (
        text.split("<!-- hard-faults-before:begin -->")[0]
        == hard.PAGE.read_text().split("<!-- hard-faults-before:begin -->")[0]
    )


def test_the_api_page_documents_every_exception_class() -> None:
    """``::: gear.errors`` lists its members by hand (to leave the short aliases out); a class missing
    from that list breaks every cross-reference to it and the strict site build."""
    import gear.errors

    page = (ROOT / "docs" / "reference" / "api.md").read_text()
    listed = re.search(r"^::: gear\.errors\n\s+options:\n\s+members: \[(?P<names>[^\]]*)\]", page, re.M)
    assert listed is not None, "api.md has no '::: gear.errors' block with a members list"
    classes = {
        name
        for name in gear.errors.__all__
        if isinstance(obj := getattr(gear.errors, name), type) and obj.__name__ == name
    }
    assert {n.strip() for n in listed["names"].split(",")} == classes
