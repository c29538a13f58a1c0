"""Shared fixtures: ``broker`` runs each integration test on the reference broker and on RabbitMQ.

The suite runs in parallel (pytest-xdist, ``-n auto --dist loadgroup`` in pyproject.toml). Tests that
share something outside their process run in one worker, one after the other (``xdist_group``, given
here by marker): every test on the real RabbitMQ (some restart it, raise alarms, add users or close all
connections), on the RabbitMQ cluster, and on Docker; and the tests that run mypy (one cache).

Tests marked slow are left out unless asked (``GEAR_TEST_SLOW=1`` or ``-m slow``; CI asks), and soak
tests (minutes of traffic each) are skipped unless asked (``GEAR_TEST_SOAK=1`` or ``-m soak``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import textwrap
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.backends import ENV_CONTAINERS, ENV_URL, BrokerHandle, RabbitMQ, containers_asked, find_rabbitmq
from tests.rabbitmq_container import START_TIMEOUT


def unique(prefix: str) -> str:
    """A name no other test uses (queues and TYPEs on a shared RabbitMQ)."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def pytest_configure(config: pytest.Config) -> None:
    if sys.version_info[:3] == (3, 13, 0):
        # CPython 3.13.0's asyncio.Server._detach wakes its waiters a second time when a transport it
        # accepted is garbage-collected after the server closed (TypeError in __del__; fixed in 3.13.1).
        # Unclosed transports are only a ResourceWarning here (ignored, see pyproject.toml).
        config.addinivalue_line(
            "filterwarnings",
            "ignore:Exception ignored in. <function _SelectorTransport.__del__"
            ":pytest.PytestUnraisableExceptionWarning",
        )


def pytest_report_header() -> str:
    """Name the AMQP client libraries this run uses (CI installs the newest the ranges allow)."""
    from importlib.metadata import version

    return "client libraries: " + ", ".join(f"{p} {version(p)}" for p in ("aiormq", "aio-pika", "pamqp"))


ENV_SOAK = "GEAR_TEST_SOAK"
"""Set to 1 to run the soak tests (``-m soak`` runs them too); CI runs them once, on Python 3.11."""
ENV_SLOW = "GEAR_TEST_SLOW"
"""Set to 1 to run the tests marked slow (``-m slow`` runs them too); the test command leaves them out
(deselected) to finish in minutes, CI runs them."""

_GROUPS = ("rabbitmq", "cluster", "docker")
"""Markers whose tests share one worker under xdist (the group is named after the marker)."""


def _asked(config: pytest.Config, env: str, marker: str) -> bool:
    """``env`` is set to 1, or ``-m`` names ``marker`` (not as ``not marker``)."""
    if os.environ.get(env, "").strip().lower() in ("1", "true", "yes"):
        return True
    markexpr = str(config.getoption("markexpr", "") or "")
    return re.search(rf"(?<!not )\b{marker}\b", markexpr) is not None


