"""scripts/rabbitmq-cluster's own behaviour that needs no cluster: URLs, settings, refusals."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster._cluster import SCRIPT, SCRIPTS


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )


def test_urls_follow_the_first_port() -> None:
    done = _run("urls", GEAR_CLUSTER_PORT="5801")
    assert done.returncode == 0
    assert done.stdout.split() == [f"amqp://guest:guest@127.0.0.1:{p}/" for p in (5801, 5802, 5803)]
    comma = _run("urls", "--comma", GEAR_CLUSTER_PORT="5801")
    assert comma.stdout.strip() == ",".join(done.stdout.split())


def test_without_rabbitmq_server_it_says_so_with_its_own_exit_code(tmp_path: object) -> None:
    done = _run("status", RABBITMQ_BIN=str(tmp_path))
    assert done.returncode == 3
    assert "rabbitmq-server is not installed" in done.stderr


def test_a_node_number_out_of_range_is_refused_before_anything_runs() -> None:
    done = _run("kill", "4", GEAR_CLUSTER_NAME="gearnosuchcluster")
    assert done.returncode == 2
    assert re.search(r"invalid choice: '?4'?", done.stderr), done.stderr  # Python 3.14's argparse quotes it


def test_a_cluster_name_must_be_a_plain_word() -> None:
    done = _run("urls", GEAR_CLUSTER_NAME="../etc")
    assert done.returncode == 1
    assert "GEAR_CLUSTER_NAME must be a plain word" in done.stderr


@pytest.fixture
def failing_bin() -> Iterator[Path]:
    """A RABBITMQ_BIN whose rabbitmq-server starts nothing and whose rabbitmqctl reaches no node (the
    node user must read it: not under pytest's private tmp_path)."""
    base = Path(tempfile.mkdtemp(prefix="gear-fake-rabbitmq-"))
    base.chmod(0o755)
    (base / "rabbitmq-server").write_text("#!/bin/sh\nexit 0\n")
    (base / "rabbitmqctl").write_text('#!/bin/sh\necho "no node answers" >&2\nexit 1\n')
    for program in base.iterdir():
        program.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_start_that_cannot_boot_tries_once_more_afresh_then_says_why(failing_bin: Path) -> None:
    data = Path(tempfile.mkdtemp(prefix="gear-fake-cluster-"))
    try:
        done = _run(
            "start",
            RABBITMQ_BIN=str(failing_bin),
            GEAR_CLUSTER_NAME="gearnoboot",
            GEAR_CLUSTER_PORT="5821",
            GEAR_CLUSTER_DIR=str(data / "cluster"),
        )
    finally:
        shutil.rmtree(data, ignore_errors=True)
    assert done.returncode == 1
    assert done.stdout.count("the cluster did not come up") == 2
    assert "booting it afresh once more" in done.stdout
    assert "no VM of ours is left" in done.stdout
    assert "gearnoboot1@localhost did not start" in done.stderr
    assert "no node answers" in done.stderr


def test_the_4_3_cluster_gives_each_node_an_address_and_ports_of_its_own() -> None:
    done = subprocess.run(
        [str(SCRIPTS["4.3"]), "urls"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GEAR_CLUSTER43_PORT": "5830"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"amqp://guest:guest@127.0.0.{n + 1}:{5830 + n}/" for n in (1, 2, 3)]


def test_the_4_3_cluster_refuses_an_unknown_disk_fault_before_anything_runs() -> None:
    done = subprocess.run(
        [str(SCRIPTS["4.3"]), "disk", "1", "melt"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "invalid choice" in done.stderr
