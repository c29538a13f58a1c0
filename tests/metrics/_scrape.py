"""Reading an operator port from a test: HTTP GETs off the event loop, and the exposition parsed by
prometheus-client's own parser."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


def get(port: int, path: str, accept: str = "") -> tuple[int, str]:
    """Status and body of ``GET http://127.0.0.1:port/path`` (blocking)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


async def aget(port: int, path: str) -> tuple[int, str]:
    """:func:`get` without blocking the loop (the service under test runs on it)."""
    return await asyncio.get_running_loop().run_in_executor(None, get, port, path)


async def samples(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of ``/metrics``: (name, labels) -> value."""
    status, body = await aget(port, "/metrics")
    assert status == 200, body
    found = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            found[sample.name, frozenset(sample.labels.items())] = sample.value
    return found


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and wanted <= ls)


async def readyz(port: int) -> tuple[int, dict[str, Any]]:
    """Status and JSON body of ``/readyz``."""
    status, body = await aget(port, "/readyz")
    return status, json.loads(body)