def _group(item: pytest.Item, group: str) -> str:
    """The xdist group of a grouped test: the RabbitMQ 4.3 cluster's tests get one of their own (it is
    another cluster than the 3.10 one, so both run at once)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    fixtures = getattr(item, "fixturenames", ())
    if group == "cluster" and ("cluster43" in fixtures or params.get("any_cluster") == "4.3"):
        return "cluster43"
    return group


_SLOW_KEY = "slow_tests_left_out"
_NOTES: list[tuple[str, Any]] = []
"""What this process tells the summary (under xdist, through its first test report)."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave slow tests out and skip soak tests unless asked, group the tests that share something
    outside their process, and, without a RabbitMQ URL, give the first test that may start a RabbitMQ
    container its start-up time."""
    if not _asked(config, ENV_SLOW, "slow"):
        slow = [item for item in items if item.get_closest_marker("slow") is not None]
        if slow:
            items[:] = [item for item in items if item.get_closest_marker("slow") is None]
            config.hook.pytest_deselected(items=slow)
            _NOTES.append((_SLOW_KEY, len(slow)))
    soak, containers = _asked(config, ENV_SOAK, "soak"), containers_asked()
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "rabbitmq" in callspec.params.values():
            # a case parametrized "rabbitmq" talks to the shared node, marked or not: it must not run
            # beside the tests that restart it or raise its alarms
            item.add_marker(pytest.mark.rabbitmq)
        marked = {m for m in _GROUPS if item.get_closest_marker(m) is not None}
        if marked:
            item.add_marker(pytest.mark.xdist_group(_group(item, sorted(marked)[0])))
        if item.get_closest_marker("soak") is not None and not soak:
            item.add_marker(pytest.mark.skip(reason=f"soak tests take minutes: {ENV_SOAK}=1 or -m soak"))
        if item.get_closest_marker("docker") is not None and not containers:
            item.add_marker(pytest.mark.skip(reason=f"starts containers: {ENV_CONTAINERS}=1 (and Docker)"))
    if os.environ.get(ENV_URL):
        return
    for item in items:
        fixtures = getattr(item, "fixturenames", ())  # test functions have them, other items not
        if item.get_closest_marker("rabbitmq") and {"broker", "rabbitmq"} & set(fixtures):
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(START_TIMEOUT + 60))
            return


SPARK_SKIP = (
    "PySpark is not installed: the test extra leaves it out (491 MB); "
    "pip install -e '.[spark]' (and Java 17) runs these tests, as CI does"
)


# pytest registers only functions named pytest_*: this one is the second collection_modifyitems hook
@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_without_pyspark(items: list[pytest.Item]) -> None:
    """Tests marked spark (tests/pipeline marks its own) skip, and say how to run them, where PySpark is
    not installed: the README's test command does not install it."""
    if importlib.util.find_spec("pyspark") is not None:
        return
    for item in items:
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.skip(reason=SPARK_SKIP))


_UNGROUPED: list[str] = []
"""Why this worker must not run grouped tests (xdist did not group them), if so."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``--dist loadgroup``, check that the groups reached the test ids (pytest 9.2 with
    pytest-xdist 3.8 dropped them silently, and tests on the shared RabbitMQ ran beside the ones that
    restart it): if not, every grouped test fails, saying why."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    for item in session.items:
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name")) for m in item.iter_markers("xdist_group")}
        )
        if names and not item.nodeid.endswith("@" + "_".join(names)):
            _UNGROUPED.append(
                "pytest-xdist did not group the tests that must share a worker (pytest 9.2 breaks "
                "--dist loadgroup: pytest-xdist issue 1386): pip install 'pytest<9.2', or run with -n 0"
            )
            return


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _UNGROUPED and item.get_closest_marker("xdist_group") is not None:
        pytest.fail(_UNGROUPED[0], pytrace=False)


_USED: list[str] = []
"""The RabbitMQ this process ran its rabbitmq tests against, in words (for the summary)."""
_USED_KEY = "rabbitmq_under_test"
_REPORTED: set[str] = set()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[Any]:
    """Carry the RabbitMQ this worker uses to the summary (xdist sends reports, not globals)."""
    outcome: Any = yield
    fresh = [used for used in _USED if used not in _REPORTED]
    if fresh or _NOTES:
        report = outcome.get_result()
        report.user_properties += [(_USED_KEY, used) for used in fresh] + _NOTES
        _REPORTED.update(fresh)
        _NOTES.clear()


def _skip_reason(report: Any) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return str(reason).removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Why tests were skipped, grouped (one line per reason, most first), and which RabbitMQ the
    rabbitmq tests ran against (CI's log, and the README's platform table, ``python
    scripts/platforms.py``, read that line)."""
    stats = terminalreporter.stats
    notes = [p for reports in stats.values() for r in reports for p in getattr(r, "user_properties", ())]
    left_out = max((value for key, value in notes if key == _SLOW_KEY), default=0)
    if left_out:
        terminalreporter.write_line(
            f"{left_out} slow tests left out (deselected): {ENV_SLOW}=1 or -m slow runs them (CI does)"
        )
    skipped = stats.get("skipped", [])
    if skipped:
        reasons = Counter(_skip_reason(report) for report in skipped)
        terminalreporter.section(f"{len(skipped)} skipped, by reason", sep="-")
        shown = reasons.most_common(8)
        for reason, count in shown:
            first, *more = _wrapped(reason) or [""]
            terminalreporter.write_line(f"{count:>5}  {first}")
            for line in more:
                terminalreporter.write_line(f"{'':>5}  {line}")
        rest = sum(reasons.values()) - sum(count for _, count in shown)
        if rest:
            terminalreporter.write_line(
                f"{rest:>5}  for {len(reasons) - len(shown)} other reasons (-rs lists each)"
            )
    used: list[str] = []
    for key, value in notes:
        if key == _USED_KEY and value not in used:
            used.append(value)
    for found in used:
        terminalreporter.write_line(f"RabbitMQ under test: {found}")
    for line in _compose_figures():
        terminalreporter.write_line(line)


