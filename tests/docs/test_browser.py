"""The built site as a reader sees it: headless Chromium (Debian's ``chromium``) over HTTP.

Three pages render at 1400 and 700 px without a console error or a sideways scroll, and their
screenshots are kept (``$GEAR_TEST_ARTIFACTS``, default ``test-artifacts/``: ``docs-PAGE-WIDTH.png``,
beside the trace report's); every link of the navigation leads to a page that exists, and clicking
one opens it; the search (Material's, client-side JavaScript over ``search/search_index.json``)
finds the deadline page for "deadline". Skipped when Chromium is not installed (``.ci/run`` installs
it with ``apt-get install -y chromium``) or without the docs extra.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline._chromium import Browser, DevToolsError, find_chromium

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PAGES = ("index.html", "tutorial.html", "concepts/addresses.html")
WIDTHS = (1400, 700)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # the base class's names
        pass


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Say nothing of a browser that left mid-answer (a click that opened another page)."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture(scope="module")
def served(built_site: tuple[Path, float, str]) -> Iterator[str]:
    """The built site on a local HTTP server (the search's worker cannot fetch from file://)."""
    handler = functools.partial(_Quiet, directory=str(built_site[0]))
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    exe = find_chromium()
    if exe is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium; .ci/run does it)")
    browser = Browser(exe, tmp_path / "profile")
    try:
        yield browser
    finally:
        browser.close()


def _wait_for(browser: Browser, expression: str, timeout: float = 20.0) -> Any:
    """Evaluate ``expression`` until it is truthy; return its value.

    An evaluation that meets the page navigating (a click that opens another page) counts as not yet.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = browser.evaluate(expression)
        except DevToolsError as error:
            if not error.page_was_navigating:
                raise
            value = None
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


_LAYOUT = """(() => ({
  title: document.title,
  pageWidth: document.documentElement.scrollWidth,
  headings: document.querySelectorAll('article h1, article h2').length,
  nav: document.querySelectorAll('.md-nav__link[href]').length,
}))()"""


def test_pages_render_at_two_widths(browser: Browser, served: str) -> None:
    artifacts = Path(os.environ.get("GEAR_TEST_ARTIFACTS", "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    seen: dict[tuple[str, int], Any] = {}
    for page in PAGES:
        for width in WIDTHS:
            browser.open(served + page, width=width)
            seen[page, width] = browser.evaluate(_LAYOUT)
            shot = artifacts / f"docs-{page.replace('/', '-').removesuffix('.html')}-{width}.png"
            browser.screenshot(shot)
            assert shot.stat().st_size > 10_000, shot
    assert browser.errors == []
    for (page, width), layout in seen.items():
        assert layout["pageWidth"] <= width, f"{page} scrolls sideways at {width} px"
        assert layout["headings"] >= 1, page
        assert "Gear" in layout["title"], page
        assert layout["nav"] > 20, page


def test_navigation_links_lead_to_pages(browser: Browser, served: str) -> None:
    browser.open(served + "index.html", width=1400)
    links = browser.evaluate(
        "[...new Set([...document.querySelectorAll('.md-nav__link[href]')].map(a => a.href.split('#')[0]))]"
    )
    assert len(links) >= 25
    broken = []
    for link in links:
        with urllib.request.urlopen(link, timeout=10) as answer:
            if answer.status != 200:
                broken.append(link)
    assert broken == []
    # clicking the tutorial's entry opens the tutorial
    browser.evaluate(
        "[...document.querySelectorAll('.md-nav__link[href]')]"
        ".find(a => a.href.endsWith('tutorial.html')).click()"
    )
    title = _wait_for(browser, "document.title.startsWith('Tutorial') && document.title")
    assert title
    assert "Tutorial" in title
    assert browser.errors == []


def test_search_finds_the_deadline_page(browser: Browser, served: str) -> None:
    browser.open(served + "index.html", width=1400)
    typed = """(() => {
      const input = document.querySelector('.md-search__input');
      input.focus();
      input.value = 'deadline';
      input.dispatchEvent(new Event('input', {bubbles: true}));
      input.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true, key: 'e'}));
      return true;
    })()"""
    results = "[...document.querySelectorAll('.md-search-result__item a')].map(a => a.href)"
    hits: list[str] = []
    deadline = time.monotonic() + 30
    while not hits and time.monotonic() < deadline:  # the index loads in a worker: type until it answers
        browser.evaluate(typed)
        hits = _wait_for(browser, f"{results}.length && {results}", timeout=2) or []
    assert any("concepts/deadlines.html" in hit for hit in hits), json.dumps(hits, indent=1)
    assert browser.errors == []