_SESSION_BEGAN = time.time()


def _compose_figures() -> list[str]:
    """One line per compose system run in this session (the figures ``tests/examples/compose_run.py``
    wrote; ``scripts/compose_figures.py`` puts them in the docs), so that CI's log has them."""
    directory = Path(os.environ.get("GEAR_TEST_ARTIFACTS", "test-artifacts"))
    lines = []
    for path in sorted(directory.glob("compose-*.json")):
        if path.stat().st_mtime < _SESSION_BEGAN:
            continue
        run = json.loads(path.read_text())
        steps = "; ".join(
            f"{s['step']} {s['seconds']:.1f} s" if s["seconds"] is not None else f"{s['step']}: {s['seen']}"
            for s in run["steps"]
        )
        lines.append(f"compose system ({run['name']}, {run['compose']}): {steps}")
    return lines


def _wrapped(reason: str, width: int = 100) -> list[str]:
    """A skip reason in full, wrapped into lines of at most ``width`` characters (never cut: the end of
    a reason is usually what to do)."""
    return textwrap.wrap(" ".join(reason.split()), width, break_long_words=False, break_on_hyphens=False)


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[RabbitMQ]:
    """The session's real RabbitMQ (see ``tests/backends.py``); skips the test when there is none.

    Only tests that need RabbitMQ ask for it, so a run without them never starts a container.
    """
    found, reason = find_rabbitmq()
    if found is None:
        pytest.skip(reason)
    _USED.append(f"RabbitMQ {'.'.join(map(str, found.version))} ({found.where})")
    try:
        yield found
    finally:
        found.close()


@pytest.fixture(params=["reference", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
async def broker(request: pytest.FixtureRequest) -> AsyncIterator[BrokerHandle]:
    """A running broker: Gear's reference broker in-process, or a real RabbitMQ."""
    if request.param == "reference":
        from gear.broker import Broker

        server = Broker(port=0)
        await server.start()
        handle = BrokerHandle(kind="reference", url=server.url, broker=server)
        try:
            yield handle
        finally:
            await handle.broker.stop()  # the one running now (a test may have restarted it)
        return
    found: RabbitMQ = request.getfixturevalue("rabbitmq")
    yield BrokerHandle.of(found)


@pytest.fixture(params=["reference-disk", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
async def durable_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[BrokerHandle]:
    """A broker that keeps durable state across ``restart``: the reference broker with a data
    directory, or a real RabbitMQ (only where the tests may restart it)."""
    if request.param == "reference-disk":
        from gear.broker import Broker

        server = Broker(port=0, data_dir=str(tmp_path_factory.mktemp("data")))
        await server.start()
        handle = BrokerHandle(kind="reference", url=server.url, broker=server)
        try:
            yield handle
        finally:
            await handle.broker.stop()
        return
    found: RabbitMQ = request.getfixturevalue("rabbitmq")
    if not found.exclusive:
        pytest.skip("restarting a shared RabbitMQ disturbs its other users; set GEAR_TEST_DISRUPTIVE=1")
    yield BrokerHandle.of(found)


@pytest.fixture
def names() -> type[_Names]:
    """``names.unique("WEB")`` gives a TYPE that no other test uses."""
    return _Names


class _Names:
    unique = staticmethod(unique)
